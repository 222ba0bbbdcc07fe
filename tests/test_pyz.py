"""pick-backend.pyz (tools/build_pyz.py, docs/pyz.md): one file that a bare Python runs.

The tests build it as CI can, without the network: from the distributions this interpreter has
installed (`--from-installed`), which at the versions tools/pyz.lock pins is the same file as from
the pinned wheels (test_installed_build_is_the_pinned_build checks that where the wheels are at
hand).  Then they run it with `python -I -S` (no site-packages: only the standard library) against
every captured machine, beside the installed command: the same exit code, output and JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, machine, machine_names, run_cli

sys.path.insert(0, os.path.join(ROOT, "tools"))
import build_pyz  # noqa: E402

BARE = [sys.executable, "-I", "-S"]  # -I: no PYTHON* variables, no user site; -S: no site-packages


def _build(out, root=ROOT, *args):
    proc = subprocess.run([sys.executable, os.path.join(root, "tools", "build_pyz.py"), "--from-installed",
                           "--out", str(out), *args], capture_output=True, text=True, timeout=300)
    return proc


@pytest.fixture(scope="module")
def pyz(tmp_path_factory):
    d = tmp_path_factory.mktemp("pyz")
    proc = _build(d / "pick-backend.pyz")
    if proc.returncode != 0 and "is not installed" in proc.stderr:
        pytest.skip(f"a pinned distribution is not installed here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    return str(d / "pick-backend.pyz"), str(d / "cache")


def run_pyz(pyz, *args, env=None):
    path, cache = pyz
    e = {k: v for k, v in os.environ.items() if k not in ("PICK_BACKEND_ROOT", "PICK_BACKEND_CONFIG", "PICK_BACKEND_CHANNEL")}
    e.update({"COLUMNS": "200", "PICK_BACKEND_PYZ_CACHE": cache}, **(env or {}))
    return subprocess.run([*BARE, path, *args], capture_output=True, text=True, env=e, timeout=120)


COMMANDS = [("check", "llamacpp", "rocm"), ("llamacpp", "--json"), ("probe", "--json")]


@pytest.mark.parametrize("name", machine_names())
def test_the_file_answers_as_the_installed_command_on_every_machine(pyz, name):
    for cmd in COMMANDS:
        args = ["--root", machine(name), *cmd]
        got, want = run_pyz(pyz, *args), run_cli(*args)
        assert (got.returncode, got.stdout, got.stderr) == (want.rc, want.out, want.err), (name, cmd)
        if "--json" in cmd:
            json.loads(got.stdout)  # and it is JSON, not an error line


def test_the_check_exit_codes_an_installer_branches_on(pyz):
    # README "For installers": gfx950 builds are stable-only on Linux (Lemonade's matrix)
    mi355x = machine("linux-ubuntu24.04-8x-mi355x")
    assert run_pyz(pyz, "--root", mi355x, "check", "llamacpp", "rocm").returncode == 0
    r = run_pyz(pyz, "--root", mi355x, "check", "llamacpp", "rocm", "--channel", "nightly")
    assert r.returncode == 3 and "stable channel" in r.stderr
    assert run_pyz(pyz, "--root", mi355x, "check", "llamacpp", "nosuch").returncode == 2


@pytest.mark.parametrize("cmd", [("matrix",), ("guide",), ("labels",), ("status",), ("llamacpp",), ("--version",),
                                 ("install", "llamacpp", "--dry-run"), ("verify", "llamacpp"), ("recipes",)])
def test_every_other_command_works_as_installed(pyz, cmd):
    args = ["--root", machine("linux-ubuntu24.04-strix-halo"), *cmd]
    got, want = run_pyz(pyz, *args), run_cli(*args)
    assert (got.returncode, got.stdout, got.stderr) == (want.rc, want.out, want.err)


@pytest.mark.parametrize("cmd", [("models", "llamacpp"), ("plan", "llamacpp", "-m", "x.gguf"),
                                 ("bench", "llamacpp", "-m", "x.gguf")])
def test_model_commands_say_they_need_gguf_and_numpy(pyz, cmd):
    r = run_pyz(pyz, "--root", machine("linux-ubuntu24.04-strix-halo"), *cmd)
    assert r.returncode == 4, r.stderr  # README's exit codes: a missing piece, as py7zr for a .7z
    assert f"{cmd[0]} needs the gguf and numpy packages" in r.stderr and "Traceback" not in r.stderr
    j = run_pyz(pyz, "--root", machine("linux-ubuntu24.04-strix-halo"), *cmd, "--json")
    assert json.loads(j.stdout)["exit"] == 4


def test_a_cache_it_cannot_unpack_into_is_named(pyz, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run_pyz(pyz, "check", "llamacpp", "cpu", env={"PICK_BACKEND_PYZ_CACHE": str(blocker / "cache")})
    assert r.returncode == 4 and "PICK_BACKEND_PYZ_CACHE" in r.stderr and str(blocker) in r.stderr
    assert "Traceback" not in r.stderr


def test_unpacked_once_then_reused(pyz, tmp_path):
    cache = tmp_path / "cache"
    env = {"PICK_BACKEND_PYZ_CACHE": str(cache)}
    assert run_pyz(pyz, "--version", env=env).returncode == 0
    (home,) = [p for p in cache.iterdir()]  # one directory, named by the contents' hash; no leftovers
    assert (home / ".complete").is_file() and (home / "selector" / "catalogs" / "lemonade.json").is_file()
    stamp = (home / ".complete").stat().st_mtime_ns
    assert run_pyz(pyz, "--version", env=env).returncode == 0
    assert [p.name for p in cache.iterdir()] == [home.name] and (home / ".complete").stat().st_mtime_ns == stamp


def test_runs_at_once_on_an_empty_cache_all_answer(pyz, tmp_path):
    path, _ = pyz
    e = dict(os.environ, PICK_BACKEND_PYZ_CACHE=str(tmp_path / "cache"))
    procs = [subprocess.Popen([*BARE, path, "--root", machine("linux-ubuntu24.04-strix-halo"), "check", "llamacpp", "vulkan"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e) for _ in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert len(list((tmp_path / "cache").iterdir())) == 1  # one unpacked copy, no half-made ones left


def test_a_cache_another_user_can_write_is_not_used(pyz, tmp_path):
    cache = tmp_path / "open"
    cache.mkdir()
    cache.chmod(0o777)
    r = run_pyz(pyz, "--version", env={"PICK_BACKEND_PYZ_CACHE": str(cache)})
    assert r.returncode == 4 and "every user can write it" in r.stderr and not list(cache.iterdir())


def _tree_copy(dest):
    """This checkout's build inputs at another path, every file with another time."""
    for d in ("selector", "probes", "tools"):
        shutil.copytree(os.path.join(ROOT, d), dest / d, ignore=shutil.ignore_patterns("__pycache__"))
    for p in dest.rglob("*"):
        os.utime(p, (1_700_000_000, 1_700_000_000))


def test_built_twice_it_is_the_same_file(pyz, tmp_path):
    _tree_copy(tmp_path / "elsewhere")
    proc = _build(tmp_path / "again.pyz", str(tmp_path / "elsewhere"))
    assert proc.returncode == 0, proc.stderr
    with open(pyz[0], "rb") as a, open(tmp_path / "again.pyz", "rb") as b:
        first, second = a.read(), b.read()
    assert hashlib.sha256(first).hexdigest() == hashlib.sha256(second).hexdigest()
    assert proc.stdout.split()[0] == hashlib.sha256(second).hexdigest()  # the SHA-256 it prints is the file's


# nvidia-ml-py's wheel has no licence file: its BSD licence is the head of pynvml.py itself
LICENCE_IN_SOURCE = {"nvidia-ml-py": "pynvml.py"}


def test_licences_travel_with_each_distribution(pyz):
    import zipfile

    with zipfile.ZipFile(pyz[0]) as z:
        names = z.namelist()
        inner = zipfile.ZipFile(__import__("io").BytesIO(z.read("payload.zip")))
    for pin in build_pyz.read_lock():
        meta = [n for n in names if re.match(rf"{build_pyz.norm(pin.name)}-[^/]+\.dist-info/METADATA$", n, re.I)]
        assert meta, pin.name
        licence = [n for n in names if n.startswith(meta[0].split("/")[0] + "/") and build_pyz.LICENCE.search(n)]
        if pin.name in LICENCE_IN_SOURCE:
            assert "Redistribution and use" in inner.read(LICENCE_IN_SOURCE[pin.name]).decode()[:2000]
        else:
            assert licence, f"{pin.name}: no licence file in the pyz"


# what pick-backend needs that is not pure Python, and what the pyz does instead (docs/pyz.md)
NOT_CARRIED = {"gguf": "models/plan/bench say they need it", "pyamdgpuinfo": "the probe reads sysfs",
               "py7zr": ".7z installs say they need it"}


def test_the_lock_carries_every_pure_dependency():
    """A dependency added to pyproject.toml and not to tools/pyz.lock would make the one file fail
    where the installed command works."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    deps = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)[1]
    names = {build_pyz.norm(m) for m in re.findall(r'^\s*"([A-Za-z0-9_.-]+)', deps, re.M)}
    pinned = {build_pyz.norm(p.name) for p in build_pyz.read_lock()}
    assert names - pinned == {build_pyz.norm(n) for n in NOT_CARRIED}


def test_installed_build_is_the_pinned_build(pyz, tmp_path):
    """At the locked versions, the files taken from the installed distributions are the wheels'."""
    from importlib import metadata

    pins = build_pyz.read_lock()
    wheels = os.environ.get("PICK_BACKEND_WHEELS") or build_pyz.default_wheels()
    have = {p.name: build_pyz._wheel_for(p, wheels) for p in pins}
    if not all(have.values()):
        pytest.skip(f"the pinned wheels are not in {wheels} (python tools/build_pyz.py downloads them)")
    off = [p.name for p in pins if metadata.version(p.name) != p.version]
    if off:
        pytest.skip(f"installed versions differ from tools/pyz.lock: {', '.join(off)}")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "build_pyz.py"), "--wheels", wheels,
                           "--out", str(tmp_path / "pinned.pyz")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "pinned.pyz").read_bytes() == open(pyz[0], "rb").read()


@pytest.mark.parametrize("path,kept", [
    ("charset_normalizer/md.py", True), ("charset_normalizer/md.cpython-311-x86_64-linux-gnu.so", False),
    ("charset_normalizer/__pycache__/md.cpython-311.pyc", False), ("../../bin/normalizer", False),
    ("cn-3.5.3.dist-info/METADATA", True), ("cn-3.5.3.dist-info/licenses/LICENSE", True),
    ("cn-3.5.3.dist-info/LICENSE", True), ("cn-3.5.3.dist-info/RECORD", False),
    ("cn-3.5.3.dist-info/INSTALLER", False), ("cn-3.5.3.dist-info/WHEEL", False),
    ("cn-3.5.3.dist-info/direct_url.json", False), ("cn-3.5.3.data/scripts/x", False)])
def test_what_of_an_installed_distribution_goes_in(path, kept):
    """What pip adds to a wheel's files when it installs them (and a compiled wheel's extensions)
    stays out, so that the file built from an installed distribution is the pure wheel's."""
    assert build_pyz.keep(path, "cn-3.5.3.dist-info") is kept
