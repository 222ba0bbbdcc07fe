"""Issue 12, the probe half: every device is reported, with whether this process can use it.

Device access (capture.json ``dev``), pyamdgpuinfo's answers (``amdgpuinfo``), the KFD facts the
multi-device engine needs (render node, CWSR, unique_id, HIP index), old kernels, NVIDIA UUIDs and
CUDA order, GPUs NVML does not list, Jetson, and the Windows fallbacks.  Each fallback and warning
is pinned: the fixtures are copied and changed one fact at a time."""

import json
import os
import shutil
import threading

import pytest

from conftest import machine, profile_of


def _copy(name, tmp_path):
    dest = tmp_path / name
    shutil.copytree(machine(name), dest, symlinks=True)
    return dest


def _edit(root, fn):
    path = root / "capture.json"
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def _probe(root):
    from probes import probe
    from probes.host import CaptureHost

    return probe(CaptureHost(root))


def _props(root, node):
    return root / "fs/sys/devices/virtual/kfd/kfd/topology/nodes" / str(node) / "properties"


def _warned(p, probe, *words):
    return any(w.probe == probe and all(x in w.message for x in words) for w in p.warnings)


# ---------------------------------------------------------------------------------------------
# capture.json 'dev'


@pytest.mark.parametrize("dev", ['[]', '{"/dev/kfd": "yes"}', '{"/dev/kfd": null}'])
def test_a_bad_dev_section_exits_5_naming_the_field(tmp_path, cli, dev):
    root = tmp_path / "cap"
    root.mkdir()
    (root / "capture.json").write_text('{"format": 1, "platform": {"system": "Linux"}, "dev": %s}' % dev)
    r = cli("--root", str(root), "probe", "--json")
    assert r.rc == 5 and "capture.json" in r.err and "'dev" in r.err and "Traceback" not in r.err


def test_a_capture_without_dev_means_nodes_are_usable_and_with_dev_absent_means_absent(tmp_path):
    from probes.host import CaptureHost

    root = _copy("linux-ubuntu24.04-strix-halo", tmp_path)
    assert CaptureHost(root).dev_access("/dev/kfd") == "rw"  # old capture: usable
    _edit(root, lambda d: d.update(dev={"/dev/dri/renderD128": "r"}))
    host = CaptureHost(root)
    assert host.dev_access("/dev/kfd") is None and host.dev_access("/dev/dri/renderD128") == "r"


def test_live_dev_access_says_rw_r_none_or_absent(tmp_path, monkeypatch):
    from probes.host import LiveHost

    node = tmp_path / "renderD128"
    node.write_text("")
    grants = {}
    monkeypatch.setattr(os, "access", lambda p, mode: (mode & grants[str(p)]) == mode)
    host = LiveHost()
    for granted, want in ((os.R_OK | os.W_OK, "rw"), (os.R_OK, "r"), (0, "none")):
        grants[str(node)] = granted
        assert host.dev_access(str(node)) == want
    assert host.dev_access(str(tmp_path / "kfd")) is None


def test_capture_records_dev_and_amdgpuinfo_and_never_reads_a_device_node(tmp_path):
    """The recording host keeps what the probes asked; the writer puts an empty file where a
    device node was (reading /dev/kfd or a FIFO could block or fail)."""
    from probes.capture import _Writer
    from probes.host import LiveHost, RecordingHost

    class Fake(LiveHost):
        def dev_access(self, path):
            return {"/dev/kfd": "none", "/dev/dri/renderD128": "rw"}.get(path)

        def amdgpuinfo(self, nodes):
            return {"gpus": {n: {"error": "PermissionError"} for n in nodes}}

    rec = RecordingHost(Fake())
    assert rec.dev_access("/dev/kfd") == "none" and rec.dev_access("/dev/nvidiactl") is None
    rec.amdgpuinfo(["/dev/dri/renderD128"])
    assert rec.dev == {"/dev/kfd": "none"}
    assert rec.amdgpu == {"gpus": {"/dev/dri/renderD128": {"error": "PermissionError"}}}

    fifo = tmp_path / "node"
    os.mkfifo(fifo)
    w = _Writer(str(tmp_path / "out"))
    t = threading.Thread(target=w.file, args=(str(fifo),), daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "the capture writer blocked reading a device node"
    copied = tmp_path / "out" / "fs" / str(fifo).lstrip("/")
    assert copied.is_file() and copied.read_bytes() == b""


# ---------------------------------------------------------------------------------------------
# AMD: pyamdgpuinfo, amdgpu.ids, access


def test_three_radeons_named_by_pyamdgpuinfo_with_hip_indices():
    p = profile_of("linux-ubuntu24.04-radeonvii-w7500-rx6600")
    assert [(g.name, g.gfx, g.hip_index) for g in p.amd_gpus] == [
        ("AMD Radeon VII", "gfx906", 0), ("AMD Radeon PRO W7500", "gfx1102", 1), ("AMD Radeon RX 6600", "gfx1032", 2)]
    assert all(g.usable_compute and g.usable_graphics and g.access_fix is None for g in p.amd_gpus)
    assert all(g.unique_id.startswith("GPU-") and len(g.unique_id) == 20 for g in p.amd_gpus)


def test_pyamdgpuinfo_answers_win_over_sysfs_and_sysfs_is_the_fallback(tmp_path):
    root = _copy("linux-ubuntu24.04-radeonvii-w7500-rx6600", tmp_path)

    def change(d):
        d["amdgpuinfo"]["gpus"]["/dev/dri/renderD128"].update(name="Libdrm Says VII", vram_size=123, gtt_size=456)
        d["amdgpuinfo"]["gpus"]["/dev/dri/renderD129"] = {"error": "OSError"}
    _edit(root, change)
    a, b, _ = _probe(root).amd_gpus
    assert (a.name, a.vram_bytes, a.gtt_bytes) == ("Libdrm Says VII", 123, 456)
    # failed: the PCI table's name, sysfs memory
    assert b.name == "AMD Radeon PRO W7500" and b.vram_bytes == 8573157376 and b.gtt_bytes > 0
    assert b.usable_compute  # an error other than permission is no evidence against access

    _edit(root, lambda d: d["amdgpuinfo"]["gpus"]["/dev/dri/renderD128"].update(vram_size=0, gtt_size=None))
    a = _probe(root).amd_gpus[0]
    assert (a.name, a.vram_bytes) == ("Libdrm Says VII", 17163091968) and a.gtt_bytes > 456  # 0: not an answer

    _edit(root, lambda d: d.update(amdgpuinfo={"error": "LibraryNotFound"}))
    a = _probe(root).amd_gpus[0]
    assert a.name == "AMD Radeon VII" and a.vram_bytes == 17163091968


def test_system_amdgpu_ids_names_the_gpu_when_pyamdgpuinfo_cannot(tmp_path):
    root = _copy("linux-ubuntu24.04-strix-halo", tmp_path)
    ids = root / "fs/usr/share/libdrm/amdgpu.ids"
    ids.parent.mkdir(parents=True)
    ids.write_text("# List of AMDGPU IDs\n\n1.0.0\n1586,\tC1,\tAMD Radeon 8060S Graphics\n1586,\tC2,\tOther\n")
    assert _probe(root).amd_gpus[0].name == "AMD Radeon 8060S Graphics"


def test_parse_amdgpu_ids():
    from probes.linux.amd import parse_amdgpu_ids

    text = "# comment, with, commas\n1.0.0\n66AF,\tC1,\tAMD Radeon VII\nZZZZ,\t00,\tbad\n7489,\t00,\t\n"
    assert parse_amdgpu_ids(text) == {("0x66af", "0xc1"): "AMD Radeon VII"}


def test_permission_error_from_pyamdgpuinfo_makes_the_gpu_unusable(tmp_path):
    root = _copy("linux-ubuntu24.04-radeonvii-w7500-rx6600", tmp_path)
    _edit(root, lambda d: d["amdgpuinfo"]["gpus"].update({"/dev/dri/renderD130": {"error": "PermissionError"}}))
    p = _probe(root)
    g = p.amd_gpus[2]
    assert (g.usable_compute, g.usable_graphics, g.access_fix) == (False, False, "add this user to the render group")
    assert g.hip_index is None and [x.hip_index for x in p.amd_gpus[:2]] == [0, 1]
    assert _warned(p, "amd_gpu", "ROCm and Vulkan cannot use it", "/dev/dri/renderD130", "render group")


def test_container_without_dev_kfd_keeps_the_gpu_for_vulkan_not_rocm():
    p = profile_of("linux-container-ubuntu24.04-rx7900xtx-no-dev-kfd")
    (g,) = p.amd_gpus
    assert (g.source, g.gfx, g.usable_compute, g.usable_graphics) == ("kfd", "gfx1100", False, True)
    assert g.access_fix == "add --device /dev/kfd --device /dev/dri to the container"
    assert g.hip_index is None
    assert _warned(p, "amd_gpu", "ROCm cannot use it here", "/dev/kfd missing", "--device /dev/kfd")


@pytest.mark.parametrize("dev,container,fix,words", [
    ({"/dev/kfd": "r", "/dev/dri/renderD128": "rw"}, False, "add this user to the render group",
     "no read-write access to /dev/kfd"),
    ({"/dev/kfd": "none", "/dev/dri/renderD128": "rw"}, True, "add --group-add render to the container",
     "no read-write access to /dev/kfd"),
    ({"/dev/dri/renderD128": "rw"}, False, "the kernel has no KFD", "/dev/kfd missing"),
    ({"/dev/kfd": "rw"}, False, "load the amdgpu driver", "/dev/dri/renderD128 missing"),
])
def test_each_access_failure_says_its_fix(tmp_path, dev, container, fix, words):
    root = _copy("linux-ubuntu24.04-r9700", tmp_path)
    _edit(root, lambda d: d.update(dev=dev))
    if container:
        (root / "fs/.dockerenv").write_text("")
    p = _probe(root)
    (g,) = p.amd_gpus
    assert g.usable_compute is False and g.access_fix.startswith(fix)
    assert g.usable_graphics is (dev.get("/dev/dri/renderD128") == "rw")
    assert _warned(p, "amd_gpu", words, fix)


def test_drm_fallback_without_kfd_says_how_to_get_rocm():
    p = profile_of("linux-container-rx7900xtx-no-kfd")
    assert all(g.usable_graphics and not g.usable_compute for g in p.amd_gpus)
    assert {g.access_fix for g in p.amd_gpus} == {"add --device /dev/kfd --device /dev/dri to the container"}
    assert [g.render_node for g in p.amd_gpus] == ["/dev/dri/renderD128", "/dev/dri/renderD129"]
    assert all(g.hip_index is None and g.cwsr is None and g.unique_id is None for g in p.amd_gpus)


# ---------------------------------------------------------------------------------------------
# AMD: KFD facts


def test_cwsr_needs_both_properties(tmp_path):
    assert [g.cwsr for g in profile_of("linux-ubuntu24.04-strix-halo-r9700-egpu").amd_gpus] == [True, True]
    assert profile_of("linux-ubuntu24.04-strix-halo-laptop-no-cwsr").amd_gpus[0].cwsr is False
    root = _copy("linux-ubuntu24.04-strix-halo-r9700-egpu", tmp_path)
    props = _props(root, 1)
    props.write_text("".join(ln for ln in props.read_text().splitlines(True) if not ln.startswith("ctl_stack_size")))
    assert [g.cwsr for g in _probe(root).amd_gpus] == [False, True]


def test_rocr_visible_devices_by_uuid_and_hip_renumbering(tmp_path):
    root = _copy("linux-ubuntu24.04-radeonvii-w7500-rx6600", tmp_path)
    uuids = [g.unique_id for g in profile_of("linux-ubuntu24.04-radeonvii-w7500-rx6600").amd_gpus]
    _edit(root, lambda d: d.update(env={"ROCR_VISIBLE_DEVICES": f"{uuids[2]},{uuids[1]}"}))
    p = _probe(root)
    assert [g.visible for g in p.amd_gpus] == [False, True, True]
    assert [g.hip_index for g in p.amd_gpus] == [None, 0, 1]
    # HIP_VISIBLE_DEVICES indexes what ROCR left: 1 is the RX 6600, and 1 stays its hip_index (the
    # index HIP_VISIBLE_DEVICES selects it by, which a run_env replacing the variable must use)
    _edit(root, lambda d: d.update(env={"ROCR_VISIBLE_DEVICES": "1,2", "HIP_VISIBLE_DEVICES": "1"}))
    p = _probe(root)
    assert [g.visible for g in p.amd_gpus] == [False, False, True]
    assert [g.hip_index for g in p.amd_gpus] == [None, None, 1]


def test_old_kernel_node_without_gfx_target_version_uses_the_pci_table():
    p = profile_of("linux-ubuntu18.04-vega64-kernel4.18")
    (g,) = p.amd_gpus
    assert (g.gfx, g.source, g.name, g.unique_id) == ("gfx900", "pci-table", "AMD Radeon RX Vega", None)
    assert _warned(p, "amd_gpu", "KFD node 1", "no gfx_target_version", "gfx900", "0x687f", "PCI table")


def test_old_kernel_node_with_an_unknown_device_id_is_still_reported(tmp_path):
    root = _copy("linux-ubuntu18.04-vega64-kernel4.18", tmp_path)
    dev = root / "fs/sys/devices/pci0000:00/0000:00:03.1/0000:08:00.0/0000:09:00.0/0000:0a:00.0/device"
    dev.write_text("0x6fff\n")
    p = _probe(root)
    (g,) = p.amd_gpus
    assert g.gfx is None and g.pci.device == "0x6fff"
    assert _warned(p, "amd_gpu", "no gfx_target_version", "0x6fff", "not in the PCI table")


def test_old_kernel_gfx_from_the_gc_version_when_ip_discovery_exists(tmp_path):
    root = _copy("linux-ubuntu24.04-r9700", tmp_path)
    props = _props(root, 1)
    props.write_text("".join(ln for ln in props.read_text().splitlines(True) if not ln.startswith("gfx_target")))
    p = _probe(root)
    assert (p.amd_gpus[0].gfx, p.amd_gpus[0].source) == ("gfx1201", "kfd")
    assert _warned(p, "amd_gpu", "no gfx_target_version", "GC IP version")


def test_node_without_drm_render_minor_finds_its_render_node_through_pci(tmp_path):
    root = _copy("linux-ubuntu24.04-r9700", tmp_path)
    props = _props(root, 1)
    props.write_text("".join(ln for ln in props.read_text().splitlines(True) if not ln.startswith("drm_render")))
    (g,) = _probe(root).amd_gpus
    assert g.render_node == "/dev/dri/renderD128" and g.gfx == "gfx1201" and g.pci.device == "0x7551"


def test_a_cpu_node_is_not_a_gpu_even_without_gfx_target_version(tmp_path):
    root = _copy("linux-ubuntu18.04-vega64-kernel4.18", tmp_path)
    assert "gfx_target_version" not in _props(root, 0).read_text()
    assert len(_probe(root).amd_gpus) == 1


def test_pyamdgpuinfo_is_asked_only_when_an_amd_gpu_is_there():
    from probes.linux import amd
    from probes.host import CaptureHost
    from probes.profile import Profile

    class Spy(CaptureHost):
        asked = []

        def amdgpuinfo(self, nodes):
            self.asked.append(list(nodes))
            return super().amdgpuinfo(nodes)

    for name, want in (("linux-ubuntu24.04-rtx4090", []),
                       ("linux-ubuntu24.04-r9700", [["/dev/dri/renderD128"]])):
        Spy.asked = []
        prof = Profile()
        amd.probe(Spy(machine(name)), prof)
        assert Spy.asked == want


def test_live_pyamdgpuinfo_answers_per_node_and_a_missing_library(monkeypatch):
    import sys
    import types

    from probes.host import LiveHost

    class GPUInfo:
        def __init__(self, path, gpu_id):
            if path.endswith("129"):
                raise PermissionError(13, "Permission denied")
            self.name, self.pci_slot = "AMD Radeon VII", "0000:0b:00.0"
            self.memory_info = {"vram_size": 1, "gtt_size": 2, "vram_cpu_accessible_size": 1}

    monkeypatch.setitem(sys.modules, "pyamdgpuinfo", types.SimpleNamespace(GPUInfo=GPUInfo))
    got = LiveHost().amdgpuinfo(["/dev/dri/renderD128", "/dev/dri/renderD129"])
    assert got == {"gpus": {"/dev/dri/renderD128": {"name": "AMD Radeon VII", "pci_slot": "0000:0b:00.0",
                                                    "vram_size": 1, "gtt_size": 2},
                            "/dev/dri/renderD129": {"error": "PermissionError"}}}
    monkeypatch.setitem(sys.modules, "pyamdgpuinfo", None)  # import fails
    assert LiveHost().amdgpuinfo(["/dev/dri/renderD128"]) == {"error": "LibraryNotFound"}


# ---------------------------------------------------------------------------------------------
# the AMD PCI table


def test_pci_table_covers_vega_and_later_and_knows_revisions():
    from probes import tables

    rows = tables.load("amd_pci")["devices"]
    assert len(rows) >= 150
    assert all(r["gfx"].startswith("gfx") and isinstance(r["apu"], bool) and r["name"] for r in rows)
    assert tables.amd_pci("0x66af")["gfx"] == "gfx906" and tables.amd_pci("7489")["gfx"] == "gfx1102"
    assert tables.amd_pci("0x731f")["gfx"] == "gfx1010"  # from the kernel's pciidlist (Navi 10)
    assert tables.amd_pci("0x73ff", "0xc7")["gfx"] == "gfx1032"
    assert tables.amd_pci("0x73ff", "0xdf")["gfx"] == "gfx1031"  # RX 6750 GRE 10GB
    assert tables.amd_pci("0x74a0")["apu"] is True  # MI300A: the curated row wins


def _generator():
    import importlib.util

    import probes

    path = os.path.join(os.path.dirname(probes.__file__), "tables", "gen_amd_pci.py")
    spec = importlib.util.spec_from_file_location("gen_amd_pci", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_table_generator_merges_its_sources():
    gen = _generator()
    clean, generate = gen.clean, gen.generate

    device_info = """
    {GDT_GFX10_3_2_XT, 0x73FF, 0xC1, GDT_HW_GENERATION_GFX103, false, "gfx1032", "AMD Radeon RX 6600 XT"},
    {GDT_GFX10_3_1, 0x73FF, 0xDF, GDT_HW_GENERATION_GFX103, false, "gfx1031", "73FF:DF"},
    {GDT_GFX10_3_2_XT, 0x73FF, 0xC7, GDT_HW_GENERATION_GFX103, false, "gfx1032", "73FF:C7"},
    {GDT_TAHITI_XT, 0x6798, 0x00, GDT_HW_GENERATION_SOUTHERNISLAND, false, "Tahiti", "old"},
    {GDT_GFX11_5_1, 0x1586, 0xC1, GDT_HW_GENERATION_GFX11, true, "gfx1151", "AMD Radeon(TM) 8060S Graphics"},
    """
    pciidlist = "\t{0x1002, 0x731F, PCI_ANY_ID, PCI_ANY_ID, 0, 0, CHIP_NAVI10},\n" \
                "\t{0x1002, 0x6798, PCI_ANY_ID, PCI_ANY_ID, 0, 0, CHIP_TAHITI},\n"
    ids = "1.0.0\n73FF,\tC7,\tAMD Radeon RX 6600\n731F,\tC1,\tAMD Radeon RX 5700 XT\n"
    curated = {"_source": "hand", "devices": [{"device": "1586", "gfx": "gfx1151", "apu": True,
                                               "name": "AMD Radeon 8060S", "codename": "Strix Halo"}]}
    rows = {r["device"]: r for r in generate(device_info, pciidlist, [ids], curated)["devices"]}
    assert set(rows) == {"73ff", "731f", "1586"}  # pre-Vega Tahiti left out
    assert rows["73ff"]["gfx"] == "gfx1032" and rows["73ff"]["gfx_by_revision"] == {"df": "gfx1031"}
    assert rows["73ff"]["name"] == "AMD Radeon RX 6600 XT / AMD Radeon RX 6600"
    assert rows["731f"] == {"device": "731f", "gfx": "gfx1010", "apu": False, "name": "AMD Radeon RX 5700 XT",
                            "codename": "Navi 10"}
    assert rows["1586"]["name"] == "AMD Radeon 8060S" and rows["1586"]["apu"] is True
    assert clean("73FF:DF") is None and clean("Ryzen9") is None and clean("AMD Radeon(TM)  X") == "AMD Radeon X"


# ---------------------------------------------------------------------------------------------
# NVIDIA


def test_titan_v_and_rtx_5880_keep_uuids_and_cuda_order(tmp_path):
    # NVML (and the profile) list the GPUs in PCI order: TITAN V at 21:00.0, RTX 5880 at 41:00.0.  CUDA
    # counts fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID: our guess puts the sm_89 card first
    p = profile_of("linux-ubuntu22.04-titanv-rtx5880ada")
    assert p.cuda_order == "fastest"
    assert [(g.sm, g.cuda_index) for g in p.nvidia_gpus] == [("sm_70", 1), ("sm_89", 0)]
    uuids = [g.uuid for g in p.nvidia_gpus]
    assert all(u.startswith("GPU-") for u in uuids)
    root = _copy("linux-ubuntu22.04-titanv-rtx5880ada", tmp_path)
    for order_env, spec, visible, order in (
            ("PCI_BUS_ID", "1,0", [True, True], [1, 0]),
            ("PCI_BUS_ID", "1", [False, True], [None, 0]),
            ("FASTEST_FIRST", "1", [True, False], [0, None]),  # CUDA device 1 is the slower TITAN V
            (None, "1", [True, False], [0, None]),
            (None, "0,1", [True, True], [1, 0]),
            (None, uuids[1][:12], [False, True], [None, 0]),
            ("PCI_BUS_ID", "1,bogus,0", [False, True], [None, 0]),
            (None, "", [False, False], [None, None])):  # CUDA: empty means no device
        env = {"CUDA_VISIBLE_DEVICES": spec, **({"CUDA_DEVICE_ORDER": order_env} if order_env else {})}
        _edit(root, lambda d: d.update(env=env))
        prof = _probe(root)
        gpus = prof.nvidia_gpus
        assert [g.visible for g in gpus] == visible, (order_env, spec)
        assert [g.cuda_index for g in gpus] == order, (order_env, spec)
        if spec == "1,bogus,0":
            assert any("CUDA_VISIBLE_DEVICES='1,bogus,0': entry 'bogus' is neither an index nor a GPU UUID; the "
                       "runtime keeps the 1 device before it" in w.message for w in prof.warnings)
        guessed = [w.message for w in prof.warnings if "fastest-first" in w.message]
        numeric = spec and spec[0].isdigit()
        assert bool(guessed) == bool(numeric and order_env != "PCI_BUS_ID"), (order_env, spec, guessed)
        if guessed:
            assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in guessed[0] and "guess" in guessed[0]
            if spec == "1":
                assert "read here with device 1 as NVIDIA TITAN V" in guessed[0]
        assert prof.device_env.get("CUDA_DEVICE_ORDER") == order_env


def test_a_gpu_nvml_does_not_list_is_reported_not_dropped():
    p = profile_of("linux-ubuntu24.04-rtx4090-gtx1080ti-open-module")
    a, b = p.nvidia_gpus
    assert (a.name, a.cuda_index, a.usable) == ("NVIDIA GeForce RTX 4090", 0, True)
    assert (b.name, b.sm, b.source, b.driver_loaded, b.usable, b.cuda_index) == (
        "NVIDIA GeForce GTX 1080 Ti", "sm_61", "pci", False, False, None)
    assert "Turing" in b.access_fix
    assert _warned(p, "nvidia", "GTX 1080 Ti", "0000:05:00.0", "NVML does not list it")


@pytest.mark.parametrize("dev,container,fix", [
    ({"/dev/nvidiactl": "rw"}, False, "load the NVIDIA driver"),
    ({"/dev/nvidiactl": "rw"}, True, "start the container with --gpus all"),
    ({"/dev/nvidiactl": "rw", "/dev/nvidia0": "r"}, False, "add this user to the video group"),
])
def test_without_nvml_cuda_needs_the_device_nodes(tmp_path, dev, container, fix):
    root = _copy("linux-ubuntu24.04-rtx4090", tmp_path)
    _edit(root, lambda d: d.update(nvml={"error": "NoPermission"}, dev=dev))
    if container:
        (root / "fs/.dockerenv").write_text("")
    p = _probe(root)
    (g,) = p.nvidia_gpus
    assert g.driver_loaded is True and g.usable is False and g.access_fix.startswith(fix)
    assert g.cuda_index is None
    assert _warned(p, "nvidia", "CUDA cannot use it here", fix)
    _edit(root, lambda d: d.update(dev={"/dev/nvidiactl": "rw", "/dev/nvidia0": "rw"}))
    (g,) = _probe(root).nvidia_gpus
    assert g.usable is True and g.cuda_index == 0


def test_no_driver_module_means_not_loaded(tmp_path):
    (g,) = profile_of("linux-ubuntu24.04-nvidia-no-driver").nvidia_gpus
    assert (g.driver_loaded, g.usable, g.cuda_index) == (False, False, None)
    assert "install the NVIDIA driver" in g.access_fix


def test_jetson_orin_from_the_device_tree():
    p = profile_of("linux-jetpack6-jetson-agx-orin")
    (g,) = p.nvidia_gpus
    assert (p.board, g.name, g.sm, g.source, g.cuda_index) == ("Jetson Orin", "Jetson Orin", "sm_87", "jetson", 0)
    assert not _warned(p, "nvidia", "nv_tegra_release")


@pytest.mark.parametrize("compatible,board,sm", [
    ("nvidia,tegra210", "Jetson Nano/TX1", "sm_53"), ("nvidia,tegra186", "Jetson TX2", "sm_62"),
    ("nvidia,tegra194", "Jetson Xavier", "sm_72"), ("nvidia,tegra234", "Jetson Orin", "sm_87"),
    ("nvidia,tegra264", "Jetson Thor", "sm_110"),
])
def test_every_tegra_soc(tmp_path, compatible, board, sm):
    root = _copy("linux-jetpack6-jetson-agx-orin", tmp_path)
    (root / "fs/sys/firmware/devicetree/base/compatible").write_bytes(b"nvidia,some-board\x00" + compatible.encode() + b"\x00")
    p = _probe(root)
    assert (p.board, p.nvidia_gpus[0].sm) == (board, sm)


@pytest.mark.parametrize("release,board,sm", [
    ("# R36 (release), REVISION: 4.3, GCID: 1, BOARD: generic, EABI: aarch64, DATE: x", "Jetson Orin", "sm_87"),
    ("# R38 (release), REVISION: 2.0, GCID: 1, BOARD: generic, EABI: aarch64, DATE: x", "Jetson Thor", "sm_110"),
    ("# R32 (release), REVISION: 7.1, GCID: 1, BOARD: t210ref, EABI: aarch64, DATE: x", "Jetson Nano/TX1", "sm_53"),
    ("# R32 (release), REVISION: 7.1, GCID: 1, BOARD: t186ref, EABI: aarch64, DATE: x", "Jetson", None),
])
def test_jetson_falls_back_to_nv_tegra_release(tmp_path, release, board, sm):
    root = _copy("linux-jetpack6-jetson-agx-orin", tmp_path)
    os.unlink(root / "fs/proc/device-tree")  # a container without the device tree
    (root / "fs/etc/nv_tegra_release").write_text(release + "\n")
    p = _probe(root)
    (g,) = p.nvidia_gpus
    assert (p.board, g.sm) == (board, sm)
    assert _warned(p, "nvidia", "/etc/nv_tegra_release", board)
    assert _warned(p, "nvidia", "SoC unknown") is (sm is None)


# ---------------------------------------------------------------------------------------------
# NPU and Intel


@pytest.mark.parametrize("dev,container,usable,fix", [
    ({"/dev/accel/accel0": "rw"}, False, True, None),
    ({"/dev/accel/accel0": "none"}, False, False, "add this user to the render group"),
    ({}, True, False, "add --device /dev/accel to the container"),
    ({}, False, False, "reload the amdxdna driver"),
])
def test_npu_needs_its_accel_node(tmp_path, dev, container, usable, fix):
    root = _copy("linux-ubuntu24.04-strix-halo", tmp_path)
    _edit(root, lambda d: d.update(dev=dev))
    if container:
        (root / "fs/.dockerenv").write_text("")
    p = _probe(root)
    (npu,) = p.npus
    assert npu.usable is usable
    assert (npu.access_fix or "").startswith(fix or "")
    if fix:
        assert _warned(p, "npu", fix)


def test_npu_without_driver_is_not_usable():
    (npu,) = profile_of("linux-ubuntu24.04-krackan-laptop-no-npu-driver").npus
    assert npu.usable is False and "modprobe amdxdna" in npu.access_fix


def test_intel_gpus_have_index_render_node_and_access(tmp_path):
    p = profile_of("linux-ubuntu24.04-arc-a770")
    assert [(g.index, g.render_node, g.usable_graphics) for g in p.intel_gpus] == [
        (0, "/dev/dri/renderD128", True), (1, "/dev/dri/renderD129", True)]
    root = _copy("linux-ubuntu24.04-arc-a770", tmp_path)
    _edit(root, lambda d: d.update(dev={"/dev/dri/renderD128": "rw", "/dev/dri/renderD129": "r"}))
    p = _probe(root)
    arc = p.intel_gpus[1]
    assert arc.usable_graphics is False and arc.access_fix == "add this user to the render group"
    assert _warned(p, "intel_gpu", "Arc A770", "Vulkan cannot use it", "not read-write")
    (root / "fs/.dockerenv").write_text("")
    _edit(root, lambda d: d.update(dev={"/dev/dri/renderD128": "rw"}))
    assert _probe(root).intel_gpus[1].access_fix == "add --device /dev/dri to the container"


# ---------------------------------------------------------------------------------------------
# Windows


def test_windows_gpu_without_its_driver_is_reported_from_its_hardware_ids(tmp_path):
    root = _copy("windows11-rx7900xtx", tmp_path)

    def basic_display(d):
        w = d["windows"]
        w["display_adapters"]["0000"].update(MatchingDeviceId="PCI\\CC_0300", DriverDesc="Microsoft Basic Display Adapter")
        w["display_enum"] = {"VEN_1002&DEV_744C&SUBSYS_471E1DA2&REV_C8": {"4&2c5f1e2&0&0008": {
            "DeviceDesc": "@display.inf,%basicdisplay.devicedesc%;Microsoft Basic Display Adapter",
            "Driver": "{4d36e968-e325-11ce-bfc1-08002be10318}\\0000",
            "ClassGUID": "{4d36e968-e325-11ce-bfc1-08002be10318}",
            "LocationInformation": "PCI bus 3, device 0, function 0", "present": True}},
            # the iGPU's driven adapter is not reported twice
            "VEN_1002&DEV_164E&SUBSYS_88771043&REV_C1": {"4&1&0&0041": {
                "Driver": "{4d36e968-e325-11ce-bfc1-08002be10318}\\0001", "present": True}}}
    _edit(root, basic_display)
    p = _probe(root)
    gone = [g for g in p.amd_gpus if g.pci.device == "0x744c"]
    assert len(gone) == 1 and len(p.amd_gpus) == 2
    (g,) = gone
    assert (g.gfx, g.usable_compute, g.usable_graphics, g.pci.bus_id) == ("gfx1100", False, False, "0000:03:00.0")
    assert "AMD's graphics driver" in g.access_fix
    assert _warned(p, "amd_gpu", "PCI 1002:744c", "Microsoft Basic Display Adapter")


def test_windows_nvidia_and_intel_without_driver_and_intel_probed(tmp_path):
    root = _copy("windows11-rx7900xtx", tmp_path)

    def more(d):
        w = d["windows"]
        w["display_adapters"]["0002"] = {"MatchingDeviceId": "pci\\ven_8086&dev_56a0&rev_08",
                                         "DriverDesc": "Intel(R) Arc(TM) A770 Graphics"}
        w["present_drivers"].append("{4d36e968-e325-11ce-bfc1-08002be10318}\\0002")
        w["display_enum"] = {
            "VEN_10DE&DEV_2684&SUBSYS_889D1043&REV_A1": {"1": {"present": True}},
            "VEN_8086&DEV_A780&SUBSYS_88821043&REV_04": {"2": {"present": True}},
            "VEN_10DE&DEV_1B80&SUBSYS_119E10DE&REV_A1": {"3": {"present": False}}}
    _edit(root, more)
    p = _probe(root)
    nv = [g for g in p.nvidia_gpus if g.source == "pci"]
    assert [(g.name, g.driver_loaded, g.usable) for g in nv] == [("NVIDIA GeForce RTX 4090", False, False)]
    assert [(g.name, g.arc, g.usable_graphics) for g in p.intel_gpus] == [
        ("Intel Arc A770 (DG2-G10)", True, True), ("Intel UHD Graphics 770 (Raptor Lake-S)", False, False)]
    assert _warned(p, "nvidia", "10de:2684", "runs without its driver")
    assert _warned(p, "intel_gpu", "8086:a780", "runs without its driver")


def test_windows_registry_permission_error_loses_that_key_only(monkeypatch):
    from probes import windows

    def values(path, names):
        if path.endswith("0001"):
            raise PermissionError(5, "Access is denied")
        return {"DriverDesc": path[-4:]}

    monkeypatch.setattr(windows, "_reg_values", values)
    errors = []
    got = windows._each(errors, "display_adapters", {"0000": "X\\0000", "0001": "X\\0001", "0002": "X\\0002"}, None)
    assert got == {"0000": {"DriverDesc": "0000"}, "0002": {"DriverDesc": "0002"}}
    assert errors == ["display_adapters.0001: PermissionError: [Errno 5] Access is denied"]


def test_node_without_any_drm_device_keeps_its_kfd_ids(tmp_path):
    """No drm_render_minor and no DRM device under its PCI function: vendor and device ids come from
    the KFD node itself, the bus id from location_id, and there is no render node to use."""
    root = _copy("linux-ubuntu24.04-r9700", tmp_path)
    props = _props(root, 1)
    props.write_text("".join(ln for ln in props.read_text().splitlines(True) if not ln.startswith("drm_render")))
    shutil.rmtree(root / "fs/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/0000:03:00.0/drm")
    p = _probe(root)
    (g,) = p.amd_gpus
    assert (g.pci.vendor, g.pci.device, g.pci.bus_id, g.gfx) == ("0x1002", "0x7551", "0000:03:00.0", "gfx1201")
    assert g.render_node is None and g.usable_graphics is False and g.usable_compute is False
    assert not _warned(p, "amd_gpu", "probe failed")


def test_empty_kfd_properties_are_a_warning_and_drm_finds_the_gpu(tmp_path):
    root = _copy("linux-ubuntu24.04-r9700", tmp_path)
    _props(root, 1).write_text("")
    p = _probe(root)
    assert [(g.source, g.gfx, g.usable_compute) for g in p.amd_gpus] == [("drm", "gfx1201", False)]
    assert _warned(p, "amd_gpu", "KFD node 1", "unreadable or empty")


def test_npu_name_only_from_a_bound_driver_and_nvml_versions_kept():
    assert [n.name for n in profile_of("linux-ubuntu24.04-strix-halo").npus] == ["RyzenAI-npu5"]
    assert [n.name for n in profile_of("linux-ubuntu24.04-krackan-laptop-no-npu-driver").npus] == [None]
    g = profile_of("linux-ubuntu22.04-titanv-rtx5880ada").nvidia_gpus[0]
    assert (g.driver_version, g.cuda_driver_version) == ("580.95.05", 13000)


@pytest.mark.parametrize("device,integrated", [("0x74a0", True), ("0x74a1", False)])
def test_mi300a_is_an_apu_by_its_device_id_though_its_gc_is_mi300x(tmp_path, device, integrated):
    """GC 9.4.3 is not in the kernel's APU list; the MI300A (0x74a0) is an APU by package."""
    root = _copy("linux-ubuntu22.04-8x-mi300x", tmp_path)
    for dev in (root / "fs/sys/devices").rglob("device"):
        if dev.is_file() and dev.read_text() == "0x74a1\n":
            dev.write_text(device + "\n")
    gpus = _probe(root).amd_gpus
    assert len(gpus) == 8 and {(g.pci.device, g.integrated) for g in gpus} == {(device, integrated)}


def test_windows_nvidia_without_nvml_is_not_usable_for_cuda(tmp_path):
    root = _copy("windows11-rtx4090", tmp_path)
    _edit(root, lambda d: d.update(nvml={"error": "DriverNotLoaded"}))
    (g,) = _probe(root).nvidia_gpus
    assert (g.sm, g.usable, g.cuda_index) == ("sm_89", False, None) and g.access_fix == "Install the NVIDIA driver"


# -- GGML_VK_VISIBLE_DEVICES: llama.cpp's Vulkan backend, counted in the Vulkan loader's order ------


def test_ggml_vk_visible_devices_on_a_one_gpu_machine_hides_or_keeps_the_gpu(tmp_path, cli):
    # the GTX 1080 machine has one Vulkan device (NVIDIA's ICD, no CPU renderer): index 0 is the GPU
    root = _copy("linux-debian12-gtx1080", tmp_path)
    _edit(root, lambda d: d.update(env={"GGML_VK_VISIBLE_DEVICES": "0"}))
    p = _probe(root)
    assert p.nvidia_gpus[0].vulkan_visible is True and p.device_env == {"GGML_VK_VISIBLE_DEVICES": "0"}
    assert not [w for w in p.warnings if w.probe == "vulkan"]
    _edit(root, lambda d: d.update(env={"GGML_VK_VISIBLE_DEVICES": "1"}))
    p = _probe(root)
    assert p.nvidia_gpus[0].vulkan_visible is False
    (w,) = [w.message for w in p.warnings if w.probe == "vulkan"]
    assert "GGML_VK_VISIBLE_DEVICES='1': index 1 is past the last Vulkan device (this machine has 1)" in w
    r = cli("--root", str(root), "llamacpp", "--json")
    v = next(b for b in r.json()["recipes"]["llamacpp"]["backends"] if b["name"] == "vulkan")
    assert v["device"]["type"] == "cpu"
    assert any("GGML_VK_VISIBLE_DEVICES hides it from llama.cpp's Vulkan backend" in n for n in v["notes"])
    # CUDA ignores the Vulkan variable; the Vulkan driver ignores CUDA's
    _edit(root, lambda d: d.update(env={"CUDA_VISIBLE_DEVICES": ""}))
    r = cli("--root", str(root), "llamacpp", "--json")
    rec = r.json()["recipes"]["llamacpp"]
    assert rec["backend"] == "vulkan" and rec["device"]["type"] == "nvidia_gpu"


def test_ggml_vk_visible_devices_with_several_devices_is_not_guessed(tmp_path):
    # the RTX 4090 desktop: the 4090, the UHD 770 and lavapipe are three Vulkan devices whose order
    # only the loader knows; a partial list is warned about and hides nothing
    root = _copy("linux-ubuntu24.04-rtx4090", tmp_path)
    _edit(root, lambda d: d.update(env={"GGML_VK_VISIBLE_DEVICES": "1"}))
    p = _probe(root)
    assert [g.vulkan_visible for g in p.nvidia_gpus + p.intel_gpus] == [True, True]
    (w,) = [w.message for w in p.warnings if w.probe == "vulkan"]
    assert "keeps 1 of 3 Vulkan devices, counted in the Vulkan loader's order" in w
    _edit(root, lambda d: d.update(env={"GGML_VK_VISIBLE_DEVICES": "2,1,0"}))
    assert not [w for w in _probe(root).warnings if w.probe == "vulkan"]
    # a list that keeps nothing hides every GPU, whatever the order
    _edit(root, lambda d: d.update(env={"GGML_VK_VISIBLE_DEVICES": "x"}))
    p = _probe(root)
    ws = [w.message for w in p.warnings if w.probe == "vulkan"]
    assert any("entry 'x' is not a device index" in w for w in ws) and any("keeps no Vulkan device" in w for w in ws)
    assert [g.vulkan_visible for g in p.nvidia_gpus + p.intel_gpus] == [False, False]


def test_a_cuda_visible_devices_that_hides_every_gpu_says_so(tmp_path, cli):
    root = _copy("linux-ubuntu22.04-titanv-rtx5880ada", tmp_path)
    _edit(root, lambda d: d.update(env={"CUDA_VISIBLE_DEVICES": ""}))  # CUDA: empty means no device
    r = cli("--root", str(root), "check", "trellis", "cuda12", "--json")
    assert r.rc == 3 and r.json()["reason"] == "No visible NVIDIA GPU (CUDA_VISIBLE_DEVICES hides them)"
    r = cli("--root", str(root), "check", "trellis", "vulkan", "--json")  # Vulkan ignores CUDA's variable
    assert r.rc == 0 and r.json()["device"]["type"] == "nvidia_gpu"
