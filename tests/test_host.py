"""The capture seam: a capture is data from outside, so it may be hostile or broken.  Nothing in it
may crash the probes, and nothing outside it may be read."""

import json
import os
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes import probe
from probes.host import CaptureHost, LinkLoop
from probes.inputs import InputError


def make_capture(tmp_path, files=None, links=None, data=None):
    root = tmp_path / "cap"
    (root / "fs").mkdir(parents=True, exist_ok=True)
    capture = {"format": 1, "platform": {"system": "Linux", "machine": "x86_64", "release": "6.8.0"}}
    capture.update(data or {})
    (root / "capture.json").write_text(json.dumps(capture))
    for path, text in (files or {}).items():
        p = root / "fs" / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
    for path, target in (links or {}).items():
        p = root / "fs" / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, p)
    return root


KFD_GPU = """cpu_cores_count 0
simd_count 192
mem_banks_count 1
gfx_target_version 110000
vendor_id 4098
device_id 29772
location_id 768
domain 0
drm_render_minor 128
"""


def test_reads_follow_relative_links_inside_the_capture(tmp_path):
    root = make_capture(
        tmp_path,
        files={"/sys/devices/pci0000:00/0000:03:00.0/vendor": "0x1002\n"},
        links={"/sys/class/drm/renderD128/device": "../../../devices/pci0000:00/0000:03:00.0"},
    )
    host = CaptureHost(root)
    assert host.read("/sys/class/drm/renderD128/device/vendor") == "0x1002\n"
    assert host.link_name("/sys/class/drm/renderD128/device") == "0000:03:00.0"


def test_absolute_link_is_never_followed_onto_the_host(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("host data")
    root = make_capture(tmp_path, links={"/etc/os-release": str(secret)})
    host = CaptureHost(root)
    assert host.read("/etc/os-release") is None


@pytest.mark.parametrize("target", ["../../../secret", "../../../../secret", "../../capture.json"])
def test_relative_link_leaving_fs_is_refused(tmp_path, target):
    (tmp_path / "secret").write_text("ID=evil\n")
    root = make_capture(tmp_path, links={"/etc/os-release": target})
    host = CaptureHost(root)
    assert host.read("/etc/os-release") is None
    prof = probe(host)
    assert prof.os.distro.id == ""


def test_dotdot_in_the_requested_path_cannot_escape(tmp_path):
    (tmp_path / "secret").write_text("x")
    root = make_capture(tmp_path)
    assert CaptureHost(root).read("/../../secret") is None


def test_link_loop_is_not_a_crash(tmp_path):
    root = make_capture(tmp_path, links={"/a/b": "../a/b", "/etc/os-release": "../a/b"})
    assert CaptureHost(root).read("/etc/os-release") is None
    probe(CaptureHost(root))


def _within(seconds, fn):
    """``fn()`` on a daemon thread: a lookup that never ends fails the test instead of hanging it."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still resolving after {seconds} s: the loop of links is never refused"
    return box


@pytest.mark.parametrize("links,path", [
    ({"/a/b": "../a/b"}, "/a/b"),  # one link naming itself
    ({"/x/p": "q", "/x/q": "p"}, "/x/p"),  # two links naming each other
])
def test_a_link_loop_is_refused_quickly_naming_the_link(tmp_path, links, path):
    host = CaptureHost(make_capture(tmp_path, links=links))
    t0 = time.perf_counter()
    box = _within(5, lambda: host._resolve(path + "/vendor"))
    assert time.perf_counter() - t0 < 1
    err = box.get("error")
    assert isinstance(err, LinkLoop), box
    assert err.link in links and err.path == path + "/vendor"
    assert f"a loop of links at {err.link}" in str(err) and str(err).startswith(path + "/vendor: ")
    # what the probes see: no such file, as for any link that leaves the capture
    assert host.read(path + "/vendor") is None and host.listdir(path) == []
    assert host.exists(path)  # the link itself is there


@pytest.mark.parametrize("n,ok", [(40, True), (41, False)])
def test_a_lookup_follows_at_most_40_links_whatever_the_cache_holds(tmp_path, n, ok):
    links = {f"/l/{i}": str(i + 1) for i in range(n)}  # /l/0 -> 1 -> ... -> n, a file
    host = CaptureHost(make_capture(tmp_path, files={f"/l/{n}": "end\n"}, links=links))
    for _ in range(2):  # the second lookup starts from the first one's cache, and counts the same links
        assert host.read("/l/1") == "end\n"  # a shorter chain first: cached
        assert host.read("/l/0") == ("end\n" if ok else None)


def test_dangling_driver_link_is_read_by_name(tmp_path):
    root = make_capture(tmp_path, links={"/sys/bus/pci/devices/0000:c5:00.1/driver": "../../../bus/pci/drivers/amdxdna"})
    assert CaptureHost(root).link_name("/sys/bus/pci/devices/0000:c5:00.1/driver") == "amdxdna"


@pytest.mark.parametrize(
    "text,needle",
    [
        ("{not json", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"format": 2, "platform": {"system": "Linux"}}', "format"),
        ('{"format": 1}', "platform"),
        ('{"format": 1, "platform": {"system": "Linux"}, "env": []}', "env"),
        ('{"format": 1, "platform": {"system": "Linux"}, "vulkan_loader": "yes"}', "vulkan_loader"),
    ],
)
def test_malformed_capture_json_exits_5_naming_the_file(tmp_path, cli, text, needle):
    root = tmp_path / "cap"
    root.mkdir()
    (root / "capture.json").write_text(text)
    with pytest.raises(InputError) as e:
        CaptureHost(root)
    assert needle in str(e.value)
    r = cli("--root", str(root), "probe", "--json")
    assert r.rc == 5
    assert "capture.json" in r.err and needle in r.err
    assert "Traceback" not in r.err


PROBED_FILES = [
    "/sys/class/kfd/kfd/topology/nodes/1/properties",
    "/sys/devices/pci0000:00/0000:03:00.0/vendor",
    "/sys/devices/pci0000:00/0000:03:00.0/device",
    "/sys/devices/pci0000:00/0000:03:00.0/class",
    "/sys/devices/pci0000:00/0000:03:00.0/mem_info_vram_total",
    "/sys/devices/pci0000:00/0000:03:00.0/ip_discovery/die/0/GC/0/major",
    "/sys/devices/pci0000:00/0000:03:00.0/revision",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/version",
    "/etc/os-release",
    "/proc/driver/nvidia/version",
    "/proc/device-tree/compatible",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    contents=st.dictionaries(st.sampled_from(PROBED_FILES), st.binary(max_size=300)),
    nvml=st.one_of(
        st.just({"error": "DriverNotLoaded"}),
        st.fixed_dictionaries({"gpus": st.lists(st.dictionaries(st.sampled_from(
            ["name", "compute_capability", "memory_total", "uuid"]), st.one_of(
            st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=3))), max_size=3)}),
    ),
    env=st.dictionaries(st.sampled_from(["HIP_VISIBLE_DEVICES", "HSA_OVERRIDE_GFX_VERSION", "CUDA_VISIBLE_DEVICES"]),
                        st.text(max_size=12)),
)
def test_garbage_files_never_crash_the_probes(tmp_path_factory, contents, nvml, env):
    tmp = tmp_path_factory.mktemp("g")
    files = {"/sys/class/kfd/kfd/topology/nodes/1/properties": KFD_GPU}
    files.update(contents)
    root = make_capture(tmp, files=files, links={"/sys/class/drm/renderD128/device": "../../../devices/pci0000:00/0000:03:00.0",
                                                 "/sys/bus/pci/devices/0000:03:00.0": "../../../devices/pci0000:00/0000:03:00.0"},
                        data={"nvml": nvml, "env": env})
    prof = probe(CaptureHost(root))
    # whatever came in, the result is a valid Profile that survives its JSON round trip
    from probes.profile import Profile

    assert Profile.from_dict(json.loads(json.dumps(prof.to_dict()))).to_dict() == prof.to_dict()
    assert not [w for w in prof.warnings if "probe failed" in w.message], prof.warnings


def test_unreadable_kfd_node_is_hidden_not_an_error(tmp_path):
    root = make_capture(tmp_path, files={"/sys/class/kfd/kfd/topology/nodes/1/properties": KFD_GPU})
    p = root / "fs/sys/class/kfd/kfd/topology/nodes/1/properties"
    if os.geteuid() == 0:
        # root reads anything: imitate the cgroup's EPERM through the Host instead
        host = CaptureHost(root)
        orig = host.read

        def read(path):
            if path.endswith("nodes/1/properties"):
                raise PermissionError(1, "Operation not permitted")
            return orig(path)

        host.read = read
    else:
        p.chmod(0)
        host = CaptureHost(root)
    prof = probe(host)
    assert len(prof.amd_gpus) == 1 and prof.amd_gpus[0].visible is False
    assert not [w for w in prof.warnings if w.probe == "amd_gpu" and "failed" in w.message]


@pytest.mark.parametrize("value", ["¹", "²,0", "1,¹", "١"])
def test_visible_devices_with_unicode_digits_never_fail_the_probe(tmp_path, value):
    # str.isdigit() accepts '¹', which int() refuses: a probe must not fail on such a value
    import shutil

    from conftest import machine
    from probes import probe
    from probes.host import CaptureHost

    root = tmp_path / "m"
    shutil.copytree(machine("linux-ubuntu24.04-7950x-rx7900xtx"), root, symlinks=True)
    cap = json.loads((root / "capture.json").read_text())
    cap["env"] = {"HIP_VISIBLE_DEVICES": value, "CUDA_VISIBLE_DEVICES": value}
    (root / "capture.json").write_text(json.dumps(cap))
    prof = probe(CaptureHost(str(root)))
    assert not [w for w in prof.warnings if "probe failed" in w.message], prof.warnings
    assert prof.amd_gpus


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_a_fifo_in_a_capture_is_no_file_and_never_blocks(tmp_path, cli):
    # a FIFO where /proc/cpuinfo belongs, and one as capture.json of another capture: reading either
    # would block forever; the probe takes the first as absent, the second is an input error
    import shutil

    from conftest import machine

    root = tmp_path / "m"
    shutil.copytree(machine("linux-debian12-gtx1080"), root, symlinks=True)
    os.remove(root / "fs/proc/cpuinfo")
    os.mkfifo(root / "fs/proc/cpuinfo")
    r = cli("--root", str(root), "probe", "--json")
    assert r.rc == 0 and r.json()["cpu"]["brand"] == ""
    bad = tmp_path / "b"
    bad.mkdir()
    os.mkfifo(bad / "capture.json")
    r = cli("--root", str(bad), "probe")
    assert r.rc == 5 and "capture.json: cannot read: not a regular file" in r.err
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    r = cli("--root", machine("linux-debian12-gtx1080"), "llamacpp", "--config", str(fifo))
    assert r.rc == 5 and "config.json: cannot read: not a regular file" in r.err
