"""Machines whose KFD topology is AMD's own capture (ROCm/k8s-device-plugin testdata, copied verbatim
by fixtures/make_kfd_fixtures.py), through the real CLI.

The answers come from the captured properties, decoded by hand: location_id 1280 = 0x0500 is
0000:05:00.0, and a partition's location_id carries its partition number in the low bits (1281 is
partition 1 of that GPU); the eight partitions of one MI300X share its unique_id.  Picks follow the
Lemonade matrix: llamacpp's rocm row lists gfx90a and gfx942 (gate: Linux), and one build serves
every device of one family, so no HIP_VISIBLE_DEVICES is needed when all of them are gfx942."""

import json
import shutil

from conftest import machine

CPX = "linux-ubuntu22.04-8x-mi300x-cpx-kfd-capture"
MI210 = "linux-ubuntu22.04-8x-mi210-kfd-capture"
# partition 0's location_id >> 8 for each GPU, in KFD order (nodes 2, 10, 18, ... 58)
CPX_BUSES = [0x05, 0x27, 0x47, 0x65, 0x85, 0xa7, 0xc7, 0xe5]


def test_cpx_partitions_are_listed_on_their_gpu_and_numbered_by_hip(cli):
    r = cli("--root", machine(CPX), "probe", "--json")
    assert r.rc == 0, r.err
    gpus = r.json()["amd_gpus"]
    assert len(gpus) == 63  # 8 partitions of seven GPUs, 7 of the last (as captured)
    assert {g["gfx"] for g in gpus} == {"gfx942"}
    assert [g["hip_index"] for g in gpus] == list(range(63))
    want = [f"0000:{b:02x}:00.0" for b in CPX_BUSES for _ in range(8)][:63]
    assert [g["pci"]["bus_id"] for g in gpus] == want
    assert {(g["pci"]["device"], g["pci"]["revision"]) for g in gpus} == {("0x74a1", "0x00")}
    for first in range(0, 63, 8):
        group = gpus[first:first + 8]
        assert len({g["unique_id"] for g in group}) == 1
    assert gpus[1]["render_node"] == "/dev/dri/renderD129" and gpus[1]["vram_bytes"] is None


def test_cpx_llamacpp_runs_rocm_on_the_first_gpu_without_pinning(cli):
    r = cli("--root", machine(CPX), "pick", "llamacpp", "--json")
    assert r.rc == 0, r.err
    rec = r.json()["recipes"]["llamacpp"]
    assert rec["backend"] == "rocm" and rec["run_args"] == "--llamacpp rocm"
    # partition 0 of the GPU at 0000:05:00.0: the only partitions with a known memory size come
    # first (more memory), then the lower index
    dev = rec["device"]
    assert (dev["family"], dev["index"], dev["bus_id"], dev["memory_bytes"]) == ("gfx942", 0, "0000:05:00.0", 205822885888)
    assert rec["run_env"] == {}  # one gfx942 build serves all 63 partitions


def test_cpx_with_rocr_visible_devices_picks_a_visible_partition(cli, tmp_path):
    """The device plugin hands a pod partitions 1-7 of the second GPU (KFD nodes 11-17, the
    profile's indices 9-15) through ROCR_VISIBLE_DEVICES."""
    root = tmp_path / "m"
    shutil.copytree(machine(CPX), root, symlinks=True)
    cap = json.loads((root / "capture.json").read_text())
    cap["env"] = {"ROCR_VISIBLE_DEVICES": ",".join(str(i) for i in range(9, 16))}
    (root / "capture.json").write_text(json.dumps(cap))
    gpus = cli("--root", str(root), "probe", "--json").json()["amd_gpus"]
    assert [g["index"] for g in gpus if g["visible"]] == list(range(9, 16))
    assert [g["hip_index"] for g in gpus[9:16]] == list(range(7))
    rec = cli("--root", str(root), "pick", "llamacpp", "--json").json()["recipes"]["llamacpp"]
    assert rec["backend"] == "rocm"
    assert (rec["device"]["index"], rec["device"]["bus_id"]) == (9, "0000:27:00.0")
    assert rec["run_env"] == {}


def test_mi210_first_gpu_is_the_first_kfd_node_not_the_lowest_bus(cli):
    # KFD node 2 (location_id 25344 = 0x6300) comes before node 4 (768 = 0x0300)
    rec = cli("--root", machine(MI210), "pick", "llamacpp", "--json").json()["recipes"]["llamacpp"]
    assert rec["backend"] == "rocm"
    assert (rec["device"]["family"], rec["device"]["index"], rec["device"]["bus_id"]) == ("gfx90a", 0, "0000:63:00.0")
    assert rec["run_env"] == {}
