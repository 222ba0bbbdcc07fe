"""Real output, validated against the schemas written in docs/json.md."""

import os
import re

import jsonschema
import pytest

from conftest import ROOT, machine, machine_names


def schema(name):
    import json

    text = open(os.path.join(ROOT, "docs", "json.md"), encoding="utf-8").read()
    m = re.search(r"```json schema:" + name + r"\n(.*?)```", text, re.S)
    assert m, f"docs/json.md has no schema:{name}"
    return json.loads(m.group(1))


@pytest.mark.parametrize("name", machine_names() or ["<live>"])
def test_probe_and_pick_json_follow_the_documented_schema(cli, name):
    root = [] if name == "<live>" else ["--root", machine(name)]
    r = cli(*root, "probe", "--json")
    assert r.rc == 0, r.err
    jsonschema.validate(r.json(), schema("profile"))
    r = cli(*root, "pick", "--all", "--allow-missing", "--json")
    assert r.rc == 0, r.err
    jsonschema.validate(r.json(), schema("pick"))


def test_check_json_follows_the_documented_schema(cli):
    r = cli("check", "llamacpp", "cpu", "--json")
    jsonschema.validate(r.json(), schema("check"))
    assert r.rc == (0 if r.json()["supported"] else 3)


def test_capture_json_is_the_profile_of_what_it_wrote(cli, tmp_path):
    r = cli("capture", str(tmp_path / "cap"), "--json")
    assert r.rc == 0, r.err
    jsonschema.validate(r.json(), schema("profile"))
    back = cli("--root", str(tmp_path / "cap"), "probe", "--json").json()
    assert r.json()["cpu"]["arch"] == back["cpu"]["arch"] and r.json()["os"] == back["os"]

