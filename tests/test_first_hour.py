"""The first hour of a new user: no traceback, scripts that round-trip, a shell that does what it
obviously means, output that fits the terminal (issue 15).  Through the real CLI."""

import json
import os
import sys
import re

import pytest

from conftest import ROOT, machine, run_tty

STRIX = machine("linux-ubuntu24.04-strix-halo")
CPU_ONLY = machine("linux-debian12-x86_64-cpu-only")
RTX5090 = machine("linux-ubuntu24.04-rtx5090")
PI5 = machine("linux-raspberrypi-pi5-arm64")


def no_traceback(r):
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err


# ------------------------------------------------------------------------------------------------
# crashes


def test_a_config_pin_of_an_unknown_backend_is_an_invalid_config_for_every_command(cli, tmp_path):
    # README: an invalid config is exit 5, naming the file and the field, as {"rocm_channel": "beta"} is
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"llamacpp": {"backend": "turbo"}}))
    for args in (["llamacpp"], ["--all", "--allow-missing"], ["check", "llamacpp", "cpu"],
                 ["matrix", "llamacpp", "--here"], ["labels"], ["llamacpp", "--json"]):
        r = cli("--root", CPU_ONLY, "--config", str(cfg), *args)
        no_traceback(r)
        assert r.rc == 5, (args, r.rc, r.err)
        assert str(cfg) in r.err and "'llamacpp.backend'" in r.err and "'turbo'" in r.err, (args, r.err)
    cfg.write_text(json.dumps({"rocm_channel": "beta"}))
    assert cli("--root", CPU_ONLY, "--config", str(cfg), "llamacpp").rc == 5
    # a pin the catalog has, in any case, and "auto" (no pin) stay valid
    cfg.write_text(json.dumps({"llamacpp": {"backend": "CPU"}, "whispercpp": {"backend": "Auto"}}))
    doc = cli("--root", CPU_ONLY, "--config", str(cfg), "llamacpp", "whispercpp", "--json").json()
    assert doc["recipes"]["llamacpp"]["backend"] == "cpu" and doc["recipes"]["llamacpp"]["pinned"]
    assert not doc["recipes"]["whispercpp"]["pinned"]


@pytest.mark.parametrize("encoding", ["cp1252", "ascii", "latin-1"])
def test_a_stdout_that_cannot_say_arrows_gets_ascii(cli, encoding):
    for args in (["llamacpp", "flm"], ["probe"], ["matrix", "llamacpp", "--here"], ["check", "llamacpp", "rocm"]):
        r = cli("--root", STRIX, *args, env={"PYTHONIOENCODING": encoding})
        no_traceback(r)
        assert r.rc == 0, r.err
        r.out.encode(encoding)  # everything written could be encoded
    r = cli("--root", STRIX, "llamacpp", env={"PYTHONIOENCODING": encoding})
    assert "llamacpp (Llama.cpp GPU)  -> vulkan on AMD GPU (gfx1151)" in r.out
    assert re.search(r"(?m)^\+ +vulkan +installable", r.out) and re.search(r"(?m)^x +system +unsupported", r.out)
    j = cli("--root", STRIX, "llamacpp", "--json", env={"PYTHONIOENCODING": encoding})
    assert j.json()["recipes"]["llamacpp"]["backend"] == "vulkan"  # JSON stays JSON (\u escapes)


def test_unwritable_or_wrong_destinations_exit_4_or_5_naming_the_path(cli, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    r = cli("capture", str(afile))  # a file, not a directory
    no_traceback(r)
    assert r.rc == 4 and str(afile) in r.err
    r = cli("capture", str(afile / "sub"))  # below a file: cannot be created
    no_traceback(r)
    assert r.rc == 4 and str(afile) in r.err
    on_strix = ["--root", STRIX]
    for args in ([*on_strix, "llamacpp"], [*on_strix, "check", "llamacpp", "cpu"], [*on_strix, "matrix", "--here"],
                 [*on_strix, "labels"], ["status"], ["uninstall", "llamacpp", "cpu"],
                 [*on_strix, "install", "llamacpp", "--dry-run"]):
        r = cli(*args, "--cache-dir", str(afile))
        no_traceback(r)
        assert r.rc == 5 and str(afile) in r.err and "--cache-dir" in r.err, (args, r.err)
    r = cli("--root", STRIX, "labels", "--write", str(afile / "features"))
    no_traceback(r)
    assert r.rc == 4 and str(afile / "features") in r.err


# ------------------------------------------------------------------------------------------------
# scripts and round trips


def test_probe_json_pipes_into_profile_stdin_pretty_or_as_lines(cli):
    pretty = cli("--root", STRIX, "probe", "--json")
    assert pretty.rc == 0 and "\n  " in pretty.out  # pretty-printed, as a person gets it
    human = cli("--profile", "-", "llamacpp", input=pretty.out)
    assert human.rc == 0, human.err
    assert "→ vulkan on AMD GPU (gfx1151)" in human.out
    as_json = cli("--profile", "-", "llamacpp", "--json", input=pretty.out)
    assert as_json.rc == 0, as_json.err
    [line] = as_json.out.splitlines()
    assert json.loads(line)["recipes"]["llamacpp"]["backend"] == "vulkan"
    one_line = json.dumps(pretty.json()) + "\n"
    assert cli("--profile", "-", "check", "llamacpp", "rocm", input=one_line).rc == 0
    assert cli("--profile", "-", "labels", input=pretty.out).rc == 0
    # two pretty documents one after the other are a fleet of two
    two = cli("--profile", "-", "llamacpp", "--json", input=pretty.out + pretty.out)
    assert two.rc == 0 and len(two.out.splitlines()) == 2


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_empty_profile_input_is_exit_5(cli, tmp_path, text):
    r = cli("--profile", "-", "llamacpp", input=text)
    no_traceback(r)
    assert r.rc == 5 and "empty" in r.err
    f = tmp_path / "p.jsonl"
    f.write_text(text)
    r = cli("--profile", str(f), "llamacpp", "--json")
    assert r.rc == 5 and str(f) in r.err


def test_incomplete_profiles_exit_5_naming_the_field(cli, tmp_path):
    full = cli("--root", STRIX, "probe", "--json").json()
    cases = [({"schema_version": 1}, "'os'"),
             (dict(full, amd_gpus=[{k: v for k, v in full["amd_gpus"][0].items() if k != "gfx"}]), "'amd_gpus[0].gfx'"),
             (dict(full, nvidia_gpus=[{"index": 0, "name": "RTX"}]), "'nvidia_gpus[0].sm'"),
             ({k: v for k, v in full.items() if k != "cpu"}, "'cpu'")]
    for i, (doc, field) in enumerate(cases):
        p = tmp_path / f"p{i}.json"
        p.write_text(json.dumps(doc))
        for args in (["llamacpp"], ["probe"], ["labels"]):
            r = cli("--profile", str(p), *args)
            no_traceback(r)
            assert r.rc == 5 and str(p) in r.err and field in r.err, (args, r.err)
        r = cli("--profile", "-", "llamacpp", input=json.dumps(doc, indent=2))
        assert r.rc == 5 and field in r.err


def test_the_required_fields_are_the_documented_ones():
    from selector.profiles import REQUIRED
    from test_json_contract import schema

    s = schema("profile")
    assert tuple(s["required"]) == REQUIRED[""]
    for key, fields in REQUIRED.items():
        if not key:
            continue
        sub = s["properties"][key.rstrip("[]")]
        sub = sub["items"] if key.endswith("[]") else sub
        assert tuple(sub["required"]) == fields, key


def test_options_that_cannot_apply_are_usage_errors(cli, tmp_path):
    prof = tmp_path / "p.json"
    prof.write_text(cli("--root", STRIX, "probe", "--json").out)
    for args in (["--root", STRIX, "--profile", str(prof), "llamacpp"],
                 ["check", "llamacpp", "cpu", "--root", STRIX, "--profile", str(prof)],
                 ["labels", "--root", STRIX, "--profile", str(prof)]):
        r = cli(*args)
        assert r.rc == 2 and "--root and --profile" in r.err, args
    r = cli("--root", STRIX, "capture", str(tmp_path / "cap"))
    assert r.rc == 2 and "capture records this machine" in r.err
    assert not (tmp_path / "cap").exists()
    r = cli("recipes", "--channel", "nightly")  # recipes do not depend on the channel
    assert r.rc == 2 and "--channel" in r.err


def test_pick_all_exits_3_when_a_recipe_has_no_backend_unless_allowed(cli):
    r = cli("--root", CPU_ONLY, "--all", "--json")
    assert r.rc == 3
    assert r.json()["recipes"]["flm"]["backend"] is None  # no NPU on this machine
    assert cli("--root", CPU_ONLY, "--all", "--allow-missing", "--json").rc == 0
    assert cli("--root", CPU_ONLY, "llamacpp", "--json").rc == 0


@pytest.mark.parametrize("args", [["llamacpp", "--json"], ["check", "llamacpp", "nope", "--json"],
                                  ["--catalog", "lemonad", "llamacpp", "--json"], ["recipes", "--json", "--bogus"]])
def test_a_failing_command_with_json_prints_a_json_error(cli, args, tmp_path):
    import jsonschema
    from test_json_contract import schema

    bad = tmp_path / "p.json"
    bad.write_text("{}")
    extra = ["--profile", str(bad)] if args[0] == "llamacpp" else []
    r = cli(*extra, *args)
    assert r.rc in (2, 5)
    doc = json.loads(r.out)
    jsonschema.validate(doc, schema("error"))
    assert doc["exit"] == r.rc and doc["error"] in r.err


def test_recipes_labels_status_uninstall_json_follow_their_schemas(cli, tmp_path):
    import jsonschema
    from test_json_contract import schema

    for cat in ("lemonade", "localai"):
        r = cli("recipes", "--json", "--catalog", cat)
        jsonschema.validate(r.json(), schema("recipes"))
        assert r.json()["catalog"] == cat
    r = cli("--root", STRIX, "labels", "--json")
    jsonschema.validate(r.json(), schema("labels"))
    assert r.json()["labels"]["pick-backend.llamacpp"] == "vulkan"
    cache = tmp_path / "cache"
    d = cache / "bin" / "llamacpp" / "vulkan"
    d.mkdir(parents=True)
    (d / "version.txt").write_text("b1000\n")
    (d / "llama-server").write_text("")  # an install holds its binary
    rt = cache / "bin" / "therock" / "gfx1151-7.14.0"
    (rt / "lib").mkdir(parents=True)
    (rt / "version.txt").write_text("7.14.0\n")
    r = cli("status", "--json", "--cache-dir", str(cache))
    jsonschema.validate(r.json(), schema("status"))
    assert [b["dir"] for b in r.json()["backends"]] == ["vulkan"]
    assert [x["dir"] for x in r.json()["runtimes"]] == ["therock/gfx1151-7.14.0"]
    r = cli("uninstall", "llamacpp", "vulkan", "--json", "--cache-dir", str(cache))
    jsonschema.validate(r.json(), schema("uninstall"))
    assert r.json()["removed"] is True and not d.exists()


def test_install_json_follows_its_schema(tmp_path):
    import jsonschema
    from test_install import VULKAN_ASSET, VULKAN_TAG, Server, install, llama_tar
    from test_json_contract import schema

    srv = Server()
    try:
        srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
        for args in (["--dry-run", "--json"], ["--json"]):
            r = install(srv, tmp_path / "cache", *args)
            assert r.rc == 0, r.err
            jsonschema.validate(r.json(), schema("install"))
    finally:
        srv.close()


# ------------------------------------------------------------------------------------------------
# the shell


def test_what_the_shell_obviously_means(cli):
    a = cli("--root", CPU_ONLY, "--all", "--allow-missing", "--json")
    b = cli("--root", CPU_ONLY, "pick", "--all", "--allow-missing", "--json")
    assert a.rc == b.rc == 0 and a.json() == b.json()
    c = cli("--json", "--root", CPU_ONLY, "llamacpp")
    assert c.rc == 0 and c.json()["recipes"]["llamacpp"]["backend"] == "vulkan"
    d = cli("--root", CPU_ONLY, "llamacpp", "--all", "--allow-missing", "--json")  # which one? said, not guessed
    assert d.rc == 2 and "--all picks every recipe, and llamacpp names one" in d.err
    assert d.json() == {"error": d.err.strip().removeprefix("pick-backend: "), "exit": 2}
    e = cli("--root", STRIX, "probe", "--json")  # options before the command name
    assert e.rc == 0 and e.json()["amd_gpus"][0]["gfx"] == "gfx1151"


def test_a_backend_given_as_a_recipe_suggests_check_and_backend(cli):
    r = cli("--root", STRIX, "llamacpp", "vulkan")
    assert r.rc == 2
    assert "pick-backend check llamacpp vulkan" in r.err and "pick-backend llamacpp --backend vulkan" in r.err


def test_names_match_whatever_their_case(cli):
    r = cli("--root", STRIX, "LlamaCpp", "--json")
    assert r.rc == 0 and list(r.json()["recipes"]) == ["llamacpp"]
    r = cli("--root", STRIX, "CHECK", "LLAMACPP", "ROCm")
    assert r.rc == 0 and r.out.startswith("llamacpp rocm: supported")
    r = cli("--root", STRIX, "llamacpp", "--backend", "ROCM", "--json")
    assert r.json()["recipes"]["llamacpp"]["backend"] == "rocm"
    r = cli("--catalog", "LocalAI", "recipes", "--json")
    assert r.json()["catalog"] == "localai"
    r = cli("--root", STRIX, "llamacpp", "--channel", "Nightly", "--json")
    assert r.rc == 0 and r.json()["settings"]["channel"] == "nightly"


def test_a_catalog_typo_is_a_usage_error_without_internal_paths(cli):
    r = cli("--catalog", "lemonad", "llamacpp")
    assert r.rc == 2
    assert "did you mean 'lemonade'?" in r.err
    assert "selector" not in r.err and ROOT not in r.err
    r = cli("--catalog", "./nothing-here.json", "llamacpp")  # a path is a file to read
    assert r.rc == 5 and "nothing-here.json" in r.err


def test_echoed_arguments_are_cut_short(cli):
    huge = "x" * 10_000
    for args in ([huge], ["check", "llamacpp", huge], ["--catalog", huge, "llamacpp"], ["llamacpp", "--backend", huge]):
        r = cli("--root", STRIX, *args)
        assert r.rc == 2 and len(r.err) < 400, (args[:1], len(r.err))
        assert "xxx..." in r.err
    for args in (["llamacpp", "--channel", huge], ["llamacpp", "--" + huge], ["llamacpp", "--json", "--" + huge]):
        r = cli("--root", STRIX, *args)  # click's own messages echo the argument too
        assert r.rc == 2 and len(r.err) < 700 and "xxx...xxx" in r.err, (args[1][:10], len(r.err))
    r = cli("--root", STRIX, "llamacpp", "--config", huge + ".json")  # a file named in full... within reason
    assert r.rc == 5 and len(r.err) < 500 and "xxx...xxx" in r.err


def test_each_command_shows_only_its_options_and_every_option_has_help():
    import click

    from selector.cli.app import LAZY, main_group

    ctx = click.Context(main_group)
    shown = {}
    for name in sorted(set(main_group.list_commands(ctx))):
        cmd = main_group.get_command(ctx, name)
        opts = [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden]
        for p in opts:
            assert p.help, f"{name} {p.opts} has no help text"
        shown[name] = {o for p in opts for o in p.opts}
    assert set(LAZY) <= set(shown)
    assert "--root" not in shown["recipes"] and "--channel" not in shown["recipes"]
    assert "--channel" not in shown["probe"] and "--catalog" not in shown["probe"]
    assert "--root" not in shown["capture"]
    assert shown["status"] >= {"--root", "--profile", "--cache-dir", "--verify"}  # --verify runs the pick on this machine
    assert {"--root", "--profile", "--channel", "--allow-missing"} <= shown["pick"]
    group = main_group.get_params(ctx)
    for p in group:
        assert p.help, p.opts
    assert {o for p in group for o in p.opts} <= {"--version", "--help", "-h"}  # nothing else before a command


def test_the_router_knows_every_option_that_takes_a_value():
    """route() skips an option's value to find the command name behind it; a value option it
    did not know would be taken for a recipe."""
    import click

    from selector.cli.app import main_group
    from selector.cli.core import VALUE_OPTS

    ctx = click.Context(main_group)
    real = set()
    for name in main_group.list_commands(ctx):
        for p in main_group.get_command(ctx, name).params:
            # an option whose value is optional (plan --check [WAY]) is not skipped with a value
            if isinstance(p, click.Option) and not p.is_flag and not p.count and not p._flag_needs_value:
                real |= {o for o in p.opts if o.startswith("--")}
    assert real <= VALUE_OPTS, real - VALUE_OPTS


def test_version_is_cheap(cli):
    import subprocess
    import sys

    r = cli("--version")
    assert r.rc == 0 and re.fullmatch(r"pick-backend \d+\.\d+\.\d+\n", r.out)
    imp = subprocess.run([sys.executable, "-X", "importtime", "-m", "selector", "--version"],
                         capture_output=True, text=True, timeout=60)
    modules = {line.split("|")[-1].strip() for line in imp.stderr.splitlines() if "|" in line}
    assert not {"rich", "requests", "cpuinfo", "distro", "importlib.metadata", "selector.catalog"} & modules


def test_the_json_pick_path_imports_nothing_heavy():
    import subprocess
    import sys

    imp = subprocess.run([sys.executable, "-X", "importtime", "-m", "selector", "llamacpp", "--json"],
                         capture_output=True, text=True, timeout=60)
    modules = {line.split("|")[-1].strip().split(".")[0] for line in imp.stderr.splitlines() if "|" in line}
    assert not {"rich", "requests", "cpuinfo", "gguf", "numpy"} & modules
    if sys.platform.startswith("linux") and os.path.exists("/etc/os-release"):
        # with a complete os-release the OS facts come from the standard library, and they are what
        # distro itself says (distro's import stays off the path: over 10 ms)
        import distro

        doc = json.loads(imp.stdout)
        want = f"{distro.id()} {distro.version()}".strip()
        assert doc["host"]["distro"] == want
        import platform

        from probes.linux.os_ import DISTRO_RENAMES

        raw = platform.freedesktop_os_release()
        if raw.get("ID") and raw.get("VERSION_ID") and raw["ID"].lower() not in DISTRO_RENAMES:
            assert "distro" not in modules


# ------------------------------------------------------------------------------------------------
# 80 columns, and pipes


def test_80_columns_header_wraps_between_parts_and_no_line_has_trailing_spaces(cli):
    for root in (STRIX, RTX5090, CPU_ONLY):
        r = run_tty("--root", root, "--all", "--allow-missing", columns=80)
        assert r.rc == 0
        lines = r.out.splitlines()
        assert all(len(x) <= 80 for x in lines), max(lines, key=len)
        assert not [x for x in lines if x != x.rstrip()]
        header = lines[:lines.index("")]
        joined = " ".join(header)
        assert joined.endswith("accelerator-first")
        for x in header[:-1]:
            assert x.endswith(" ·"), header  # broken after a separator, never inside a part
    r = run_tty("--root", STRIX, "llamacpp", columns=80)
    assert "linux · ubuntu 24.04 · 6.14.0-33-generic · x86_64 · lemonade · stable ·\naccelerator-first" in r.out


@pytest.mark.parametrize("columns", ["", "5", "80"])
def test_in_a_pipe_lines_are_neither_wrapped_nor_padded(cli, columns):
    # an exported COLUMNS (even COLUMNS=5) is a terminal's width, not a pipe's
    r = cli("llamacpp", "--root", CPU_ONLY, env={"COLUMNS": columns})
    lines = r.out.splitlines()
    assert lines[0].endswith("accelerator-first")
    assert not [x for x in lines if x != x.rstrip()]
    [vulkan] = [x for x in lines if re.match(r"✓ +vulkan ", x)]
    assert vulkan.endswith("runs on the CPU: No AMD GPU found")  # one line, however long


def test_matrix_at_80_columns_cuts_no_word_and_sorts_sm_targets_as_numbers(cli):
    from selector import catalog, render

    for cat in ("lemonade", "localai"):
        r = run_tty("--catalog", cat, "matrix", columns=80)
        assert r.rc == 0
        assert all(len(x) <= 80 for x in r.out.splitlines())
        assert "…" not in r.out
        words = set(r.out.split())
        c = catalog.load(cat)
        for name in c.recipes:
            for cells in render.matrix_rows(c, name):
                for w in " ".join(cells).split():
                    assert w in words, (cat, name, w)
    r = run_tty("matrix", "llamacpp", columns=200)
    lists = re.findall(r"nvidia_gpu \(([^)]*)\)", r.out)  # the row's targets (the CUDA build names its own too)
    assert lists
    for found in lists:
        sms = re.findall(r"sm_(\d+)", found)
        assert sms == sorted(sms, key=int) and "75" in sms and "120" in sms


# ------------------------------------------------------------------------------------------------
# shell completion (click's)


def _complete(cli, words, shell="bash"):
    env = {"_PICK_BACKEND_COMPLETE": f"{shell}_complete", "COMP_WORDS": " ".join(words),
           "COMP_CWORD": str(len(words) - 1)}
    r = cli(env=env)
    assert r.rc == 0, r.err
    return [x.split(",", 1)[1] for x in r.out.splitlines() if "," in x]


def test_completion_names_recipes_backends_and_catalogs(cli):
    assert "llamacpp" in _complete(cli, ["pick-backend", "lla"])
    assert "probe" in _complete(cli, ["pick-backend", "pro"])
    assert set(_complete(cli, ["pick-backend", "check", "llamacpp", ""])) == \
        {"system", "metal", "cuda", "vulkan", "rocm", "cpu", "nathanw", "halobox"}
    assert _complete(cli, ["pick-backend", "llamacpp", "--backend", "ro"]) == ["rocm"]
    assert {"lemonade", "localai"} <= set(_complete(cli, ["pick-backend", "--catalog", ""]))
    assert "strata" in _complete(cli, ["pick-backend", "--catalog", "localai", "str"])
    # after leading options the next word may be a command (or a recipe)
    assert "check" in _complete(cli, ["pick-backend", "--json", "ch"])
    assert "install" in _complete(cli, ["pick-backend", "--root", "/tmp", "ins"])
    # a backend is one of that recipe's, also as the value of --backend / --backends
    assert set(_complete(cli, ["pick-backend", "install", "whispercpp", "--backend", ""])) == \
        {"npu", "metal", "vulkan", "rocm", "cpu"}
    assert set(_complete(cli, ["pick-backend", "bench", "whispercpp", "--backends", ""])) == \
        {"npu", "metal", "vulkan", "rocm", "cpu"}
    for shell in ("bash", "zsh", "fish"):
        r = cli(env={"_PICK_BACKEND_COMPLETE": f"{shell}_source"})
        assert r.rc == 0 and "_PICK_BACKEND_COMPLETE" in r.out, shell


# ------------------------------------------------------------------------------------------------
# dependencies: distro reads the OS facts, never outside a capture; CPU features


def _capture(tmp_path, files, links=()):
    root = tmp_path / "cap"
    (root / "fs").mkdir(parents=True)
    (root / "capture.json").write_text(json.dumps({"format": 1, "platform": {"system": "Linux", "machine": "x86_64"}}))
    for path, text in files.items():
        p = root / "fs" / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for path, target in links:
        p = root / "fs" / path
        p.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, p)
    return root


def test_distro_reads_the_capture_normalised_like_distro(cli, tmp_path):
    root = _capture(tmp_path, {"usr/lib/os-release": 'ID="opensuse-leap"\nVERSION_ID="15.6"\nID_LIKE="suse opensuse"\n'},
                    [("etc/os-release", "../usr/lib/os-release")])
    d = cli("--root", str(root), "probe", "--json").json()["os"]["distro"]
    assert d == {"id": "opensuse", "version": "15.6", "like": "suse opensuse"}  # distro's NORMALIZED_OS_ID


def test_distro_never_reads_outside_a_capture(cli, tmp_path):
    outside = tmp_path / "outside"
    (outside / "etc").mkdir(parents=True)
    (outside / "etc" / "os-release").write_text('ID=escaped\nVERSION_ID="6.6.6"\n')
    (outside / "etc" / "redhat-release").write_text("Escaped Linux release 6.6.6 (Evil)\n")
    inside = {"usr/lib/os-release": "ID=inside\n"}  # no VERSION_ID: distro looks at /etc/*-release too
    for i, links in enumerate([[("etc/os-release", str(outside / "etc" / "os-release"))],   # absolute
                               [("etc/os-release", "../../../outside/etc/os-release")],     # .. past the root
                               [("etc", str(outside / "etc"))],                             # the directory
                               [("etc/redhat-release", str(outside / "etc" / "redhat-release"))]]):
        sub = tmp_path / f"t{i}"
        sub.mkdir()
        root = _capture(sub, inside, links)
        os.symlink(outside, sub / "outside")  # where the relative escape lands
        r = cli("--root", str(root), "probe", "--json")
        assert r.rc == 0, r.err
        assert r.json()["os"]["distro"]["id"] == "inside", links
        assert "escaped" not in r.out.lower() and "6.6.6" not in r.out, links


@pytest.mark.parametrize("name,has,lacks", [
    # Ryzen AI Max+ 395 (Zen 5): AVX-512 with VNNI and BF16; no AMX (an Intel feature)
    ("linux-ubuntu24.04-strix-halo", {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"},
     {"amx_tile", "sve"}),
    # Raspberry Pi 5 (Cortex-A76, Armv8.2-A): dotprod, but neither i8mm (v8.6) nor SVE
    ("linux-raspberrypi-pi5-arm64", {"asimd", "asimddp"}, {"i8mm", "sve", "avx2"}),
])
def test_cpu_features_come_from_proc_cpuinfo(cli, name, has, lacks):
    cpu = cli("--root", machine(name), "probe", "--json").json()["cpu"]
    feats = set(cpu["features"])
    assert has <= feats and not lacks & feats, sorted(feats)
    assert feats <= set(cpu["flags"]) and cpu["features"] == sorted(cpu["features"])
    assert cpu["detailed"] is None
    human = cli("--root", machine(name), "probe")
    assert "CPU features: " + " ".join(cpu["features"]) in human.out


def test_probe_detailed_shows_what_py_cpuinfo_adds(cli):
    r = cli("probe", "--detailed", "--json")
    assert r.rc == 0, r.err
    det = r.json()["cpu"]["detailed"]
    assert det["source"].startswith("py-cpuinfo")
    human = cli("probe", "--detailed")
    assert "source: py-cpuinfo" in human.out
    assert "source: py-cpuinfo" not in cli("probe").out


def test_every_declared_dependency_is_imported_somewhere():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        block = re.search(r"(?ms)^dependencies = \[(.*?)^\]", f.read()).group(1)
    deps = re.findall(r'"([^"]+)"', block)
    assert "platformdirs" not in block  # Lemonade's cache path is ~/.cache/lemonade on every OS
    modules = {"click": "click", "rich": "rich", "requests": "requests", "distro": "distro", "py-cpuinfo": "cpuinfo",
               "nvidia-ml-py": "pynvml", "pyamdgpuinfo": "pyamdgpuinfo", "py7zr": "py7zr", "gguf": "gguf",
               "urllib3": "urllib3"}
    code = ""
    for pkg in ("probes", "selector"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, pkg)):
            code += "".join(open(os.path.join(dirpath, f), encoding="utf-8").read() for f in files if f.endswith(".py"))
    for dep in deps:
        name = re.split(r"[<>=;\s]", dep, maxsplit=1)[0]
        assert name in modules, f"{name} is declared but nothing says what it is for"
        assert re.search(rf"(?m)^\s*(import|from) {modules[name]}\b", code), f"{name} is declared and never imported"


def test_profile_stdin_on_a_terminal_says_to_pipe_one_in_instead_of_waiting():
    import pty
    import sys

    pid, fd = pty.fork()
    if pid == 0:  # stdin, stdout and stderr are the terminal, as for a person who forgot the pipe
        os.execvp(sys.executable, [sys.executable, "-m", "selector", "--profile", "-", "llamacpp"])
    import select
    import signal

    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 30)
        if not ready:  # still waiting for the keyboard: the defence is gone
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("--profile - on a terminal waited for input")
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 5
    assert b"pipe one in" in out


def test_json_nested_too_deeply_is_a_bad_input_not_a_crash(cli, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    for args in (["--config", str(deep), "llamacpp"], ["--profile", str(deep), "llamacpp"],
                 ["--catalog", str(deep), "llamacpp"]):
        r = cli(*args)
        no_traceback(r)
        assert r.rc == 5 and "nested too deeply" in r.err and str(deep) in r.err, args
    r = cli("--profile", "-", "llamacpp", "--json", input=deep.read_text())
    assert r.rc == 5 and "nested too deeply" in r.out


def test_arguments_that_are_not_utf8_are_shown_as_bytes():
    import subprocess
    import sys

    r = subprocess.run([os.fsencode(sys.executable), b"-m", b"selector", b"llama\xffcpp", b"--json"],
                       capture_output=True, timeout=60)
    assert r.returncode == 2 and b"Traceback" not in r.stderr
    assert b"unknown recipe 'llama\\xffcpp'" in r.stderr
    assert json.loads(r.stdout)["exit"] == 2


@pytest.mark.parametrize("value", ["¹", "٣", "0", "-1", "wide"])
def test_a_terminal_width_that_is_not_a_number_is_ignored(cli, value):
    # rich reads COLUMNS/LINES itself; '¹' and '٣' pass str.isdigit and then fail int() inside it
    r = cli("--root", STRIX, "guide", env={"COLUMNS": value, "LINES": value})
    assert r.rc == 0 and "internal error" not in r.err, r.err
    r = cli("--root", STRIX, "llamacpp", env={"COLUMNS": value})
    assert r.rc == 0 and "internal error" not in r.err, r.err


def test_an_empty_write_path_is_a_usage_error_not_stdout(cli):
    r = cli("--root", CPU_ONLY, "labels", "--write", "")
    assert r.rc == 2 and "--write needs a file name" in r.err and r.out == ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ")
@pytest.mark.parametrize("args", [["--all", "--allow-missing"], ["probe"], ["matrix", "--here"]])
def test_a_reader_that_closes_the_pipe_early_ends_the_command_quietly_with_0(args):
    # `pick-backend ... | head -1`: a pipe of 4 KiB, one line read, then closed while the tool writes
    import fcntl
    import subprocess

    from conftest import machine

    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PICK_BACKEND")}
    p = subprocess.Popen([sys.executable, "-m", "selector", "--root", machine("linux-ubuntu24.04-strix-halo"), *args],
                         stdout=w, stderr=subprocess.PIPE, env=env)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        assert f.readline()
    err = p.communicate(timeout=60)[1].decode()
    assert p.returncode == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err


def _console_script(tmp_path, body: str, *args):
    """Run ``body`` then the console script's main() in a fresh interpreter, as `pick-backend ARGS`."""
    import subprocess

    code = (f"import sys\n{body}\nsys.argv = ['pick-backend', *{list(args)!r}]\n"
            "from selector.cli import main\nmain()\n")
    # buffered, as a user's pipe is (PYTHONUNBUFFERED, set on some CI machines, would hide a lost buffer)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PICK_BACKEND") and k != "PYTHONUNBUFFERED"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                          cwd=tmp_path)


def test_the_quick_exit_still_runs_exit_handlers_and_keeps_every_byte_and_the_code(tmp_path):
    # the console script skips the interpreter's teardown: what a user or tool relies on at exit stays
    # (atexit handlers: coverage, temporary directories; the whole of a large output; the exit code)
    from conftest import machine

    mark = tmp_path / "atexit-ran"
    hook = f"import atexit\natexit.register(lambda: open({str(mark)!r}, 'w').write('ran'))"
    r = _console_script(tmp_path, hook, "--root", machine("linux-ubuntu24.04-strix-halo"), "matrix", "--json")
    assert r.returncode == 0 and mark.read_text() == "ran"
    assert json.loads(r.stdout)["catalog"] == "lemonade"  # 16 KB, every byte flushed
    mark.unlink()
    r = _console_script(tmp_path, hook, "no-such-recipe", "--json")  # an error: its JSON still reaches stdout
    assert r.returncode == 2 and "unknown recipe" in r.stderr and mark.read_text() == "ran"
    assert json.loads(r.stdout)["exit"] == 2


def test_a_thread_still_running_at_the_end_is_waited_for(tmp_path):
    # the quick exit would cut a running thread short: with one alive, the usual exit joins it first
    done = tmp_path / "thread-done"
    body = ("import threading, time\n"
            f"threading.Thread(target=lambda: (time.sleep(0.5), open({str(done)!r}, 'w').write('done'))).start()")
    r = _console_script(tmp_path, body, "recipes")
    assert r.returncode == 0 and done.read_text() == "done"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="/dev/full: a device that is always full")
@pytest.mark.parametrize("args", [["llamacpp"], ["llamacpp", "--json"], ["matrix", "--json"],
                                  ["uninstall", "llamacpp", "vulkan", "--json", "--cache-dir", "{tmp}"]])
@pytest.mark.parametrize("buffered", [True, False])
def test_output_to_a_full_disk_is_exit_4_with_one_line_not_a_traceback(args, buffered, tmp_path):
    # (uninstall ends with its own sys.exit(0): its output is flushed on the way out, and checked there)
    # `pick-backend ... > file` on a full disk: the output is lost, so the command says so and fails
    # with "a destination cannot be written"; never exit 0 (a truncated file taken for a whole one)
    import subprocess

    from conftest import machine

    env = {k: v for k, v in os.environ.items() if not k.startswith("PICK_BACKEND") and k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    with open("/dev/full", "w") as full:
        args = [a.replace("{tmp}", str(tmp_path)) for a in args]
        root = [] if args[0] == "uninstall" else ["--root", machine("linux-ubuntu24.04-strix-halo")]
        r = subprocess.run([sys.executable, "-m", "selector", *root, *args],
                           stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=60)
    assert r.returncode == 4, r.stderr
    assert r.stderr == "pick-backend: writing the output failed: No space left on device\n"


@pytest.mark.skipif(os.name == "nt", reason="a pipe whose reader is gone: EPIPE")
@pytest.mark.parametrize("args", [["--version"], ["--help"], ["llamacpp", "--json"], ["check", "llamacpp", "rocm"],
                                  ["status", "--cache-dir", "{tmp}"]])
def test_a_reader_gone_before_the_first_line_still_ends_with_0(args, tmp_path):
    # `pick-backend ... | true`: the first write fails. click turns a broken pipe into exit 1 by itself;
    # README says 0, quietly, whatever the command (the help and the version are printed while parsing)
    import subprocess

    from conftest import machine

    r, w = os.pipe()
    os.close(r)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PICK_BACKEND")}
    root = [] if args[0] in ("--version", "--help", "status") else ["--root", machine("linux-ubuntu24.04-strix-halo")]
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    p = subprocess.run([sys.executable, "-m", "selector", *root, *args], stdout=w, stderr=subprocess.PIPE, env=env,
                       timeout=60)
    os.close(w)
    assert p.returncode == 0 and p.stderr == b"", p.stderr


@pytest.mark.skipif(os.name == "nt", reason=">&- closes a POSIX descriptor")
def test_closed_standard_streams_give_the_documented_codes():
    # `>&-`: nothing can be printed, so exit 4 with the reason on stderr; `2>&-`: the messages are lost
    # but the exit code is the command's own
    import subprocess

    from conftest import machine

    root = ["--root", machine("linux-ubuntu24.04-strix-halo")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PICK_BACKEND")}

    r = subprocess.run([sys.executable, "-m", "selector", *root, "llamacpp"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, env=env, timeout=60, preexec_fn=lambda: os.close(1))
    assert r.returncode == 4 and r.stderr.decode() == "pick-backend: writing the output failed: standard output is closed\n"
    for args, code in ((["no-such-recipe"], 2), (["llamacpp"], 0)):
        r = subprocess.run([sys.executable, "-m", "selector", *root, *args], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=env, timeout=60, preexec_fn=lambda: os.close(2))
        assert r.returncode == code, args
