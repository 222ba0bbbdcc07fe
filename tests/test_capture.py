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
