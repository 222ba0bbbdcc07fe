"""Every command with hostile input of every kind: files, environment variables, flags, paths,
undecodable bytes, huge arguments.  Whatever comes in: no traceback, and a documented exit code
(README, docs/json.md).  In-process (click's CliRunner isolation around the real entry point,
selector.cli.main), so that hundreds of runs cost seconds."""

import json
import os

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import machine

DOCUMENTED = {0, 2, 3, 4, 5}
STRIX = machine("linux-ubuntu24.04-strix-halo")


def invoke(args, env=None, input=None):
    """Run selector.cli.main(args) as the console script would; (exit code, stdout, stderr)."""
    from selector.cli import main

    runner = CliRunner()
    with runner.isolation(input=input, env=env) as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        import sys

        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        return code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Hostile files and paths, made once."""
    d = tmp_path_factory.mktemp("hostile")
    paths = {}

    def put(name, data: bytes):
        p = d / name
        p.write_bytes(data)
        paths[name] = str(p)

    put("empty.json", b"")
    put("garbage.json", b"\xff\xfe\x00garbage{{{")
    put("latin1.json", '{"llamacpp": {"backend": "vulkan\xe9"}}'.encode("latin-1"))
    put("list.json", b"[1, 2, 3]")
    put("null.json", b"null")
    put("deep.json", b"[" * 5000 + b"]" * 5000)
    put("pin-unknown.json", json.dumps({"llamacpp": {"backend": "warp"}, "rocm_channel": "stable"}).encode())
    put("bad-types.json", json.dumps({"llamacpp": {"backend": 3}, "rocm_channel": ["x"]}).encode())
    put("profile-partial.json", json.dumps({"schema_version": 1, "amd_gpus": [{"index": "zero"}]}).encode())
    put("fleet.jsonl", b'{"schema_version": 1}\n{oops\n\n\xff\n')
    put("catalog.json", json.dumps({"name": "x", "recipes": {"r": {"rows": "no"}}}).encode())
    os.mkdir(d / "emptydir")
    os.mkdir(d / "capture-bad")
    (d / "capture-bad" / "capture.json").write_text('{"format": 1, "platform": {"system": 7}}')
    paths["emptydir"] = str(d / "emptydir")
    paths["capture-bad"] = str(d / "capture-bad")
    paths["missing"] = str(d / "does-not-exist")
    paths["below-a-file"] = str(d / "empty.json" / "x")
    paths["devnull"] = os.devnull
    paths["proc"] = "/proc/self/status"
    paths["cache"] = str(d / "cache")  # a real, empty cache: nothing outside tmp is ever written
    return paths


# a valid invocation of every command, which the sweep then spoils
BASES = {
    "pick": [["llamacpp"], ["--all"], ["llamacpp", "flm"], []],
    "probe": [[]],
    "check": [["llamacpp", "vulkan"], ["flm", "npu"]],
    "matrix": [["llamacpp", "--here"], []],
    "recipes": [[]],
    "labels": [[], ["--recipes", "llamacpp"]],
    "status": [[]],
    "uninstall": [["llamacpp", "vulkan"]],
    "guide": [[], ["--engine", "llamacpp"]],
    "capture": [["{tmp}/cap"]],
    "install": [["llamacpp", "--dry-run"]],
}
MACHINE_OPTS = {"pick", "probe", "check", "matrix", "labels", "install", "guide"}
WORDS = ["llamacpp", "LLAMACPP", "flm", "vulkan", "rocm", "cpu", "whispercpp", "auto", "nope", "-", "--", "",
         "lemonade", "localai", "nightly", "stable", "lemonade-policy"]
FLAGS = ["--json", "--all", "--allow-missing", "--here", "--detailed", "--prefer-system", "--no-prefer-system",
         "--help", "--version", "-h", "--bogus", "--all=1"]
VALUE_OPTS = ["--root", "--profile", "--catalog", "--cache-dir", "--channel", "--config", "--policy", "--backend",
              "--prefix", "--recipes", "--write", "--engine", "--guide", "--gfx", "--sm", "--os", "--arch"]

undecodable = st.binary(min_size=1, max_size=12).map(os.fsdecode)  # argv as Python sees non-UTF-8 bytes
huge = st.integers(1000, 20000).map(lambda n: "é" * n)


def values(files):
    return st.one_of(st.sampled_from(WORDS), st.sampled_from(sorted(files.values())), st.text(max_size=20),
                     undecodable, huge, st.just(STRIX))


def mutations(files):
    one = st.one_of(st.sampled_from(WORDS).map(lambda w: [w]), st.sampled_from(FLAGS).map(lambda f: [f]),
                    undecodable.map(lambda w: [w]), huge.map(lambda w: [w]),
                    st.tuples(st.sampled_from(VALUE_OPTS), values(files)).map(list))
    return st.lists(one, max_size=3).map(lambda xs: [y for x in xs for y in x])


def environments(files):
    return st.dictionaries(st.sampled_from(["PICK_BACKEND_ROOT", "PICK_BACKEND_CONFIG", "PICK_BACKEND_CHANNEL",
                                            "PICK_BACKEND_POLICY", "COLUMNS", "HIP_VISIBLE_DEVICES"]),
                           values(files).map(lambda v: v.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                                             .replace("\0", "")), max_size=2)


def _safe(args, tmp):
    """Destinations stay in tmp: an absolute path elsewhere is dropped (with its option)."""
    out, skip = [], False
    for i, a in enumerate(args):
        if os.path.isabs(a) and not a.startswith(tmp) and a not in (STRIX, os.devnull, "/proc/self/status"):
            if out and out[-1] in VALUE_OPTS:
                out.pop()
            continue
        out.append(a)
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_command_with_hostile_input_exits_with_a_documented_code(files, data):
    tmp = os.path.dirname(files["cache"])
    cmd = data.draw(st.sampled_from(sorted(BASES)), label="command")
    base = [a.replace("{tmp}", tmp) for a in data.draw(st.sampled_from(BASES[cmd]), label="base")]
    where = data.draw(st.sampled_from([["--root", STRIX], []]), label="machine") if cmd in MACHINE_OPTS else []
    extra = data.draw(mutations(files), label="mutations")
    env = data.draw(environments(files), label="env")
    stdin = data.draw(st.sampled_from([None, "", "{", "\xff\xfe", json.dumps({"schema_version": 1})]), label="stdin")
    full = [cmd, *base, *where, *extra]
    if cmd in ("capture", "install", "uninstall", "status"):  # these write: only into tmp
        full = _safe(full, tmp) + ["--cache-dir", files["cache"]] * (cmd != "capture")
    env = dict(env, HOME=files["cache"], XDG_CACHE_HOME=files["cache"], LEMONADE_CACHE_DIR=files["cache"],
               PICK_BACKEND_GITHUB_API="http://127.0.0.1:9", PICK_BACKEND_RETRY_BASE="0",
               PICK_BACKEND_THEROCK_URL="http://127.0.0.1:9")
    code, out, err = invoke(full, env=env, input=stdin)
    assert "Traceback" not in err and "internal error" not in err, (full, err)
    assert code in DOCUMENTED, (full, code, err)
    if code != 0:
        assert len(err) < 2000, (full, len(err))  # a message, not an echo of a huge argument
    if code in (2, 4, 5) and "--json" in full and not {"--help", "-h", "--version"} & set(full):
        last = out.strip().splitlines()[-1]
        assert "error" in json.loads(last), (full, out)


def test_the_sweep_sees_a_crash():
    """The harness itself: a command that raises reaches the catch-all and fails the sweep's test."""
    import click

    from selector.cli import app as cli

    @cli.main_group.command("boom")
    def boom():
        raise RuntimeError("dictionary changed size during iteration")

    try:
        code, out, err = invoke(["boom"])
    finally:
        cli.main_group.commands.pop("boom")
    assert code not in DOCUMENTED and "internal error: RuntimeError" in err and "Traceback" not in err
    assert isinstance(boom, click.Command)
