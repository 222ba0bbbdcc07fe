"""Row conditions (``requires`` in a catalog row, docs/catalogs.md): each one holds or gives the
reason the user reads in the verdict, and the `system` row of llama.cpp is gated on a
`llama-server` on PATH.  Machines are the captured fixtures with one fact changed at a time."""

import json

import pytest

from conftest import machine, profile_of, run_cli
from selector import catalog, engine
from selector.requires import at_least, is_version, version_tuple

RTX4090 = "linux-ubuntu24.04-rtx4090"  # NVIDIA driver 570.86.15, x86_64
RK3588 = "linux-ubuntu22.04-rk3588-orangepi5plus"  # board "Rockchip RK3588", glibc 2.35, arm64
M3MAX = "macos14-m3max"  # macOS 14.5
CPU_VM = "linux-debian12-x86_64-cpu-only"


def verdict(profile, requires, devices=None):
    """The verdict of a one-row recipe whose row has these conditions."""
    row = {"backend": "b", "os": ["linux", "macos", "windows"], "devices": devices or {"cpu": []}}
    if requires is not None:
        row["requires"] = requires
    cat = catalog.parse({"schema_version": 1, "name": "t", "recipes": {"r": {"rows": [row]}}})
    (v,) = engine.decide(profile, cat, "r").backends
    return v


def ok(v):
    return v.supported and not v.reason


# -- versions -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text,want", [
    ("575.51.03", (575, 51, 3)), ("2.39", (2, 39)), ("580", (580,)), (" 14.5 ", (14, 5)),
    ("2.39-0ubuntu8", (2, 39)), ("v580", None), ("", None), (None, None), (580, None),
])
def test_version_tuple(text, want):
    assert version_tuple(text) == want


@pytest.mark.parametrize("have,need,want", [
    ("575.51.03", "575", True), ("570.86.15", "580", False), ("2.39", "2.4", True), ("2.35", "2.39", False),
    ("575", "575.1", False), ("575.0", "575", True), ("575", "575.0.0", True), ("580", "580", True),
    (None, "580", None), ("unknown", "580", None), ("580", "x", None),
])
def test_at_least_compares_number_by_number(have, need, want):
    assert at_least(have, need) is want


@pytest.mark.parametrize("text,want", [("580", True), ("2.39", True), ("1.2.3.4", True), ("2.", False),
                                       (".5", False), ("v580", False), ("580 ", False), (580, False), (None, False)])
def test_is_version_is_what_the_catalog_accepts(text, want):
    assert is_version(text) is want


# -- each condition, as the verdict says it ------------------------------------------------------


def test_a_row_without_conditions_is_supported():
    assert ok(verdict(profile_of(CPU_VM), None))
    assert ok(verdict(profile_of(CPU_VM), {}))


def test_executable_gate():
    p = profile_of(CPU_VM)
    v = verdict(p, {"executable": "llama-server"})
    assert not v.supported and v.reason == "llama-server is not on PATH"
    p.executables = {"llama-server": "/usr/local/bin/llama-server"}
    assert ok(verdict(p, {"executable": "llama-server"}))
    assert not verdict(p, {"executable": "whisper-server"}).supported


@pytest.mark.parametrize("arch,want", [
    (["arm64"], "the image is built for arm64 only (found x86_64)"),
    (["arm64", "riscv64"], "the image is built for arm64 or riscv64 only (found x86_64)"),
    (["arm64", "ppc64le", "riscv64"], "the image is built for arm64, ppc64le or riscv64 only (found x86_64)"),
    (["arm64", "x86_64"], ""),
])
def test_arch_gate(arch, want):
    v = verdict(profile_of(CPU_VM), {"arch": arch})
    assert v.supported is (want == "") and v.reason == want


@pytest.mark.parametrize("need,want", [
    ("580", "needs NVIDIA driver 580 or newer (found 570.86.15)"),
    ("570.86.16", "needs NVIDIA driver 570.86.16 or newer (found 570.86.15)"),
    ("570.86.15", ""), ("570", ""), ("575", "needs NVIDIA driver 575 or newer (found 570.86.15)"),
])
def test_nvidia_driver_gate(need, want):
    v = verdict(profile_of(RTX4090), {"nvidia_driver_min": need}, {"nvidia_gpu": []})
    assert v.supported is (want == "") and v.reason == want


def test_nvidia_driver_gate_without_a_known_driver_says_unknown():
    v = verdict(profile_of(CPU_VM), {"nvidia_driver_min": "580"})
    assert not v.supported and v.reason == "needs NVIDIA driver 580 or newer (NVIDIA driver version unknown)"


def test_glibc_gate():
    p = profile_of(RK3588)
    assert p.os.glibc == "2.35"
    v = verdict(p, {"glibc_min": "2.39"})
    assert not v.supported and v.reason == "needs glibc 2.39 or newer (found 2.35)"
    assert ok(verdict(p, {"glibc_min": "2.35"}))
    assert ok(verdict(p, {"glibc_min": "2.4"}))  # 35 > 4: numbers, not text
    p.os.glibc = None
    v = verdict(p, {"glibc_min": "2.17"})
    assert not v.supported and v.reason == "needs glibc 2.17 or newer (glibc version unknown)"


def test_macos_gate():
    p = profile_of(M3MAX)
    v = verdict(p, {"macos_min": "15"})
    assert not v.supported and v.reason == "needs macOS 15 or newer (found 14.5)"
    assert ok(verdict(p, {"macos_min": "14"}))
    # a Linux kernel version is not a macOS version
    v = verdict(profile_of(CPU_VM), {"macos_min": "6"})
    assert not v.supported and v.reason == "needs macOS 6 or newer (macOS version unknown)"


def test_board_gate_matches_tokens_case_insensitively():
    p = profile_of(RK3588)  # "Rockchip RK3588"
    assert ok(verdict(p, {"boards": ["rk3588"]}))
    assert ok(verdict(p, {"boards": ["RK3576", "RK3588"]}))
    v = verdict(p, {"boards": ["rk3576", "rk3562"]})
    assert not v.supported and v.reason == "needs a rk3576 or rk3562 board (found Rockchip RK3588)"
    p.board = "Rockchip RK3588S"  # a different SoC: tokens, not substrings
    assert not verdict(p, {"boards": ["rk3588"]}).supported
    v = verdict(profile_of(CPU_VM), {"boards": ["rk3588"]})
    assert not v.supported and v.reason == "needs a rk3588 board (no such board found)"


def test_first_failing_condition_is_the_reason_and_all_must_hold():
    p = profile_of(RK3588)  # arm64, glibc 2.35, no llama-server
    req = {"executable": "llama-server", "arch": ["x86_64"], "glibc_min": "2.39", "boards": ["rk3576"]}
    # the architecture is a platform fact, judged first (like the OS)
    assert verdict(p, req).reason == "the image is built for x86_64 only (found arm64)"
    req["arch"] = ["arm64"]
    assert verdict(p, req).reason == "llama-server is not on PATH"
    p.executables = {"llama-server": "/usr/bin/llama-server"}
    assert verdict(p, req).reason == "needs glibc 2.39 or newer (found 2.35)"
    req["glibc_min"] = "2.35"
    assert verdict(p, req).reason == "needs a rk3576 board (found Rockchip RK3588)"
    req["boards"] = ["rk3588"]
    assert ok(verdict(p, req))


def test_check_alone_reports_the_arch_too():
    """requires.check is the catalog's whole condition list, usable without the engine's own
    platform pass: the architecture is among its conditions."""
    from selector import requires

    p = profile_of(RK3588)
    p.executables = {"llama-server": "/usr/bin/llama-server"}
    row = catalog.parse({"schema_version": 1, "name": "t", "recipes": {"r": {"rows": [
        {"backend": "b", "os": ["linux"], "devices": {"cpu": []},
         "requires": {"executable": "llama-server", "arch": ["x86_64"]}}]}}}).recipes["r"].rows[0]
    assert requires.check(engine.Machine(p), row) == "the image is built for x86_64 only (found arm64)"
    p.cpu.arch = "x86_64"
    assert requires.check(engine.Machine(p), row) == ""
    bare = catalog.parse({"schema_version": 1, "name": "t", "recipes": {"r": {"rows": [
        {"backend": "b", "os": ["linux"], "devices": {"cpu": []}}]}}}).recipes["r"].rows[0]
    assert requires.check(engine.Machine(p), bare) == ""


# -- the `system` row through the CLI -------------------------------------------------------------


def _profile_file(tmp_path, name, executables):
    r = run_cli("--root", machine(name), "probe", "--json")
    assert r.rc == 0
    data = r.json()
    data["executables"] = executables
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(data))
    return str(path)


def _llamacpp(profile_path, *args):
    r = run_cli("--profile", profile_path, "llamacpp", "--json", *args)
    assert r.rc == 0, r.err
    rec = r.json()["recipes"]["llamacpp"]
    return rec, {v["name"]: v for v in rec["backends"]}


def test_system_llama_server_is_used_only_when_on_path_and_preferred(tmp_path):
    without = _profile_file(tmp_path, CPU_VM, {})
    rec, vs = _llamacpp(without, "--prefer-system")
    assert vs["system"]["supported"] is False and "llama-server is not on PATH" in vs["system"]["reason"]
    assert rec["backend"] != "system"

    (tmp_path / "w").mkdir()
    with_exe = _profile_file(tmp_path / "w", CPU_VM, {"llama-server": "/usr/local/bin/llama-server"})
    rec, vs = _llamacpp(with_exe, "--prefer-system")
    assert vs["system"]["supported"] is True
    assert rec["backend"] == "system"
    rec, vs = _llamacpp(with_exe, "--no-prefer-system")
    assert vs["system"]["supported"] is True and rec["backend"] != "system"
