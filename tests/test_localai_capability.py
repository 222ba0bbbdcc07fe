"""LocalAI's own choice and the driver gates, through the real CLI.

What LocalAI would do by itself (its capability string and the image each meta backend maps it to)
is written by hand into each fixture's expected.json ("localai"), worked out from
mudler/LocalAI@82c191af pkg/system/capabilities.go and backend/index.yaml; the CUDA driver gates
from the backends' Makefiles and NVIDIA's driver table (selector/catalogs/cuda-drivers.json)."""

import json
import os
import shutil

import pytest

from conftest import ROOT, expected, machine, machine_names, run_cli

GTX1080 = "linux-debian12-gtx1080"  # driver 535.247.01 / CUDA 12.2, sm_61
NO_DRIVER = "linux-ubuntu24.04-nvidia-no-driver"
SPARK = "linux-dgxos7-dgx-spark-gb10"
XAVIER = "linux-ubuntu20.04-jetson-agx-xavier"
HALO_512M = "linux-ubuntu24.04-strix-halo"
HALO_96G = "linux-ubuntu24.04-strix-halo-vram96g"
RTX4090_570 = "linux-ubuntu24.04-rtx4090"
ENV = "LOCALAI_FORCE_META_BACKEND_CAPABILITY"


def pick_all(root):
    r = run_cli("--root", root, "--catalog", "localai", "pick", "--all", "--allow-missing", "--json")
    assert r.rc == 0, r.err
    return r.json()


def verdict(rec, backend):
    return next(v for v in rec["backends"] if v["name"] == backend)


def _with_localai():
    return [n for n in machine_names() if "localai" in expected(n)]


@pytest.mark.parametrize("name", _with_localai())
def test_localai_own_choice_matches_the_hand_worked_capability_and_images(name):
    want = expected(name)["localai"]
    data = pick_all(machine(name))
    assert data["localai"]["capability"] == want["capability"]
    assert data["localai"]["source"] == "detected"
    for recipe, image in want["installs"].items():
        own = data["recipes"][recipe]["localai"]
        assert own["installs"] == image, recipe
        pick = data["recipes"][recipe].get("install", "").split()[-1:]
        assert own["same_as_pick"] == (pick == [image]), recipe


def test_the_five_machines_of_the_issue_are_fixtures():
    assert {GTX1080, NO_DRIVER, SPARK, XAVIER, HALO_512M} <= set(_with_localai())


# -- CUDA: kernels and driver -------------------------------------------------------------------


def test_gtx1080_on_driver_535_gets_no_ptx_only_cuda_image():
    data = pick_all(machine(GTX1080))
    audio = data["recipes"]["audio-cpp"]
    assert audio["backend"] == "cpu"
    why = verdict(audio, "cuda12")["reason"]
    assert "only PTX for sm_61" in why and "CUDA 12.8" in why and "570.26" in why and "535.247.01, CUDA 12.2" in why
    assert "no kernels for sm_61" in verdict(audio, "cuda13")["reason"]
    llama = data["recipes"]["llama-cpp"]
    assert llama["backend"] == "vulkan" and llama["install"] == "local-ai backends install vulkan-llama-cpp"
    # LocalAI by itself would take cuda12-llama-cpp: say so, and give the concrete image
    assert llama["localai"]["installs"] == "cuda12-llama-cpp"
    assert llama["localai"]["commands"] == ["local-ai backends install vulkan-llama-cpp"]


def test_driver_cuda_version_comes_from_nvidias_table_when_nvml_gives_none(tmp_path):
    dest = tmp_path / "m"
    shutil.copytree(machine(GTX1080), dest, symlinks=True)
    cap = json.loads((dest / "capture.json").read_text())
    del cap["nvml"]["cuda_driver_version"]
    (dest / "capture.json").write_text(json.dumps(cap))
    rec = pick_all(str(dest))["recipes"]["audio-cpp"]
    assert "535.247.01, CUDA 12.2" in verdict(rec, "cuda12")["reason"]  # 535.54.03 <= 535.247.01 < 545.23.06


def test_sass_runs_on_an_older_driver_of_the_same_cuda_major():
    r = run_cli("--root", machine(RTX4090_570), "--catalog", "localai", "audio-cpp", "--json")
    assert r.rc == 0
    rec = r.json()["recipes"]["audio-cpp"]
    assert rec["backend"] == "cuda12"  # sm_89 SASS in the CUDA 12.8 build; driver 570 = CUDA 12.8
    assert "CUDA 13.x" in verdict(rec, "cuda13")["reason"]


def test_no_cuda_or_vulkan_image_without_the_nvidia_driver():
    data = pick_all(machine(NO_DRIVER))
    for recipe in ("audio-cpp", "nemo-speech-cpp", "whisper-medusa", "llama-cpp"):
        assert data["recipes"][recipe]["backend"] == "cpu", recipe
    nemo = data["recipes"]["nemo-speech-cpp"]
    assert "no NVIDIA driver drives it" in verdict(nemo, "cuda12")["reason"]
    assert "no NVIDIA driver drives it (none loaded, or the card is bound to another), so vulkan cannot run" in verdict(nemo, "vulkan")["reason"]
    assert "no NVIDIA driver drives it" in verdict(data["recipes"]["whisper-medusa"], "cuda12")["reason"]


# -- names and gates from the index ------------------------------------------------------------


def test_dgx_spark_vllm_cpp_image_is_the_index_name():
    rec = pick_all(machine(SPARK))["recipes"]["vllm-cpp"]
    assert rec["backend"] == "nvidia-l4t"
    assert rec["install"] == "local-ai backends install nvidia-l4t-arm64-vllm-cpp"
    assert rec["localai"]["same_as_pick"] is True
    assert rec["localai"]["commands"] == ["local-ai backends install vllm-cpp"]


def test_xavier_gets_no_jetpack6_or_cuda13_image_and_no_amd64_vulkan():
    data = pick_all(machine(XAVIER))
    nemo = data["recipes"]["nemo-speech-cpp"]
    assert nemo["backend"] == "vulkan"
    assert "Jetson Orin (sm_87) only" in verdict(nemo, "l4t-cuda12")["reason"]
    assert "no kernels for sm_72" in verdict(nemo, "l4t-cuda13")["reason"]
    vllm = data["recipes"]["vllm-cpp"]
    assert vllm["backend"] == "cpu"
    assert verdict(vllm, "vulkan")["reason"] == "the image is built for x86_64 only (found arm64)"
    assert nemo["localai"]["note"].startswith("LocalAI by itself would install nvidia-l4t-arm64-nemo-speech-cpp, "
                                              "which does not run here: the L4T CUDA 12 image is built on JetPack 6")


# -- what LocalAI does by itself --------------------------------------------------------------


def test_strix_halo_512m_carve_out_is_default_to_localai_and_the_human_view_says_how_to_get_rocm():
    r = run_cli("--root", machine(HALO_512M), "--catalog", "localai", "llama-cpp", "vllm-cpp")
    assert r.rc == 0, r.err
    out = " ".join(r.out.split())
    assert "LocalAI by itself would use capability default" in out
    assert "4 GiB or less" in out
    assert f"set {ENV}=amd" in out
    assert f"{ENV}=amd local-ai backends install rocm-llama-cpp" in out
    assert "applies to every backend it installs" in out
    # vulkan-vllm-cpp passes LocalAI's filter under any capability: the concrete image is enough
    assert "install the pick with: local-ai backends install vulkan-vllm-cpp" in out
    assert f"{ENV}=vulkan" not in out  # no per-recipe value of the process-wide variable


def test_strix_halo_96g_carve_out_is_amd_and_llama_cpp_needs_nothing_forced():
    rec = pick_all(machine(HALO_96G))["recipes"]["llama-cpp"]
    assert rec["backend"] == "rocm"
    assert rec["localai"]["same_as_pick"] is True
    assert rec["localai"]["commands"] == ["local-ai backends install llama-cpp"]


@pytest.mark.parametrize("how", ["env", "run_file"])
def test_a_forced_capability_wins_over_detection(tmp_path, how):
    dest = tmp_path / "m"
    shutil.copytree(machine(HALO_512M), dest, symlinks=True)
    if how == "env":
        cap = json.loads((dest / "capture.json").read_text())
        cap["env"][ENV] = "amd"
        (dest / "capture.json").write_text(json.dumps(cap))
    else:
        (dest / "fs" / "run" / "localai").mkdir(parents=True)
        (dest / "fs" / "run" / "localai" / "capability").write_text("amd\n")
    data = pick_all(str(dest))
    assert data["localai"]["capability"] == "amd" and data["localai"]["source"] == how
    assert data["recipes"]["llama-cpp"]["localai"]["installs"] == "rocm-llama-cpp"
    assert data["recipes"]["llama-cpp"]["localai"]["same_as_pick"] is True


def test_lemonade_output_has_no_localai_section():
    r = run_cli("--root", machine(HALO_512M), "llamacpp", "--json")
    assert r.rc == 0
    assert "localai" not in r.json() and "localai" not in r.json()["recipes"]["llamacpp"]


# -- the catalog's new fields are validated --------------------------------------------------------


def _bad_catalog(tmp_path, change):
    with open(os.path.join(ROOT, "selector", "catalogs", "localai.json"), encoding="utf-8") as f:
        data = json.load(f)
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("change,words", [
    (lambda d: d["recipes"]["audio-cpp"]["rows"][1]["requires"]["cuda"].update(toolkit="12"),
     "recipes.audio-cpp.rows[1].requires.cuda.toolkit"),
    (lambda d: d["recipes"]["audio-cpp"]["rows"][1]["requires"]["cuda"].update(ptx=["compute_61"]),
     "recipes.audio-cpp.rows[1].requires.cuda.ptx"),
    (lambda d: d["recipes"]["vllm-cpp"]["rows"][3]["requires"].update(vulkan="yes"),
     "recipes.vllm-cpp.rows[3].requires.vulkan"),
    (lambda d: d["capability"]["rules"][6]["if"].update(vram_at_most="4G"), "capability.rules[6].if.vram_at_most"),
    (lambda d: d["capability"]["rules"][0]["if"].update(gpu="x"), "capability.rules[0].if"),
    (lambda d: d["recipes"]["llama-cpp"].update(capabilities={"default": 1}), "recipes.llama-cpp.capabilities"),
])
def test_bad_capability_or_cuda_data_is_exit_5_naming_the_entry(tmp_path, change, words):
    r = run_cli("--root", machine(GTX1080), "--catalog", _bad_catalog(tmp_path, change), "audio-cpp")
    assert r.rc == 5, r.out + r.err
    assert "bad.json" in r.err and words in r.err
    assert "Traceback" not in r.err


def test_the_same_cuda_gate_judges_lemonades_llamacpp_cuda_build(tmp_path):
    # lemonade-sdk/llama.cpp builds its CUDA assets with CUDA 12.9 (SASS per sm): a CUDA 11.8 driver cannot load them
    dest = tmp_path / "m"
    shutil.copytree(machine(RTX4090_570), dest, symlinks=True)
    cap = json.loads((dest / "capture.json").read_text())
    cap["nvml"].update(driver_version="520.61.05", cuda_driver_version=11080)
    (dest / "capture.json").write_text(json.dumps(cap))
    r = run_cli("--root", str(dest), "llamacpp", "--json")
    rec = r.json()["recipes"]["llamacpp"]
    assert rec["backend"] == "vulkan"
    assert verdict(rec, "cuda")["reason"] == "needs an NVIDIA driver for CUDA 12.x (525.60.13 or newer; found 520.61.05, CUDA 11.8)"
    r = run_cli("--root", machine(RTX4090_570), "llamacpp", "--json")
    assert r.json()["recipes"]["llamacpp"]["backend"] == "cuda"


def test_rocm_images_need_an_amd_gpu_usable_for_compute(tmp_path):
    # a container without /dev/kfd: the Profile's usable_compute is false (the device-access probe's fact)
    r = run_cli("--root", machine(HALO_96G), "probe", "--json")
    prof = r.json()
    prof["amd_gpus"][0]["usable_compute"] = False
    path = tmp_path / "node.json"
    path.write_text(json.dumps(prof))
    r = run_cli("--profile", str(path), "--catalog", "localai", "llama-cpp", "strata", "--json")
    recs = r.json()["recipes"]
    assert recs["llama-cpp"]["backend"] == "vulkan"
    assert "cannot open /dev/kfd" in verdict(recs["llama-cpp"], "rocm")["reason"]
    assert recs["strata"]["backend"] is None and r.rc == 3


ORIN = "linux-jetpack6-jetson-agx-orin"  # JetPack 6.2: /etc/nv_tegra_release says R36, REVISION 4.3


def test_jetpack6_orin_gets_no_cuda13_image():
    # JetPack 6 (L4T R36) ships CUDA 12.6 and a driver for it; CUDA 13 on Jetson comes with JetPack 7
    # (L4T R38, developer.nvidia.com/embedded/jetpack-archive).  The CUDA 13.0 L4T images cannot load
    # on it, so llama-cpp's pick is the JetPack 6 image, which is also what LocalAI installs by itself
    # (capability nvidia-l4t: no /usr/local/cuda-13)
    doc = pick_all(machine(ORIN))
    rec = doc["recipes"]["llama-cpp"]
    assert rec["backend"] == "l4t-cuda12" and rec["install"] == "local-ai backends install nvidia-l4t-arm64-llama-cpp"
    why = verdict(rec, "l4t-cuda13")["reason"]
    assert verdict(rec, "l4t-cuda13")["supported"] is False and "CUDA 13" in why and "12.6" in why
    assert rec["localai"]["same_as_pick"] is True
