"""Windows and macOS, replayed on Linux from their captures (capture.json "windows" / "macos").

What users rely on: a Strix Point laptop gets its NPU backends, and is told when the NPU driver is
missing; the Radeon 780M is found by its PCI id (gfx1103), not by a marketing name; a Mac says metal;
an x64 Python on Windows on ARM or a Python under Rosetta does not make the machine x86_64; and a
garbage capture section is a warning or exit 5, never a traceback."""

import copy
import json
import shutil

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import machine, profile_of, run_cli


def decide(name, recipe):
    from selector import catalog, engine

    return engine.decide(profile_of(name), catalog.load("lemonade"), recipe)


def picked(name, recipe):
    d = decide(name, recipe)
    return (d.backend, d.device.type if d.device else None, d.device.family if d.device else None) if d.ok else None


def messages(profile, probe=None):
    return [w.message for w in profile.warnings if probe is None or w.probe == probe]


# ---------------------------------------------------------------------------------------------
# Windows


def test_strix_point_picks_the_npu_and_the_igpu():
    name = "windows11-strixpoint"
    assert picked(name, "whispercpp") == ("npu", "amd_npu", "XDNA2")
    assert picked(name, "flm") == ("npu", "amd_npu", "XDNA2")
    assert picked(name, "ryzenai-llm") == ("npu", "amd_npu", "XDNA2")
    assert picked(name, "llamacpp") == ("vulkan", "amd_gpu", "gfx1150")
    assert messages(profile_of(name), "npu") == []


def test_strix_point_without_npu_driver_names_the_driver():
    name = "windows11-strixpoint-no-npu-driver"
    prof = profile_of(name)
    assert [n.driver_bound for n in prof.npus] == [False]
    assert any("driver is not installed" in m for m in messages(prof, "npu"))
    for recipe in ("whispercpp", "flm", "ryzenai-llm"):
        v = decide(name, recipe).verdict("npu")
        assert not v.supported and "driver" in v.reason, (recipe, v.reason)
    assert picked(name, "whispercpp") == ("vulkan", "amd_gpu", "gfx1150")
    assert picked(name, "flm") is None and picked(name, "ryzenai-llm") is None


def test_radeon_780m_is_gfx1103_from_its_pci_id_and_rocm_checks_ok():
    (gpu,) = profile_of("windows11-radeon780m").amd_gpus
    assert (gpu.pci.device, gpu.gfx, gpu.integrated) == ("0x15bf", "gfx1103", True)
    r = run_cli("--root", machine("windows11-radeon780m"), "check", "llamacpp", "rocm")
    assert r.rc == 0, r.err
    assert "gfx1103" in r.out


def test_780m_found_whatever_the_driver_calls_it(tmp_path):
    # Lemonade reads marketing names; an unhelpful DriverDesc must not lose the GPU
    root = _copy("windows11-radeon780m", tmp_path)
    data = _load(root)
    data["windows"]["display_adapters"]["0000"]["DriverDesc"] = "AMD Radeon(TM) Graphics"
    _save(root, data)
    (gpu,) = _profile(root).amd_gpus
    assert (gpu.gfx, gpu.integrated) == ("gfx1103", True)


def test_rx7900xtx_is_discrete_and_a_removed_gpu_is_not_reported():
    prof = profile_of("windows11-rx7900xtx")
    assert [(g.gfx, g.integrated) for g in prof.amd_gpus] == [("gfx1100", False), ("gfx1036", True)]
    assert prof.nvidia_gpus == []  # the GTX 1080's driver key is stale (not a present device)
    assert picked("windows11-rx7900xtx", "llamacpp") == ("vulkan", "amd_gpu", "gfx1100")


def test_rtx4090_through_nvml_and_through_the_name_table_without_it(tmp_path):
    assert picked("windows11-rtx4090", "llamacpp") == ("cuda", "nvidia_gpu", "sm_89")
    root = _copy("windows11-rtx4090", tmp_path)
    data = _load(root)
    data["nvml"] = {"error": "LibraryNotFound"}
    _save(root, data)
    prof = _profile(root)
    (gpu,) = prof.nvidia_gpus
    assert (gpu.name, gpu.sm) == ("NVIDIA GeForce RTX 4090", "sm_89")
    assert any("name" in m for m in messages(prof, "nvidia"))


def test_x64_python_on_windows_on_arm_reports_arm64_and_warns():
    prof = profile_of("windows11-arm64-x64python")
    assert (prof.cpu.arch, prof.cpu.emulated) == ("arm64", True)
    assert any("emulated" in m for m in messages(prof, "cpu"))
    r = run_cli("--root", machine("windows11-arm64-x64python"), "probe", "--json")
    assert r.rc == 0 and r.json()["cpu"]["arch"] == "arm64"


# ---------------------------------------------------------------------------------------------
# macOS


def test_m3_picks_metal_and_moonshine_cpu():
    name = "macos14-m3max"
    for recipe in ("llamacpp", "whispercpp", "kokoro"):
        assert picked(name, recipe) == ("metal", "metal", "metal"), recipe
    assert picked(name, "moonshine") == ("cpu", "cpu", "arm64")
    r = run_cli("--root", machine(name), "llamacpp", "--json")
    assert r.rc == 0 and r.json()["recipes"]["llamacpp"]["backend"] == "metal"


def test_intel_mac_has_no_llamacpp_backend_and_says_why():
    r = run_cli("--root", machine("macos14-intel"), "llamacpp", "--json")
    assert r.rc == 3
    rec = r.json()["recipes"]["llamacpp"]
    assert rec["backend"] is None
    reasons = {b["name"]: b["reason"] for b in rec["backends"]}
    assert "Intel Mac" in reasons["metal"]
    assert "Requires Linux or Windows" in reasons["vulkan"]


def test_rosetta_reports_arm64_and_warns():
    prof = profile_of("macos13-m1-rosetta")
    assert (prof.cpu.arch, prof.cpu.emulated, prof.metal.available) == ("arm64", True, True)
    assert any("Rosetta" in m for m in messages(prof, "cpu"))
    assert picked("macos13-m1-rosetta", "llamacpp") == ("metal", "metal", "metal")


# ---------------------------------------------------------------------------------------------
# Garbage in the sections


def _copy(name, tmp_path):
    dest = tmp_path / name
    shutil.copytree(machine(name), dest)
    return dest


def _load(root):
    return json.loads((root / "capture.json").read_text())


def _save(root, data):
    (root / "capture.json").write_text(json.dumps(data))


def _profile(root):
    from probes import probe
    from probes.host import CaptureHost

    return probe(CaptureHost(str(root)))


json_leaf = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=12)
json_any = st.recursive(json_leaf, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                        max_leaves=12)
WIN_KEYS = ["win32_ver", "current_version", "processor", "cpu_count", "memory_bytes", "is_wow64_process2",
            "display_adapters", "present_drivers", "pci_enum", "vulkan_drivers", "errors"]
MAC_KEYS = ["mac_ver", "sysctl", "metal", "errors"]


def _mutations(keys):
    """Replace, drop or corrupt keys at the top level and one level down of a real section."""
    return st.lists(st.tuples(st.sampled_from(keys), st.sampled_from(["replace", "drop", "inner"]),
                              st.text(max_size=30), json_any), min_size=1, max_size=5)


def _mutate(section, muts):
    section = copy.deepcopy(section)
    for key, how, inner_key, value in muts:
        if how == "drop":
            section.pop(key, None)
        elif how == "replace" or not isinstance(section.get(key), dict) or not section[key]:
            section[key] = value
        else:
            inner = section[key]
            k = inner_key if inner_key in inner or not inner else sorted(inner)[len(inner_key) % len(inner)]
            inner[k] = value
    return section


def _check_no_crash(tmp_path, data):
    from probes import probe
    from probes.host import CaptureHost
    from probes.profile import Profile
    from selector import catalog, engine

    root = tmp_path / "garbage"
    root.mkdir(exist_ok=True)
    (root / "capture.json").write_text(json.dumps(data))
    prof = probe(CaptureHost(str(root)))
    # every oddity was handled on purpose: nothing fell through to the probe runner's safety net
    assert not [m for m in messages(prof) if m.startswith("probe failed")], messages(prof)
    assert Profile.from_dict(json.loads(json.dumps(prof.to_dict()))).to_dict() == prof.to_dict()
    cat = catalog.load("lemonade")
    m = engine.Machine(prof)
    for recipe in ("llamacpp", "whispercpp", "flm"):
        engine.decide(prof, cat, recipe, machine=m)


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(muts=_mutations(WIN_KEYS), which=st.sampled_from(["windows11-strixpoint", "windows11-rtx4090",
                                                         "windows11-arm64-x64python"]))
def test_garbage_in_windows_section_is_never_a_traceback(tmp_path, muts, which):
    data = json.loads(open(f"{machine(which)}/capture.json").read())
    data["windows"] = _mutate(data["windows"], muts)
    _check_no_crash(tmp_path, data)


@FAST
@given(muts=_mutations(MAC_KEYS), which=st.sampled_from(["macos14-m3max", "macos13-m1-rosetta", "macos14-intel"]))
def test_garbage_in_macos_section_is_never_a_traceback(tmp_path, muts, which):
    data = json.loads(open(f"{machine(which)}/capture.json").read())
    data["macos"] = _mutate(data["macos"], muts)
    _check_no_crash(tmp_path, data)


@FAST
@given(section=st.dictionaries(st.text(max_size=20), json_any, max_size=6), system=st.sampled_from(["Windows", "Darwin"]))
def test_random_sections_are_never_a_traceback(tmp_path, section, system):
    data = {"format": 1, "platform": {"system": system, "machine": "AMD64" if system == "Windows" else "arm64"},
            "windows" if system == "Windows" else "macos": section}
    _check_no_crash(tmp_path, data)


def test_wrong_type_is_a_warning_naming_the_field(tmp_path):
    root = _copy("windows11-strixpoint", tmp_path)
    data = _load(root)
    data["windows"]["display_adapters"]["0000"]["HardwareInformation.qwMemorySize"] = "lots"
    data["windows"]["is_wow64_process2"] = [0, 43620]
    _save(root, data)
    prof = _profile(root)
    text = " | ".join(messages(prof))
    assert "windows.display_adapters.0000.HardwareInformation.qwMemorySize is 'lots' (str)" in text
    assert "windows.is_wow64_process2" in text
    assert prof.amd_gpus[0].gfx == "gfx1150" and prof.amd_gpus[0].vram_bytes is None


def test_section_that_is_not_an_object_is_exit_5(tmp_path):
    for name, key in (("windows11-strixpoint", "windows"), ("macos14-m3max", "macos")):
        root = _copy(name, tmp_path)
        data = _load(root)
        data[key] = ["not", "an", "object"]
        _save(root, data)
        r = run_cli("--root", str(root), "llamacpp", "--json")
        assert r.rc == 5, r.err
        assert "capture.json" in r.err and f"'{key}'" in r.err and "Traceback" not in r.err
