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

    `pick-backend pick RECIPE --policy measured` then picks the fastest (at `--depth N`: by the results
    measured at that depth).  Exit 0 when at least one backend was measured, 3 when none could be (none
    installed, all failed), 5 when the model cannot be found or read, 130 on Ctrl-C (nothing half-written).
    """
    from selector import bench, render, render_bench
    from selector.cli.needs import model_packages

    if not n_prompt and not n_gen:
        raise Fail(EXIT_USAGE, "--prompt 0 and --gen 0 leave nothing to measure")
    model_packages("bench")
    o = Opts(ctx, kwargs)
    depths = o.depths or [0]
    (name,) = o.recipe_names([recipe])
    spec = bench.spec_of(o.catalog().name, name)
    if spec is None:
        raise Fail(EXIT_UNSUPPORTED, f"{name} has no benchmark tool that pick-backend can read "
                                     f"({bench.none_words(o.catalog().name, name)})")
    profile, d, cands = _candidates(ctx, o, name, backends, do_install)
    path, label, model = _model_file(model_spec)
    fits_note, ngl = _fit(profile, d, path, model, n_prompt + n_gen + max(depths))
    if fits_note:
        raise Fail(EXIT_UNSUPPORTED, fits_note)
    tests = [f"{t}{f'@d{x}' if x else ''}" for x in depths
             for t in (f"pp{n_prompt}" if n_prompt else None, f"tg{n_gen}" if n_gen else None) if t]
    job = {"o": o, "name": name, "spec": spec, "profile": profile, "d": d, "path": path, "label": label, "ngl": ngl,
           "tests": tests, "depths": depths, "repetitions": repetitions, "timeout": timeout, "unsaved": [],
           "at": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()}
    results = [_measure(job, v) for v in cands]
    ok = [r for r in results if r["status"] == bench.OK]
    # the winner: generation (else prompts) at the first depth asked for
    metric = next(t for t in tests if t.startswith("tg") or not n_gen)
    steady = [r for r in ok if metric in r["tests"] and not r["tests"][metric].get("noisy")]
    winner = max(steady, key=lambda r: r["tests"][metric]["avg_ts"])["backend"] if steady else None
    if as_json:
        render.emit_json({"schema_version": 1, "recipe": name, "model": {"label": label, "file": path},
                          "metric": metric, "depths": depths, "winner": winner,
                          "results": [{k: x for k, x in r.items() if k != "env"} for r in results]})
    else:
        render_bench.table(render.console(), results, winner, metric, tests)
    sys.exit(0 if ok else EXIT_UNSUPPORTED)


def _candidates(ctx, o: Opts, name: str, backends: str | None, do_install: bool) -> tuple:
    """(profile, decision, the supported backends to measure that are installed): --backends' own, else
    every supported one; --install installs the missing first.  Exit 3 where none is left."""
    from selector import engine

    profile, cat, _s, (d,), _w = decide_all(o, [name])
    rec = cat.recipes[name]
    wanted = [o.backend_name(name, b.strip()) for b in backends.split(",") if b.strip()] if backends else None
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
        profile, cat, _s, (d,), _w = decide_all(o, [name])
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
    return profile, d, cands


def _head(job: dict, v, dirname: str, server: str | None) -> dict:
    """What every record of one backend's run says: the build, the device and its driver, the model."""
    from selector import bench, engine

    o, name, dev = job["o"], job["name"], v.device
    head = {"recipe": name, "backend": v.name, "dir": dirname, "version": o.installed().get(name, {}).get(dirname),
            "device": {"key": engine.device_key(dev), "name": dev.name if dev else "CPU", "type": dev.type if dev else "cpu",
                       "driver": bench.driver_of(job["profile"], dev.type if dev else "cpu", dev.gpu if dev else None)},
            "model": {"key": bench.model_key(job["path"]), "label": job["label"], "file": job["path"]}, "at": job["at"]}
    if v.name == "system":  # not in the cache: the file on PATH is the build, its own number its version
        head["binary"] = bench.identity(server)
    return head


def _argv(job: dict, v, exe: str, head: dict, cache: str, dirname: str) -> list[str]:
    n_prompt = next((t.split("@")[0][2:] for t in job["tests"] if t.startswith("pp")), "0")
    n_gen = next((t.split("@")[0][2:] for t in job["tests"] if t.startswith("tg")), "0")
    argv = [exe, "-m", job["path"], "-p", n_prompt, "-n", n_gen, "-r", str(job["repetitions"]), "-o", "json"]
    if job["depths"] != [0]:  # llama-bench's -d: each test run again after that many tokens filled the context
        argv += ["-d", ",".join(map(str, job["depths"]))]
    dev = v.device
    if dev is not None and dev.type != "cpu":  # a build running on the CPU has no layers to give a GPU
        argv += ["-ngl", str(job["ngl"])]
    from selector.cli.models import _device_ids

    dev_id = _device_ids(cache, job["name"], dirname, head["version"]).get(head["device"]["key"]) if dev else None
    if dev_id:  # the number this build gave the device when `verify` ran it (ROCm0, Vulkan1)
        argv += ["-dev", dev_id]
    return argv


def _measure(job: dict, v) -> dict:
    """Run one backend's benchmark (once more where it was noisy) and keep a record of each test."""
    from selector import bench, engine
    from selector.install.states import cache_root

    o, name, d, spec, tests = job["o"], job["name"], job["d"], job["spec"], job["tests"]
    cache = cache_root(o.cache_dir)
    dirname = engine.install_dir_name(o.catalog().recipes[name], v.name, d.channel)
    server, exe = bench.tool_of(cache, name, dirname, o.binary_of(name), spec["binary"], job["profile"].os.name,
                           system=v.name == "system")
    env, _note, _group = engine.run_env_for(engine.Machine(job["profile"]), v)
    head = _head(job, v, dirname, server)
    if exe is None or not os.path.isfile(exe):
        where = os.path.dirname(server) if server else os.path.join(cache, "bin", name, dirname)
        return {**head, "status": bench.FAILED, "why": f"{spec['binary']} is not beside {o.binary_of(name)} in {where}",
                "evidence": [], "tests": {}}
    argv = _argv(job, v, exe, head, cache, dirname)
    _say(f"bench {v.name}: {os.path.basename(exe)} on {head['device']['name']} "
         f"({', '.join(tests)}, {job['repetitions']} runs each)...")
    out = _run_steady(argv, {**os.environ, **env}, job, head, v)
    _own_version(out, v.name)
    for t in tests:  # one record per test: whole, or (interrupted above) none
        try:
            bench.save(cache, head | bench.test_record(out, t))
        except OSError as e:
            if not job["unsaved"]:
                _say(f"warning: the results cannot be kept ({e.strerror or e}: {e.filename or cache}); "
                     "--policy measured will not see them")
            job["unsaved"].append(t)
    _say(f"bench {v.name}: " + (", ".join(f"{t} {x['avg_ts']:.1f} t/s" for t, x in out["tests"].items())
                                if out["status"] == bench.OK else f"failed: {out['why']}"))
    return {**out, "env": env}


def _run_steady(argv: list[str], env: dict, job: dict, head: dict, v) -> dict:
    """The run, measured once more where its runs varied a lot (a busy machine); the steadier kept."""
    from selector import bench

    dev, out = v.device, None
    for attempt in range(2):
        try:
            r = bench.run(argv, env, job["timeout"])
        except KeyboardInterrupt:
            _say(f"bench {v.name}: stopped; nothing recorded for it")
            sys.exit(130)
        got = bench.judge(head, r, job["tests"], dev is not None and dev.type != "cpu")
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
    return out


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
    if not res.fits:
        return (f"{model.label} does not fit on {d.device.name if d.device else 'this machine'}; nothing to measure "
                f"(`pick-backend plan {d.recipe} --model {path}` says what would)"), 0
    if res.status is fit.Status.PARTIAL:
        _say(f"{model.label}: {res.ngl} of {res.n_layer + 1} layers fit on the GPU; measuring with -ngl {res.ngl}")
        return None, res.ngl
    return None, 99


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
