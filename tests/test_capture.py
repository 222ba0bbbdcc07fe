"""`pick-backend capture DIR` then `--root DIR` gives the same Profile as probing live."""

import json
import os


def test_capture_replays_to_the_live_profile(tmp_path, cli):
    live = cli("probe", "--json")
    assert live.rc == 0, live.err
    dest = tmp_path / "me"
    r = cli("capture", str(dest))
    assert r.rc == 0, r.err
    assert (dest / "capture.json").is_file()
    data = json.loads((dest / "capture.json").read_text())
    assert data["format"] == 1 and data["platform"]["system"]
    if data["platform"]["system"] == "Linux":  # device nodes: their access, never their contents
        assert isinstance(data["dev"], dict) and set(data["dev"].values()) <= {"rw", "r", "none"}
    replay = cli("--root", str(dest), "probe", "--json")
    assert replay.rc == 0, replay.err
    assert replay.json() == live.json()


def test_capture_keeps_links_relative(tmp_path, cli):
    dest = tmp_path / "me"
    assert cli("capture", str(dest)).rc == 0
    for base, dirs, files in os.walk(dest / "fs"):
        for name in dirs + files:
            p = os.path.join(base, name)
            if os.path.islink(p):
                assert not os.readlink(p).startswith("/"), p


def test_probe_here_says_what_this_machine_is(cli):
    r = cli("probe", "--json")
    assert r.rc == 0
    prof = r.json()
    assert set(prof) >= {"schema_version", "os", "cpu", "amd_gpus", "nvidia_gpus", "npus", "metal", "vulkan",
                         "executables", "warnings"}
    assert prof["os"]["name"] == "linux" and prof["cpu"]["arch"] in ("x86_64", "arm64")
    if not prof["nvidia_gpus"]:
        assert any(w["probe"] == "nvidia" for w in prof["warnings"])
    human = cli("probe")
    assert human.rc == 0 and prof["cpu"]["arch"] in human.out


def test_capture_never_deletes_a_users_files_and_replaces_only_an_earlier_capture(tmp_path, cli):
    dest = tmp_path / "notes"
    (dest / "fs").mkdir(parents=True)
    (dest / "fs" / "my-notes.txt").write_text("mine")
    (dest / "todo.txt").write_text("mine too")
    r = cli("capture", str(dest))
    assert r.rc == 2 and "is not empty" in r.err and "--force" in r.err
    assert (dest / "fs" / "my-notes.txt").read_text() == "mine"
    r = cli("capture", str(dest), "--force")  # a file that is no part of a capture: never deleted
    assert r.rc == 2 and "holds files that are not a capture" in r.err
    assert (dest / "fs" / "my-notes.txt").read_text() == "mine" and (dest / "todo.txt").exists()
    # an earlier capture is replaced with --force, and nothing is left beside it
    cap = tmp_path / "cap"
    assert cli("capture", str(cap)).rc == 0
    (cap / "fs" / "stale-file").write_text("from an earlier capture")
    assert cli("capture", str(cap)).rc == 2
    r = cli("capture", str(cap), "--force")
    assert r.rc == 0, r.err
    assert not (cap / "fs" / "stale-file").exists() and (cap / "capture.json").is_file()
    assert sorted(os.listdir(tmp_path)) == ["cap", "notes"]  # no staging directory left
    # an empty directory is a new one
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli("capture", str(empty)).rc == 0 and (empty / "capture.json").is_file()


def test_a_failed_capture_leaves_nothing_behind(tmp_path, monkeypatch):
    from probes import capture

    def boom(*a, **k):
        raise OSError(28, "No space left on device", "capture.json.tmp")

    monkeypatch.setattr(capture, "_write", boom)
    import pytest

    with pytest.raises(OSError):
        capture.write_capture(str(tmp_path / "new"))
    assert os.listdir(tmp_path) == []
