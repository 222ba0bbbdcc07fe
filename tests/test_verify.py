"""`pick-backend verify` (and `install --verify`, `status --verify`, `labels --verify`): fake builds
that print what real builds printed in public reports, run through the real CLI.

Each REPORT below names its source.  Where a report quotes only part of what the build printed
(the excerpt stops before the device list, or gives the device's name in another tool's output),
the missing values are marked DERIVED with what they were derived from.  Device-list lines follow
llama.cpp's format ``  <NAME><N>: <description> (<total> MiB, <free> MiB free)`` (common/arg.cpp).
"""

import json
import os
import time

import pytest

from conftest import machine, profile_of, run_cli
from selector import verify as V

STRIX = machine("linux-ubuntu24.04-strix-halo")  # gfx1151 APU: llamacpp picks vulkan
RTX4090 = machine("linux-ubuntu24.04-rtx4090")  # llamacpp picks cuda on the RTX 4090
RX7900 = machine("linux-ubuntu24.04-7950x-rx7900xtx")  # RX 7900 XTX + Raphael iGPU
OVERRIDE = machine("linux-ubuntu22.04-rx6700xt-override")  # HSA_OVERRIDE_GFX_VERSION=10.3.0 on a gfx1031


# ------------------------------------------------------------------------------------------------
# what real builds printed


class R:
    # https://github.com/ggml-org/llama.cpp/issues/20142 (also lemonade-sdk/llamacpp-rocm#63):
    # Framework Desktop, Ryzen AI Max+ 395 (gfx1151), upstream Vulkan build b8204.  The ggml_vulkan
    # line is verbatim; the excerpt ends before the device list, so the list line is DERIVED: the
    # description as ggml's Vulkan backend names the device (the same "AMD Radeon Graphics (RADV
    # GFX1151)"), the MiB figures DERIVED for a 64 GB machine.
    RADV_STRIX_ERR = ("ggml_vulkan: Found 1 Vulkan devices:\n"
                      "ggml_vulkan: 0 = AMD Radeon Graphics (RADV GFX1151) (radv) | uma: 1 | fp16: 1 | bf16: 0 | "
                      "warp size: 64 | shared memory: 65536 | int dot: 1 | matrix cores: KHR_coopmat\n")
    RADV_STRIX_OUT = "Available devices:\n  Vulkan0: AMD Radeon Graphics (RADV GFX1151) (65536 MiB, 63000 MiB free)\n"

    # https://github.com/ggml-org/llama.cpp/issues/16659: `llama-server --list-devices`, Vulkan,
    # NVIDIA GeForce RTX 2060 (verbatim).
    VK_2060_ERR = ("ggml_vulkan: Found 1 Vulkan devices:\n"
                   "ggml_vulkan: 0 = NVIDIA GeForce RTX 2060 (NVIDIA) | uma: 0 | fp16: 1 | bf16: 1 | warp size: 32 | "
                   "shared memory: 49152 | int dot: 1 | matrix cores: NV_coopmat2\n")
    VK_2060_OUT = "Available devices:\n  Vulkan0: NVIDIA GeForce RTX 2060 (6144 MiB, 5136 MiB free)\n"

    # https://github.com/ollama/ollama/issues/16508: Ollama's llama-server discovery, CUDA build,
    # two GPUs (verbatim; compute capabilities 8.6 and 12.0 from the ggml_cuda_init lines).
    CUDA_TWO_OUT = ("Available devices:\n"
                    "  CUDA0: NVIDIA GeForce RTX 3080 Ti (11909 MiB, 11650 MiB free)\n"
                    "  CUDA1: NVIDIA RTX PRO 4000 Blackwell SFF Edition (24026 MiB, 23795 MiB free)\n")
    CUDA_TWO_ERR = ("ggml_cuda_init: found 2 CUDA devices (Total VRAM: 35936 MiB):\n"
                    "  Device 0: NVIDIA GeForce RTX 3080 Ti, compute capability 8.6, VMM: yes, VRAM: 11909 MiB\n"
                    "  Device 1: NVIDIA RTX PRO 4000 Blackwell SFF Edition, compute capability 12.0, VMM: yes, "
                    "VRAM: 24026 MiB\n")

    # https://rocm.docs.amd.com/projects/ai-ecosystem/en/latest/inference/llamacpp.html ("Select a
    # GPU"): a ROCm build on a machine with a discrete and an integrated GPU (verbatim).
    ROCM_TWO_OUT = ("Available devices:\n"
                    "  ROCm0: AMD Radeon RX 9070 XT (16304 MiB, 15770 MiB free)\n"
                    "  ROCm1: AMD Radeon Graphics (63199 MiB, 63174 MiB free)\n")
    # the same machine with only the integrated GPU listed (what HIP_VISIBLE_DEVICES=1 shows):
    # DERIVED from the line above
    ROCM_IGPU_OUT = "Available devices:\n  ROCm0: AMD Radeon Graphics (63199 MiB, 63174 MiB free)\n"

    # https://github.com/KhronosGroup/Vulkan-Loader/issues/979 ("vkEnumeratePhysicalDevices only
    # gets me VK_PHYSICAL_DEVICE_TYPE_CPU"): the only Vulkan device is "llvmpipe (LLVM 12.0.0, 256
    # bits)".  The list line is DERIVED from that name in llama.cpp's format; MiB figures DERIVED.
    LLVMPIPE_OUT = "Available devices:\n  Vulkan0: llvmpipe (LLVM 12.0.0, 256 bits) (32000 MiB, 30000 MiB free)\n"

    # https://github.com/ggml-org/llama.cpp/issues/20142 and lemonade-sdk/llamacpp-rocm#63: a ROCm
    # build on the gfx1151 that finds no device (the error line verbatim).  After it llama.cpp
    # prints its header and no device (DERIVED from common/arg.cpp: the header is unconditional).
    ROCM_NONE_ERR = "ggml_cuda_init: failed to initialize ROCm: no ROCm-capable device is detected\n"
    ROCM_NONE_OUT = "Available devices:\n"

    # https://github.com/ggml-org/llama.cpp/issues/25807: a ROCm 7.14 build without its runtime on
    # the library path (verbatim; the dynamic loader exits 127).
    HIPBLAS_ERR = ("./llama-server: error while loading shared libraries: libhipblas.so.3: "
                   "cannot open shared object file: No such file or directory\n")
    # https://github.com/ggml-org/llama.cpp/issues/23517: a build missing its own library (verbatim)
    COMMON_ERR = ("/app/llama-server: error while loading shared libraries: libllama-common.so.0: "
                  "cannot open shared object file: No such file or directory\n")

    # not a device list at all (an old build that treats the flag as something else, or noise)
    GARBAGE_OUT = "\x1b[31m%%%% 0xDEADBEEF\nusage: ??? \n\xff\xfe random bytes\n"


# ------------------------------------------------------------------------------------------------
# fake builds


def script(stdout="", stderr="", rc=0, extra=""):
    return ("#!/bin/sh\n" + extra
            + (f"cat <<'PB_OUT'\n{stdout}PB_OUT\n" if stdout else "")
            + (f"cat >&2 <<'PB_ERR'\n{stderr}PB_ERR\n" if stderr else "")
            + f"exit {rc}\n")


def fake_build(cache, dirname, text, recipe="llamacpp", binary="llama-server", sub="llama-b0000"):
    """A build installed the way `install` leaves it: <cache>/bin/<recipe>/<dir>/<sub>/<binary>."""
    d = cache / "bin" / recipe / dirname
    (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "version.txt").write_text("b0000\n")
    exe = d / sub / binary
    exe.write_text(text)
    os.chmod(exe, 0o755)
    return exe


def verify(root, cache, *args, env=None, profile=None):
    where = ["--profile", str(profile)] if profile else ["--root", root]
    return run_cli(*where, "verify", "llamacpp", "--cache-dir", str(cache), *args, env=env)


def report_profile(tmp_path, base, nvidia=None, amd=None, patch=None):
    """The machine of a report as a saved Profile: its GPUs (name, memory, target) are the
    report's; everything else (OS, driver, CPU) is the base fixture's (DERIVED)."""
    p = profile_of(os.path.basename(base)).to_dict()
    if nvidia is not None:
        tmpl = p["nvidia_gpus"][0]
        p["nvidia_gpus"] = [dict(tmpl, index=i, name=n, memory_bytes=mib * 1048576, sm=sm,
                                 compute_capability=[int(sm[3:-1]), int(sm[-1])], pci=None, uuid=None)
                            for i, (n, mib, sm) in enumerate(nvidia)]
    if amd is not None:
        tmpl = p["amd_gpus"][0]
        p["amd_gpus"] = [dict(tmpl, index=i, name=n, gfx=gfx, gfx_effective=gfx, integrated=igpu,
                              vram_bytes=mib * 1048576, pci=dict(tmpl["pci"], bus_id=None))
                         for i, (n, mib, gfx, igpu) in enumerate(amd)]
    if patch:
        patch(p)
    path = tmp_path / "report-profile.json"
    path.write_text(json.dumps(p))
    return path


# ------------------------------------------------------------------------------------------------
# each verdict through the CLI


def test_vulkan_on_amd_radv_verified(tmp_path):
    fake_build(tmp_path, "vulkan", script(R.RADV_STRIX_OUT, R.RADV_STRIX_ERR))
    r = verify(STRIX, tmp_path, "--json")
    assert r.rc == 0, r.err
    rep = r.json()
    assert (rep["schema_version"], rep["recipe"], rep["backend"], rep["verdict"]) == \
        (1, "llamacpp", "vulkan", "verified")
    assert rep["matched"] == "Vulkan0"
    assert rep["devices"] == [{"id": "Vulkan0", "backend": "Vulkan", "index": 0,
                               "name": "AMD Radeon Graphics (RADV GFX1151)", "total_mib": 65536, "free_mib": 63000,
                               "pci": None, "kind": "gpu"}]
    assert rep["evidence"] == ["Vulkan0: AMD Radeon Graphics (RADV GFX1151) (65536 MiB, 63000 MiB free)"]
    assert rep["command"][1:] == ["--list-devices"] and rep["status"] == 0
    assert "ggml_vulkan: Found 1 Vulkan devices:" in rep["stderr_tail"]
    human = verify(STRIX, tmp_path)
    assert human.rc == 0 and "llamacpp vulkan: verified" in human.out and "Vulkan0" in human.out


def test_vulkan_on_nvidia_is_picked_on_the_gpu_and_verify_agrees(tmp_path):
    # Lemonade's Vulkan row lists AMD GPUs and CPUs, but NVIDIA's Vulkan driver runs the build on the
    # GPU: the pick names the RTX 2060 of the report, and the build's listing shows it as Vulkan0
    prof = report_profile(tmp_path, RTX4090, nvidia=[("NVIDIA GeForce RTX 2060", 6144, "sm_75")])
    fake_build(tmp_path, "vulkan", script(R.VK_2060_OUT, R.VK_2060_ERR))
    r = verify(None, tmp_path, "--backend", "vulkan", "--json", profile=prof)
    assert r.rc == 0, r.err
    rep = r.json()
    assert rep["verdict"] == "verified" and rep["expected"]["type"] == "nvidia_gpu"
    assert rep["matched"] == "Vulkan0"
    # the same listing on the RTX 4090 machine is another device: the pick and verify never disagree silently
    r = verify(RTX4090, tmp_path, "--backend", "vulkan", "--json")
    assert r.rc == 3 and r.json()["verdict"] == "other_device"


def test_a_cpu_pick_whose_build_lists_a_gpu_is_a_disagreement_not_verified(tmp_path):
    # the probe saw no Vulkan driver for the GPU (no ICD in the profile), the build lists it anyway:
    # it will offload there, so verify says the pick was wrong instead of "verified"
    def no_icd(p):
        p["vulkan"]["gpu_drivers"] = []
        for g in p["nvidia_gpus"] + p["intel_gpus"]:
            g["vulkan_driver"] = None
    prof = report_profile(tmp_path, RTX4090, nvidia=[("NVIDIA GeForce RTX 2060", 6144, "sm_75")], patch=no_icd)
    fake_build(tmp_path, "vulkan", script(R.VK_2060_OUT, R.VK_2060_ERR))
    r = verify(None, tmp_path, "--backend", "vulkan", "--json", profile=prof)
    rep = r.json()
    assert r.rc == 3 and rep["verdict"] == "other_device" and rep["expected"]["type"] == "cpu"
    assert "the build lists GPUs and will use them" in rep["message"]
    assert rep["evidence"] == ["Vulkan0: NVIDIA GeForce RTX 2060 (6144 MiB, 5136 MiB free)"]


def test_cuda_two_gpus_the_pick_is_found_among_them(tmp_path):
    # the engine picks the GPU with more memory, the RTX PRO 4000: it is CUDA1 in the list
    prof = report_profile(tmp_path, RTX4090, nvidia=[("NVIDIA GeForce RTX 3080 Ti", 11909, "sm_86"),
                                                      ("NVIDIA RTX PRO 4000 Blackwell SFF Edition", 24026, "sm_120")])
    fake_build(tmp_path, "cuda", script(R.CUDA_TWO_OUT, R.CUDA_TWO_ERR))
    r = verify(None, tmp_path, "--json", profile=prof)
    assert r.rc == 0, r.err
    rep = r.json()
    assert rep["backend"] == "cuda" and rep["verdict"] == "verified"
    assert rep["matched"] == "CUDA1"
    assert [d["id"] for d in rep["devices"]] == ["CUDA0", "CUDA1"]
    assert [(d["total_mib"], d["free_mib"]) for d in rep["devices"]] == [(11909, 11650), (24026, 23795)]


def test_cuda_two_gpus_on_a_machine_with_neither(tmp_path):
    fake_build(tmp_path, "cuda", script(R.CUDA_TWO_OUT, R.CUDA_TWO_ERR))
    r = verify(RTX4090, tmp_path, "--json")
    assert r.rc == 3
    rep = r.json()
    assert rep["verdict"] == "other_device"
    assert len(rep["evidence"]) == 2 and "CUDA_VISIBLE_DEVICES" in rep["fix"]


def test_rocm_two_gpus_dgpu_picked_and_listed(tmp_path):
    prof = report_profile(tmp_path, RX7900, amd=[("AMD Radeon RX 9070 XT", 16304, "gfx1201", False),
                                                 ("AMD Radeon Graphics", 512, "gfx1036", True)])
    fake_build(tmp_path, "rocm-stable", script(R.ROCM_TWO_OUT))
    r = verify(None, tmp_path, "--backend", "rocm", "--json", profile=prof)
    assert r.rc == 0, r.err
    rep = r.json()
    assert rep["dir"] == "rocm-stable" and rep["verdict"] == "verified" and rep["matched"] == "ROCm0"


def test_rocm_gpu_the_tables_do_not_name_is_matched_by_memory(tmp_path):
    # a GPU newer than the PCI tables is named after its target ("AMD GPU (gfx1201)"); ROCm prints its
    # marketing name.  The probe's name carries no model to compare, so the memory decides: ROCm0 is it
    prof = report_profile(tmp_path, RX7900, amd=[("AMD GPU (gfx1201)", 16304, "gfx1201", False),
                                                 ("AMD Radeon Graphics", 512, "gfx1036", True)])
    fake_build(tmp_path, "rocm-stable", script(R.ROCM_TWO_OUT))
    r = verify(None, tmp_path, "--backend", "rocm", "--json", profile=prof)
    assert r.rc == 0, r.out
    assert r.json()["matched"] == "ROCm0"
    # and only the iGPU listed is still another device
    fake_build(tmp_path, "rocm-stable", script(R.ROCM_IGPU_OUT))
    assert verify(None, tmp_path, "--backend", "rocm", profile=prof).rc == 3


def test_rocm_only_the_igpu_is_another_device(tmp_path):
    prof = report_profile(tmp_path, RX7900, amd=[("AMD Radeon RX 9070 XT", 16304, "gfx1201", False),
                                                 ("AMD Radeon Graphics", 512, "gfx1036", True)])
    fake_build(tmp_path, "rocm-stable", script(R.ROCM_IGPU_OUT))
    r = verify(None, tmp_path, "--backend", "rocm", profile=prof)
    assert r.rc == 3
    assert "llamacpp rocm: other device" in r.out
    assert "ROCm0: AMD Radeon Graphics (63199 MiB, 63174 MiB free)" in r.out
    assert "HIP_VISIBLE_DEVICES" in r.out  # the fix names the selector


def test_llvmpipe_only_is_another_device_with_the_driver_fix(tmp_path):
    fake_build(tmp_path, "vulkan", script(R.LLVMPIPE_OUT))
    r = verify(STRIX, tmp_path, "--json")
    assert r.rc == 3
    rep = r.json()
    assert rep["verdict"] == "other_device"
    assert rep["devices"][0]["kind"] == "software"
    assert rep["evidence"] == ["Vulkan0: llvmpipe (LLVM 12.0.0, 256 bits) (32000 MiB, 30000 MiB free)"]
    assert "Vulkan driver" in rep["fix"] and "render" in rep["fix"]


def test_no_devices_is_no_gpu(tmp_path):
    fake_build(tmp_path, "rocm-stable", script(R.ROCM_NONE_OUT, R.ROCM_NONE_ERR))
    r = verify(STRIX, tmp_path, "--backend", "rocm", "--json")
    assert r.rc == 3
    rep = r.json()
    assert rep["verdict"] == "no_gpu" and rep["devices"] == []
    assert rep["evidence"] == ["Available devices:", R.ROCM_NONE_ERR.strip()]
    human = verify(STRIX, tmp_path, "--backend", "rocm")
    assert "no GPU" in human.out and "no ROCm-capable device is detected" in human.out


def test_no_gpu_names_the_hsa_override_as_a_likely_cause(tmp_path):
    fake_build(tmp_path, "rocm-stable", script(R.ROCM_NONE_OUT, R.ROCM_NONE_ERR))
    r = verify(OVERRIDE, tmp_path, "--backend", "rocm", "--json")
    assert r.rc == 3
    rep = r.json()
    assert rep["verdict"] == "no_gpu"
    assert any("HSA_OVERRIDE_GFX_VERSION" in c and "gfx1031" in c for c in rep["causes"]), rep["causes"]


def test_no_gpu_names_render_group_and_missing_vulkan_driver(tmp_path):
    # the Strix Halo capture as a user outside the render group and without Mesa's RADV (DERIVED:
    # the probe's access_fix and an empty ICD list, as the access and Vulkan probes report them)
    def patch(p):
        p["amd_gpus"][0]["access_fix"] = "add the user to the render group (sudo usermod -aG render $USER)"
        p["vulkan"]["gpu_drivers"] = []

    prof = report_profile(tmp_path, STRIX, patch=patch)
    fake_build(tmp_path, "vulkan", script("Available devices:\n"))
    r = verify(None, tmp_path, "--backend", "vulkan", "--json", profile=prof)
    assert r.rc == 3
    causes = r.json()["causes"]
    assert any("render group" in c for c in causes) and any("Vulkan driver (ICD)" in c for c in causes), causes
    human = verify(None, tmp_path, "--backend", "vulkan", profile=prof)
    assert "likely causes:" in human.out and "usermod -aG render" in human.out


def test_missing_rocm_library_does_not_start_and_names_therock(tmp_path):
    fake_build(tmp_path, "rocm-stable", script(stderr=R.HIPBLAS_ERR, rc=127))
    r = verify(STRIX, tmp_path, "--backend", "rocm", "--json")
    assert r.rc == 4
    rep = r.json()
    assert rep["verdict"] == "does_not_start" and rep["status"] == 127
    assert "libhipblas.so.3" in rep["message"]
    assert rep["evidence"] == [R.HIPBLAS_ERR.strip().split("./llama-server: ")[1]]
    assert "TheRock" in rep["fix"] and "LD_LIBRARY_PATH" in rep["fix"]
    assert "pick-backend install llamacpp --backend rocm" in rep["fix"]
    assert "libhipblas.so.3" in rep["stderr_tail"]


def test_missing_own_library_does_not_start(tmp_path):
    fake_build(tmp_path, "vulkan", script(stderr=R.COMMON_ERR, rc=127))
    r = verify(STRIX, tmp_path)
    assert r.rc == 4
    assert "does not start" in r.out and "libllama-common.so.0" in r.out


def test_a_hang_is_killed_with_its_children_at_the_timeout(tmp_path):
    pidfile = tmp_path / "child.pid"
    fake_build(tmp_path, "vulkan", script(extra=f"sleep 300 &\necho $! > {pidfile}\nsleep 300\n"))
    t0 = time.monotonic()
    r = verify(STRIX, tmp_path, "--timeout", "1", "--json")
    assert time.monotonic() - t0 < 20
    assert r.rc == 4
    rep = r.json()
    assert rep["verdict"] == "does_not_start" and rep["timed_out"] is True and rep["status"] is None
    assert "timed out after 1 s" in rep["message"]
    child = int(pidfile.read_text())
    for _ in range(50):  # the background sleep was in the build's process group: it is gone too
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        try:  # a zombie whose parent was killed is reaped by init shortly
            with open(f"/proc/{child}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    break
        except OSError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, 9)
        pytest.fail("the build's child outlived the timeout")


def test_garbage_output_is_unknown(tmp_path):
    fake_build(tmp_path, "vulkan", script(R.GARBAGE_OUT))
    r = verify(STRIX, tmp_path, "--json")
    assert r.rc == 3
    rep = r.json()
    assert rep["verdict"] == "unknown" and rep["devices"] == []


def test_not_installed_and_bad_timeout(tmp_path):
    r = verify(STRIX, tmp_path)
    assert r.rc == 3 and "not installed" in r.out and "pick-backend install llamacpp" in r.out
    assert verify(STRIX, tmp_path, "--timeout", "0").rc == 2
    assert verify(STRIX, tmp_path, "--backend", "vulkn").rc == 2


@pytest.mark.parametrize("value", ["nan", "inf", "1e308"])
def test_a_timeout_that_is_no_number_of_seconds_is_a_usage_error(tmp_path, value):
    # with a build installed, nan / inf reached the process wait as an internal error (exit 1)
    fake_build(tmp_path, "vulkan", script(R.RADV_STRIX_OUT, R.RADV_STRIX_ERR))
    r = verify(STRIX, tmp_path, "--timeout", value)
    assert r.rc == 2, r.out + r.err
    assert "--timeout" in r.err and "internal error" not in r.err


def test_wrong_architecture_does_not_start(tmp_path):
    exe = fake_build(tmp_path, "vulkan", "")
    exe.write_bytes(b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + b"\x02\x00\xb7\x00" + b"\x00" * 100)  # aarch64 header
    r = verify(STRIX, tmp_path, "--json")
    assert r.rc == 4, r.out
    assert r.json()["verdict"] == "does_not_start"


def test_system_binary_on_path(tmp_path):
    bindir = tmp_path / "path"
    bindir.mkdir()
    exe = bindir / "llama-server"
    exe.write_text(script(R.RADV_STRIX_OUT, R.RADV_STRIX_ERR))
    os.chmod(exe, 0o755)
    r = verify(STRIX, tmp_path / "cache", "--backend", "system", "--json",
               env={"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
    assert r.rc == 0, r.err
    rep = r.json()
    assert rep["backend"] == "system" and rep["command"][0] == str(exe) and rep["verdict"] == "verified"


def test_the_build_runs_without_proxies_or_llama_arg_variables(tmp_path):
    fake_build(tmp_path, "vulkan", script(R.RADV_STRIX_OUT, extra=(
        'echo "proxy=${https_proxy-unset},${HTTP_PROXY-unset} arg=${LLAMA_ARG_HF_REPO-unset} '
        'keep=${PB_KEEP-unset}" >&2\n')))
    r = verify(STRIX, tmp_path, "--json", env={"https_proxy": "http://10.0.0.1:3128", "HTTP_PROXY": "http://x:1",
                                              "LLAMA_ARG_HF_REPO": "some/model", "PB_KEEP": "yes"})
    assert r.rc == 0, r.err
    assert "proxy=unset,unset arg=unset keep=yes" in r.json()["stderr_tail"]


# ------------------------------------------------------------------------------------------------
# status --verify and labels --verify


def test_status_verify_and_labels_verify(tmp_path):
    fake_build(tmp_path, "vulkan", script(R.RADV_STRIX_OUT))
    st = run_cli("--root", STRIX, "status", "--verify", "--json", "--cache-dir", str(tmp_path))
    assert st.rc == 0, st.err
    [row] = st.json()["backends"]
    assert row["device_check"]["verdict"] == "verified"
    lab = run_cli("--root", STRIX, "labels", "--verify", "--recipes", "llamacpp", "--cache-dir", str(tmp_path))
    assert lab.rc == 0, lab.err
    assert "pick-backend.llamacpp.verified=true" in lab.out.splitlines()
    plain = run_cli("--root", STRIX, "labels", "--recipes", "llamacpp", "--cache-dir", str(tmp_path))
    assert "verified" not in plain.out  # only with --verify

    fake_build(tmp_path, "vulkan", script(R.LLVMPIPE_OUT))
    st = run_cli("--root", STRIX, "status", "--verify", "--cache-dir", str(tmp_path))
    assert st.rc == 3 and "device check: other device" in st.out
    lab = run_cli("--root", STRIX, "labels", "--verify", "--recipes", "llamacpp", "--cache-dir", str(tmp_path))
    assert "pick-backend.llamacpp.verified=false" in lab.out.splitlines()


def test_labels_verify_leaves_out_what_is_not_installed(tmp_path):
    lab = run_cli("--root", STRIX, "labels", "--verify", "--recipes", "llamacpp", "--cache-dir", str(tmp_path))
    assert lab.rc == 0 and "verified" not in lab.out


# ------------------------------------------------------------------------------------------------
# the pure parts


def test_parse_devices_formats():
    seen, devs = V.parse_devices(
        "noise before\nAvailable devices:\n"
        "  BLAS: OpenBLAS (0 MiB, 0 MiB free)\n"
        "  MTL0: Apple M1 (5461 MiB, 5460 MiB free)\n"
        "  Metal: Apple M2 Max (10922 MiB, 10922 MiB free)\n"
        "  ROCm0: AMD Radeon RX 7600 (8176 MiB, 8116 MiB free) [PCI 0000:06:00.0]\n"
        "  Vulkan1: llvmpipe (LLVM 15.0.7, 256 bits) (0 MiB, 0 MiB free)\n"
        "not a device line\n")
    assert seen
    assert [(d["id"], d["backend"], d["index"], d["kind"]) for d in devs] == [
        ("BLAS", "BLAS", None, "cpu"), ("MTL0", "MTL", 0, "gpu"), ("Metal", "Metal", None, "gpu"),
        ("ROCm0", "ROCm", 0, "gpu"), ("Vulkan1", "Vulkan", 1, "software")]
    assert devs[3]["pci"] == "0000:06:00.0" and devs[3]["name"] == "AMD Radeon RX 7600"
    assert V.parse_devices("  Vulkan0: X (1 MiB, 1 MiB free)\n") == (False, [])  # no header: not a listing


def test_match_device_rules():
    dev = {"name": "AMD Radeon RX 7600", "total_mib": 8176, "pci": "0000:06:00.0"}
    assert V.match_device({"type": "amd_gpu", "name": "AMD Radeon RX 7900 XT", "bus_id": "0000:06:00.0"}, dev)[0]
    assert not V.match_device({"type": "amd_gpu", "name": "AMD Radeon RX 7600", "bus_id": "0000:0e:00.0"}, dev)[0]
    nv = {"name": "NVIDIA GeForce RTX 4090", "total_mib": 24564, "pci": None}
    assert V.match_device({"type": "nvidia_gpu", "name": "NVIDIA GeForce RTX 4090", "memory_bytes": 25757220864,
                           "bus_id": "00000000:01:00.0"}, nv)[0]
    assert not V.match_device({"type": "amd_gpu", "name": "AMD Radeon RX 4090"}, nv)[0]  # vendor differs
    generic = {"name": "AMD Radeon Graphics", "total_mib": 63199, "pci": None}
    assert V.match_device({"type": "amd_gpu", "name": "AMD Radeon 8060S", "integrated": True}, generic)[0]
    assert not V.match_device({"type": "amd_gpu", "name": "AMD Radeon RX 9070 XT", "integrated": False,
                               "memory_bytes": 16304 * 1048576}, generic)[0]


def test_judge_is_pure_and_orders_load_errors_first():
    step = {"parser": "ggml-devices", "prefixes": ["Vulkan"], "backend": "vulkan"}
    out = V.judge(step, None, 127, R.HIPBLAS_ERR)
    assert out["verdict"] == "does_not_start"
    assert V.judge(step, None, 0, R.VK_2060_OUT)["verdict"] == "verified"  # no pick to compare: any GPU
    assert V.judge(step, None, 0, R.CUDA_TWO_OUT)["verdict"] == "no_gpu"  # CUDA devices are not Vulkan's
    assert V.judge({"parser": "starts"}, None, 0, "version: 1")["verdict"] == "verified"
    assert V.judge({"parser": "starts"}, None, 1, "boom")["verdict"] == "does_not_start"


def test_bad_verify_file_names_the_field(tmp_path):
    from probes.inputs import InputError

    bad = tmp_path / "v.json"
    bad.write_text(json.dumps({"recipes": {"llamacpp": {"backends": {"vulkan": {"parser": "magic"}}}}}))
    with pytest.raises(InputError, match=r"recipes\.llamacpp\.backends\.vulkan\.parser"):
        V.load_spec(path=str(bad))


def test_bundled_verify_file_loads_and_covers_the_asset_recipes():
    from selector.install.resolve import load_assets

    spec = V.load_spec("lemonade")
    for name, rule in load_assets("lemonade")["recipes"].items():
        for backend in rule["backends"]:
            step = V.step_for(spec, name, backend)
            assert step["parser"] in V.PARSERS and step["args"], (name, backend)
    assert V.step_for(spec, "llamacpp", "rocm-nightly")["prefixes"] == ["ROCm", "HIP"]


def test_verify_json_follows_the_documented_schema(tmp_path):
    import jsonschema
    from test_json_contract import schema

    s = schema("verify")
    jsonschema.validate(verify(STRIX, tmp_path, "--json").json(), s)  # not installed
    for text in (script(R.RADV_STRIX_OUT, R.RADV_STRIX_ERR), script(stderr=R.HIPBLAS_ERR, rc=127),
                 script(R.ROCM_NONE_OUT, R.ROCM_NONE_ERR)):
        fake_build(tmp_path, "vulkan", text)
        r = verify(STRIX, tmp_path, "--json")
        jsonschema.validate(r.json(), s)
        assert r.rc == r.json()["exit_code"]


def test_judge_reads_windows_loader_statuses_and_old_builds():
    spec = V.load_spec("lemonade")
    step = V.step_for(spec, "llamacpp", "vulkan")
    dll = V.judge(step, None, 0xC0000135, "", spec=spec)
    assert dll["verdict"] == "does_not_start" and "DLL" in dll["message"]
    assert V.judge(step, None, 0xC000007B, "", spec=spec)["fix"]  # another architecture: reinstall
    # a build older than --list-devices starts, but cannot list: not "does not start"
    old = V.judge(step, None, 1, "error: invalid argument: --list-devices\n", spec=spec)
    assert old["verdict"] == "unknown" and "older" in old["fix"]


def test_a_relative_cache_dir_is_resolved_once_so_the_build_still_starts(tmp_path):
    # verify runs the build from its own directory: a cache given relative to the shell's directory
    # must still name it (issue: "does not start: rocache-src/.../llama-server: not found")
    import subprocess
    import sys

    cache = tmp_path / "rocache-src"
    fake_build(cache, "vulkan", script(R.VK_2060_OUT, R.VK_2060_ERR))
    prof = report_profile(tmp_path, RTX4090, nvidia=[("NVIDIA GeForce RTX 2060", 6144, "sm_75")])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PICK_BACKEND")}
    r = subprocess.run([sys.executable, "-m", "selector", "--profile", str(prof), "verify", "llamacpp",
                        "--backend", "vulkan", "--cache-dir", "rocache-src", "--json"],
                       cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"] == "verified"


def test_sigterm_during_verify_ends_the_builds_whole_process_group(tmp_path):
    """A build hung at GPU start (and a helper it started) must not keep holding the GPU after the
    user stops verify: SIGTERM ends the group, as the timeout does."""
    import sys

    from test_bench import gone, terminate_when_started

    child = tmp_path / "child.pid"
    fake_build(tmp_path, "vulkan", f"#!{sys.executable}\nimport subprocess, sys, time\n"
               f"subprocess.Popen([sys.executable, '-c', \"import os, time; open({str(child)!r}, 'w').write(str(os.getpid())); time.sleep(600)\"])\n"
               "time.sleep(600)\n")
    rc, pid = terminate_when_started(["verify", "llamacpp", "--root", STRIX, "--cache-dir", str(tmp_path)], child)
    assert rc == 130 and gone(pid)


@pytest.mark.skipif(os.name == "nt", reason="LD_LIBRARY_PATH is the loader's path on Linux")
def test_the_device_check_environment_keeps_the_users_library_path_behind_the_builds():
    # the build's own directory first (its libggml), then whatever the user's loader path held; no
    # proxies (the check talks to nothing) and no LLAMA_ARG_* (they would change the server's flags);
    # the pick's device pinning on top
    base = {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/opt/rocm/lib", "HTTPS_PROXY": "http://p:3128",
            "no_proxy": "localhost", "LLAMA_ARG_N_GPU_LAYERS": "0", "HOME": "/home/u"}
    env = V.clean_env(base, {"HIP_VISIBLE_DEVICES": "1"}, ["/c/bin/llamacpp/rocm"])
    assert env == {"PATH": "/usr/bin", "HOME": "/home/u", "HIP_VISIBLE_DEVICES": "1",
                   "LD_LIBRARY_PATH": "/c/bin/llamacpp/rocm" + os.pathsep + "/opt/rocm/lib"}
    # no build directory to add: the loader path is left as the user had it, and not made up when unset
    assert V.clean_env(base)["LD_LIBRARY_PATH"] == "/opt/rocm/lib"
    assert "LD_LIBRARY_PATH" not in V.clean_env({"PATH": "/usr/bin"})
    assert V.clean_env({}, lib_dirs=["/a", "/b"])["LD_LIBRARY_PATH"] == "/a" + os.pathsep + "/b"


def test_a_build_that_cannot_start_or_prints_bytes_that_are_not_utf8_still_gets_a_readable_result():
    import sys

    r = V.run([os.path.join(os.sep, "nonexistent", "llama-server"), "--list-devices"], dict(os.environ), 5)
    assert r["start_error"].endswith("llama-server: not found (No such file or directory)")
    assert (r["status"], r["stdout"], r["stderr"], r["timed_out"]) == (None, "", "", False)
    assert 0 <= r["seconds"] < 5 and r["seconds"] == round(r["seconds"], 3)
    # a driver's message in a legacy code page: shown with replacement characters, never a crash
    r = V.run([sys.executable, "-c", "import os; os.write(1, b'Vulkan0: \\xe9 GPU\\n'); os.write(2, b'err \\xff\\n')"],
              dict(os.environ), 30)
    assert r["status"] == 0 and r["stdout"] == "Vulkan0: \ufffd GPU\n" and r["stderr"] == "err \ufffd\n"
    # seconds to the millisecond, as docs/json.md shows them, and the time the build took
    assert r["seconds"] == round(r["seconds"], 3) and 0 < r["seconds"] < 30


@pytest.mark.skipif(os.name == "nt", reason="process groups are POSIX")
def test_a_build_whose_group_cannot_be_signalled_is_still_killed_on_timeout(tmp_path, monkeypatch):
    # killpg can be refused (a build that made itself a setuid helper's group leader): the build itself
    # is still killed, so a hung GPU start never outlives the check
    import sys

    from test_bench import gone

    def refused(pgid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(V.os, "killpg", refused)
    pid_file = tmp_path / "pid"
    r = V.run([sys.executable, "-c", f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
               "time.sleep(600)"], dict(os.environ), 3)
    assert r["timed_out"] and r["status"] is None
    assert gone(int(pid_file.read_text()))


@pytest.mark.skipif(os.name == "nt", reason="execute permission bits are POSIX")
def test_a_build_without_execute_permission_is_named_as_such(tmp_path):
    exe = tmp_path / "llama-server"
    exe.write_text("#!/bin/sh\necho hi\n")
    exe.chmod(0o644)  # unpacked by a tool that dropped the mode bits
    r = V.run([str(exe), "--list-devices"], dict(os.environ), 5)
    assert r["start_error"] == f"{exe}: cannot be executed: Permission denied"
    assert r["status"] is None and r["stdout"] == "" and 0 <= r["seconds"] < 5
    assert r["seconds"] == round(r["seconds"], 3)


@pytest.mark.skipif(os.name == "nt", reason="sessions and process groups are POSIX")
def test_a_timeout_returns_even_when_an_escaped_helper_keeps_the_output_open(tmp_path):
    # a build that started a helper in its own session (out of the build's group, so the group kill
    # misses it) which holds stdout: the check still ends, a few seconds after the timeout, with no output
    import signal
    import sys
    import time

    pid_file = tmp_path / "helper.pid"
    helper = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    build = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {helper!r}], start_new_session=True); "
             "time.sleep(60)")
    t0 = time.monotonic()
    try:
        r = V.run([sys.executable, "-c", build], dict(os.environ), 1)
        assert r["timed_out"] and r["status"] is None and (r["stdout"], r["stderr"]) == ("", "")
        assert time.monotonic() - t0 < 20
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


@pytest.mark.skipif(os.name == "nt", reason="SIGTERM handlers are POSIX")
def test_the_sigterm_handler_is_the_callers_again_after_a_check():
    # while a build runs, SIGTERM interrupts like Ctrl-C (to end the build's group); afterwards the
    # program's own handler is back, so `install --verify` and `bench` keep their own behaviour
    import signal
    import sys

    def mine(signum, frame):
        pass

    old = signal.signal(signal.SIGTERM, mine)
    try:
        V.run([sys.executable, "-c", "pass"], dict(os.environ), 30)
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, old)
