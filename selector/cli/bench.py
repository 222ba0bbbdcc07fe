"""``pick-backend bench RECIPE --model M``: run each installed build's benchmark, keep the results.

Imported only when run (LAZY in selector/cli/app.py).  The results feed ``--policy measured``.
"""

from __future__ import annotations

import datetime
import os
import sys

import click

from selector.cli.core import EXIT_INPUT, EXIT_UNSUPPORTED, EXIT_USAGE, Fail, Opts, common, complete_backend, complete_recipe, decide_all  # noqa: E501

INSTALLED = ("installed", "update_available", "update_required")  # any installed build runs (an old one too)


def _model_file(spec: str) -> tuple[str, str, object]:
    """(local path, label, Model) of the model to benchmark: a path, or a Lemonade name or checkpoint
    whose file is in the Hugging Face cache (where Lemonade downloads)."""
    from selector.models import source
    from selector.models.gguf_header import ModelError

    try:
        m = source.resolve(spec)
    except ModelError as e:
        raise Fail(EXIT_INPUT, str(e)) from None
    first = m.files[0]
    if not first.startswith(("http://", "https://")):
        if not os.path.isfile(first):
            raise Fail(EXIT_INPUT, f"{first}: no such model file")
        return first, m.label, m
    local = source.hf_cached(first)
    if local is None:
        raise Fail(EXIT_INPUT, f"{m.label}: not downloaded (llama-bench needs the file); download it first "
                               f"(`lemonade pull {m.name}`)" if m.name else
                   f"{first}: not downloaded; llama-bench needs a local file")
    return local, m.label, m


@click.command("bench")
@click.argument("recipe", shell_complete=complete_recipe)
@click.option("--model", "-m", "model_spec", required=True,
              help="The model: a path, or a Lemonade name / org/repo:QUANT already downloaded.")
@common
@click.option("--backends", default=None, shell_complete=complete_backend, help="Comma-separated backends to measure (default: every supported, installed one).")
@click.option("--repetitions", "-r", type=click.IntRange(1, 100), default=3, show_default=True, help="Runs of each test.")
@click.option("--prompt", "n_prompt", type=click.IntRange(0, 1 << 20), default=512, show_default=True,
              help="Prompt tokens of the prompt-processing test (0: none).")
@click.option("--gen", "n_gen", type=click.IntRange(0, 1 << 20), default=128, show_default=True,
              help="Tokens of the generation test (0: none).")
@click.option("--timeout", type=click.FloatRange(1, 24 * 3600), default=600.0, show_default=True,
              help="Seconds one backend's benchmark may take; then its process group is stopped.")
@click.option("--install", "do_install", is_flag=True, help="Install the missing supported backends first.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (docs/json.md, 'bench').")
@click.pass_context
def bench_cmd(ctx, recipe, model_spec, backends, repetitions, n_prompt, n_gen, timeout, do_install, as_json, **kwargs):
    """Run llama-bench of each installed backend of RECIPE on the picked device and keep the results.

    `pick-backend pick RECIPE --policy measured` then picks the fastest.  Exit 0 when at least one
    backend was measured, 3 when none could be (none installed, all failed), 5 when the model cannot
    be found or read, 130 on Ctrl-C (nothing half-written).
    """
    from selector import bench, engine, render
    from selector.cli.needs import model_packages
    from selector.install.states import cache_root

    if not n_prompt and not n_gen:
        raise Fail(EXIT_USAGE, "--prompt 0 and --gen 0 leave nothing to measure")
    model_packages("bench")
    o = Opts(ctx, kwargs)
    (name,) = o.recipe_names([recipe])
    spec = _spec(o.catalog().name, name)
    if spec is None:
        raise Fail(EXIT_UNSUPPORTED, f"{name} has no benchmark tool that pick-backend can read "
                                     f"({_none_words(o.catalog().name, name)})")
    profile, cat, s, (d,), _w = decide_all(o, [name])
    rec = cat.recipes[name]
    wanted = [b.strip() for b in backends.split(",") if b.strip()] if backends else None
    if wanted:
        wanted = [o.backend_name(name, b) for b in wanted]
    cands = [v for v in d.backends if v.supported and (wanted is None or v.name in wanted)]
    for b in wanted or []:
        v = d.verdict(b)
        if v is None or not v.supported:
            click.echo(f"pick-backend: {b}: not supported here ({v.reason if v else 'unknown'}); not measured", err=True)
    if do_install:
        have = o.installed().get(name, {})
        for v in cands:
            if have.get(engine.install_dir_name(rec, v.name, d.channel)) is None:
                _install(ctx, o, name, v.name)
        profile, cat, s, (d,), _w = decide_all(o, [name])
        cands = [d.verdict(v.name) for v in cands]
    have = o.installed().get(name, {})
    built = {v.name for v in cands if v.name == "system" or have.get(engine.install_dir_name(rec, v.name, d.channel))
             is not None}
    missing = [v.name for v in cands if v.name not in built]
    cands = [v for v in cands if v.name in built]
    for b in missing if wanted or not cands else []:
        click.echo(f"pick-backend: {b} is not installed; not measured (--install installs it)", err=True)
    if not cands:
        raise Fail(EXIT_UNSUPPORTED, f"no installed, supported backend of {name} to measure"
                                     + (f"; `pick-backend bench {name} --model M --install` installs {', '.join(missing)}"
                                        if missing else ""))
    path, label, model = _model_file(model_spec)
    fits_note, ngl = _fit(profile, d, path, model, n_prompt + n_gen)
    if fits_note:
        raise Fail(EXIT_UNSUPPORTED, fits_note)
    cache = cache_root(o.cache_dir)
    installed = o.installed()
    m = engine.Machine(profile)
    results = []
    unsaved: list[str] = []
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    for v in cands:
        dirname = engine.install_dir_name(rec, v.name, d.channel)
        server, exe = _tool_of(cache, name, dirname, o.binary_of(name), spec["binary"], profile.os.name,
                               system=v.name == "system")
        env, _note, _group = engine.run_env_for(m, v)
        dev = v.device
        head = {"recipe": name, "backend": v.name, "dir": dirname, "version": installed.get(name, {}).get(dirname),
                "device": {"key": engine.device_key(dev), "name": dev.name if dev else "CPU", "type": dev.type if dev else "cpu",
                           "driver": bench.driver_of(profile, dev.type if dev else "cpu", dev.gpu if dev else None)},
                "model": {"key": bench.model_key(path), "label": label, "file": path}, "at": now, "env": env}
        if v.name == "system":  # not in the cache: the file on PATH is the build, its own number its version
            head["binary"] = bench.identity(server)
        tests = [t for t in (f"pp{n_prompt}" if n_prompt else None, f"tg{n_gen}" if n_gen else None) if t]
        if exe is None or not os.path.isfile(exe):
            where = os.path.dirname(server) if server else os.path.join(cache, "bin", name, dirname)
            out = {**head, "status": bench.FAILED,
                   "why": f"{spec['binary']} is not beside {o.binary_of(name)} in {where}", "evidence": [], "tests": {}}
            results.append(out)
            continue
        argv = [exe, "-m", path, "-p", str(n_prompt), "-n", str(n_gen), "-r", str(repetitions), "-o", "json"]
        if dev is not None and dev.type != "cpu":  # a build running on the CPU has no layers to give a GPU
            argv += ["-ngl", str(ngl)]
        from selector.cli.models import _device_ids

        dev_id = _device_ids(cache, name, dirname, head["version"]).get(head["device"]["key"]) if dev else None
        if dev_id:  # the number this build gave the device when `verify` ran it (ROCm0, Vulkan1)
            argv += ["-dev", dev_id]
        _say(f"bench {v.name}: {os.path.basename(exe)} on {head['device']['name']} "
             f"({', '.join(tests)}, {repetitions} runs each)...")
        out = None
        for attempt in range(2):  # a noisy result (a busy machine) is measured once more
            try:
                r = bench.run(argv, {**os.environ, **env}, timeout)
            except KeyboardInterrupt:
                _say(f"bench {v.name}: stopped; nothing recorded for it")
                sys.exit(130)
            got = _judge(head, r, tests, dev is not None and dev.type != "cpu")
            if out is None or (got["status"] == bench.OK and bench.spread(got) < bench.spread(out)):
                out = got
            if out["status"] != bench.OK or not bench.noisy_tests(out):
                break
            if attempt == 0:
                noisy = bench.noisy_tests(out)
                _say(f"bench {v.name}: the runs of {', '.join(noisy)} varied by more than {bench.NOISY:.0%} of "
                     f"{'their' if len(noisy) > 1 else 'its'} mean (a busy machine?); measuring again")
        for t in bench.noisy_tests(out) if out["status"] == bench.OK else []:
            out["tests"][t]["noisy"] = True
        _own_version(out, v.name)
        for t in tests:  # one record per test: whole, or (interrupted above) none
            try:
                bench.save(cache, {k: x for k, x in head.items() if k != "env"} | _test_record(out, t))
            except OSError as e:
                if not unsaved:
                    _say(f"warning: the results cannot be kept ({e.strerror or e}: {e.filename or cache}); "
                         "--policy measured will not see them")
                unsaved.append(t)
        results.append(out)
        _say(f"bench {v.name}: " + (", ".join(f"{t} {x['avg_ts']:.1f} t/s" for t, x in out["tests"].items())
                                    if out["status"] == bench.OK else f"failed: {out['why']}"))
    ok = [r for r in results if r["status"] == bench.OK]
    metric = next((t for t in (f"tg{n_gen}" if n_gen else None, f"pp{n_prompt}" if n_prompt else None) if t), None)
    steady = [r for r in ok if metric in r["tests"] and not r["tests"][metric].get("noisy")]
    winner = max(steady, key=lambda r: r["tests"][metric]["avg_ts"])["backend"] if steady else None
    if as_json:
        render.emit_json({"schema_version": 1, "recipe": name, "model": {"label": label, "file": path},
                          "metric": metric, "winner": winner,
                          "results": [{k: x for k, x in r.items() if k != "env"} for r in results]})
    else:
        _table(render.console(), results, winner, metric, n_prompt, n_gen)
    sys.exit(0 if ok else EXIT_UNSUPPORTED)


def _tool_of(cache: str, recipe: str, dirname: str, binary: str | None, tool: str, os_name: str,
             system: bool = False) -> tuple[str | None, str | None]:
    """(the build's server, its benchmark tool beside it).  The system build is the server on PATH;
    its tool is beside that name, else beside the file a link names (a package's bin/ links)."""
    import shutil

    from selector.verify import installed_binary

    suffix = ".exe" if os_name == "windows" else ""
    if system:
        server = shutil.which(binary) if binary else None
        if not server:
            return None, None
        for d in dict.fromkeys((os.path.dirname(server), os.path.dirname(os.path.realpath(server)))):
            if os.path.isfile(os.path.join(d, tool + suffix)):
                return server, os.path.join(d, tool + suffix)
        return server, os.path.join(os.path.dirname(server), tool + suffix)
    server = installed_binary(os.path.join(cache, "bin", recipe, dirname), binary, os_name)
    return server, (os.path.join(os.path.dirname(server), tool + suffix) if server else None)


def _own_version(out: dict, backend: str) -> None:
    """The build's own number (llama-bench prints build_number and build_commit with each result) beside
    the install record's version: a build installed under another name says so."""
    build = next((t["build"] for t in out["tests"].values() if t.get("build", {}).get("number")), None)
    if not build:
        return
    own = f"b{build['number']}"
    out["build_version"] = own
    if backend == "system" or out["version"] is None:
        out["version"] = own
    elif out["version"] != own:
        _say(f"bench {backend}: the install record says {out['version']}, the build itself says build "
             f"{build['number']} (commit {build.get('commit') or '?'}); installed from a file of another release?")


def _say(msg: str) -> None:
    sys.stderr.write(f"pick-backend: {msg}\n")
    sys.stderr.flush()


def _tool(catalog: str, recipe: str) -> dict | None:
    """The recipe's entry in catalogs/<catalog>-bench.json, or None."""
    from selector.bench import tools

    return tools(catalog).get(recipe)


def _spec(catalog: str, recipe: str) -> dict | None:
    """The benchmark tool of the recipe, when it prints what this command reads."""
    r = _tool(catalog, recipe)
    return r if r and r.get("parser") == "llama-bench-json" else None


def _none_words(catalog: str, recipe: str) -> str:
    r = _tool(catalog, recipe)
    return r["note"] if r and r.get("note") else "none is known for it"


def _fit(profile, d, path: str, model, ctx: int) -> tuple[str | None, int]:
    """(why the model cannot run on the picked device at all, or None; the -ngl that fits: 99 for
    all layers, K when only K fit, as `plan` says)."""
    from selector.models import fit, planner, source
    from selector.models.gguf_header import ModelError

    try:
        facts = source.facts(source.Model(path, [path]), None)
        res = planner.fit_model(profile, d, d.verdict(d.backend), facts, min(max(ctx, 512), facts.get("n_ctx_train") or ctx))
    except ModelError as e:
        raise Fail(EXIT_INPUT, str(e)) from None
    except fit.FitError:
        return None, 99
    if res["status"] == "no":
        return (f"{model.label} does not fit on {d.device.name if d.device else 'this machine'}; nothing to measure "
                f"(`pick-backend plan {d.recipe} --model {path}` says what would)"), 0
    if res["status"] == "partial":
        _say(f"{model.label}: {res['ngl']} of {res['n_layer'] + 1} layers fit on the GPU; measuring with -ngl {res['ngl']}")
        return None, res["ngl"]
    return None, 99


def _judge(head: dict, r: dict, tests: list[str], expect_gpu: bool) -> dict:
    from selector import bench

    text = r["stdout"]
    evidence = bench.tail(r["stderr"] or r["stdout"])
    if r["status"] != bench.OK:
        return {**head, "status": bench.FAILED, "why": r["why"], "evidence": evidence, "tests": {}}
    try:
        rows = bench.parse(text)
    except ValueError as e:
        return {**head, "status": bench.FAILED, "why": f"unreadable output: {e}", "evidence": bench.tail(text) or evidence,
                "tests": {}}
    if not bench.saw_gpu(rows, expect_gpu):
        return {**head, "status": bench.FAILED, "why": "it ran on the CPU: llama-bench saw no GPU",
                "evidence": evidence, "tests": {}}
    got = {}
    for row in rows:
        t = bench.test_name(row)
        got[t] = {"avg_ts": float(row["avg_ts"]), "stddev_ts": float(row["stddev_ts"]),
                  "samples_ts": [float(x) for x in row.get("samples_ts", []) if isinstance(x, (int, float))],
                  "build": {"commit": row.get("build_commit"), "number": row.get("build_number")},
                  "gpu_info": row.get("gpu_info"), "backends": row.get("backends")}
    absent = [t for t in tests if t not in got]
    if absent:
        return {**head, "status": bench.FAILED, "why": f"no result for {', '.join(absent)}", "evidence": evidence,
                "tests": got}
    return {**head, "status": bench.OK, "why": "", "evidence": [], "tests": got}


def _test_record(out: dict, test: str) -> dict:
    t = out["tests"].get(test)
    own = {"build_version": out["build_version"]} if out.get("build_version") else {}
    if out["status"] == "ok" and t:
        return {"test": test, "status": "ok", "version": out["version"], **own, **t}
    return {"test": test, "status": "failed", "why": out["why"], "evidence": out["evidence"]}


def _table(con, results, winner, metric, n_prompt, n_gen) -> None:
    from selector.bench import NOISY

    cols = ["backend", "build", "device"] + ([f"pp{n_prompt} t/s"] if n_prompt else []) + ([f"tg{n_gen} t/s"] if n_gen else [])
    lines = [cols]
    for r in results:
        build = next((x["build"] for x in r["tests"].values()), {}) if r["tests"] else {}
        own = r.get("build_version")
        version = str(r["version"] or build.get("number") or "?")
        row = [r["backend"] + (" *" if r["backend"] == winner else ""),
               version + (f" (says {own})" if own and own != version else ""), r["device"]["name"]]
        for t in ([f"pp{n_prompt}"] if n_prompt else []) + ([f"tg{n_gen}"] if n_gen else []):
            x = r["tests"].get(t)
            row.append((f"{x['avg_ts']:.1f} ± {x['stddev_ts']:.1f}" + (" noisy" if x.get("noisy") else ""))
                       if x and r["status"] == "ok" else "failed")
        lines.append(row)
    widths = [max(len(x[i]) for x in lines) for i in range(len(cols))]
    for i, line in enumerate(lines):
        con.print("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip(), style="bold" if i == 0 else None,
                  markup=False, highlight=False, soft_wrap=True)
    for r in results:
        if r["status"] != "ok":
            con.print(f"{r['backend']}: {r['why']}", style="red", markup=False, highlight=False, soft_wrap=True)
            for e in r["evidence"][-5:]:
                con.print(f"  {e}", style="dim", markup=False, highlight=False, soft_wrap=True)
    if any(x.get("noisy") for r in results for x in r["tests"].values()):
        con.print(f"noisy: the runs of a test varied by more than {NOISY:.0%} of their mean, twice; such a result is "
                  "kept but never chosen by --policy measured (measure again on a quiet machine)",
                  markup=False, highlight=False, soft_wrap=True)
    if winner:
        con.print(f"* fastest by {metric}; `pick-backend pick {results[0]['recipe']} --policy measured` picks it",
                  markup=False, highlight=False, soft_wrap=True)


def _install(ctx, o: Opts, name: str, backend: str) -> None:
    """Install one backend as `pick-backend install NAME --backend B` would (its progress, its checks)."""
    import subprocess

    argv = [sys.executable, "-m", "selector", "install", name, "--backend", backend]
    for flag, value in (("--cache-dir", o.cache_dir), ("--catalog", o.v.get("catalog")), ("--channel", o.channel),
                        ("--config", o.config_path), ("--root", o.root)):
        if value:
            argv += [flag, value]
    _say(f"installing {name} {backend} first")
    rc = subprocess.call(argv)
    if rc != 0:
        _say(f"installing {name} {backend} failed (exit {rc}); not measured")
