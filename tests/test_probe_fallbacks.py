"""The Linux probes' fallbacks and selections, each on a small capture written under tmp_path in
the format of docs/captures.md (sysfs as the kernel prints it: KFD properties in decimal, PCI ids
in hex).  The values are those of real devices: PCI ids from pciutils' pci.ids and the kernel's
amdgpu/amdxdna id tables, gfx targets from the kernel's GC IP map (kfd_device.c kgd2kfd_probe()), the
KFD properties layout from the MI300X fixture (a capture of a real node); device ids 0x0001 to
0x0005 are made up on purpose and stand for a device no table lists.  What each test checks is
what a user reads: which devices are listed, under which name and target, and the warnings."""

import json
import os

import pytest

from conftest import run_cli
from probes import probe
from probes.host import CaptureHost
from probes.linux.amd import parse_override

PCI = "sys/devices/pci0000:00"
MEMINFO = "MemTotal:       65536000 kB\nMemFree:        1000 kB\n"


class Capture:
    """A Linux capture directory, built file by file."""

    def __init__(self, root, env=None, nvml=None):
        self.root = str(root)
        self.fs = os.path.join(self.root, "fs")
        os.makedirs(self.fs)
        data = {"format": 1, "platform": {"system": "Linux", "machine": "x86_64", "release": "6.8.0-51-generic"},
                "env": env or {}, "nvml": nvml or {"error": "LibraryNotFound"}, "vulkan_loader": False,
                "executables": {}}
        with open(os.path.join(self.root, "capture.json"), "w") as f:
            json.dump(data, f)
        self.file("proc/meminfo", MEMINFO)

    def file(self, path, text):
        full = os.path.join(self.fs, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)

    def link(self, path, target):
        full = os.path.join(self.fs, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        os.symlink(target, full)

    def pci(self, bdf, vendor, device, cls, revision="0x00", driver=None, **extra):
        """A PCI function under sys/devices and its sys/bus/pci/devices link."""
        base = f"{PCI}/{bdf}"
        for name, value in (("vendor", vendor), ("device", device), ("class", cls), ("revision", revision)):
            self.file(f"{base}/{name}", value + "\n")
        for name, value in extra.items():
            self.file(f"{base}/{name}", value)
        if driver:
            self.link(f"{base}/driver", f"../../../bus/pci/drivers/{driver}")
        self.link(f"sys/bus/pci/devices/{bdf}", f"../../../devices/pci0000:00/{bdf}")
        return base

    def drm(self, entry, bdf):
        """/sys/class/drm/<entry>/device -> the PCI function."""
        self.link(f"sys/class/drm/{entry}/device", f"../../../devices/pci0000:00/{bdf}")

    def amd_gpu(self, bdf, device, gc=None, vram=None, card=None, render=None, cls="0x030000", revision="0xc8"):
        base = self.pci(bdf, "0x1002", device, cls, revision=revision, driver="amdgpu")
        if gc:
            for k, v in zip(("major", "minor", "revision"), gc.split(".")):
                self.file(f"{base}/ip_discovery/die/0/GC/0/{k}", v + "\n")
        if vram is not None:
            self.file(f"{base}/mem_info_vram_total", f"{vram}\n")
        if card is not None:
            self.drm(f"card{card}", bdf)
        if render is not None:
            self.drm(f"renderD{render}", bdf)

    def kfd_node(self, node, **props):
        text = "".join(f"{k} {v}\n" for k, v in props.items())
        self.file(f"sys/class/kfd/kfd/topology/nodes/{node}/properties", text)

    def profile(self):
        return probe(CaptureHost(self.root))


def kfd_gpu(gfx_target_version, device_id, minor=None, location_id=0, unique_id=None):
    props = {"cpu_cores_count": 0, "simd_count": 192, "gfx_target_version": gfx_target_version,
             "vendor_id": 4098, "device_id": device_id, "location_id": location_id, "domain": 0}
    if minor is not None:
        props["drm_render_minor"] = minor
    if unique_id is not None:
        props["unique_id"] = unique_id
    return props


CPU_NODE = {"cpu_cores_count": 16, "simd_count": 0, "gfx_target_version": 0, "vendor_id": 0, "device_id": 0}


def warnings(p, probe_name):
    return [w.message for w in p.warnings if w.probe == probe_name]


# -- AMD: KFD topology ----------------------------------------------------------------------------


def test_kfd_gpus_take_pci_facts_from_their_render_node(tmp_path):
    c = Capture(tmp_path)
    c.kfd_node(0, **CPU_NODE)
    c.kfd_node(1, **kfd_gpu(110000, 29772, minor=128))  # 0x744c, Navi 31
    c.amd_gpu("0000:03:00.0", "0x744c", gc="11.0.0", vram=25753026560, card=1, render=128)
    p = c.profile()
    (g,) = p.amd_gpus
    assert (g.gfx, g.gfx_effective, g.source, g.integrated) == ("gfx1100", "gfx1100", "kfd", False)
    assert "7900 XTX" in g.name
    assert (g.pci.vendor, g.pci.device, g.pci.revision, g.pci.bus_id) == ("0x1002", "0x744c", "0xc8", "0000:03:00.0")
    assert g.vram_bytes == 25753026560 and g.driver == "amdgpu"
    assert g.index == 0 and g.visible


def test_kfd_gpu_without_a_render_node_uses_its_own_ids_and_location(tmp_path):
    c = Capture(tmp_path)
    c.kfd_node(0, **CPU_NODE)
    # location_id = bus << 8 | device << 3 | function: 0000:c3:00.0
    c.kfd_node(1, **kfd_gpu(110000, 29772, location_id=0xc3 << 8))
    c.kfd_node(2, **kfd_gpu(100300, 29631, location_id=(0x0a << 8) | (2 << 3) | 1))  # 0x73bf: Navi 21
    p = c.profile()
    a, b = p.amd_gpus
    assert (a.gfx, a.pci.vendor, a.pci.device, a.pci.bus_id) == ("gfx1100", "0x1002", "0x744c", "0000:c3:00.0")
    assert "7900 XTX" in a.name
    assert (b.gfx, b.pci.device, b.pci.bus_id) == ("gfx1030", "0x73bf", "0000:0a:02.1")
    assert b.name.startswith("AMD Radeon RX 6") and b.integrated is False
    assert [g.index for g in p.amd_gpus] == [0, 1]


def test_kfd_nodes_are_taken_in_numeric_order(tmp_path):
    c = Capture(tmp_path)
    c.kfd_node(0, **CPU_NODE)
    c.kfd_node(10, **kfd_gpu(100300, 29631, location_id=0x0a << 8))
    c.kfd_node(2, **kfd_gpu(110000, 29772, location_id=0x03 << 8))
    assert [g.gfx for g in c.profile().amd_gpus] == ["gfx1100", "gfx1030"]  # node 2 before node 10


def test_compute_partitions_report_the_pci_device_of_their_gpu(tmp_path):
    """An MI300X in CPX mode (values of AMD's capture, ROCm/k8s-device-plugin
    testdata/topo-mi300-cpx): one KFD node per partition, all with the GPU's unique_id and
    location_id = PCI id | partition.  Partition 0 renders on the PCI device; the others on
    platform devices amdgpu_xcp.N that have no PCI attributes."""
    c = Capture(tmp_path)
    c.kfd_node(0, **CPU_NODE)
    uid, other = 16404946649897475633, 2472748907779728154
    c.kfd_node(1, **kfd_gpu(90402, 29857, minor=128, location_id=0x0500, unique_id=uid))
    c.kfd_node(2, **kfd_gpu(90402, 29857, minor=129, location_id=0x0501, unique_id=uid))
    c.kfd_node(3, **kfd_gpu(90402, 29857, minor=130, location_id=0x2701, unique_id=other))
    c.amd_gpu("0000:05:00.0", "0x74a1", vram=205822885888, render=128, cls="0x120000", revision="0x00")
    for minor, xcp in ((129, 0), (130, 1)):
        c.file(f"sys/devices/platform/amdgpu_xcp.{xcp}/modalias", "platform:amdgpu_xcp\n")
        c.link(f"sys/devices/platform/amdgpu_xcp.{xcp}/drm/renderD{minor}/device", f"../../../amdgpu_xcp.{xcp}")
        c.link(f"sys/class/drm/renderD{minor}", f"../../devices/platform/amdgpu_xcp.{xcp}/drm/renderD{minor}")
    a, b, x = c.profile().amd_gpus
    assert (a.pci.bus_id, a.pci.revision, a.vram_bytes) == ("0000:05:00.0", "0x00", 205822885888)
    assert (b.pci.vendor, b.pci.device, b.pci.revision, b.pci.bus_id) == ("0x1002", "0x74a1", "0x00", "0000:05:00.0")
    assert b.driver == "amdgpu" and b.name == a.name and b.gfx == "gfx942"
    assert b.vram_bytes is None  # the partition's share is not the GPU's total
    assert b.unique_id == a.unique_id and b.render_node == "/dev/dri/renderD129"
    # a partition of another GPU borrows nothing from this one
    assert (x.pci.revision, x.pci.bus_id) != ("0x00", "0000:05:00.0")


def test_kfd_gpu_of_unknown_device_is_named_by_its_target(tmp_path):
    c = Capture(tmp_path)
    c.kfd_node(1, **kfd_gpu(110501, 0x0001))
    c.kfd_node(2, **kfd_gpu(110000, 0x0002))
    a, b = c.profile().amd_gpus
    assert (a.gfx, a.name) == ("gfx1151", "AMD GPU (gfx1151)")
    assert a.integrated is True  # gfx1151 is an APU target (Strix Halo)
    assert (b.name, b.integrated) == ("AMD GPU (gfx1100)", False)


def test_kfd_node_with_only_its_target(tmp_path):
    """A KFD node that names no PCI ids or location: still an AMD GPU of that target."""
    c = Capture(tmp_path)
    c.file("sys/class/kfd/kfd/topology/nodes/1/properties", "simd_count 80\ngfx_target_version 110000\n")
    (g,) = c.profile().amd_gpus
    assert (g.gfx, g.name, g.pci.vendor, g.pci.device, g.pci.bus_id) == ("gfx1100", "AMD GPU (gfx1100)", "0x1002", "", None)


class HiddenHost(CaptureHost):
    """A capture whose listed files raise PermissionError, as files hidden by a container's cgroup
    or a restrictive mode do (the Host contract: read raises PermissionError)."""

    def __init__(self, root, hidden):
        super().__init__(root)
        self.hidden = set(hidden)

    def read(self, path):
        if path in self.hidden:
            raise PermissionError(13, "Permission denied", path)
        return super().read(path)


def test_kfd_node_that_cannot_be_read_is_reported_hidden(tmp_path):
    c = Capture(tmp_path)
    c.kfd_node(1, **kfd_gpu(110000, 29772, location_id=0x03 << 8))
    c.kfd_node(2, **kfd_gpu(100300, 29631, location_id=0x0a << 8))
    c.kfd_node(3, **kfd_gpu(110501, 0x1586, location_id=0xc5 << 8))
    p = probe(HiddenHost(c.root, {"/sys/class/kfd/kfd/topology/nodes/2/properties"}))
    a, hidden, b = p.amd_gpus
    assert (a.gfx, b.gfx) == ("gfx1100", "gfx1151")  # the nodes after it are still read
    assert hidden.visible is False and hidden.gfx is None and hidden.source == "kfd"
    assert "2" in hidden.name and "hidden" in hidden.name


def test_kfd_implausible_and_empty_nodes_are_skipped_with_a_warning(tmp_path):
    c = Capture(tmp_path)
    c.kfd_node(1, **kfd_gpu(1000000, 29772))
    c.file("sys/class/kfd/kfd/topology/nodes/2/properties", "")
    c.kfd_node(3, **kfd_gpu(110000, 29772))
    p = c.profile()
    assert [g.gfx for g in p.amd_gpus] == ["gfx1100"]
    w = warnings(p, "amd_gpu")
    assert any("KFD node 1" in m and "1000000" in m for m in w), w
    assert any("KFD node 2" in m for m in w), w


def test_kfd_with_only_a_cpu_node_falls_back_to_drm(tmp_path):
    c = Capture(tmp_path)
    c.kfd_node(0, **CPU_NODE)
    c.amd_gpu("0000:03:00.0", "0x744c", gc="11.0.0", card=0)
    (g,) = c.profile().amd_gpus
    assert (g.gfx, g.source) == ("gfx1100", "drm")


# -- AMD: the MI300A APU rule ----------------------------------------------------------------------


@pytest.mark.parametrize("device_id,device,integrated", [(0x74a0, "0x74a0", True), (0x74a1, "0x74a1", False)])
def test_mi300a_is_an_apu_and_mi300x_is_not_with_the_same_gc(tmp_path, device_id, device, integrated):
    """MI300A and MI300X share GC 9.4.3 (gfx942); the kernel calls MI300A an APU by its package,
    so the device id decides."""
    c = Capture(tmp_path)
    c.kfd_node(1, **kfd_gpu(90402, device_id, minor=128))
    c.amd_gpu("0000:02:00.0", device, gc="9.4.3", render=128, cls="0x120000", revision="0x00")
    (g,) = c.profile().amd_gpus
    assert g.gfx == "gfx942" and g.integrated is integrated
    assert ("MI300A" if integrated else "MI300X") in g.name


@pytest.mark.parametrize("device_id,integrated", [(0x74a0, True), (0x74a1, False), (0x744c, False)])
def test_without_gc_the_device_table_decides(tmp_path, device_id, integrated):
    c = Capture(tmp_path)
    c.kfd_node(1, **kfd_gpu(90402 if device_id != 0x744c else 110000, device_id, location_id=0x02 << 8))
    assert c.profile().amd_gpus[0].integrated is integrated


def test_apu_by_gc_version_even_for_an_unknown_device(tmp_path):
    c = Capture(tmp_path)
    c.kfd_node(1, **kfd_gpu(110003, 0x0001, minor=128))
    c.amd_gpu("0000:c4:00.0", "0x0001", gc="11.0.1", render=128)  # GC 11.0.1 (Phoenix) is an APU
    c2 = Capture(tmp_path / "dgpu")
    c2.kfd_node(1, **kfd_gpu(110000, 0x0002, minor=128))
    c2.amd_gpu("0000:03:00.0", "0x0002", gc="11.0.0", render=128)  # not in the table, GC says discrete
    assert c.profile().amd_gpus[0].integrated is True
    assert c2.profile().amd_gpus[0].integrated is False


# -- AMD: ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES -----------------------------------------------


HEX = ["GPU-3c04c4e6a01b0b73", "GPU-1111222233334444", "GPU-0123456789abcdef"]  # as rocm-smi prints them
UIDS = [int(h[4:], 16) for h in HEX]  # KFD's unique_id is the same number in decimal


def three_gpus(tmp_path, env):
    c = Capture(tmp_path, env=env)
    for i, (uid, gfx) in enumerate(zip(UIDS, (90402, 110000, 100300))):
        c.kfd_node(i + 1, **kfd_gpu(gfx, 0x0001, location_id=(i + 1) << 8, unique_id=uid))
    return c.profile()


def visible(p):
    return [g.gfx for g in p.amd_gpus if g.visible]


@pytest.mark.parametrize("env,want", [
    ({}, ["gfx942", "gfx1100", "gfx1030"]),
    ({"ROCR_VISIBLE_DEVICES": HEX[1]}, ["gfx1100"]),
    ({"ROCR_VISIBLE_DEVICES": "GPU-0123"}, ["gfx1030"]),  # a unique prefix is enough
    ({"ROCR_VISIBLE_DEVICES": f"{HEX[2]},0"}, ["gfx942", "gfx1030"]),
    ({"ROCR_VISIBLE_DEVICES": "GPU-ffff,0"}, []),  # the list stops at the first invalid entry
    ({"ROCR_VISIBLE_DEVICES": "1,2", "HIP_VISIBLE_DEVICES": "1"}, ["gfx1030"]),  # HIP indexes what ROCR left
    ({"HIP_VISIBLE_DEVICES": "2"}, ["gfx1030"]),
    ({"HIP_VISIBLE_DEVICES": "0,5,1"}, ["gfx942"]),  # 5 is out of range: the list ends there
    ({"HIP_VISIBLE_DEVICES": ""}, ["gfx942", "gfx1100", "gfx1030"]),  # empty is unset for HIP (flag default "")
    ({"ROCR_VISIBLE_DEVICES": " "}, ["gfx942", "gfx1100", "gfx1030"]),
    ({"HIP_VISIBLE_DEVICES": "garbage"}, []),
    ({"CUDA_VISIBLE_DEVICES": "1"}, ["gfx1100"]),  # HIP reads CUDA's variable when its own is unset
    ({"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "2"}, ["gfx1030"]),  # ... and HIP's first
])
def test_visible_devices(tmp_path, env, want):
    p = three_gpus(tmp_path, env)
    assert len(p.amd_gpus) == 3  # hidden GPUs are still reported
    assert visible(p) == want
    assert all(g.visible is True or g.visible is False for g in p.amd_gpus)
    assert [g.integrated for g in p.amd_gpus] == [False] * 3  # neither an APU target nor a known APU


# -- AMD: HSA_OVERRIDE_GFX_VERSION -----------------------------------------------------------------


@pytest.mark.parametrize("value,want", [
    ("10.3.0", "gfx1030"), ("11.0.0", "gfx1100"), ("9.0.10", "gfx90a"), (" gfx1030 ", "gfx1030"), ("GFX1100", "gfx1100"),
    ("10.3", None), ("10.16.0", None), ("10.3.16", None), ("gfx", None), ("gfx-10", None), ("abc", None), ("", None),
])
def test_parse_override(value, want):
    assert parse_override(value) == want


@pytest.mark.parametrize("env,problem", [
    ({"HIP_VISIBLE_DEVICES": "0,5,1"}, "HIP_VISIBLE_DEVICES='0,5,1': index 5 is past the last device (there are 3); "
                                       "the runtime keeps the 1 device before it"),
    ({"HIP_VISIBLE_DEVICES": "garbage"}, "HIP_VISIBLE_DEVICES='garbage': entry 'garbage' is neither an index nor a "
                                         "GPU UUID; the runtime keeps no device"),
    ({"ROCR_VISIBLE_DEVICES": "GPU-ffff,0"}, "ROCR_VISIBLE_DEVICES='GPU-ffff,0': UUID GPU-ffff matches no GPU"),
    ({"HIP_VISIBLE_DEVICES": "1,1"}, "index 1 is repeated"),
    ({"ROCR_VISIBLE_DEVICES": f"{HEX[2]},{HEX[2]}"}, f"{HEX[2]} is repeated; the runtime keeps the 1 device before it"),
    ({"ROCR_VISIBLE_DEVICES": "GPU-"}, "UUID GPU- matches 3 GPUs"),
    ({"HIP_VISIBLE_DEVICES": "-1"}, "entry -1 is negative"),
    ({"HIP_VISIBLE_DEVICES": "0,,1"}, "an empty entry ends the list"),
])
def test_a_device_list_that_is_not_valid_is_warned_naming_the_variable_and_value(tmp_path, env, problem):
    p = three_gpus(tmp_path, env)
    assert any(problem in m for m in warnings(p, "amd_gpu")), warnings(p, "amd_gpu")


def test_a_valid_device_list_is_not_warned(tmp_path):
    p = three_gpus(tmp_path, {"HIP_VISIBLE_DEVICES": "2,0", "ROCR_VISIBLE_DEVICES": "0,1,2"})
    assert not [m for m in warnings(p, "amd_gpu") if "VISIBLE_DEVICES" in m]


def test_override_applies_within_its_major_version_and_is_refused_across_it(tmp_path):
    p = three_gpus(tmp_path, {"HSA_OVERRIDE_GFX_VERSION": "11.0.2"})
    # gfx1100 runs as gfx1102; gfx942 (9) and gfx1030 (10) would cross a major version: ROCm refuses
    assert [g.gfx_effective for g in p.amd_gpus] == ["gfx942", "gfx1102", "gfx1030"]
    assert [g.gfx_override_refused for g in p.amd_gpus] == [True, False, True]
    assert [g.gfx for g in p.amd_gpus] == ["gfx942", "gfx1100", "gfx1030"]
    w = warnings(p, "amd_gpu")
    assert sum("across a major version" in m for m in w) == 2
    assert any("(gfx942) as gfx1102, across a major version" in m and "HSA_OVERRIDE_GFX_VERSION_<node> for the "
               "GPUs it fits instead (this GPU is KFD node 1)" in m for m in w), w
    assert any("HSA_OVERRIDE_GFX_VERSION=11.0.2: ROCm runs" in m and "(gfx1100) as gfx1102" in m for m in w)


def test_a_per_node_override_wins_for_its_node_only(tmp_path):
    # KFD node 1 is the gfx942, node 2 the gfx1100, node 3 the gfx1030 (ROCr: HSA_OVERRIDE_GFX_VERSION_<node>)
    p = three_gpus(tmp_path, {"HSA_OVERRIDE_GFX_VERSION_1": "9.0.8", "HSA_OVERRIDE_GFX_VERSION": "11.0.1"})
    assert [g.kfd_node for g in p.amd_gpus] == [1, 2, 3]
    assert [g.gfx_effective for g in p.amd_gpus] == ["gfx908", "gfx1101", "gfx1030"]
    assert [g.gfx_override for g in p.amd_gpus] == ["HSA_OVERRIDE_GFX_VERSION_1", "HSA_OVERRIDE_GFX_VERSION",
                                                   "HSA_OVERRIDE_GFX_VERSION"]
    assert [g.gfx_override_refused for g in p.amd_gpus] == [False, False, True]
    assert p.device_env == {"HSA_OVERRIDE_GFX_VERSION": "11.0.1", "HSA_OVERRIDE_GFX_VERSION_1": "9.0.8"}
    only = three_gpus(tmp_path / "b", {"HSA_OVERRIDE_GFX_VERSION_3": "10.3.1"})
    assert [g.gfx_effective for g in only.amd_gpus] == ["gfx942", "gfx1100", "gfx1031"]


def test_bad_override_is_ignored_with_a_warning(tmp_path):
    p = three_gpus(tmp_path, {"HSA_OVERRIDE_GFX_VERSION": "ten"})
    assert [g.gfx_effective for g in p.amd_gpus] == ["gfx942", "gfx1100", "gfx1030"]
    assert any("'ten'" in m and "ignored" in m for m in warnings(p, "amd_gpu"))


# -- AMD: no KFD, DRM only ---------------------------------------------------------------------------


def test_drm_fallback_names_ids_and_targets(tmp_path):
    c = Capture(tmp_path)
    c.amd_gpu("0000:03:00.0", "0x744c", gc="11.0.0", vram=25753026560, card=1, render=128)  # GC known
    c.amd_gpu("0000:07:00.0", "0x73bf", card=2, render=129)  # no ip_discovery: the PCI table
    c.amd_gpu("0000:0c:00.0", "0x0001", card=10)  # neither: target unknown
    c.amd_gpu("0000:0d:00.0", "0x744c", render=130)  # a render node only, after the duplicates
    c.link("sys/class/drm/card1-DP-1", "../../devices/pci0000:00/0000:03:00.0/drm/card1/card1-DP-1")  # a connector
    c.pci("0000:03:00.1", "0x1002", "0xab30", "0x040300", driver="snd_hda_intel")  # its HDMI audio
    c.drm("card3", "0000:03:00.1")
    p = c.profile()
    a, b, u, r = p.amd_gpus  # card1 and renderD128 are one GPU; the audio function is none
    assert (a.gfx, a.source, a.pci.device, a.pci.bus_id, a.vram_bytes) == (
        "gfx1100", "drm", "0x744c", "0000:03:00.0", 25753026560)
    assert "7900 XTX" in a.name and a.driver == "amdgpu" and a.pci.revision == "0xc8"
    assert (b.gfx, b.source, b.pci.bus_id) == ("gfx1030", "pci-table", "0000:07:00.0")
    assert b.name.startswith("AMD Radeon RX 6")
    assert (u.gfx, u.name, u.pci.device) == (None, "AMD GPU", "0x0001")
    assert (r.gfx, r.pci.bus_id) == ("gfx1100", "0000:0d:00.0")
    assert [g.index for g in p.amd_gpus] == [0, 1, 2, 3]
    w = warnings(p, "amd_gpu")
    assert any("0x0001" in m and "0000:0c:00.0" in m and "unknown" in m for m in w), w
    assert any("/sys/class/kfd" in m and "/dev/kfd" in m for m in w), w  # ROCm cannot run here


def test_drm_fallback_keeps_instinct_accelerators(tmp_path):
    """An MI300X is a processing accelerator (PCI class 0x1200, as lspci shows it on a real node),
    not a display controller: a container without /dev/kfd still lists it."""
    c = Capture(tmp_path)
    c.amd_gpu("0000:05:00.0", "0x74a1", gc="9.4.3", render=128, cls="0x120000", revision="0x00")
    (g,) = c.profile().amd_gpus
    assert (g.gfx, g.source, g.integrated) == ("gfx942", "drm", False) and "MI300X" in g.name


def test_drm_gc_missing_from_the_map_falls_back_to_the_table_with_a_warning(tmp_path):
    c = Capture(tmp_path)
    c.amd_gpu("0000:03:00.0", "0x744c", gc="13.9.9", render=128)
    p = c.profile()
    (g,) = p.amd_gpus
    assert (g.gfx, g.source) == ("gfx1100", "pci-table")
    assert any("13.9.9" in m for m in warnings(p, "amd_gpu"))


def test_drm_partial_gc_version_is_no_gc_version(tmp_path):
    c = Capture(tmp_path)
    c.amd_gpu("0000:03:00.0", "0x744c", gc="11.0.0", render=128)
    os.remove(os.path.join(c.fs, PCI, "0000:03:00.0/ip_discovery/die/0/GC/0/revision"))
    p = c.profile()
    (g,) = p.amd_gpus
    assert (g.gfx, g.source) == ("gfx1100", "pci-table")
    assert not any("GC IP" in m for m in warnings(p, "amd_gpu"))


def test_drm_render_nodes_only_and_the_kfd_directory_present(tmp_path):
    """A render node alone is enough; with /sys/class/kfd present (no topology) there is no
    container warning."""
    c = Capture(tmp_path)
    c.file("sys/class/kfd/kfd/.keep", "")
    c.amd_gpu("0000:03:00.0", "0x744c", gc="11.0.0", render=128)
    c.file("sys/class/drm/version", "drm 1.1.0 20060810\n")
    p = c.profile()
    (g,) = p.amd_gpus
    assert g.gfx == "gfx1100" and g.pci.bus_id == "0000:03:00.0"
    assert not any("/dev/kfd" in m for m in warnings(p, "amd_gpu"))


def test_drm_entries_sort_cards_numerically(tmp_path):
    c = Capture(tmp_path)
    c.amd_gpu("0000:10:00.0", "0x73bf", card=10)
    c.amd_gpu("0000:20:00.0", "0x744c", card=2)
    c.pci("0000:30:00.0", "0x10de", "0x2684", "0x030000", driver="nvidia")  # an NVIDIA card in between
    c.drm("card5", "0000:30:00.0")
    p = c.profile()
    assert [g.pci.bus_id for g in p.amd_gpus] == ["0000:20:00.0", "0000:10:00.0"]


# -- NPU: AMD PCI functions ------------------------------------------------------------------------


def ryzen_board(c):
    """The AMD functions every Ryzen board has that are not NPUs (pci.ids: 14ea host bridge,
    14ed/14ee PCIe GPP bridges, 15b9 USB 3.1 xHCI, 15e3 HD audio, 1649 PSP)."""
    c.pci("0000:00:00.0", "0x1022", "0x14e8", "0x060000")
    c.pci("0000:00:01.1", "0x1022", "0x14ed", "0x060400", driver="pcieport")
    c.pci("0000:00:08.1", "0x1022", "0x14eb", "0x060400", driver="pcieport")
    c.pci("0000:c6:00.3", "0x1022", "0x15b9", "0x0c0330", driver="xhci_hcd")
    c.pci("0000:c6:00.6", "0x1022", "0x15e3", "0x040300", driver="snd_hda_intel")
    c.pci("0000:c6:00.2", "0x1022", "0x1649", "0x108000", driver="ccp")


def test_bridges_and_usb_controllers_are_not_npus(tmp_path):
    c = Capture(tmp_path)
    ryzen_board(c)
    p = c.profile()
    assert p.npus == [] and p.amd_gpus == []
    assert warnings(p, "npu") == [] and warnings(p, "amd_gpu") == []


def strix_npu(c, driver="amdxdna", accel=True, dev_node=True, revision="0x10", device="0x17f0", vbnv="RyzenAI-npu4\n"):
    extra = {"vbnv": vbnv} if vbnv is not None else {}
    base = c.pci("0000:c7:00.1", "0x1022", device, "0x118000", revision=revision, driver=driver, **extra)
    if accel:
        c.link("sys/class/accel/accel0/device", "../../../devices/pci0000:00/0000:c7:00.1")
    if dev_node:
        c.file("dev/accel/accel0", "")
    return base


def test_bound_npu_with_its_node(tmp_path):
    c = Capture(tmp_path)
    ryzen_board(c)
    c.pci("0000:c5:00.0", "0x1002", "0x150e", "0x030000", driver="amdgpu")  # the Radeon 890M iGPU
    strix_npu(c)
    p = c.profile()
    (n,) = p.npus
    assert (n.vendor, n.generation, n.codename, n.driver_bound) == ("amd", "XDNA2", "Strix Point", True)
    assert n.device_node == "/dev/accel/accel0" and n.name == "RyzenAI-npu4"
    assert (n.pci.vendor, n.pci.device, n.pci.revision, n.pci.bus_id) == ("0x1022", "0x17f0", "0x10", "0000:c7:00.1")
    assert warnings(p, "npu") == []


def test_npu_name_is_none_without_a_readable_vbnv(tmp_path):
    c = Capture(tmp_path)
    strix_npu(c, vbnv=None)
    assert c.profile().npus[0].name is None
    c2 = Capture(tmp_path / "hidden")
    strix_npu(c2)
    (n,) = probe(HiddenHost(c2.root, {"/sys/bus/pci/devices/0000:c7:00.1/vbnv"})).npus
    assert n.name is None and n.driver_bound and n.device_node == "/dev/accel/accel0"


def test_npu_revision_picks_the_generation(tmp_path):
    c = Capture(tmp_path)
    strix_npu(c, revision="0x11")
    assert c.profile().npus[0].codename == "Strix Halo"
    c2 = Capture(tmp_path / "phx")
    strix_npu(c2, device="0x1502", revision="0x00")
    (n,) = c2.profile().npus
    assert (n.generation, n.codename) == ("XDNA1", "Phoenix")


def test_npu_without_driver_is_reported_with_the_fix(tmp_path):
    c = Capture(tmp_path)
    strix_npu(c, driver=None, accel=False, dev_node=False)
    p = c.profile()
    (n,) = p.npus
    assert not n.driver_bound and n.device_node is None and n.name is None
    (w,) = warnings(p, "npu")
    assert "0000:c7:00.1" in w and "modprobe amdxdna" in w


def test_npu_bound_to_another_driver_says_which(tmp_path):
    c = Capture(tmp_path)
    strix_npu(c, driver="vfio-pci", accel=False, dev_node=False)
    p = c.profile()
    assert p.npus[0].driver_bound is False and p.npus[0].name is None
    (w,) = warnings(p, "npu")
    assert "'vfio-pci'" in w and "amdxdna" in w


def test_bound_npu_without_a_dev_node_is_warned(tmp_path):
    c = Capture(tmp_path)
    strix_npu(c, dev_node=False)
    p = c.profile()
    assert p.npus[0].driver_bound and p.npus[0].device_node is None
    (w,) = warnings(p, "npu")
    assert "/dev/accel" in w


def test_unknown_device_bound_to_amdxdna_is_an_npu_of_unknown_generation(tmp_path):
    c = Capture(tmp_path)
    strix_npu(c, device="0x17ff")
    (n,) = c.profile().npus
    assert (n.generation, n.codename, n.driver_bound, n.device_node) == ("unknown", "unknown", True, "/dev/accel/accel0")


# -- NVIDIA: NVML, CUDA_VISIBLE_DEVICES ------------------------------------------------------------


def nvml(*gpus, driver="570.86.15"):
    return {"driver_version": driver, "cuda_driver_version": 12080, "gpus": list(gpus)}


RTX4090 = {"name": "NVIDIA GeForce RTX 4090", "compute_capability": [8, 9], "memory_total": 25757220864,
           "pci_bus_id": "00000000:01:00.0", "uuid": "GPU-5a3d2a4e-1c6f-0a93-7b1e-0d1bd9d57a11"}
TITANV = {"name": "NVIDIA TITAN V", "compute_capability": [7, 0], "memory_total": 12884901888,
          "pci_bus_id": "00000000:02:00.0", "uuid": "GPU-e2d4f1a0-7c33-4b6b-a0a1-55e4b8c0d9f2"}


def nv_profile(tmp_path, env=None, gpus=(RTX4090, TITANV), **kw):
    return Capture(tmp_path, env=env, nvml=nvml(*gpus, **kw)).profile()


def test_nvml_gpus(tmp_path):
    p = nv_profile(tmp_path)
    a, b = p.nvidia_gpus
    assert (a.index, a.name, a.sm, a.compute_capability, a.memory_bytes, a.source) == (
        0, "NVIDIA GeForce RTX 4090", "sm_89", [8, 9], 25757220864, "nvml")
    assert (a.driver_version, a.cuda_driver_version, a.pci.bus_id) == ("570.86.15", 12080, "00000000:01:00.0")
    assert (b.index, b.sm) == (1, "sm_70")
    assert a.visible is True and b.visible is True
    assert (a.pci.vendor, a.pci.device) == ("0x10de", "")  # NVML gives no PCI device id
    assert warnings(p, "nvidia") == []


@pytest.mark.parametrize("spec,want", [
    ("1", ["NVIDIA TITAN V"]),
    ("1,0", ["NVIDIA GeForce RTX 4090", "NVIDIA TITAN V"]),
    ("GPU-e2d4", ["NVIDIA TITAN V"]),  # a UUID prefix
    ("GPU-5A3D2A4E-1C6F-0A93-7B1E-0D1BD9D57A11", ["NVIDIA GeForce RTX 4090"]),
    ("0,GPU-nope,1", ["NVIDIA GeForce RTX 4090"]),  # stops at the first invalid entry
    ("2", []), ("-1", []), ("", []),
])
def test_cuda_visible_devices(tmp_path, spec, want):
    p = nv_profile(tmp_path, env={"CUDA_VISIBLE_DEVICES": spec})
    assert len(p.nvidia_gpus) == 2  # hidden GPUs are still reported
    assert [g.name for g in p.nvidia_gpus if g.visible] == want
    assert all(g.visible is True or g.visible is False for g in p.nvidia_gpus)


def test_nvml_answers_of_the_wrong_type_are_dropped_or_warned(tmp_path):
    odd = {"name": None, "compute_capability": [True, 0], "memory_total": None}
    neg = {"name": "NVIDIA X", "compute_capability": [8, -1], "memory_total": 1 << 30}
    short = {"name": "NVIDIA Y", "compute_capability": [8], "memory_total": 1 << 30, "pci_bus_id": 7}
    p = nv_profile(tmp_path, gpus=("not a gpu", odd, neg, short, RTX4090), driver=570)
    names = [g.name for g in p.nvidia_gpus]
    assert names == ["NVIDIA GPU", "NVIDIA X", "NVIDIA Y", "NVIDIA GeForce RTX 4090"]
    assert [g.sm for g in p.nvidia_gpus] == [None, None, None, "sm_89"]
    assert [g.index for g in p.nvidia_gpus] == [0, 1, 2, 3]
    assert p.nvidia_gpus[0].memory_bytes == 65536000 * 1024 and p.nvidia_gpus[0].source == "nvml+meminfo"
    assert p.nvidia_gpus[2].pci is None and p.nvidia_gpus[2].source == "nvml"
    assert all(g.driver_version is None for g in p.nvidia_gpus)
    w = warnings(p, "nvidia")
    assert any("nvml.gpus[0]" in m for m in w), w
    assert any("NVIDIA GPU" in m and "system memory from /proc/meminfo" in m for m in w), w


def test_cuda_visible_devices_by_uuid_through_the_cli(tmp_path):
    c = Capture(tmp_path, env={"CUDA_VISIBLE_DEVICES": "GPU-e2d4f1a0"}, nvml=nvml(RTX4090, TITANV))
    r = run_cli("--root", c.root, "probe", "--json")
    assert r.rc == 0, r.err
    assert [(g["name"], g["visible"]) for g in r.json()["nvidia_gpus"]] == [
        ("NVIDIA GeForce RTX 4090", False), ("NVIDIA TITAN V", True)]


# -- NVIDIA: no NVML -----------------------------------------------------------------------------------


def test_without_nvml_pci_cards_are_named_from_the_driver_or_the_table(tmp_path):
    c = Capture(tmp_path, nvml={"error": "DriverNotLoaded"})
    c.pci("0000:01:00.0", "0x10de", "0x2204", "0x030000", revision="0xa1", driver="nvidia")
    c.pci("0000:01:00.1", "0x10de", "0x1aef", "0x040300")  # the card's audio function
    c.pci("0000:02:00.0", "0x10de", "0x2684", "0x030200")
    c.pci("0000:03:00.0", "0x10de", "0x0001", "0x030000")
    c.file("proc/driver/nvidia/version",
           "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n"
           "GCC version:  gcc version 12.3.0\n")
    c.file("proc/driver/nvidia/gpus/0000:01:00.0/information",
           "Model: \t\t NVIDIA GeForce RTX 3090 Ti\nIRQ:   \t\t 180\n")
    p = c.profile()
    a, b, u = p.nvidia_gpus
    assert a.name == "NVIDIA GeForce RTX 3090 Ti"  # the driver's own name first
    assert "4090" in b.name  # 0x2684 from the PCI table
    assert u.name == "NVIDIA GPU [10de:0001]"
    assert [g.index for g in p.nvidia_gpus] == [0, 1, 2]
    assert all(g.sm is None and g.source == "pci" and g.driver_version == "550.54.14" for g in p.nvidia_gpus)
    assert (a.pci.vendor, a.pci.device, a.pci.revision, a.pci.bus_id) == ("0x10de", "0x2204", "0xa1", "0000:01:00.0")
    w = warnings(p, "nvidia")
    assert len(w) == 3
    assert "0000:01:00.0" in w[0] and "kernel module is not loaded" in w[0]


def test_no_nvidia_at_all_says_why_in_one_warning(tmp_path):
    p = Capture(tmp_path).profile()
    assert p.nvidia_gpus == []
    (w,) = warnings(p, "nvidia")
    assert w.startswith("No NVIDIA driver is installed")


def test_unknown_nvml_error_is_named(tmp_path):
    p = Capture(tmp_path, nvml={"error": "Weird"}).profile()
    (w,) = warnings(p, "nvidia")
    assert "Weird" in w
    p = Capture(tmp_path / "none", nvml={"gpus": None}).profile()  # neither GPUs nor an error class
    (w,) = warnings(p, "nvidia")
    assert "unknown error" in w


@pytest.mark.parametrize("error,words", [
    ("LibraryNotFound", "no NVIDIA driver is installed"),
    ("DriverNotLoaded", "kernel module is not loaded"),
    ("NoPermission", "permission"),
    ("LibRmVersionMismatch", "without a reboot"),
    ("GpuIsLost", "fallen off the bus"),
    ("FunctionNotFound", "too old"),
    ("Timeout", "in time"),
    ("NotSupported", "does not support"),
    ("Uninitialized", "could not be initialised"),
    ("Unknown", "unknown error"),
])
def test_each_nvml_error_class_is_said_in_words(tmp_path, error, words):
    """What a user reads when NVML fails with a card on the bus (the pynvml error classes)."""
    c = Capture(tmp_path, nvml={"error": error})
    c.pci("0000:01:00.0", "0x10de", "0x2684", "0x030000")
    (w,) = warnings(c.profile(), "nvidia")
    assert words in w and "0000:01:00.0" in w and error not in w


def test_unreadable_device_tree_is_no_jetson(tmp_path):
    c = Capture(tmp_path)
    c.file("proc/device-tree/compatible", "nvidia,tegra234\x00")
    p = probe(HiddenHost(c.root, {"/proc/device-tree/compatible"}))
    assert p.nvidia_gpus == []
    (w,) = warnings(p, "nvidia")
    assert w.startswith("No NVIDIA driver is installed")


# -- NVIDIA: Jetson -------------------------------------------------------------------------------------


def test_jetson_orin_from_the_device_tree(tmp_path):
    c = Capture(tmp_path, env={"CUDA_VISIBLE_DEVICES": "0"})
    c.file("proc/device-tree/compatible", "nvidia,p3768-0000+p3767-0005\x00nvidia,p3767-0005\x00nvidia,tegra234\x00")
    # the open kernel module's line (as on GB10 and JetPack 6): "for <arch>" before the version
    c.file("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  540.4.0  "
           "Release Build  (buildbrain@mobile-u64-6336-d8000)  Tue Jan  7 17:35:12 PST 2025\n")
    p = c.profile()
    (g,) = p.nvidia_gpus
    assert (g.index, g.name, g.sm, g.compute_capability, g.source) == (0, "Jetson Orin", "sm_87", [8, 7], "jetson")
    assert g.memory_bytes == 65536000 * 1024  # unified memory: the system's
    assert g.driver_version == "540.4.0" and g.visible
    assert p.board == "Jetson Orin"
    assert warnings(p, "nvidia") == []


def test_jetson_found_by_nv_tegra_release_alone(tmp_path):
    c = Capture(tmp_path)
    c.file("etc/nv_tegra_release", "# R36 (release), REVISION: 4.0, GCID: 37537400, BOARD: generic, EABI: aarch64\n")
    p = c.profile()
    (g,) = p.nvidia_gpus
    assert g.source == "jetson" and "Jetson" in g.name and "Jetson" in p.board
    assert g.memory_bytes == 65536000 * 1024


def test_jetson_hidden_by_cuda_visible_devices(tmp_path):
    c = Capture(tmp_path, env={"CUDA_VISIBLE_DEVICES": "1"})
    c.file("proc/device-tree/compatible", "nvidia,tegra194\x00")
    (g,) = c.profile().nvidia_gpus
    assert g.sm == "sm_72" and not g.visible


def test_a_non_jetson_arm_board_has_no_nvidia_gpu(tmp_path):
    c = Capture(tmp_path)
    c.file("proc/device-tree/compatible", "xunlong,orangepi-5-plus\x00rockchip,rk3588\x00")
    p = c.profile()
    assert p.nvidia_gpus == []
    assert p.board == "Rockchip RK3588"


def test_a_kfd_gpu_without_a_render_node_names_what_is_missing_and_blames_no_group(tmp_path, cli):
    # a gfx1152 (Krackan) KFD node whose drm_render_minor is absent and whose PCI function has no drm/:
    # the render node does not exist, so no group membership can help
    c = Capture(tmp_path / "m", env={})
    c.kfd_node(1, **kfd_gpu(110502, 0x1114))
    p = c.profile()
    (w,) = [m for m in warnings(p, "amd_gpu") if "cannot use it" in m]
    assert "(gfx1152) (gfx1152)" not in w and " at None" not in w and "access to )" not in w
    assert "render group" not in w
    assert "no render node" in w
    r = cli("--root", c.root, "check", "llamacpp", "rocm", "--json")
    assert r.rc == 3
    assert "it has no render node (/dev/dri/renderD*)" in r.json()["reason"] and "None" not in r.json()["reason"]


def test_a_bad_override_is_warned_once_and_a_good_per_node_one_still_applies(tmp_path):
    p = three_gpus(tmp_path, {"HSA_OVERRIDE_GFX_VERSION": "ten"})
    assert sum("'ten'" in m for m in warnings(p, "amd_gpu")) == 1  # one variable, one warning, three GPUs
    p = three_gpus(tmp_path / "b", {"HSA_OVERRIDE_GFX_VERSION_1": "nine", "HSA_OVERRIDE_GFX_VERSION_2": "11.0.1"})
    assert [g.gfx_effective for g in p.amd_gpus] == ["gfx942", "gfx1101", "gfx1030"]
    assert any("HSA_OVERRIDE_GFX_VERSION_1='nine' is not a gfx version" in m for m in warnings(p, "amd_gpu"))


def test_every_device_variable_is_recorded_as_set(tmp_path):
    env = {"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "",
           "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "GGML_VK_VISIBLE_DEVICES": "0", "HSA_OVERRIDE_GFX_VERSION": "9.4.2",
           "HSA_OVERRIDE_GFX_VERSION_3": "10.3.0", "HSA_OVERRIDE_GFX_VERSION_X": "1.0.0", "HOME": "/root"}
    p = three_gpus(tmp_path, env)
    assert p.device_env == {k: v for k, v in env.items() if k not in ("HOME", "HSA_OVERRIDE_GFX_VERSION_X")}
    assert p.cuda_order == "pci"


def test_a_cuda_device_order_that_cuda_does_not_know_is_warned(tmp_path):
    p = three_gpus(tmp_path, {"CUDA_DEVICE_ORDER": "SLOWEST_FIRST"})
    assert p.cuda_order == "fastest"
    assert any("CUDA_DEVICE_ORDER='SLOWEST_FIRST' is neither PCI_BUS_ID nor FASTEST_FIRST" in m
               for m in warnings(p, "nvidia"))


def test_a_sysfs_hex_attribute_must_be_hex():
    from probes.util import parse_hex

    assert parse_hex("0x744C\n") == "0x744c" and parse_hex("0xzz") is None and parse_hex("744c") is None


def test_a_mig_uuid_is_read_as_a_uuid(tmp_path):
    # MIG instances are named MIG-<uuid> in CUDA_VISIBLE_DEVICES (NVIDIA MIG user guide): one that
    # matches nothing is a UUID that matches no GPU, not garbage
    p = three_gpus(tmp_path, {"HIP_VISIBLE_DEVICES": "MIG-0000"})
    assert any("UUID MIG-0000 matches no GPU" in m for m in warnings(p, "amd_gpu"))


def test_hip_reading_cuda_visible_devices_is_said(tmp_path):
    p = three_gpus(tmp_path, {"CUDA_VISIBLE_DEVICES": "1"})
    assert any("CUDA_VISIBLE_DEVICES='1' also selects AMD GPUs: HIP reads it when HIP_VISIBLE_DEVICES is not set" in m
               for m in warnings(p, "amd_gpu"))
    p = three_gpus(tmp_path / "b", {"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0"})
    assert not any("also selects AMD GPUs" in m for m in warnings(p, "amd_gpu"))


def test_a_loaded_driver_without_its_nvml_library_is_named_so_and_cuda_cannot_be_matched(tmp_path, cli):
    # a container given /dev/nvidia* but not the driver's user-space libraries: the kernel module is
    # loaded (its /proc version), NVML cannot be opened; "no driver installed" would be false, and
    # without NVML the compute capability (so the CUDA build) is unknown
    c = Capture(tmp_path / "m", nvml={"error": "LibraryNotFound"})
    c.pci("0000:01:00.0", "0x10de", "0x2684", "0x030000", revision="0xa1", driver="nvidia")
    c.file("proc/driver/nvidia/version",
           "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n")
    p = c.profile()
    (w,) = warnings(p, "nvidia")
    assert "the NVIDIA kernel driver 550.54.14 is loaded but its NVML library (libnvidia-ml.so.1) is not found" in w
    assert "until NVML answers" in w and "install the NVIDIA driver" not in w and "no NVIDIA driver" not in w
    r = cli("--root", c.root, "check", "llamacpp", "cuda", "--json")
    assert r.rc == 3
    assert "its compute capability is unknown (NVML did not answer), so no cuda build can be matched to it" \
        in r.json()["reason"]


def test_a_card_passed_through_to_a_vm_is_named_by_its_own_binding(tmp_path):
    # the nvidia module is loaded (another card uses it) but this card is bound to vfio-pci: neither
    # "no driver installed" nor "NVML missing" is true of it; what is true is its binding
    c = Capture(tmp_path / "m", nvml={"error": "LibraryNotFound"})
    c.pci("0000:01:00.0", "0x10de", "0x2684", "0x030000", revision="0xa1", driver="nvidia")
    c.pci("0000:02:00.0", "0x10de", "0x2204", "0x030000", revision="0xa1", driver="vfio-pci")
    c.file("proc/driver/nvidia/version",
           "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n")
    p = c.profile()
    on_nvidia, passed = warnings(p, "nvidia")
    assert "the NVIDIA kernel driver 550.54.14 is loaded but its NVML library" in on_nvidia
    assert passed.endswith("bound to vfio-pci, not to the NVIDIA driver 550.54.14; CUDA backends cannot use it "
                           "(bind it to nvidia, then run again)")
    assert p.nvidia_gpus[1].access_fix == "bind it to nvidia, then run again"


def test_a_jetson_of_unknown_soc_is_told_why_cuda_cannot_be_matched(tmp_path, cli):
    # an L4T release the tables do not know, its driver loaded: a Jetson has no NVML, so the cause is
    # the unknown SoC, not NVML
    c = Capture(tmp_path / "m")
    c.file("etc/nv_tegra_release", "# R99 (release), REVISION: 1.0, GCID: 1, BOARD: mystery, EABI: aarch64\n")
    c.file("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  999.1.0  "
           "Release Build  (buildbrain@mobile)  Tue Jan  7 17:35:12 PST 2025\n")
    (g,) = c.profile().nvidia_gpus
    assert g.source == "jetson" and g.sm is None
    r = cli("--root", c.root, "check", "llamacpp", "cuda", "--json")
    assert r.rc == 3
    assert "its compute capability is unknown (its SoC is not in the tables)" in r.json()["reason"], r.json()["reason"]
    assert "NVML" not in r.json()["reason"]
