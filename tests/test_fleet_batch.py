"""Many saved Profiles in one process: `pick --profile DIR|FILE.jsonl|- --json`, one JSON line each,
equal to what the single-profile command says about each machine."""

import json

import pytest

from conftest import machine

MACHINES = ["linux-ubuntu24.04-strix-halo", "linux-ubuntu24.04-rtx4090", "linux-debian12-x86_64-cpu-only"]


def _profiles(cli):
    return {name: cli("--root", machine(name), "probe", "--json").json() for name in MACHINES}


def test_directory_of_profiles(cli, tmp_path):
    profs = _profiles(cli)
    for name, p in profs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(p))
    r = cli("pick", "llamacpp", "--json", "--profile", str(tmp_path))
    assert r.rc == 0, r.err
    lines = [json.loads(x) for x in r.out.splitlines()]
    assert [d["name"] for d in lines] == sorted(MACHINES)
    for d in lines:
        single = cli("--root", machine(d["name"]), "llamacpp", "--json").json()
        assert d["recipes"] == single["recipes"]


def test_json_lines_stream_with_names_and_stdin(cli, tmp_path):
    profs = _profiles(cli)
    text = "".join(json.dumps(dict(p, name=f"node-{i}")) + "\n" for i, p in enumerate(profs.values()))
    path = tmp_path / "fleet.jsonl"
    path.write_text(text)
    a = cli("pick", "--all", "--allow-missing", "--json", "--profile", str(path))
    b = cli("pick", "--all", "--allow-missing", "--json", "--profile", "-", input=text)
    assert a.rc == 0 and b.rc == 0
    assert a.out == b.out
    lines = [json.loads(x) for x in a.out.splitlines()]
    assert [d["name"] for d in lines] == ["node-0", "node-1", "node-2"]
    assert lines[0]["recipes"]["flm"]["backend"] == "npu"  # Strix Halo
    assert lines[1]["recipes"]["llamacpp"]["backend"] == "cuda"  # RTX 4090


def test_a_bad_line_is_reported_on_its_line_and_exits_5(cli, tmp_path):
    good = _profiles(cli)[MACHINES[0]]
    path = tmp_path / "fleet.jsonl"
    path.write_text(json.dumps(good) + "\n{broken\n" + json.dumps({"schema_version": 1, "npus": 3}) + "\n")
    r = cli("pick", "llamacpp", "--json", "--profile", str(path))
    assert r.rc == 5 and "Traceback" not in r.err
    lines = [json.loads(x) for x in r.out.splitlines()]
    assert "recipes" in lines[0]
    assert "fleet.jsonl:2" in lines[1]["error"] and "not valid JSON" in lines[1]["error"]
    assert "npus" in lines[2]["error"]


def test_no_backend_in_a_batch_exits_3(cli, tmp_path):
    p = _profiles(cli)["linux-debian12-x86_64-cpu-only"]
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(p) + "\n")
    r = cli("pick", "flm", "--json", "--profile", str(path))
    assert r.rc == 3
    assert json.loads(r.out)["recipes"]["flm"]["backend"] is None


def test_localai_own_choice_is_in_every_line(cli, tmp_path):
    profs = _profiles(cli)
    for name, p in profs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(p))
    r = cli("--catalog", "localai", "pick", "--all", "--allow-missing", "--json", "--profile", str(tmp_path))
    assert r.rc == 0, r.err
    for d in (json.loads(x) for x in r.out.splitlines()):
        single = cli("--root", machine(d["name"]), "--catalog", "localai", "pick", "--all", "--allow-missing",
                     "--json").json()
        assert d["localai"] == single["localai"]  # the capability LocalAI would detect there, and why
        assert d["recipes"] == single["recipes"]  # each backend's own-choice entry and the guide's warnings
        assert d.pop("name") and d == single


def test_a_capture_directory_given_as_profiles_says_use_root(cli):
    from conftest import machine

    root = machine("linux-ubuntu24.04-strix-halo")
    r = cli("--profile", root, "llamacpp")
    assert r.rc == 5 and "is a capture directory (it has capture.json), not saved profiles: replay it with --root" in r.err


@pytest.mark.parametrize("patch,field,words", [
    (lambda p: p["amd_gpus"][0].update(gfx="banana"), "amd_gpus[0].gfx", "must be a gfx target (gfx1100, gfx90a) or null, found 'banana'"),
    (lambda p: p["nvidia_gpus"].append({"index": 0, "name": "x", "sm": "sm_x"}), "nvidia_gpus[0].sm", "must be a CUDA target"),
    (lambda p: p.update(executables={"llama-server": 3}), "executables",
     "must be an object of strings, found an object whose entry 'llama-server' is int"),
    (lambda p: p["amd_gpus"][0].update(vram_bytes="big"), "amd_gpus[0].vram_bytes", "must be an integer or null, found str 'big'"),
    (lambda p: p["amd_gpus"][0].update(vram_bytes=-5), "amd_gpus[0].vram_bytes", "must not be negative, found -5"),
    (lambda p: p["cpu"].update(memory_bytes=-1), "cpu.memory_bytes", "must not be negative, found -1"),
])
def test_a_saved_profile_with_a_wrong_value_names_the_field_in_words(cli, tmp_path, patch, field, words):
    from conftest import profile_of

    p = profile_of("linux-ubuntu24.04-strix-halo").to_dict()
    patch(p)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(p))
    r = cli("--profile", str(path), "llamacpp")
    assert r.rc == 5 and f"field '{field}' {words}" in r.err, r.err


def test_without_json_a_directory_reads_as_one_line_per_machine_and_recipe(cli, tmp_path):
    """`--profile DIR` without --json is for a person or grep: NAME  RECIPE  BACKEND  DEVICE, the same
    pick the JSON lines carry."""
    profs = _profiles(cli)
    for name, p in profs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(p))
    r = cli("pick", "llamacpp", "--profile", str(tmp_path))
    assert r.rc == 0, r.err
    lines = r.out.splitlines()
    assert len(lines) == len(MACHINES) and not any(x.startswith("{") for x in lines)
    js = {d["name"]: d for d in map(json.loads, cli("pick", "llamacpp", "--json", "--profile", str(tmp_path)).out.splitlines())}
    for line in lines:
        name, recipe, backend = line.split("  ")[:3]
        assert recipe == "llamacpp" and js[name]["recipes"]["llamacpp"]["backend"] == backend
