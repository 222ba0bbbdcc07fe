"""What counts as installed, and where the cache is (selector/install/states.py; docs/DESIGN.md "Install cache",
lemonade-behaviour.md "update_required").  Lemonade's own installs carry no install.json; ours do."""

import json
import os

from conftest import run_cli, run_tty
from selector.install import states


def _write(path, text=""):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _status_cache(env, *args):
    r = run_cli("status", "--json", *args, env=env)
    assert r.rc == 0, r.err
    return r.json()["cache"]


def test_cache_directory_precedence(tmp_path):
    # --cache-dir, else LEMONADE_CACHE_DIR, else $XDG_CACHE_HOME/lemonade, else ~/.cache/lemonade (as Lemonade)
    home, xdg, lem, flag = (str(tmp_path / n) for n in ("home", "xdg", "lem", "flag"))
    env = {"HOME": home, "XDG_CACHE_HOME": xdg, "LEMONADE_CACHE_DIR": lem}
    assert _status_cache(env, "--cache-dir", flag) == flag
    assert _status_cache(env) == lem
    assert _status_cache(dict(env, LEMONADE_CACHE_DIR="")) == os.path.join(xdg, "lemonade")
    # USERPROFILE is Windows' home: elsewhere it is some other program's variable, not a cache location
    assert _status_cache(dict(env, LEMONADE_CACHE_DIR="", XDG_CACHE_HOME="", USERPROFILE=str(tmp_path / "w"))) \
        == os.path.join(home, ".cache", "lemonade")


def test_windows_cache_is_under_userprofile(monkeypatch):
    monkeypatch.setattr(os, "name", "nt")
    assert states.cache_root(env={"USERPROFILE": "C:\\Users\\ana"}) == os.path.join("C:\\Users\\ana", ".cache", "lemonade")
    # Lemonade's variable still wins there
    assert states.cache_root(env={"USERPROFILE": "C:\\Users\\ana", "LEMONADE_CACHE_DIR": "D:\\lc"}) == "D:\\lc"


def _binary_of(recipe):
    return {"llamacpp": "llama-server", "whispercpp": "whisper-server"}.get(recipe)


def test_lemonade_install_counts_only_with_its_binary(tmp_path):
    bin_dir = tmp_path / "bin" / "llamacpp"
    # Lemonade's own install: version.txt and the binary somewhere below, no install.json
    _write(str(bin_dir / "vulkan" / "version.txt"), "b8766\n")
    _write(str(bin_dir / "vulkan" / "build" / "bin" / "llama-server"))
    # a Windows build (the cache shared with a Windows install): the .exe is the binary
    _write(str(bin_dir / "cpu" / "version.txt"), "b8766\n")
    _write(str(bin_dir / "cpu" / "llama-server.exe"))
    # version.txt alone is not an install, and does not hide the next directory
    _write(str(bin_dir / "rocm" / "version.txt"), "b8766\n")
    _write(str(bin_dir / "rocm" / "README.md"))
    _write(str(bin_dir / "zzz" / "version.txt"), "b1\n")
    _write(str(bin_dir / "zzz" / "llama-server"))
    got = states.installed(str(tmp_path), None, _binary_of)
    assert got == {"llamacpp": {"vulkan": "b8766", "cpu": "b8766", "zzz": "b1"}}
    # without a way to name the binary, version.txt is taken at its word
    assert states.installed(str(tmp_path), None, None)["llamacpp"]["rocm"] == "b8766"


def test_work_directories_are_not_backends(tmp_path):
    bin_dir = tmp_path / "bin" / "llamacpp"
    for name in ("vulkan", ".hidden", "vulkan.staging", "vulkan.old", "vulkan.lock", "vulkan.partial",
                 "vulkan.trash", "vulkan.staging.unwrap"):
        _write(str(bin_dir / name / "version.txt"), "b8766\n")
        _write(str(bin_dir / name / "llama-server"))
    _write(str(bin_dir / "notadir"), "b8766\n")
    assert states.installed(str(tmp_path), None, _binary_of) == {"llamacpp": {"vulkan": "b8766"}}


def test_only_the_asked_recipes_are_read(tmp_path):
    for r, b in (("llamacpp", "llama-server"), ("whispercpp", "whisper-server")):
        _write(str(tmp_path / "bin" / r / "cpu" / "version.txt"), "v1\n")
        _write(str(tmp_path / "bin" / r / "cpu" / b))
    assert set(states.installed(str(tmp_path), {"whispercpp"}, _binary_of)) == {"whispercpp"}
    assert set(states.installed(str(tmp_path), None, _binary_of)) == {"llamacpp", "whispercpp"}
    assert states.installed(str(tmp_path / "nothing"), None, _binary_of) == {}


def _ours(d, record, version="b8766"):
    _write(os.path.join(d, "version.txt"), version + "\n")
    _write(os.path.join(d, "install.json"), json.dumps(record))


def test_our_install_is_complete_only_with_what_its_record_names(tmp_path):
    d = str(tmp_path / "bin" / "llamacpp" / "rocm-stable")
    rt = str(tmp_path / "bin" / "therock" / "gfx1151")
    _ours(d, {"binary": "llama-server", "expect": "lib", "runtime": "therock/gfx1151",
              "runtime_version": "7.12.0", "runtime_expect": "lib/libamdhip64.so"})
    _write(os.path.join(d, "llama-server"))
    _write(os.path.join(d, "lib", "libggml.so"))
    _write(os.path.join(rt, "version.txt"), "7.12.0\n")
    _write(os.path.join(rt, "lib", "libamdhip64.so"))
    assert states.installed(str(tmp_path), {"llamacpp"}, _binary_of) == {"llamacpp": {"rocm-stable": "b8766"}}
    assert states.complete(d)

    os.remove(os.path.join(rt, "lib", "libamdhip64.so"))  # the runtime lost its library
    assert not states.complete(d)
    assert states.installed(str(tmp_path), {"llamacpp"}, _binary_of) == {"llamacpp": {"rocm-stable": None}}
    _write(os.path.join(rt, "lib", "libamdhip64.so"))
    _write(os.path.join(rt, "version.txt"), "7.11.0\n")  # another runtime version than the one built against
    assert not states.complete(d)
    _write(os.path.join(rt, "version.txt"), "7.12.0\n")
    assert states.complete(d)
    os.remove(os.path.join(d, "llama-server"))  # the binary install.json names is gone
    assert not states.complete(d)


def test_expect_path_and_record_fields(tmp_path):
    d = str(tmp_path / "x")
    _ours(d, {"binary": "bin/llama-server", "expect": "share/models"})
    _write(os.path.join(d, "bin", "llama-server"))
    assert not states.complete(d)  # the record's expect path is missing
    os.makedirs(os.path.join(d, "share", "models"))
    assert states.complete(d)
    # an expect given by the caller is checked in place of the record's
    assert not states.complete(d, expect="lib")
    # a binary that is a link, or a path out of the tree, is not a binary
    os.remove(os.path.join(d, "bin", "llama-server"))
    _write(str(tmp_path / "outside"))
    os.symlink(str(tmp_path / "outside"), os.path.join(d, "bin", "llama-server"))
    assert not states.complete(d)
    for bad in ("../outside", "/etc/passwd", "", 7):
        assert not states.complete(d, record={"binary": bad})
    # an absolute binary path is refused even where the same path exists inside the tree
    _write(os.path.join(d, "bin", "real"))
    assert states.complete(d, record={"binary": "bin/real"})
    assert not states.complete(d, record={"binary": "/bin/real"})


def test_a_runtime_path_that_climbs_out_of_the_cache_is_refused(tmp_path):
    d = str(tmp_path / "cache" / "bin" / "llamacpp" / "rocm-stable")
    _ours(d, {})
    _write(os.path.join(d, "llama-server"))
    # a matching version.txt sits where the record points, but outside <cache>/bin
    _write(str(tmp_path / "cache" / "elsewhere" / "version.txt"), "1\n")
    _write(str(tmp_path / "cache" / "bin" / "therock" / "x" / "version.txt"), "1\n")
    assert states.complete(d, record={"binary": "llama-server", "runtime": "therock/x", "runtime_version": "1"})
    assert not states.complete(d, record={"binary": "llama-server", "runtime": "../elsewhere", "runtime_version": "1"})
    assert not states.complete(d, record={"binary": "llama-server", "runtime": "therock/../../elsewhere",
                                          "runtime_version": "1"})


def test_record_without_binary_falls_back_to_a_search(tmp_path):
    d = str(tmp_path / "y")
    _ours(d, {"version": "b1"})
    assert not states.complete(d, binary="llama-server")  # a record but no binary: install.json must name it
    assert states.complete(d)  # nothing to look for
    d2 = str(tmp_path / "z")
    os.makedirs(d2)
    assert not states.complete(d2, binary="llama-server")
    _write(os.path.join(d2, "deep", "llama-server.exe"))
    assert states.complete(d2, binary="llama-server")


def test_unreadable_version_and_record(tmp_path):
    d = str(tmp_path / "v")
    _write(os.path.join(d, "version.txt"), "\n")
    _write(os.path.join(d, "install.json"), "[1, 2]")
    assert states.read_version(d) is None
    assert states.read_record(d) == {}
    _write(os.path.join(d, "version.txt"), "b9 \nsecond line\n")
    _write(os.path.join(d, "install.json"), "{not json")
    assert states.read_version(d) == "b9"
    assert states.read_record(d) == {}


def test_status_lists_the_therock_runtimes_and_who_needs_them(tmp_path):
    cache = tmp_path / "c"
    rt = str(cache / "bin" / "therock" / "gfx1151-7.14.0")
    _ours(rt, {"kind": "runtime", "expect": "lib"}, version="7.14.0")
    _write(os.path.join(rt, "lib", "libamdhip64.so"))
    d = str(cache / "bin" / "llamacpp" / "rocm-stable")
    _ours(d, {"binary": "llama-server", "runtime": "therock/gfx1151-7.14.0", "runtime_version": "7.14.0",
              "runtime_expect": "lib"})
    _write(os.path.join(d, "llama-server"))
    # Lemonade's own runtime (no install.json), a half-made one, and a crash's leftover that is not a runtime
    _write(str(cache / "bin" / "therock" / "gfx1100-7.14.0" / "version.txt"), "7.14.0\n")
    os.makedirs(cache / "bin" / "therock" / "gfx1201-7.14.0")
    os.makedirs(cache / "bin" / "therock" / "gfx1151-7.14.0.staging")
    os.makedirs(cache / "bin" / "therock" / ".hidden")
    _write(str(cache / "bin" / "therock" / "notes.txt"), "a file, not a runtime")
    # a runtime whose install.json cannot be read is not taken for a complete one
    _write(str(cache / "bin" / "therock" / "gfx942-7.14.0" / "version.txt"), "7.14.0\n")
    _write(str(cache / "bin" / "therock" / "gfx942-7.14.0" / "install.json"), "[1, 2")
    # a backend record whose runtime is not a name is no user of anything (and no crash)
    odd = str(cache / "bin" / "llamacpp" / "rocm-nightly")
    _ours(odd, {"binary": "llama-server", "runtime": ["therock/gfx1151-7.14.0"]})
    _write(os.path.join(odd, "llama-server"))
    r = run_cli("status", "--json", "--cache-dir", str(cache))
    assert r.rc == 0, r.err
    got = {x["dir"]: x for x in r.json()["runtimes"]}
    assert set(got) == {"therock/gfx1100-7.14.0", "therock/gfx1151-7.14.0", "therock/gfx1201-7.14.0",
                        "therock/gfx942-7.14.0"}
    assert got["therock/gfx942-7.14.0"]["complete"] is False
    assert got["therock/gfx1151-7.14.0"] == {"dir": "therock/gfx1151-7.14.0", "version": "7.14.0", "complete": True,
                                             "path": rt, "used_by": ["llamacpp/rocm-stable"]}
    assert got["therock/gfx1100-7.14.0"]["complete"] is True and got["therock/gfx1100-7.14.0"]["used_by"] == []
    assert got["therock/gfx1201-7.14.0"]["complete"] is False and got["therock/gfx1201-7.14.0"]["version"] is None
    assert [b["dir"] for b in r.json()["backends"]] == ["rocm-nightly", "rocm-stable"]  # therock is not a recipe
    human = run_cli("status", "--cache-dir", str(cache), env={"COLUMNS": "120"})
    assert human.rc == 0, human.err
    line = {ln.split()[0]: ln for ln in human.out.splitlines() if ln.startswith("therock/")}
    assert line["therock/gfx1151-7.14.0"].split()[1:] == ["7.14.0", "llamacpp/rocm-stable"]
    assert line["therock/gfx1100-7.14.0"].split()[1:] == ["7.14.0", "-"]
    assert line["therock/gfx1201-7.14.0"].split()[1:3] == ["?", "-"] and "(incomplete" in line["therock/gfx1201-7.14.0"]
    os.remove(os.path.join(rt, "lib", "libamdhip64.so"))
    os.rmdir(os.path.join(rt, "lib"))
    r = run_cli("status", "--json", "--cache-dir", str(cache))
    got = {x["dir"]: x for x in r.json()["runtimes"]}
    assert got["therock/gfx1151-7.14.0"]["complete"] is False
    assert r.json()["backends"][0]["state"] == "update_required"  # its runtime lost lib/: install repairs it


def test_human_status_fits_80_columns_and_names_the_cache_once(tmp_path):
    cache = tmp_path / "a-rather-long-cache-directory-name-for-a-shared-machine" / "lemonade"
    for dirname in ("vulkan", "rocm-stable", "cpu"):
        d = str(cache / "bin" / "llamacpp" / dirname)
        _write(os.path.join(d, "version.txt"), "b1234-some-long-build-suffix\n")
        _write(os.path.join(d, "llama-server"))
    rt = str(cache / "bin" / "therock" / "gfx1151-7.14.0")
    _write(os.path.join(rt, "version.txt"), "7.14.0\n")
    r = run_tty("status", "--cache-dir", str(cache), columns=80)
    assert r.rc == 0, r.err
    lines = r.out.splitlines()
    assert all(len(line) <= 80 for line in lines), r.out
    assert lines[0].startswith("cache")  # the cache once, at the top; rows do not repeat their paths
    assert not any("bin/llamacpp" in line for line in lines), r.out
    for dirname in ("vulkan", "rocm-stable", "cpu"):
        assert any(dirname in line and "update_required" in line for line in lines), r.out
    assert any("therock/gfx1151-7.14.0" in line and "7.14.0" in line for line in lines)
    empty = run_cli("status", "--cache-dir", str(tmp_path / "empty"))
    assert empty.rc == 0 and empty.out.strip() == f"nothing installed in {tmp_path / 'empty'}"


def test_names_and_versions_are_shown_as_they_are_at_any_width(tmp_path):
    # a version.txt or a directory name with brackets is text, never rich markup (it was an internal error)
    cache = tmp_path / "c"
    d = str(cache / "bin" / "llamacpp" / "vulkan")
    _write(os.path.join(d, "version.txt"), "b1[/]\n")
    _write(os.path.join(d, "llama-server"))
    _write(str(cache / "bin" / "therock" / "gfx1151-[red]x[" / "version.txt"), "[bold]7\n")
    for columns in ("200", "80", "30"):
        r = run_tty("status", "--cache-dir", str(cache), columns=int(columns))
        assert r.rc == 0 and "Traceback" not in r.out and "internal error" not in r.out, r.out
        words = r.out.split()
        assert "b1[/]" in words and "therock/gfx1151-[red]x[" in words and "[bold]7" in words, r.out
        assert "update_required" in words  # whole: never cut in two
        assert all(len(line) <= int(columns) for line in r.out.splitlines() if "/" not in line), r.out
