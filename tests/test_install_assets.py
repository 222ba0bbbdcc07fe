"""`install --dry-run --json` plans Lemonade's asset, repository, tag and directory for every recipe x
backend x OS x arch that the catalog supports.

Every expected name below is transcribed by hand from Lemonade's own install code at
lemonade-sdk/lemonade@e385039ed33551de7f54cb73194cd08088772c08 (2026-08-22), the commit whose
src/cpp/resources/backend_versions.json our pins copy; `file:line` cites where the name is built.
Abbreviations: LL = src/cpp/server/backends/llamacpp/llamacpp_server.cpp, WH = whispercpp/whispercpp_server.cpp,
SD = sdcpp/sdcpp_server.cpp, KO = kokoro/kokoro_server.cpp, FL = fastflowlm/fastflowlm_server.cpp,
RY = ryzenai/ryzenai_server.cpp, MO = moonshine/moonshine_server.cpp, OR = onnxruntime/onnxruntime_server.cpp,
TS = thinksound/thinksound_server.cpp, AC = acestep/acestep_server.cpp, TR = trellis/trellis_server.cpp,
OM = openmoss/openmoss_server.cpp, TN = thenoise/thenoise_server.cpp, VL = vllm/vllm_server.cpp (all under
src/cpp/server/backends/), BU = src/cpp/server/backends/backend_utils.cpp, BM = src/cpp/server/backend_manager.cpp,
BV = src/cpp/resources/backend_versions.json.

Tags (BV): llamacpp cpu/vulkan/metal b10375, cuda b10397, rocm-stable b10470, rocm-nightly b1311 (48-55);
whispercpp v1.8.4 (56-62); sd-cpp master-820-de298c2, cuda master-789-65745b4 (63-69), whose asset
version drops the build number (SD:93-115); TheRock 7.14.0 (71), 7.14 in llama.cpp names (LL:157-164);
ryzenai v1.7.0 (130); flm v1.0.2 (133), bare in names (FL:49-53); kokoro b17 (136); vllm
vllm0.20.1-rocm7.12.0, gfx942/gfx950 vllm0.19.1-rocm7.13.0 (139-146); thenoise thenoise-0.3.0-rocm7.14.0
(149); moonshine moonshine0.0.62 (168); onnxruntime 0.3.7 (171); thinksound v0.1.2 (173-177); acestep
v0.1.1 (178-182); trellis v0.4.3 (183-187); openmoss v0.1.3 (188-192).

TheRock (BU:1631-1643, 1037-1040; BM:626-640 for which builds bring it): the tarball
therock-dist-<linux|windows>-<url_mapping[arch] or arch>-7.14.0.tar.gz into therock/<arch>-7.14.0, where <arch>
is Lemonade's get_rocm_arch(): the hardware gfx from KFD on Linux, the family name on Windows.
"""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from conftest import ROOT, machine, run_cli
from servers import TestServer

BASE = machine("linux-debian12-x86_64-cpu-only")  # only the starting point: --os/--arch/--gfx/--sm replace it

GH = "https://github.com"
ROCK = "https://repo.amd.com/rocm/tarball-multi-arch"


def rock(os_word, variant, arch):
    """TheRock runtime artifact as (asset, destination) (BU:1642 name, BU:1039 directory)."""
    return (f"therock-dist-{os_word}-{variant}-7.14.0.tar.gz", f"therock/{arch}-7.14.0")


# (id, recipe, backend, os, arch, extra args, repository, tag, [(asset, destination), ...], citation)
CASES = [
    # --- llamacpp --------------------------------------------------------------------------------------
    ("llamacpp-cpu-linux-x64", "llamacpp", "cpu", "linux", "x86_64", [], "ggml-org/llama.cpp", "b10375",
     [("llama-b10375-bin-ubuntu-x64.tar.gz", "llamacpp/cpu")], "LL:231,238"),
    ("llamacpp-cpu-linux-arm64", "llamacpp", "cpu", "linux", "arm64", [], "ggml-org/llama.cpp", "b10375",
     [("llama-b10375-bin-ubuntu-arm64.tar.gz", "llamacpp/cpu")], "LL:236"),
    ("llamacpp-cpu-windows-x64", "llamacpp", "cpu", "windows", "x86_64", [], "ggml-org/llama.cpp", "b10375",
     [("llama-b10375-bin-win-cpu-x64.zip", "llamacpp/cpu")], "LL:233"),
    # deliberate: Lemonade takes the x64 build on every Windows (LL:233); ggml-org publishes a native
    # arm64 one (ggml-org/llama.cpp .github/workflows/release.yml: windows-cpu matrix x64 + arm64)
    ("llamacpp-cpu-windows-arm64", "llamacpp", "cpu", "windows", "arm64", [], "ggml-org/llama.cpp", "b10375",
     [("llama-b10375-bin-win-cpu-arm64.zip", "llamacpp/cpu")], "release.yml windows-cpu"),
    ("llamacpp-vulkan-linux-x64", "llamacpp", "vulkan", "linux", "x86_64", [], "ggml-org/llama.cpp", "b10375",
     [("llama-b10375-bin-ubuntu-vulkan-x64.tar.gz", "llamacpp/vulkan")], "LL:244,251"),
    ("llamacpp-vulkan-linux-arm64", "llamacpp", "vulkan", "linux", "arm64", [], "ggml-org/llama.cpp", "b10375",
     [("llama-b10375-bin-ubuntu-vulkan-arm64.tar.gz", "llamacpp/vulkan")], "LL:249"),
    ("llamacpp-vulkan-windows-x64", "llamacpp", "vulkan", "windows", "x86_64", [], "ggml-org/llama.cpp", "b10375",
     [("llama-b10375-bin-win-vulkan-x64.zip", "llamacpp/vulkan")], "LL:246"),
    # Windows on ARM: Lemonade's x64 build (LL:246); ggml-org publishes no win-vulkan-arm64 asset
    ("llamacpp-vulkan-windows-arm64", "llamacpp", "vulkan", "windows", "arm64", [], "ggml-org/llama.cpp", "b10375",
     [("llama-b10375-bin-win-vulkan-x64.zip", "llamacpp/vulkan")], "LL:246"),
    ("llamacpp-metal-macos", "llamacpp", "metal", "macos", "arm64", [], "ggml-org/llama.cpp", "b10375",
     [("llama-b10375-bin-macos-arm64.tar.gz", "llamacpp/metal")], "LL:224,226"),
    ("llamacpp-cuda-linux-x64", "llamacpp", "cuda", "linux", "x86_64", ["--sm", "sm_89"], "lemonade-sdk/llama.cpp",
     "b10397", [("llama-b10397-ubuntu-cuda-sm_89-x64.tar.xz", "llamacpp/cuda")], "LL:202,218"),
    ("llamacpp-cuda-linux-arm64-spark", "llamacpp", "cuda", "linux", "arm64", ["--sm", "sm_121"],
     "lemonade-sdk/llama.cpp", "b10397", [("llama-b10397-ubuntu-cuda-sm_121-arm64.tar.xz", "llamacpp/cuda")],
     "LL:216"),
    ("llamacpp-cuda-windows-x64", "llamacpp", "cuda", "windows", "x86_64", ["--sm", "sm_120"],
     "lemonade-sdk/llama.cpp", "b10397", [("llama-b10397-windows-cuda-sm_120-x64.7z", "llamacpp/cuda")], "LL:213"),
    ("llamacpp-rocm-stable-linux", "llamacpp", "rocm", "linux", "x86_64", ["--gfx", "gfx1151"],
     "lemonade-sdk/llama.cpp", "b10470",
     [("llama-b10470-bin-ubuntu-rocm-7.14-x64.tar.gz", "llamacpp/rocm-stable"), rock("linux", "gfx1151", "gfx1151")],
     "LL:176,181; BV:112"),
    ("llamacpp-rocm-stable-windows", "llamacpp", "rocm", "windows", "x86_64", ["--gfx", "gfx1100"],
     "lemonade-sdk/llama.cpp", "b10470",
     [("llama-b10470-bin-win-rocm-7.14-x64.zip", "llamacpp/rocm-stable"), rock("windows", "gfx110X-all", "gfx110X")],
     "LL:179; BV:105"),
    ("llamacpp-rocm-stable-linux-mi300", "llamacpp", "rocm", "linux", "x86_64", ["--gfx", "gfx942"],
     "lemonade-sdk/llama.cpp", "b10470",
     [("llama-b10470-bin-ubuntu-rocm-7.14-x64.tar.gz", "llamacpp/rocm-stable"), rock("linux", "gfx94X-dcgpu", "gfx942")],
     "LL:181; BV:102"),
    # gfx908 is in therock.architectures (BV:73) but not in url_mapping: the arch is used verbatim (BU:1631-1635)
    ("llamacpp-rocm-stable-linux-mi100", "llamacpp", "rocm", "linux", "x86_64", ["--gfx", "gfx908"],
     "lemonade-sdk/llama.cpp", "b10470",
     [("llama-b10470-bin-ubuntu-rocm-7.14-x64.tar.gz", "llamacpp/rocm-stable"), rock("linux", "gfx908", "gfx908")],
     "BU:1631-1642"),
    # a family name as --gfx, as Lemonade accepts it (BV:97-99 architectures, 104-106 url_mapping)
    ("llamacpp-rocm-stable-linux-family", "llamacpp", "rocm", "linux", "x86_64", ["--gfx", "gfx103X"],
     "lemonade-sdk/llama.cpp", "b10470",
     [("llama-b10470-bin-ubuntu-rocm-7.14-x64.tar.gz", "llamacpp/rocm-stable"), rock("linux", "gfx103X-all", "gfx103X")],
     "BV:104"),
    ("llamacpp-rocm-nightly-linux", "llamacpp", "rocm", "linux", "x86_64", ["--gfx", "gfx1201", "--channel", "nightly"],
     "lemonade-sdk/llamacpp-rocm", "b1311", [("llama-b1311-ubuntu-rocm-gfx120X-x64.zip", "llamacpp/rocm-nightly")],
     "LL:186-188,197; BV:154"),
    ("llamacpp-rocm-nightly-windows", "llamacpp", "rocm", "windows", "x86_64",
     ["--gfx", "gfx1151", "--channel", "nightly"], "lemonade-sdk/llamacpp-rocm", "b1311",
     [("llama-b1311-windows-rocm-gfx1151-x64.zip", "llamacpp/rocm-nightly")], "LL:195"),
    # --- whispercpp ------------------------------------------------------------------------------------
    ("whispercpp-cpu-linux", "whispercpp", "cpu", "linux", "x86_64", [], "lemonade-sdk/whisper.cpp-rocm", "v1.8.4",
     [("whisper-v1.8.4-linux-cpu-x86_64.tar.gz", "whispercpp/cpu")], "WH:84,96"),
    ("whispercpp-cpu-windows", "whispercpp", "cpu", "windows", "x86_64", [], "lemonade-sdk/whisper.cpp-rocm", "v1.8.4",
     [("whisper-v1.8.4-windows-cpu-x64.zip", "whispercpp/cpu")], "WH:94"),
    ("whispercpp-vulkan-linux", "whispercpp", "vulkan", "linux", "x86_64", [], "lemonade-sdk/whisper.cpp-rocm",
     "v1.8.4", [("whisper-v1.8.4-linux-vulkan-x86_64.tar.gz", "whispercpp/vulkan")], "WH:117"),
    ("whispercpp-vulkan-windows", "whispercpp", "vulkan", "windows", "x86_64", [], "lemonade-sdk/whisper.cpp-rocm",
     "v1.8.4", [("whisper-v1.8.4-windows-vulkan-x64.zip", "whispercpp/vulkan")], "WH:115"),
    # whispercpp has no ROCm channels, so Lemonade brings no TheRock with it (BM:626-630), but its Linux
    # rocm server loads TheRock's libraries at start (WH:300-312): installed alongside, where Lemonade reads
    ("whispercpp-rocm-linux", "whispercpp", "rocm", "linux", "x86_64", ["--gfx", "gfx1151"],
     "lemonade-sdk/whisper.cpp-rocm", "v1.8.4",
     [("whisper-v1.8.4-linux-rocm-gfx1151.tar.gz", "whispercpp/rocm"), rock("linux", "gfx1151", "gfx1151")],
     "WH:101-102,109; WH:300-312"),
    ("whispercpp-rocm-windows", "whispercpp", "rocm", "windows", "x86_64", ["--gfx", "gfx1201"],
     "lemonade-sdk/whisper.cpp-rocm", "v1.8.4", [("whisper-v1.8.4-windows-rocm-gfx120X.zip", "whispercpp/rocm")],
     "WH:107"),
    ("whispercpp-npu-windows", "whispercpp", "npu", "windows", "x86_64", ["--force"], "lemonade-sdk/whisper.cpp-rocm",
     "v1.8.4", [("whisper-v1.8.4-windows-npu-x64.zip", "whispercpp/npu")], "WH:88"),
    ("whispercpp-metal-macos", "whispercpp", "metal", "macos", "arm64", [], "lemonade-sdk/whisper.cpp-rocm", "v1.8.4",
     [("whisper-v1.8.4-darwin-metal-arm64.tar.gz", "whispercpp/metal")], "WH:122"),
    # --- sd-cpp (asset version master-de298c2 / master-65745b4: SD:93-115) -----------------------------
    ("sdcpp-cpu-linux", "sd-cpp", "cpu", "linux", "x86_64", [], "leejet/stable-diffusion.cpp", "master-820-de298c2",
     [("sd-master-de298c2-bin-Linux-Ubuntu-24.04-x86_64.zip", "sd-cpp/cpu")], "SD:90,169"),
    ("sdcpp-cpu-windows", "sd-cpp", "cpu", "windows", "x86_64", [], "leejet/stable-diffusion.cpp",
     "master-820-de298c2", [("sd-master-de298c2-bin-win-cpu-x64.zip", "sd-cpp/cpu")], "SD:167"),
    ("sdcpp-vulkan-linux", "sd-cpp", "vulkan", "linux", "x86_64", [], "leejet/stable-diffusion.cpp",
     "master-820-de298c2", [("sd-master-de298c2-bin-Linux-Ubuntu-24.04-x86_64-vulkan.zip", "sd-cpp/vulkan")],
     "SD:141"),
    ("sdcpp-vulkan-windows", "sd-cpp", "vulkan", "windows", "x86_64", [], "leejet/stable-diffusion.cpp",
     "master-820-de298c2", [("sd-master-de298c2-bin-win-vulkan-x64.zip", "sd-cpp/vulkan")], "SD:139"),
    ("sdcpp-rocm-linux", "sd-cpp", "rocm", "linux", "x86_64", ["--gfx", "gfx1151"], "leejet/stable-diffusion.cpp",
     "master-820-de298c2",
     [("sd-master-de298c2-bin-Linux-Ubuntu-24.04-x86_64-rocm-7.14.0.zip", "sd-cpp/rocm-stable"),
      rock("linux", "gfx1151", "gfx1151")], "SD:72-81,132-133"),
    ("sdcpp-rocm-windows", "sd-cpp", "rocm", "windows", "x86_64", ["--gfx", "gfx1201"], "leejet/stable-diffusion.cpp",
     "master-820-de298c2",
     [("sd-master-de298c2-bin-win-rocm-7.14.0-x64.zip", "sd-cpp/rocm-stable"), rock("windows", "gfx120X-all", "gfx120X")],
     "SD:130; BV:106"),
    ("sdcpp-cuda-linux-x64", "sd-cpp", "cuda", "linux", "x86_64", ["--sm", "sm_89"],
     "lemonade-sdk/stable-diffusion.cpp", "master-789-65745b4",
     [("sd-master-65745b4-ubuntu-cuda-sm_89-x64.tar.xz", "sd-cpp/cuda")], "SD:146,159"),
    ("sdcpp-cuda-linux-arm64", "sd-cpp", "cuda", "linux", "arm64", ["--sm", "sm_121"],
     "lemonade-sdk/stable-diffusion.cpp", "master-789-65745b4",
     [("sd-master-65745b4-ubuntu-cuda-sm_121-arm64.tar.xz", "sd-cpp/cuda")], "SD:157"),
    ("sdcpp-cuda-windows", "sd-cpp", "cuda", "windows", "x86_64", ["--sm", "sm_89"],
     "lemonade-sdk/stable-diffusion.cpp", "master-789-65745b4",
     [("sd-master-65745b4-windows-cuda-sm_89-x64.zip", "sd-cpp/cuda")], "SD:154"),
    ("sdcpp-metal-macos", "sd-cpp", "metal", "macos", "arm64", [], "leejet/stable-diffusion.cpp", "master-820-de298c2",
     [("sd-master-de298c2-bin-Darwin-macOS-*-arm64.zip", "sd-cpp/metal")], "SD:119 (resolved through the API: BU:176-230)"),
    # --- kokoro, flm, ryzenai-llm, moonshine, onnxruntime -----------------------------------------------
    ("kokoro-cpu-linux", "kokoro", "cpu", "linux", "x86_64", [], "lemonade-sdk/Kokoros", "b17",
     [("kokoros-linux-x86_64.tar.gz", "kokoro/cpu")], "KO:45,51"),
    ("kokoro-cpu-windows", "kokoro", "cpu", "windows", "x86_64", [], "lemonade-sdk/Kokoros", "b17",
     [("kokoros-windows-x86_64.tar.gz", "kokoro/cpu")], "KO:49"),
    ("kokoro-metal-macos", "kokoro", "metal", "macos", "arm64", [], "lemonade-sdk/Kokoros", "b17",
     [("kokoros-darwin-arm64-metal.tar.gz", "kokoro/metal")], "KO:55"),
    ("flm-npu-linux", "flm", "npu", "linux", "x86_64", ["--force"], "ROCm/FastFlowLM", "v1.0.2",
     [("fastflowlm_1.0.2_linux.tar.gz", "flm/npu")], "FL:47,58"),
    ("flm-npu-windows", "flm", "npu", "windows", "x86_64", ["--force"], "ROCm/FastFlowLM", "v1.0.2",
     [("fastflowlm_1.0.2_windows_amd64.zip", "flm/npu")], "FL:56"),
    ("ryzenai-npu-windows", "ryzenai-llm", "npu", "windows", "x86_64", ["--force"], "lemonade-sdk/ryzenai-server",
     "v1.7.0", [("ryzenai-server.zip", "ryzenai-llm/npu")], "RY:26"),
    ("moonshine-linux-x64", "moonshine", "cpu", "linux", "x86_64", [], "lemonade-sdk/moonshine-server-rocm",
     "moonshine0.0.62", [("moonshine-server-moonshine0.0.62-linux-x64.tar.gz", "moonshine/cpu")], "MO:35,50"),
    ("moonshine-linux-arm64", "moonshine", "cpu", "linux", "arm64", [], "lemonade-sdk/moonshine-server-rocm",
     "moonshine0.0.62", [("moonshine-server-moonshine0.0.62-linux-arm64.tar.gz", "moonshine/cpu")], "MO:48"),
    ("moonshine-windows", "moonshine", "cpu", "windows", "x86_64", [], "lemonade-sdk/moonshine-server-rocm",
     "moonshine0.0.62", [("moonshine-server-moonshine0.0.62-windows-x64.zip", "moonshine/cpu")], "MO:44"),
    ("moonshine-macos", "moonshine", "cpu", "macos", "arm64", [], "lemonade-sdk/moonshine-server-rocm",
     "moonshine0.0.62", [("moonshine-server-moonshine0.0.62-macos-arm64.tar.gz", "moonshine/cpu")], "MO:46"),
    ("onnxruntime-linux-x64", "onnxruntime", "cpu", "linux", "x86_64", [], "lemonade-sdk/ort-server", "0.3.7",
     [("ort-server-0.3.7-linux-x64.tar.gz", "onnxruntime/cpu")], "OR:118,129"),
    ("onnxruntime-linux-arm64", "onnxruntime", "cpu", "linux", "arm64", [], "lemonade-sdk/ort-server", "0.3.7",
     [("ort-server-0.3.7-linux-arm64.tar.gz", "onnxruntime/cpu")], "OR:127"),
    ("onnxruntime-windows", "onnxruntime", "cpu", "windows", "x86_64", [], "lemonade-sdk/ort-server", "0.3.7",
     [("ort-server-0.3.7-windows-x64.zip", "onnxruntime/cpu")], "OR:123"),
    ("onnxruntime-macos", "onnxruntime", "cpu", "macos", "arm64", [], "lemonade-sdk/ort-server", "0.3.7",
     [("ort-server-0.3.7-macos-arm64.tar.gz", "onnxruntime/cpu")], "OR:125"),
    # --- thenoise, vllm: per-GPU archives ---------------------------------------------------------------
    ("thenoise-rocm-linux", "thenoise", "rocm", "linux", "x86_64", ["--gfx", "gfx1151"], "lemonade-sdk/thenoise",
     "thenoise-0.3.0-rocm7.14.0", [("thenoise-0.3.0-rocm7.14.0-gfx1151-x64.tar.gz", "thenoise/rocm")], "TN:52-56"),
    # on Windows get_rocm_arch() is the family name (system_info.cpp:1858-1875)
    ("thenoise-rocm-windows", "thenoise", "rocm", "windows", "x86_64", ["--gfx", "gfx1100"], "lemonade-sdk/thenoise",
     "thenoise-0.3.0-rocm7.14.0", [("thenoise-0.3.0-rocm7.14.0-gfx110X-x64.tar.gz", "thenoise/rocm")], "TN:56"),
    ("vllm-rocm-linux-strix", "vllm", "rocm", "linux", "x86_64", ["--gfx", "gfx1151"], "lemonade-sdk/vllm-rocm",
     "vllm0.20.1-rocm7.12.0-gfx1151", [("vllm0.20.1-rocm7.12.0-gfx1151-x64.tar.gz", "vllm/rocm")], "VL:299-335"),
    ("vllm-rocm-linux-rdna3", "vllm", "rocm", "linux", "x86_64", ["--gfx", "gfx1100"], "lemonade-sdk/vllm-rocm",
     "vllm0.20.1-rocm7.12.0-gfx110X", [("vllm0.20.1-rocm7.12.0-gfx110X-x64.tar.gz", "vllm/rocm")], "VL:300-301,332"),
    # gfx942 is not in the catalog row (vllm.h support), so --force; its pin is the override (BV:143)
    ("vllm-rocm-linux-mi300-override", "vllm", "rocm", "linux", "x86_64", ["--gfx", "gfx942", "--force"],
     "lemonade-sdk/vllm-rocm", "vllm0.19.1-rocm7.13.0-gfx942",
     [("vllm0.19.1-rocm7.13.0-gfx942-x64.tar.gz", "vllm/rocm")], "VL:310-314; BV:143"),
]

# thinksound, acestep, trellis, openmoss: '<stem>-<variant>-linux-x64.tar.gz' / '-windows-x64.zip', variant
# 'rocm' for rocm-stable, which brings TheRock (BM:626-640)
for recipe, stem, repo, tag, cite, backends in [
        ("thinksound", "thinksound", "pwilkin/thinksound.cpp", "v0.1.2", "TS:30-35", ("cuda", "vulkan", "rocm")),
        ("acestep", "acestep", "pwilkin/acestep.cpp", "v0.1.1", "AC:60-65", ("cuda", "vulkan", "rocm")),
        ("trellis", "trellis", "pwilkin/trellis.cpp", "v0.4.3", "TR:33-38", ("cuda", "vulkan", "rocm")),
        ("openmoss", "moss-tts", "pwilkin/openmoss", "v0.1.3", "OM:27-32", ("cuda", "vulkan"))]:
    for backend in backends:
        args = {"cuda": ["--sm", "sm_89"], "vulkan": [], "rocm": ["--gfx", "gfx1151"]}[backend]
        dirname = "rocm-stable" if backend == "rocm" else backend
        CASES.append((f"{recipe}-{backend}-linux", recipe, backend, "linux", "x86_64", args, repo, tag,
                      [(f"{stem}-{backend}-linux-x64.tar.gz", f"{recipe}/{dirname}")]
                      + ([rock("linux", "gfx1151", "gfx1151")] if backend == "rocm" else []), cite))
        CASES.append((f"{recipe}-{backend}-windows", recipe, backend, "windows", "x86_64", args, repo, tag,
                      [(f"{stem}-{backend}-windows-x64.zip", f"{recipe}/{dirname}")]
                      + ([rock("windows", "gfx1151", "gfx1151")] if backend == "rocm" else []), cite))


class NoReleases:
    """A releases API on 127.0.0.1 that knows no release: a dry run then prints the plan as resolved
    from the data alone (a warning says the API had no answer)."""

    def __init__(self):
        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                self.send_response(404)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.httpd = TestServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def api():
    s = NoReleases()
    yield s
    s.close()


def dry_run(api, tmp_path, monkeypatch, capsys, recipe, *args, root=BASE):
    """`pick-backend install --dry-run --json` through the real entry point, in this process (fast)."""
    from selector.cli import main

    monkeypatch.setenv("PICK_BACKEND_GITHUB_API", api.url)
    monkeypatch.setenv("PICK_BACKEND_RETRY_BASE", "0")
    monkeypatch.delenv("PICK_BACKEND_THEROCK_URL", raising=False)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    for k in ("PICK_BACKEND_ROOT", "PICK_BACKEND_CONFIG", "PICK_BACKEND_CHANNEL", "LEMONADE_CACHE_DIR"):
        monkeypatch.delenv(k, raising=False)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["--root", root, "install", recipe, *args, "--dry-run", "--json", "--cache-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    return e.value.code, out, err


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_dry_run_plans_lemonades_asset_and_directory(case, api, tmp_path, monkeypatch, capsys):
    _, recipe, backend, os_name, arch, extra, repo, tag, want, cite = case
    rc, out, err = dry_run(api, tmp_path, monkeypatch, capsys, recipe, "--backend", backend, "--os", os_name,
                           "--arch", arch, *extra)
    assert rc == 0, f"{cite}: {err}"
    plan = json.loads(out)
    got = [(a["asset"], a["destination"]) for a in plan["artifacts"]]
    assert got == want, cite
    main = plan["artifacts"][0]
    assert (main["repository"], main["tag"], main["version"]) == (repo, tag, tag), cite
    assert main["url"] == f"{GH}/{repo}/releases/download/{tag}/{want[0][0]}"
    assert plan["path"] == os.path.join(str(tmp_path), "bin", *want[0][1].split("/"))
    for a in plan["artifacts"][1:]:  # TheRock: a plain URL, its version is TheRock's
        assert (a["kind"], a["repository"], a["version"]) == ("runtime", None, "7.14.0")
        assert a["url"] == f"{ROCK}/{a['asset']}"


def _required_cases():
    """(recipe, backend, os, arch) for every catalog row pick-backend can install: each OS of the row, on
    the CPU architectures the row names for its cpu device, else the OS's usual one."""
    from selector.catalog import load

    assets = json.load(open(os.path.join(ROOT, "selector", "catalogs", "lemonade-assets.json")))
    cat = load("lemonade")
    out = set()
    for rname, recipe in cat.recipes.items():
        for row in recipe.rows:
            if row.format == "container" or row.backend == "system":
                continue
            if row.backend in assets["no_install"].get(rname, {}):
                continue
            cpu = dict(row.devices).get("cpu")
            for os_name in row.os:
                arches = cpu if cpu else (("arm64",) if os_name == "macos" else ("x86_64",))
                for arch in arches:
                    out.add((rname, row.backend, os_name, arch))
    return out


def test_every_installable_catalog_row_is_in_the_table():
    have = {(c[1], c[2], c[3], c[4]) for c in CASES}
    missing = sorted(_required_cases() - have)
    assert missing == [], f"catalog rows with no transcribed expectation: {missing}"


@pytest.mark.parametrize("recipe,backend,args,words", [
    ("llamacpp-hrx", "hrx", ["--gfx", "gfx1151"], "no llamacpp-hrx recipe"),
    ("thenoise", "cuda", ["--sm", "sm_89"], "installs only TheNoise rocm"),
    ("trellis", "cuda12", ["--sm", "sm_61"], "no trellis cuda12 build"),
    ("ds4", "rocm", ["--gfx", "gfx1151", "--force"], "container image"),
    ("llamacpp", "halobox", ["--gfx", "gfx1151", "--force"], "container image"),
])
def test_rows_lemonade_does_not_install_exit_3_with_the_reason(recipe, backend, args, words, api, tmp_path,
                                                               monkeypatch, capsys):
    rc, out, err = dry_run(api, tmp_path, monkeypatch, capsys, recipe, "--backend", backend, "--os", "linux",
                           "--arch", "x86_64", *args)
    assert rc == 3 and f"no install rule for {recipe} {backend}" in err and words in err


def test_no_build_for_this_arch_names_what_is_published(api, tmp_path, monkeypatch, capsys):
    # sd.cpp's Linux vulkan build is x86_64 only (SD:141); a GB10 host (arm64, NVIDIA) must not get it
    rc, out, err = dry_run(api, tmp_path, monkeypatch, capsys, "sd-cpp", "--backend", "vulkan", "--os", "linux",
                           "--arch", "arm64", "--sm", "sm_121", "--force")
    assert rc == 3 and "on linux/arm64" in err and "linux/x86_64" in err


# ------------------------------------------------------------------------------------------------
# the TheRock directory on real captures


def test_therock_dir_is_the_kfd_gfx_not_the_hsa_override(api, tmp_path, monkeypatch, capsys):
    """RX 6700 XT (gfx1031) run as gfx1030 through HSA_OVERRIDE_GFX_VERSION: Lemonade reads the KFD target
    (system_info.cpp:3474-3499 -> identify_rocm_arch_from_name 1818-1835), so its runtime directory is
    therock/gfx1031-7.14.0 (BU:1037-1040) with the gfx103X-all tarball (BV:121)."""
    root = machine("linux-ubuntu22.04-rx6700xt-override")
    rc, out, err = dry_run(api, tmp_path, monkeypatch, capsys, "llamacpp", "--backend", "rocm", root=root)
    assert rc == 0, err
    plan = json.loads(out)
    assert plan["device"]["family"] == "gfx1030"  # the engine judges the effective target
    assert [(a["asset"], a["destination"]) for a in plan["artifacts"]][1] == \
        ("therock-dist-linux-gfx103X-all-7.14.0.tar.gz", "therock/gfx1031-7.14.0")
    assert plan["artifacts"][1]["path"] == os.path.join(str(tmp_path), "bin", "therock", "gfx1031-7.14.0")


def test_therock_dir_on_windows_is_the_family_name(api, tmp_path, monkeypatch, capsys):
    """RX 7900 XTX on Windows: Lemonade names the arch from the marketing name, '7900' -> gfx110X
    (system_info.cpp:1867-1875), so it looks in therock/gfx110X-7.14.0."""
    root = machine("windows11-rx7900xtx")
    rc, out, err = dry_run(api, tmp_path, monkeypatch, capsys, "sd-cpp", "--backend", "rocm", root=root)
    assert rc == 0, err
    got = [(a["asset"], a["destination"]) for a in json.loads(out)["artifacts"]]
    assert got == [("sd-master-de298c2-bin-win-rocm-7.14.0-x64.zip", "sd-cpp/rocm-stable"),
                   ("therock-dist-windows-gfx110X-all-7.14.0.tar.gz", "therock/gfx110X-7.14.0")]


@pytest.mark.parametrize("gfx,variant", [("gfx1153", "gfx1153"), ("gfx110X", "gfx110X-all"),
                                         ("gfx120X", "gfx120X-all"), ("gfx103X", "gfx103X-all")])
def test_gfx_accepts_lemonades_therock_keys(gfx, variant, api, tmp_path, monkeypatch, capsys):
    """`--gfx` takes every key of Lemonade's therock.url_mapping (BV:101-127), family names included."""
    rc, out, err = dry_run(api, tmp_path, monkeypatch, capsys, "llamacpp", "--backend", "rocm", "--os", "linux",
                           "--gfx", gfx, "--force")
    assert rc == 0, err
    rt = json.loads(out)["artifacts"][1]
    assert (rt["asset"], rt["destination"]) == (f"therock-dist-linux-{variant}-7.14.0.tar.gz", f"therock/{gfx}-7.14.0")


# ------------------------------------------------------------------------------------------------
# pins and data


def test_pins_are_lemonades_backend_versions():
    """Transcribed from BV at e385039e; a pin that drifts from Lemonade's must fail here."""
    pins = json.load(open(os.path.join(ROOT, "selector", "catalogs", "lemonade-versions.json")))
    pins = {k: v for k, v in pins.items() if not k.startswith("_")}
    assert pins == {
        "llamacpp": {"vulkan": "b10375", "rocm-stable": "b10470", "rocm-nightly": "b1311", "cuda": "b10397",
                     "metal": "b10375", "cpu": "b10375"},
        "whispercpp": {k: "v1.8.4" for k in ("cpu", "metal", "npu", "rocm", "vulkan")},
        "sd-cpp": {"cpu": "master-820-de298c2", "cuda": "master-789-65745b4", "metal": "master-820-de298c2",
                   "rocm-stable": "master-820-de298c2", "vulkan": "master-820-de298c2"},
        "kokoro": {"cpu": "b17", "metal": "b17"},
        "flm": {"npu": "v1.0.2"},
        "ryzenai-llm": {"npu": "v1.7.0"},
        "moonshine": {"cpu": "moonshine0.0.62"},
        "onnxruntime": {"cpu": "0.3.7"},
        "vllm": {"rocm": "vllm0.20.1-rocm7.12.0",
                 "rocm_arch_overrides": {"gfx942": "vllm0.19.1-rocm7.13.0", "gfx950": "vllm0.19.1-rocm7.13.0"}},
        "thenoise": {"rocm": "thenoise-0.3.0-rocm7.14.0"},
        "thinksound": {"vulkan": "v0.1.2", "rocm-stable": "v0.1.2", "cuda": "v0.1.2"},
        "acestep": {"vulkan": "v0.1.1", "rocm-stable": "v0.1.1", "cuda": "v0.1.1"},
        "trellis": {"vulkan": "v0.4.3", "rocm-stable": "v0.4.3", "cuda": "v0.4.3"},
        "openmoss": {"vulkan": "v0.1.3", "rocm-stable": "v0.1.3", "cuda": "v0.1.3"},
    }


def test_pinned_checksum_of_a_pwilkin_asset_is_lemonades(api, tmp_path, monkeypatch, capsys):
    """Lemonade pins the SHA-256 of the pwilkin builds (BV:36-44); the plan carries it as 'pinned'."""
    rc, out, err = dry_run(api, tmp_path, monkeypatch, capsys, "trellis", "--backend", "vulkan", "--os", "linux",
                           "--arch", "x86_64")
    assert rc == 0, err
    a = json.loads(out)["artifacts"][0]
    assert a["digest"] == "sha256:a614549056da47950d7506d73ba923298a85859024b6a2ca782a0f7c9604f602"
    assert a["digest_source"] == "pinned"


def test_py7zr_is_a_windows_dependency():
    """Windows CUDA builds are .7z (LL:213); they must unpack on a plain `pip install pick-backend`."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from packaging.markers import Marker
    from packaging.requirements import Requirement

    deps = tomllib.load(open(os.path.join(ROOT, "pyproject.toml"), "rb"))["project"]["dependencies"]
    reqs = [Requirement(d) for d in deps]
    sevenzip = [r for r in reqs if r.name == "py7zr"]
    assert sevenzip, "py7zr is not a dependency"
    win = {"sys_platform": "win32", "platform_system": "Windows", "os_name": "nt"}
    assert all(r.marker is None or r.marker.evaluate(win) for r in sevenzip)
    assert isinstance(sevenzip[0].marker, (Marker, type(None)))


def test_wildcard_matching_nothing_names_the_pattern_and_lists_the_assets(tmp_path):
    """sd.cpp's macOS asset is a wildcard (SD:119); when the release holds no match the error says which
    pattern it tried and every asset it saw."""
    from selector.install.download import DownloadError
    from selector.install.github import find_asset

    names = [f"sd-master-de298c2-bin-{p}.zip" for p in (
        "win-cpu-x64", "win-vulkan-x64", "win-rocm-7.14.0-x64", "win-avx2-x64", "win-avx512-x64", "win-noavx-x64",
        "Linux-Ubuntu-24.04-x86_64", "Linux-Ubuntu-24.04-x86_64-vulkan", "Linux-Ubuntu-24.04-x86_64-rocm-7.14.0",
        "Darwin-macOS-15.7.7-x86_64")]
    rel = {"assets": [{"name": n, "browser_download_url": f"https://x/{n}"} for n in names]}
    with pytest.raises(DownloadError) as e:
        find_asset(rel, "sd-master-de298c2-bin-Darwin-macOS-*-arm64.zip", "leejet/stable-diffusion.cpp",
                   "master-820-de298c2")
    msg = str(e.value)
    assert "sd-master-de298c2-bin-Darwin-macOS-*-arm64.zip" in msg
    assert [n for n in names if n not in msg] == []


def test_sevenzip_cuda_build_installs_when_py7zr_is_present(tmp_path):
    """The Windows CUDA .7z unpacks and its llama-server.exe is found (the archive has no top directory:
    BU:261-263).  Runs where py7zr is installed (every Windows, by the dependency above)."""
    py7zr = pytest.importorskip("py7zr")
    from selector.install.unpack import extract, find_binary

    src = tmp_path / "src"
    src.mkdir()
    (src / "llama-server.exe").write_bytes(b"MZ fake")
    (src / "ggml-cuda.dll").write_bytes(b"MZ dll")
    archive = tmp_path / "llama-b10397-windows-cuda-sm_89-x64.7z"
    with py7zr.SevenZipFile(archive, "w") as z:
        z.write(src / "llama-server.exe", "llama-server.exe")
        z.write(src / "ggml-cuda.dll", "ggml-cuda.dll")
    staging = tmp_path / "staging"
    extract(str(archive), str(staging), archive.name)
    assert find_binary(str(staging), "llama-server", "windows") == "llama-server.exe"


def test_cli_install_of_a_new_recipe_end_to_end_names_lemonades_asset(api, tmp_path):
    """The real console entry point, in a subprocess: onnxruntime, which had no rule before."""
    r = run_cli("--root", BASE, "install", "onnxruntime", "--dry-run", "--json", "--cache-dir", str(tmp_path),
                env={"PICK_BACKEND_GITHUB_API": api.url, "PICK_BACKEND_RETRY_BASE": "0"})
    assert r.rc == 0, r.err
    a = r.json()["artifacts"][0]
    assert (a["repository"], a["asset"], a["destination"]) == \
        ("lemonade-sdk/ort-server", "ort-server-0.3.7-linux-x64.tar.gz", "onnxruntime/cpu")  # OR:118,129


def test_split_archive_release_says_it_cannot_be_joined_yet():
    """thenoise and vllm may publish parts plus a .partcount manifest (BU:584-628, TN:405, VL:780)."""
    from selector.install.download import DownloadError
    from selector.install.github import find_asset

    base = "vllm0.20.1-rocm7.12.0-gfx1151-x64"
    names = [f"{base}.partcount", f"{base}.part01-of-02.tar.gz", f"{base}.part02-of-02.tar.gz"]
    rel = {"assets": [{"name": n, "browser_download_url": f"https://x/{n}"} for n in names]}
    with pytest.raises(DownloadError) as e:
        find_asset(rel, f"{base}.tar.gz", "lemonade-sdk/vllm-rocm", "vllm0.20.1-rocm7.12.0-gfx1151")
    assert "split" in str(e.value) and f"{base}.tar.gz" in str(e.value)


@pytest.mark.parametrize("name,recipe,want", [
    # DGX Spark (GB10, sm_121, arm64): the engine picks cuda; Lemonade's aarch64 name (LL:215-216)
    ("linux-dgxos7-dgx-spark-gb10", "llamacpp", ("cuda", "llama-b10397-ubuntu-cuda-sm_121-arm64.tar.xz", "llamacpp/cuda")),
    ("linux-dgxos7-dgx-spark-gb10", "sd-cpp", ("cuda", "sd-master-65745b4-ubuntu-cuda-sm_121-arm64.tar.xz", "sd-cpp/cuda")),
    # Windows on ARM: the pick is vulkan, and the build is Lemonade's x64 one (LL:246)
    ("windows11-arm64-x64python", "llamacpp", ("vulkan", "llama-b10375-bin-win-vulkan-x64.zip", "llamacpp/vulkan")),
    # Strix Point on Windows: ryzenai-llm on the NPU (RY:26), thenoise on the iGPU, named gfx1150 (TN:56)
    ("windows11-strixpoint", "ryzenai-llm", ("npu", "ryzenai-server.zip", "ryzenai-llm/npu")),
    ("windows11-strixpoint", "thenoise", ("rocm", "thenoise-0.3.0-rocm7.14.0-gfx1150-x64.tar.gz", "thenoise/rocm")),
])
def test_the_pick_on_a_real_capture_installs_lemonades_build(name, recipe, want, api, tmp_path, monkeypatch, capsys):
    rc, out, err = dry_run(api, tmp_path, monkeypatch, capsys, recipe, root=machine(name))
    assert rc == 0, err
    plan = json.loads(out)
    a = plan["artifacts"][0]
    assert (plan["backend"], a["asset"], a["destination"]) == want


@pytest.mark.parametrize("edit,field", [
    (lambda d: d["no_install"].__setitem__("trellis", {"cuda12": 3}), "no_install.trellis"),
    (lambda d: d["recipes"]["vllm"]["backends"]["rocm"][0].__setitem__("release_tag", ""),
     "recipes.vllm.backends.rocm[0].release_tag"),
    (lambda d: d["therock"].__setitem__("url_mapping", ["gfx1151"]), "therock.url_mapping"),
])
def test_a_bad_assets_file_names_the_file_and_field(edit, field, tmp_path):
    from probes.inputs import InputError
    from selector.install.resolve import load_assets

    data = json.load(open(os.path.join(ROOT, "selector", "catalogs", "lemonade-assets.json")))
    edit(data)
    path = tmp_path / "lemonade-assets.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as e:
        load_assets(path=str(path))
    assert str(e.value).startswith(f"{path}: {field}:")


def test_every_supported_gpu_row_has_a_build_for_the_architectures_it_admits():
    """A Lemonade row that a GPU or NPU can satisfy is supported on any CPU architecture unless it
    says otherwise; where lemonade-assets.json publishes its builds for x86_64 only, the row must
    carry requires.arch ["x86_64"], or an arm64 machine gets an "installable" pick that install
    refuses (acestep cuda on a DGX Spark)."""
    from selector.catalog import load
    from selector.install.resolve import load_assets

    cat, assets = load("lemonade"), load_assets("lemonade")["recipes"]
    missing = []
    for rname, recipe in cat.recipes.items():
        published = assets.get(rname, {}).get("backends", {})
        for row in recipe.rows:
            keys = [k for k in published if k == row.backend or k.startswith(row.backend + "-")]
            arches = {e["arch"] for k in keys for e in published[k] if isinstance(e, dict) and e.get("os") in row.os}
            gpu = [t for t, _ in row.devices if t != "cpu"]
            if keys and gpu and arches and "arm64" not in arches and row.requires.get("arch") != ["x86_64"]:
                missing.append(f"{rname} {row.backend}")
    assert not missing, missing


@pytest.mark.parametrize("target,device_type", [(["--gfx", "gfx1100"], "amd_gpu"), (["--sm", "sm_61"], "nvidia_gpu")])
def test_a_target_gpu_has_its_vulkan_driver_so_the_pick_for_it_is_the_machines_pick(
        target, device_type, api, tmp_path, monkeypatch, capsys):
    # --gfx/--sm describe another machine's GPU, drivers included: Vulkan comes before ROCm in
    # llamacpp's rows and runs on the target GPU (a GTX 1080-class sm_61 has no CUDA build)
    code, out, err = dry_run(api, tmp_path, monkeypatch, capsys, "llamacpp", *target, "--os", "linux",
                             "--arch", "x86_64")
    doc = json.loads(out)
    assert doc["backend"] == "vulkan" and doc["device"]["type"] == device_type, (doc, err)


@pytest.mark.parametrize("target,ok", [(["--gfx", "gfx9999"], False), (["--gfx", "gfx99X"], False),
                                       (["--sm", "sm_999"], False), (["--sm", "sm_13"], False),
                                       (["--gfx", "gfx1151"], True), (["--gfx", "gfx120X"], True),
                                       (["--sm", "sm_120a"], True)])
def test_a_target_no_gpu_has_is_a_usage_error(target, ok, api, tmp_path, monkeypatch, capsys):
    # docs/install.md: --gfx/--sm that name no GPU of the tables exit 2, before any plan is made
    code, out, err = dry_run(api, tmp_path, monkeypatch, capsys, "llamacpp", *target, "--os", "linux",
                             "--arch", "x86_64")
    if ok:
        assert code == 0, err
    else:
        assert code == 2 and f"{target[0]} '{target[1]}' is not" in err and "the tables know" in err
