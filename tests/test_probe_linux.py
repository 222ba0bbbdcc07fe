"""Linux probe facts that the fixtures' expected.json cannot say alone: warnings in words, and the
done-criteria of the probe issue through the command line."""

from conftest import machine, profile_of


def test_strix_halo_probe_json(cli):
    r = cli("--root", machine("linux-ubuntu24.04-strix-halo"), "probe", "--json")
    assert r.rc == 0
    p = r.json()
    (gpu,) = p["amd_gpus"]
    assert gpu["gfx"] == "gfx1151" and gpu["integrated"] is True
    (npu,) = p["npus"]
    assert (npu["generation"], npu["codename"], npu["driver_bound"]) == ("XDNA2", "Strix Halo", True)
    assert npu["device_node"] == "/dev/accel/accel0"


def test_7950x_reports_both_gpus_and_the_igpu_is_integrated():
    p = profile_of("linux-ubuntu24.04-7950x-rx7900xtx")
    assert [(g.gfx, g.integrated) for g in p.amd_gpus] == [("gfx1100", False), ("gfx1036", True)]


def test_krackan_npu_without_driver_is_reported_with_the_fix():
    p = profile_of("linux-ubuntu24.04-krackan-laptop-no-npu-driver")
    (npu,) = p.npus
    assert npu.generation == "XDNA2" and npu.codename == "Krackan" and not npu.driver_bound
    assert npu.device_node is None
    assert any(w.probe == "npu" and "amdxdna" in w.message and "modprobe" in w.message for w in p.warnings)


def test_container_without_kfd_reads_drm_and_maps_gc_11_0_3_to_gfx1101():
    p = profile_of("linux-container-rx7900xtx-no-kfd")
    assert p.os.container
    assert {g.gfx for g in p.amd_gpus} == {"gfx1100", "gfx1101"}
    assert all(g.source == "drm" for g in p.amd_gpus)
    assert any("KFD" in w.message for w in p.warnings)


def test_nvidia_without_driver_is_reported_with_unknown_sm():
    p = profile_of("linux-ubuntu24.04-nvidia-no-driver")
    (g,) = p.nvidia_gpus
    assert g.sm is None and g.source == "pci" and "3090" in g.name
    assert any("CUDA backends cannot be judged" in w.message for w in p.warnings)


def test_gb10_memory_falls_back_to_meminfo():
    p = profile_of("linux-dgxos7-dgx-spark-gb10")
    (g,) = p.nvidia_gpus
    assert g.sm == "sm_121" and g.memory_bytes == p.cpu.memory_bytes and g.memory_bytes > 100 << 30
    assert p.cpu.arch == "arm64"


def test_wsl_and_override_are_reported():
    assert profile_of("linux-wsl2-ubuntu24.04").os.wsl is True
    p = profile_of("linux-ubuntu22.04-rx6700xt-override")
    (g,) = p.amd_gpus
    assert (g.gfx, g.gfx_effective) == ("gfx1031", "gfx1030")
    assert any("HSA_OVERRIDE_GFX_VERSION" in w.message for w in p.warnings)


def test_probe_human_output_has_a_device_table(cli):
    r = cli("--root", machine("linux-ubuntu24.04-7950x-rx7900xtx"), "probe")
    assert r.rc == 0
    assert "gfx1100" in r.out and "gfx1036" in r.out and "integrated" in r.out and "discrete" in r.out
