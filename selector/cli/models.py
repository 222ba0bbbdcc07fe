"""After the pick: which models fit (``models``) and the launch line for one (``plan``).

Imported only when run (LAZY in selector/cli/app.py); the ``gguf`` package (and numpy with it) is
imported only when a model header is read.
"""

from __future__ import annotations

import os
import sys

import click

from selector.cli import plan_check
from selector.cli.core import describe_options, EXIT_INPUT, EXIT_INSTALL, EXIT_UNSUPPORTED, EXIT_USAGE, Fail, Opts, common, complete_backend, complete_recipe, decide_all  # noqa: E501

CACHE_TYPES = ("f16", "bf16", "f32", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")
GIB = 1 << 30


def _decision(o: Opts, recipe: str, backend: str | None = None):
    profile, cat, _s, (d,), _w = decide_all(o, [o.recipe_names([recipe], False)[0]], backend)
    if d.backend is None or not d.ok:
        runs = [x.name for x in d.backends if x.supported and x.name != d.backend]
        if d.pinned and d.backend and runs:  # the backend asked for does not run here, and another does
            raise Fail(EXIT_UNSUPPORTED, f"{d.recipe}: {d.backend} does not run here ({d.verdict(d.backend).reason}); "
                                         f"{', '.join(runs)} {'runs' if len(runs) == 1 else 'run'} here: --backend {runs[0]}, or leave "
                                         "--backend out")
        raise Fail(EXIT_UNSUPPORTED, f"{d.recipe}: {d.reason}; no backend runs here, so no model does")
    return profile, cat, d, d.verdict(d.backend)


def _cache(o: Opts) -> str:
    from selector.install.states import cache_root

    return cache_root(o.cache_dir)


def _device_ids(cache: str, recipe: str, dirname: str, version: str | None) -> dict:
    """{device key: the id the build gives it (ROCm0)} from the last verify of this build."""
    from selector import store

    rec = store.read(store.path(cache, "devices", f"{recipe}/{dirname}"))
    if not rec or rec.get("version") != version or not isinstance(rec.get("ids"), dict):
        return {}
    return {k: v for k, v in rec["ids"].items() if isinstance(k, str) and isinstance(v, str)}


def _bandwidth(o: Opts, profile, cache: str):
    """System memory's bandwidth, got once for the command where a plan needs it."""
    from selector.models.system_bandwidth import SystemBandwidth

    return SystemBandwidth(profile, cache, replayed=bool(o.root or o.profile_path),
                           say=lambda t: sys.stderr.write(f"pick-backend: {t}\n"))


def _one_depth(o) -> int | None:
    """plan --depth N: the depth its speed is given at beside an empty context (default: the planned context's)."""
    if o.depths and len(o.depths) > 1:
        raise Fail(EXIT_USAGE, f"--depth {','.join(map(str, o.depths))}: plan gives the speed at one depth")
    return o.depths[0] if o.depths else None


def _check_ctx(ctx_size: int | None) -> None:
    if ctx_size is not None and ctx_size <= 0:
        raise Fail(EXIT_USAGE, f"--ctx-size {ctx_size}: a context is a positive number of tokens (leave it out "
                               "for the largest that fits)")


CTX_HELP = ("The context of one slot (default: the largest that fits the whole model, up to its trained "
            "context; where none from 2048 does, 4096 or the trained context if smaller).")


@click.command("models")
@click.argument("recipe", shell_complete=complete_recipe)
@common
@describe_options
@click.option("--backend", default=None, shell_complete=complete_backend, help="Judge this backend instead of the pick.")
@click.option("--fits", "only_fits", is_flag=True, help="Only the models that fit on the picked device.")
@click.option("--ctx-size", type=int, default=None, help=CTX_HELP)
@click.option("--parallel", type=int, default=1, show_default=True,
              help="Slots: requests served at once, each with its own context (llama-server --parallel).")
@click.option("--read-headers", is_flag=True,
              help="Read each model's GGUF header over the network (a few MB each, cached) for an exact fit.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (docs/json.md, 'models').")
@click.pass_context
def models_cmd(ctx, recipe, backend, only_fits, ctx_size, parallel, read_headers, as_json, **kwargs):
    """Lemonade's models of RECIPE, largest first, and whether each fits on the picked device.

    Each is planned as `plan` plans it, from its GGUF header where it was read (by `plan`, or
    --read-headers), else from a guess by its download size.  Exit 0, or 3 when no backend of RECIPE
    runs here.
    """
    from selector import render, render_plan
    from selector.cli.needs import model_packages
    from selector.models import listing, planner

    o = Opts(ctx, kwargs)
    _check_ctx(ctx_size)
    _check_parallel(parallel)
    model_packages("models")
    profile, cat, d, v = _decision(o, recipe, backend)
    cache = _cache(o)
    got = listing.rows(profile, d, v, cache, ctx_size, parallel, read_headers, _bandwidth(o, profile, cache))
    rows = [r for r in got.rows if r.fits] if only_fits else got.rows
    dev = planner.targets(profile, d, v)
    on = {"backend": d.backend, "device": d.device.to_dict() if d.device else None,
          "memory": " + ".join(x["described"] for x in dev) if dev else planner.gib(profile.cpu.memory_bytes) + " system"}
    if read_headers:
        _say_unread(got)
    if as_json:
        render.emit_json({"schema_version": 1, "recipe": d.recipe, **on, "parallel": parallel,
                          "models": [render_plan.row_json(r) for r in rows]})
        return
    con = render.console()
    for w in profile.warnings:
        if w.probe == "described":
            con.print(w.message, style="yellow", markup=False, highlight=False, soft_wrap=True)
    gpus = f"{len(dev)}x " if len(dev) > 1 and len({x['name'] for x in dev}) == 1 else ""
    con.print(f"{d.recipe}: {d.backend} on {gpus}{d.device.name if d.device else 'CPU'} ({on['memory']})"
              + (f", {parallel} slots, each with the context shown" if parallel > 1 else ""), markup=False)
    if not rows:
        con.print("no model of Lemonade's list fits" if only_fits else f"Lemonade lists no model for {d.recipe}")
        return
    render_plan.print_models(con, rows, d.recipe, listing.gguf_recipe(d.recipe))


def _say_unread(got) -> None:
    """--read-headers: how many headers were read, and each cause of those that were not, once."""
    bad = got.unread
    sys.stderr.write(f"pick-backend: {got.read_now} GGUF headers read now, {got.cached} from the cache"
                     + (f", {len(bad)} not read" if bad else "")
                     + (f", {got.not_tried} not tried after the first {len(bad)} failed" if got.not_tried else "")
                     + "\n")
    for r in bad:
        sys.stderr.write(f"pick-backend: {r.name}: {r.unread}\n")


@click.command("plan", context_settings={"ignore_unknown_options": False})
@click.argument("recipe", shell_complete=complete_recipe)
@click.option("--model", "-m", "model_spec", required=True,
              help="A Lemonade model name, org/repo:QUANT, an http(s) URL or a path of a GGUF.")
@common
@describe_options
@click.option("--backend", default=None, shell_complete=complete_backend, help="Plan for this backend instead of the pick.")
@click.option("--ctx-size", type=int, default=None, help=CTX_HELP)
@click.option("--cache-type-k", type=click.Choice(CACHE_TYPES), default="f16", help="KV cache type of K.")
@click.option("--cache-type-v", type=click.Choice(CACHE_TYPES), default="f16", help="KV cache type of V.")
@click.option("--parallel", type=int, default=1, show_default=True,
              help="Slots: requests served at once, each with the planned context (llama-server --parallel).")
@click.option("--exec", "do_exec", is_flag=True, help="Run the launch line (arguments after -- are passed on).")
@plan_check.options
@click.option("--json", "as_json", is_flag=True, help="Print JSON (docs/json.md, 'plan').")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def plan_cmd(ctx, recipe, model_spec, backend, ctx_size, cache_type_k, cache_type_v, parallel, do_exec, check_way,
             check_timeout, as_json, extra, **kwargs):
    """The launch line for MODEL on RECIPE's picked build: device, -ngl, --ctx-size, environment.

    Reads the model's GGUF header (from a file, or by range requests, never the weights).  Exit 0
    when it fits (all layers, or -ngl K of them), 3 when it does not fit or no backend runs here,
    4 for --exec without an installed build, 5 when the model cannot be read.  With --check: 0 when
    the engine confirms every buffer, 3 when it contradicts one, 4 when it does not answer.
    """
    from selector import render, render_plan
    from selector.cli.needs import model_packages
    from selector.engine import install_dir_name
    from selector.models import fit, planner, planning, source
    from selector.models.facts import fit_table
    from selector.models.gguf_header import ModelError

    o = Opts(ctx, kwargs)
    _check_plan_flags(o, extra, do_exec, as_json)
    plan_check.refuse_flags(o, check_way, do_exec)
    model_packages("plan")
    _check_ctx(ctx_size)
    _check_parallel(parallel)
    profile, cat, d, v = _decision(o, recipe, backend)
    rec = cat.recipes[d.recipe]
    cache = _cache(o)
    dirname = install_dir_name(rec, d.backend, d.channel)
    version = o.installed().get(d.recipe, {}).get(dirname)
    try:
        model = _model(model_spec, d.recipe)
        plan_check.refuse(check_way, d.recipe in fit_table()["gguf_recipes"], model)
        planned = planning.plan_model(profile, d, v, model, cache, _device_ids(cache, d.recipe, dirname, version),
                                      ctx_size, cache_type_k, cache_type_v, parallel, _bandwidth(o, profile, cache),
                                      _one_depth(o))
    except source.SpecError as e:
        raise Fail(EXIT_USAGE, str(e)) from None
    except ModelError as e:
        raise Fail(EXIT_INPUT, str(e)) from None
    except fit.FitError as e:
        raise Fail(EXIT_USAGE, str(e)) from None
    except planner.UnknownMemory as e:
        raise Fail(EXIT_UNSUPPORTED, f"{d.recipe} {d.backend} runs on a GPU here, but {e}") from None
    p = planned.plan
    better = _better(o, recipe, d, model, cache, planned, ctx_size, cache_type_k, cache_type_v, parallel)
    binary = o.binary_of(d.recipe)
    exe = None
    if d.backend == "system":  # the machine's own: this one's PATH, or what the capture or profile recorded
        exe = profile.executables.get(binary) if binary else None
    elif version is not None:
        exe = planner.exe_path(cache, d.recipe, dirname, binary, profile.os.name)
    planned, measured = plan_check.with_measured(planned, cache, exe, profile, model, bool(o.root or o.profile_path))
    p = planned.plan
    header = planned.from_header
    out = render_plan.plan_json(
        model_spec, d, model, planned, exe, binary, version is not None,
        planner.lemonade_line(rec, d, p, model) if model.name and header else None,
        planner.lemonade_note(p) if model.name and header else None,
        render_plan.plan_warnings(p, None if o.root or o.profile_path else os.environ),
        next((w.message for w in profile.warnings if w.probe == "described"), None), better)
    if measured:
        out["fit"]["measured"] = {k: measured.get(k) for k in ("date", "build", "way")}
        out["warnings"] += plan_check.over_words(p)
    if do_exec:
        _exec(d, model, exe, binary, p, out, extra)
    con = render.console()
    if not as_json:
        devs = planner.targets(profile, d, v)
        where = " + ".join(f"{x['name']} ({x['described']})" for x in devs) if devs else "the CPU"
        render_plan.print_plan(con, out, p if header else None, f"{model.label} on {d.backend} ({where})", d.recipe,
                               measured=measured)
    code = plan_check.run(con, out, planned, exe, check_way, check_timeout, cache, profile, model, as_json) \
        if check_way and p.fits else None
    if check_way and not p.fits:
        plan_check.not_run(con, out, as_json)
    if as_json:
        render.emit_json(out)
    if not p.fits or (measured and not check_way and plan_check.over_words(p)):
        sys.exit(EXIT_UNSUPPORTED)
    if code:
        sys.exit(code)


def _better(o: Opts, recipe: str, d, model, cache: str, planned, *how) -> tuple | None:
    """Another backend that runs here and fits more of the model (planning.better_backend)."""
    from selector.models import planning

    def decide(name):
        try:
            profile, _c, d2, v2 = _decision(o, recipe, name)
        except Fail:
            return None
        return profile, d2, v2, _bandwidth(o, profile, cache)
    return planning.better_backend(planned, d, model, cache, how, decide)


def _check_plan_flags(o: Opts, extra, do_exec: bool, as_json: bool) -> None:
    if extra and not do_exec:
        raise Fail(EXIT_USAGE, f"unexpected arguments {' '.join(extra)!r}: arguments after -- go with --exec")
    if do_exec and as_json:
        raise Fail(EXIT_USAGE, "--exec starts the server in this process: there is no JSON to print after it "
                               "(plan --json shows the line; --exec runs it)")
    if do_exec and (o.root or o.profile_path or o.described):
        other = "--root" if o.root else "--profile" if o.profile_path else "--gpu/--vram/--ram"
        raise Fail(EXIT_USAGE, f"--exec runs a build on this machine, and {other} plans for another one; "
                               "plan it here without it")


def _model(spec: str, recipe: str):
    """The model ``spec`` names, refused (exit 2) where it is a model of another recipe."""
    from selector.models import source

    known = source.lemonade_model(spec) if not os.path.exists(spec) else None
    if known and known[1]["recipe"] != recipe:
        raise Fail(EXIT_USAGE, f"{known[0]} is a {known[1]['recipe']} model (Lemonade's list), not {recipe}; "
                               f"`pick-backend models {known[1]['recipe']}` is where it fits")
    return source.resolve(spec)


def _exec(d, model, exe, binary, p, out: dict, extra) -> None:
    """--exec: replace this process with the build, running the plan's line."""
    if exe is None:
        import shutil

        found = shutil.which(binary) if binary and d.backend != "system" else None
        raise Fail(EXIT_INSTALL, f"{d.recipe} {d.backend} is not installed; run `pick-backend install {d.recipe}` first"
                   + (f", or run the {binary} on PATH ({found}): --backend system, or --prefer-system to pick it "
                      "where it runs here" if found else ""))
    if not p.fits:
        raise Fail(EXIT_UNSUPPORTED, f"{model.label} does not fit here; not starting it")
    # LLAMA_ARG_* variables are llama-server's own options: the line pins them, the shell's must not
    # change what it allocates (LLAMA_ARG_SWA_FULL, LLAMA_ARG_REPACK, ...)
    env = {**{k: val for k, val in os.environ.items() if not k.startswith("LLAMA_ARG_")}, **out["env"]}
    sys.stdout.flush()
    os.execve(exe, [exe, *out["args"], *extra], env)


def _check_parallel(n: int) -> None:
    from selector.models.fit import MAX_SLOTS

    if not 1 <= n <= MAX_SLOTS:
        raise Fail(EXIT_USAGE, f"--parallel {n}: llama-server takes 1 to {MAX_SLOTS} slots (LLAMA_MAX_SEQ)")


