"""The LocalAI catalog (``--catalog localai``): the image of a LocalAI backend that really runs on a
machine, or why none does.  Expectations come from LocalAI's engine pages
(LocalAI's documentation at localai.io), written by hand."""

import json
import os

import pytest

from conftest import ROOT, machine, run_cli

RTX4090_570 = "linux-ubuntu24.04-rtx4090"  # driver 570.86.15
RTX4090_575 = "linux-ubuntu24.04-rtx4090-driver575"
RTX4090_580 = "linux-ubuntu24.04-rtx4090-driver580"
RTX5090 = "linux-ubuntu24.04-rtx5090"
CPU_VM = "linux-debian12-x86_64-cpu-only"
STRIX_HALO = "linux-ubuntu24.04-strix-halo"
SPARK = "linux-dgxos7-dgx-spark-gb10"  # capture without a recorded glibc
SPARK_239 = "linux-dgxos7-dgx-spark-gb10-glibc2.39"
SPARK_235 = "linux-container-ubuntu22.04-dgx-spark-gb10-glibc2.35"
ARC = "linux-ubuntu24.04-arc-a770"
RK3588 = "linux-ubuntu22.04-rk3588-orangepi5plus"
RK3566 = "linux-ubuntu22.04-rk3566-quartz64a"


def pick(name, recipe, *extra):
    r = run_cli("--root", machine(name), "--catalog", "localai", recipe, "--json", *extra)
    return r, r.json()["recipes"][recipe]


def verdict(rec, backend):
    return next(v for v in rec["backends"] if v["name"] == backend)


# -- vllm-cpp: the CUDA image has Blackwell kernels only ----------------------------------------


def test_rtx4090_vllm_cpp_cuda13_needs_a_cuda13_driver_else_vulkan():
    # backend/go/vllm-cpp/Makefile L75-76 @82c191af builds sm_89 since #11512 (the docs page lags)
    r, rec = pick(RTX4090_570, "vllm-cpp")
    assert r.rc == 0
    assert r.json()["catalog"] == "localai"
    assert rec["backend"] == "vulkan"
    assert rec["device"]["type"] == "nvidia_gpu"
    assert verdict(rec, "cuda13")["supported"] is False
    assert verdict(rec, "cuda13")["reason"] == "needs an NVIDIA driver for CUDA 13.x (580 or newer; found 570.86.15, CUDA 12.8)"
    r, rec = pick(RTX4090_580, "vllm-cpp")
    assert rec["backend"] == "cuda13" and rec["device"]["family"] == "sm_89"


def test_rtx5090_vllm_cpp_is_cuda13():
    r, rec = pick(RTX5090, "vllm-cpp")
    assert r.rc == 0
    assert rec["backend"] == "cuda13"
    assert rec["device"]["family"] == "sm_120"
    assert rec["install"] == "local-ai backends install cuda13-vllm-cpp"
    assert rec["env"] == {"LOCALAI_FORCE_META_BACKEND_CAPABILITY": "nvidia-cuda-13"}


# -- strata: CUDA images gated on the NVIDIA driver ---------------------------------------------


def test_strata_driver_575_is_cuda12_because_cuda13_needs_580():
    r, rec = pick(RTX4090_575, "strata")
    assert r.rc == 0
    assert rec["backend"] == "cuda12"
    assert "580" in verdict(rec, "cuda13")["reason"] and "575.51.03" in verdict(rec, "cuda13")["reason"]


def test_strata_driver_580_is_cuda13():
    r, rec = pick(RTX4090_580, "strata")
    assert r.rc == 0
    assert rec["backend"] == "cuda13"
    assert rec["install"] == "local-ai backends install cuda13-strata"


def test_strata_driver_570_fits_nothing_and_names_each_driver_needed():
    r, rec = pick(RTX4090_570, "strata")
    assert r.rc == 3
    assert rec["backend"] is None
    assert "no variant fits this machine" in rec["reason"]
    assert verdict(rec, "cuda13")["reason"] == "needs NVIDIA driver 580 or newer (found 570.86.15)"
    assert verdict(rec, "cuda12")["reason"] == "needs NVIDIA driver 575 or newer (found 570.86.15)"


def test_strata_human_view_prints_install_command_and_capability():
    r = run_cli("--root", machine(RTX4090_580), "--catalog", "localai", "strata")
    assert r.rc == 0, r.err
    assert "local-ai backends install cuda13-strata" in r.out
    assert "LocalAI by itself would use capability nvidia " in r.out  # no /usr/local/cuda-N in the capture


def test_cpu_only_vm_strata_lists_every_variants_reason():
    r = run_cli("--root", machine(CPU_VM), "--catalog", "localai", "strata")
    assert r.rc == 3
    assert "no variant fits this machine" in r.out
    for backend, why in [("cuda13", "No NVIDIA GPU found"), ("cuda12", "No NVIDIA GPU found"),
                         ("l4t-cuda13", "built for arm64 only"), ("rocm", "No AMD GPU found"),
                         ("intel", "No Intel GPU found"), ("metal", "Requires macOS")]:
        line = next(x for x in r.out.splitlines() if f" {backend} " in x)
        assert why in line, line
    js = run_cli("--root", machine(CPU_VM), "--catalog", "localai", "strata", "--json")
    assert js.rc == 3
    rec = js.json()["recipes"]["strata"]
    assert rec["backend"] is None and all(v["reason"] for v in rec["backends"])


def test_strix_halo_strata_rocm_audio_cpu_and_nemo_vulkan_on_the_gpu():
    r = run_cli("--root", machine(STRIX_HALO), "--catalog", "localai", "strata", "audio-cpp", "nemo-speech-cpp", "--json")
    assert r.rc == 0
    recs = r.json()["recipes"]
    assert recs["strata"]["backend"] == "rocm"
    assert recs["strata"]["device"]["family"] == "gfx1151"
    audio = recs["audio-cpp"]  # no rocm-audio-cpp in backend/index.yaml @82c191af: the engines page is ahead of it
    assert audio["backend"] == "cpu"
    assert any("no ROCm image" in n for n in verdict(audio, "cpu")["notes"])
    # the vulkan image's row lists NVIDIA GPUs only, but a Vulkan build runs on any GPU with a Vulkan
    # driver: RADV runs it on the Radeon 8060S, and the verdict says the row does not list it
    nemo = recs["nemo-speech-cpp"]
    assert nemo["backend"] == "vulkan" and nemo["device"]["type"] == "amd_gpu"
    assert any("LocalAI's matrix lists this build for NVIDIA GPUs; it runs on this AMD GPU through its Vulkan "
               "driver (radeon_icd)" in n for n in verdict(nemo, "vulkan")["notes"])
    assert nemo["env"] == {"LOCALAI_FORCE_META_BACKEND_CAPABILITY": "vulkan"}


def test_dgx_spark_strata_needs_glibc_2_39():
    r, rec = pick(SPARK_239, "strata")
    assert r.rc == 0
    assert rec["backend"] == "l4t-cuda13"
    assert rec["install"] == "local-ai backends install cuda13-nvidia-l4t-arm64-strata"
    r, rec = pick(SPARK_235, "strata")
    assert r.rc == 3
    assert verdict(rec, "l4t-cuda13")["reason"] == "needs glibc 2.39 or newer (found 2.35)"
    r, rec = pick(SPARK, "strata")  # a capture that did not record the C library: not assumed
    assert r.rc == 3
    assert "glibc 2.39" in verdict(rec, "l4t-cuda13")["reason"]


def test_intel_arc_strata_is_the_intel_image():
    r, rec = pick(ARC, "strata")
    assert r.rc == 0
    assert rec["backend"] == "intel"
    assert rec["device"] == {"type": "intel_gpu", "family": "arc", "index": 1, "name": "Intel Arc A770 (DG2-G10)"}  # the UHD 770 iGPU is 0


def test_check_gate_uses_the_localai_catalog():
    r = run_cli("--root", machine(RTX4090_575), "--catalog", "localai", "check", "strata", "cuda13")
    assert r.rc == 3
    assert "needs NVIDIA driver 580 or newer" in r.err
    assert run_cli("--root", machine(RTX4090_575), "--catalog", "localai", "check", "strata", "cuda12").rc == 0


# -- rkllm: Rockchip SoC from the device tree ----------------------------------------------------


def test_rkllm_rk3588_supported_rk3566_named_unsupported():
    r, rec = pick(RK3588, "rkllm")
    assert r.rc == 0 and rec["backend"] == "cloud-proxy"
    r, rec = pick(RK3566, "rkllm")
    assert r.rc == 3
    assert "RK3566" in verdict(rec, "cloud-proxy")["reason"]


# -- the catalog itself --------------------------------------------------------------------------


def test_matrix_lists_the_localai_catalog():
    r = run_cli("--catalog", "localai", "matrix", "--json")
    assert r.rc == 0
    data = r.json()
    assert data["catalog"] == "localai"
    assert {"llama-cpp", "whisper", "vllm-cpp", "strata", "audio-cpp", "nemo-speech-cpp", "whisper-medusa",
            "rkllm"} <= set(data["recipes"])
    assert [row["backend"] for row in data["recipes"]["audio-cpp"]["rows"]] == ["cuda13", "cuda12", "metal", "cpu"]
    human = run_cli("--catalog", "localai", "matrix", "strata")
    assert human.rc == 0 and "nvidia_driver_min 580" in human.out


def test_unknown_recipe_in_localai_suggests_the_closest():
    r = run_cli("--root", machine(CPU_VM), "--catalog", "localai", "stratta")
    assert r.rc == 2
    assert "strata" in r.err


def _catalog_with(tmp_path, **row_changes):
    with open(os.path.join(ROOT, "selector", "catalogs", "localai.json"), encoding="utf-8") as f:
        data = json.load(f)
    data["recipes"]["strata"]["rows"][0].update(row_changes)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("change,words", [
    ({"requires": {"nvidia_driver": "580"}}, "recipes.strata.rows[0].requires.nvidia_driver"),
    ({"requires": {"nvidia_driver_min": "new"}}, "recipes.strata.rows[0].requires.nvidia_driver_min"),
    ({"env": {"LOCALAI_FORCE_META_BACKEND_CAPABILITY": 13}}, "recipes.strata.rows[0].env"),
    ({"device_notes": {"gpu": "x"}}, "recipes.strata.rows[0].device_notes"),
])
def test_bad_catalog_entry_is_exit_5_naming_file_and_entry(tmp_path, change, words):
    path = _catalog_with(tmp_path, **change)
    r = run_cli("--root", machine(CPU_VM), "--catalog", path, "strata")
    assert r.rc == 5
    assert "bad.json" in r.err and words in r.err
    assert "Traceback" not in r.err


def test_lemonade_stays_the_default_catalog_without_localai_fields():
    r = run_cli("--root", machine(RTX4090_580), "llamacpp", "--json")
    assert r.rc == 0
    data = r.json()
    assert data["catalog"] == "lemonade"
    rec = data["recipes"]["llamacpp"]
    assert "install" not in rec and "env" not in rec
    assert all("install" not in v for v in rec["backends"])


# -- version comparison and the glibc fact --------------------------------------------------------


@pytest.mark.parametrize("have,need,ok", [
    ("575.51.03", "575", True), ("570.86.15", "575", False), ("580", "580", True),
    ("2.39", "2.39", True), ("2.39", "2.4", True), ("2.35", "2.39", False), ("15.1", "15", True),
    ("14.7.1", "15", False), (None, "575", None), ("garbage", "575", None),
])
def test_versions_compare_number_by_number(have, need, ok):
    from selector.requires import at_least

    assert at_least(have, need) is ok


def test_glibc_comes_from_the_capture_and_bad_values_are_a_warning(tmp_path):
    import shutil

    from probes import probe
    from probes.host import CaptureHost

    assert probe(CaptureHost(machine(SPARK_239))).os.glibc == "2.39"
    dest = tmp_path / "m"
    shutil.copytree(machine(SPARK_239), dest, symlinks=True)
    cap = json.loads((dest / "capture.json").read_text())
    cap["libc"] = {"name": "glibc", "version": "two"}
    (dest / "capture.json").write_text(json.dumps(cap))
    prof = probe(CaptureHost(str(dest)))
    assert prof.os.glibc is None
    assert any(w.probe == "libc" for w in prof.warnings)
    cap["libc"] = "2.39"
    (dest / "capture.json").write_text(json.dumps(cap))
    r = run_cli("--root", str(dest), "--catalog", "localai", "strata")
    assert r.rc == 5 and "libc" in r.err


@pytest.mark.parametrize("name", [RTX5090, STRIX_HALO, SPARK_235])
def test_localai_pick_json_follows_the_documented_schema(name):
    import jsonschema

    from test_json_contract import schema

    r = run_cli("--root", machine(name), "--catalog", "localai", "pick", "--all", "--allow-missing", "--json")
    assert r.rc == 0, r.err
    jsonschema.validate(r.json(), schema("pick"))


def test_an_intel_gpu_this_process_cannot_open_gets_no_sycl_image(tmp_path):
    # LocalAI's intel image (SYCL, Level Zero) opens the GPU's render node: on the Arc A770 machine it
    # is picked; when the node is not read-write (no render group) it is not, and the reason says why
    import shutil

    r, rec = pick(ARC, "llama-cpp")
    assert rec["backend"] == "intel" and rec["device"]["name"] == "Intel Arc A770 (DG2-G10)"
    root = tmp_path / "arc"
    shutil.copytree(machine(ARC), root, symlinks=True)
    data = json.loads((root / "capture.json").read_text())
    data["dev"] = {k: ("none" if "renderD" in k else v) for k, v in data.get("dev", {}).items()} or \
        {"/dev/dri/renderD128": "none", "/dev/dri/renderD129": "none"}
    (root / "capture.json").write_text(json.dumps(data))
    r = run_cli("--root", str(root), "--catalog", "localai", "llama-cpp", "--json")
    intel = verdict(r.json()["recipes"]["llama-cpp"], "intel")
    assert not intel["supported"] and "cannot open its render node" in intel["reason"], intel["reason"]


# -- strata on a Mac: "Apple Silicon: metal-strata, macOS 15 or newer" (localai-engines.txt) ----------


def test_metal_strata_needs_macos_15(tmp_path):
    r, rec = pick("macos14-m3max", "strata")  # macOS 14.5 on an M3 Max
    assert r.rc == 3 and rec["backend"] is None
    assert verdict(rec, "metal")["reason"] == "needs macOS 15 or newer (found 14.5)"
    # the same Mac on macOS 15: the Metal image fits
    prof = run_cli("--root", machine("macos14-m3max"), "probe", "--json").json()
    prof["os"]["version"] = "15.1"
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(prof))
    r = run_cli("--profile", str(path), "--catalog", "localai", "strata", "--json")
    rec = r.json()["recipes"]["strata"]
    assert r.rc == 0 and rec["backend"] == "metal" and rec["device"]["type"] == "metal"
