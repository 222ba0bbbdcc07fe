"""After the pick: which models fit (``models``) and the launch line for one (``plan``).

Imported only when run (LAZY in selector/cli/app.py); the ``gguf`` package (and numpy with it) is
imported only when a model header is read.
"""

from __future__ import annotations

import os
import shlex
import sys

import click

from selector.cli.core import describe_options, EXIT_INPUT, EXIT_INSTALL, EXIT_UNSUPPORTED, EXIT_USAGE, Fail, Opts, common, complete_backend, complete_recipe, decide_all  # noqa: E501

CACHE_TYPES = ("f16", "bf16", "f32", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")
GIB = 1 << 30


def _decision(o: Opts, recipe: str, backend: str | None = None):
    profile, cat, _s, (d,), _w = decide_all(o, [o.recipe_names([recipe], False)[0]], backend)
    if d.backend is None or not d.ok:
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


def _gguf_recipe(recipe: str) -> bool:
    from selector.models.facts import fit_table

    return recipe in fit_table()["gguf_recipes"]


def _size_fit(profile, d, v, size: int, weights_only: bool = False) -> dict:
    """Fit from the file size alone (whisper.cpp, sd.cpp, or a header not read): weights + reserve."""
    from selector.models import fit, planner

    runtime = planner.runtime_of(d, v)
    devs = planner.targets(profile, d, v)
    need = size + fit.reserve(runtime)
    if devs:
        dev = devs[0]
        ok = need <= dev["budget"]
        if not ok and len(devs) > 1:  # the GPUs the same build serves, layers split over them as plan would
            total = sum(d["budget"] for d in devs) - fit.reserve(runtime) * (len(devs) - 1)
            if need <= total:
                return {"status": "split", "basis": "file size", "ctx": None, "runtime": runtime,
                        "devices": [{"name": d["name"], "needs_bytes": need * d["budget"] // sum(x["budget"] for x in devs),
                                     "budget_bytes": d["budget"], "memory": d["memory"](0)} for d in devs]}
        out = {"status": "fits" if ok else "no", "basis": "file size", "ctx": None, "runtime": runtime,
               "devices": [{"name": dev["name"], "needs_bytes": need, "budget_bytes": dev["budget"],
                            "memory": dev["memory"](need)}]}
        gpu_room = sum(x["budget"] - fit.reserve(runtime) for x in devs)
        cpu_room = (profile.cpu.memory_bytes or 0) - fit.reserve("cpu")
        if not ok and weights_only and not any(x["shared"] for x in devs) and size <= gpu_room + cpu_room:
            # too big for the GPUs, not for them and system memory together: -ngl K (or, for a mixture
            # of experts, --n-cpu-moe N) runs it with part of it there; which, the header says
            out.update(status="partial", cpu_bytes=max(size - gpu_room, 0), cpu_budget=cpu_room)
        return out
    room = (profile.cpu.memory_bytes or 0)
    return {"status": "cpu" if need <= room else "no", "basis": "file size", "ctx": None, "runtime": runtime,
            "devices": [], "cpu_bytes": need, "cpu_budget": room}


def _where_words(res: dict) -> str:
    s = res["status"]
    if s in ("fits", "split"):
        mems = sorted({x.get("memory", "VRAM") for x in res["devices"]})
        return ("split: " if s == "split" else "") + ", ".join(mems)
    if s == "partial" and "ngl" not in res:  # from the file size
        return "VRAM + system memory"
    if s == "partial":
        return f"{res['ngl']}/{res['n_layer'] + 1} layers, rest on CPU"
    if s == "experts":
        return f"all layers, experts of {res['n_cpu_moe']} on CPU"
    if s == "cpu":
        return "system memory"
    return "does not fit"


@click.command("models")
@click.argument("recipe", shell_complete=complete_recipe)
@common
@describe_options
@click.option("--backend", default=None, shell_complete=complete_backend, help="Judge this backend instead of the pick.")
@click.option("--fits", "only_fits", is_flag=True, help="Only the models that fit on the picked device.")
@click.option("--ctx-size", type=int, default=None, help="Judge every model at this context (default: the largest that fits).")
@click.option("--parallel", type=int, default=1, show_default=True,
              help="Slots: requests served at once, each with its own context (llama-server --parallel).")
@click.option("--read-headers", is_flag=True,
              help="Read each model's GGUF header over the network (a few MB each, cached) for an exact fit.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (docs/json.md, 'models').")
@click.pass_context
def models_cmd(ctx, recipe, backend, only_fits, ctx_size, parallel, read_headers, as_json, **kwargs):
    """Lemonade's models of RECIPE, largest first, and whether each fits on the picked device.

    The fit is exact for a model whose GGUF header was read (by `plan`, or --read-headers) and from
    the download size otherwise.  Exit 0, or 3 when no backend of RECIPE runs here.
    """
    from selector import render
    from selector.cli.needs import model_packages
    from selector.models import fit, planner, source
    from selector.models.gguf_header import ModelError

    o = Opts(ctx, kwargs)
    if ctx_size is not None and ctx_size <= 0:
        raise Fail(EXIT_USAGE, f"--ctx-size {ctx_size}: a context is a positive number of tokens")
    _check_parallel(parallel)
    model_packages("models")
    profile, cat, d, v = _decision(o, recipe, backend)
    cache = _cache(o)
    rows = []
    cpu_bw = None
    for name, entry in source.catalog()["models"].items():
        if entry["recipe"] != d.recipe:
            continue
        size = int(entry["size_gb"] * 1e9)
        facts, note = None, None
        try:
            if not _gguf_recipe(d.recipe):
                raise ModelError("")  # sized by its download: no header to read
            model = source.resolve(name) if read_headers else _cached_model(cache, entry)
            facts = source.facts(model, cache, read_allowed=read_headers) if model else None
            if read_headers:
                _remember_checkpoint(cache, model)
        except ModelError as e:
            note = str(e) or None
        res = None
        if facts is not None and _gguf_recipe(d.recipe):
            try:
                res = planner.fit_model(profile, d, v, facts, ctx_size, parallel=parallel)
                res["basis"] = "header"
            except (fit.FitError, planner.UnknownMemory) as e:
                note = str(e)
        if res is None:
            res = _size_fit(profile, d, v, size, _gguf_recipe(d.recipe))
        speed = likely = None
        if res["basis"] == "header" and res["status"] != "no":
            if res["status"] in ("cpu", "partial", "experts") and cpu_bw is None:
                cpu_bw = _cpu_bandwidth(o, profile, cache) or False  # once for every row, and only if asked for
            est = planner.estimate_speed(profile, res, facts, planner.targets(profile, d, v), cpu_bw or None)
            speed = est["tokens_per_s"] if est else None
            likely = est["estimate"]["tokens_per_s"] if est and est.get("estimate") else None
        row = {"name": name, "checkpoint": entry["checkpoint"], "size_bytes": size, "labels": entry["labels"],
               "fits": res["status"] != "no", "status": res["status"], "where": _where_words(res),
               "ctx": res.get("ctx"), "trained_ctx": facts.get("n_ctx_train") if facts else None,
               "basis": res["basis"], "tokens_per_s": speed, "tokens_per_s_estimate": likely,
               **({"note": note} if note else {})}
        rows.append(row)
    rows.sort(key=lambda r: (-r["size_bytes"], r["name"]))
    if only_fits:
        rows = [r for r in rows if r["fits"]]
    dev = planner.targets(profile, d, v)
    on = {"backend": d.backend, "device": d.device.to_dict() if d.device else None,
          "memory": " + ".join(x["described"] for x in dev) if dev else planner.gib(profile.cpu.memory_bytes) + " system"}
    if as_json:
        render.emit_json({"schema_version": 1, "recipe": d.recipe, **on, "parallel": parallel, "models": rows})
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
    lines = [("model", "size", "fits", "context", "speed", "labels")]
    for r in rows:
        c = "-" if r["ctx"] is None else (f"{r['ctx']}" + ("" if r["trained_ctx"] in (None, r["ctx"]) else f"/{r['trained_ctx']}"))
        if r["ctx"] is None and r["fits"] and r["basis"] == "file size" and _gguf_recipe(d.recipe):
            c = "header not read"
        fits = ("weights fit: " if r["basis"] == "file size" and _gguf_recipe(d.recipe) else "") + r["where"]
        lines.append((r["name"], f"{r['size_bytes'] / 1e9:.1f} GB", fits if r["fits"] else "no", c,
                      f"~{r['tokens_per_s_estimate']:.0f} t/s" if r["tokens_per_s_estimate"] else
                      f"≤{r['tokens_per_s']:.0f} t/s" if r["tokens_per_s"] else "-", ",".join(r["labels"])))
    widths = [max(len(x[i]) for x in lines) for i in range(5)]
    for i, line in enumerate(lines):
        text = "  ".join(x.ljust(w) for x, w in zip(line, widths)) + "  " + line[5]
        con.print(text.rstrip(), style="bold" if i == 0 else None, markup=False, highlight=False, soft_wrap=True)
    for r in rows:
        if r.get("note"):
            con.print(f"{r['name']}: {r['note']}", style="yellow", markup=False, highlight=False, soft_wrap=True)
    if any(r["tokens_per_s"] for r in rows):
        con.print("speed: ≤ at most this many tokens/s generated, by the memory bandwidth bound; ~ what published "
                  "runs of the backend on this GPU family reached of that bound (`plan` gives the basis and range)",
                  style="dim", markup=False)
    if any(r["basis"] == "file size" for r in rows) and _gguf_recipe(d.recipe):
        con.print("weights fit: the download fits; whether a context does too is in the GGUF header, which "
                  f"`pick-backend plan {d.recipe} --model NAME` or `models --read-headers` reads (a few MB each)",
                  style="dim", markup=False)


def _cached_model(cache: str, entry: dict):
    """The model as an earlier read resolved it (its files are in the cached record), or None."""
    from selector import store
    from selector.models import source

    idx = store.read(store.path(cache, "models", "checkpoint:" + entry["checkpoint"]))
    files = idx.get("files") if idx else None
    if isinstance(files, list) and files and all(isinstance(f, str) for f in files):
        return source.Model(entry["checkpoint"], files, None, entry, entry["checkpoint"])
    return None


def _remember_checkpoint(cache: str, model) -> None:
    from selector import store

    if model.checkpoint:
        try:
            store.write(store.path(cache, "models", "checkpoint:" + model.checkpoint), {"files": model.files})
        except OSError:
            pass


@click.command("plan", context_settings={"ignore_unknown_options": False})
@click.argument("recipe", shell_complete=complete_recipe)
@click.option("--model", "-m", "model_spec", required=True,
              help="A Lemonade model name, org/repo:QUANT, an http(s) URL or a path of a GGUF.")
@common
@describe_options
@click.option("--backend", default=None, shell_complete=complete_backend, help="Plan for this backend instead of the pick.")
@click.option("--ctx-size", type=int, default=None, help="The context to plan for (default: the largest that fits).")
@click.option("--cache-type-k", type=click.Choice(CACHE_TYPES), default="f16", help="KV cache type of K.")
@click.option("--cache-type-v", type=click.Choice(CACHE_TYPES), default="f16", help="KV cache type of V.")
@click.option("--parallel", type=int, default=1, show_default=True,
              help="Slots: requests served at once, each with the planned context (llama-server --parallel).")
@click.option("--exec", "do_exec", is_flag=True, help="Run the launch line (arguments after -- are passed on).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (docs/json.md, 'plan').")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def plan_cmd(ctx, recipe, model_spec, backend, ctx_size, cache_type_k, cache_type_v, parallel, do_exec, as_json, extra,
             **kwargs):
    """The launch line for MODEL on RECIPE's picked build: device, -ngl, --ctx-size, environment.

    Reads the model's GGUF header (from a file, or by range requests, never the weights).  Exit 0
    when it fits (all layers, or -ngl K of them), 3 when it does not fit or no backend runs here,
    4 for --exec without an installed build, 5 when the model cannot be read.
    """
    from selector import render
    from selector.cli.needs import model_packages
    from selector.engine import install_dir_name
    from selector.models import fit, planner, source
    from selector.models.gguf_header import ModelError

    o = Opts(ctx, kwargs)
    if extra and not do_exec:
        raise Fail(EXIT_USAGE, f"unexpected arguments {' '.join(extra)!r}: arguments after -- go with --exec")
    model_packages("plan")
    if do_exec and as_json:
        raise Fail(EXIT_USAGE, "--exec starts the server in this process: there is no JSON to print after it "
                               "(plan --json shows the line; --exec runs it)")
    if do_exec and (o.root or o.profile_path or o.described):
        other = "--root" if o.root else "--profile" if o.profile_path else "--gpu/--vram/--ram"
        raise Fail(EXIT_USAGE, f"--exec runs a build on this machine, and {other} plans for another one; "
                               "plan it here without it")
    _check_parallel(parallel)
    profile, cat, d, v = _decision(o, recipe, backend)
    rec = cat.recipes[d.recipe]
    cache = _cache(o)
    known = source.lemonade_model(model_spec) if not os.path.exists(model_spec) else None
    if known and known[1]["recipe"] != d.recipe:
        raise Fail(EXIT_USAGE, f"{known[0]} is a {known[1]['recipe']} model (Lemonade's list), not {d.recipe}; "
                               f"`pick-backend models {known[1]['recipe']}` is where it fits")
    try:
        model = source.resolve(model_spec)
    except ModelError as e:
        raise Fail(EXIT_INPUT, str(e)) from None
    dirname = install_dir_name(rec, d.backend, d.channel)
    installed = o.installed().get(d.recipe, {})
    version = installed.get(dirname)
    header_model = _gguf_recipe(d.recipe)  # llama.cpp takes GGUF only: the header is read, whatever the name
    try:
        if header_model:
            facts = source.facts(model, cache)
            _remember_checkpoint(cache, model)
            ids = _device_ids(cache, d.recipe, dirname, version)
            res = planner.fit_model(profile, d, v, facts, ctx_size, cache_type_k, cache_type_v, ids, parallel)
            if res.get("instead_of"):  # layers or experts in system memory: its bandwidth decides which is faster
                bw = _cpu_bandwidth(o, profile, cache)
                if bw:
                    res = planner.fit_model(profile, d, v, facts, ctx_size, cache_type_k, cache_type_v, ids, parallel,
                                            cpu_bw=bw)
        else:
            facts = None
            size = int(model.entry["size_gb"] * 1e9) if model.entry else _file_size(model.files[0])
            res = _size_fit(profile, d, v, size)
    except ModelError as e:
        raise Fail(EXIT_INPUT, str(e)) from None
    except fit.FitError as e:
        raise Fail(EXIT_USAGE, str(e)) from None
    except planner.UnknownMemory as e:
        raise Fail(EXIT_UNSUPPORTED, f"{d.recipe} {d.backend} runs on a GPU here, but {e}") from None
    binary = o.binary_of(d.recipe)
    exe = None
    if d.backend == "system":  # the machine's own: this one's PATH, or what the capture or profile recorded
        exe = profile.executables.get(binary) if binary else None
    elif version is not None:
        exe = planner.exe_path(cache, d.recipe, dirname, binary, profile.os.name)
    argv = planner.llama_server_args(res, planner.model_arg(model), {}) if header_model else \
        planner.model_arg(model, hf=False)
    devs = planner.targets(profile, d, v)
    cpu_bw = _cpu_bandwidth(o, profile, cache) if facts and res["status"] in ("cpu", "partial", "experts") else None
    speed = planner.estimate_speed(profile, res, facts, devs, cpu_bw) if facts else None
    if speed and res.get("instead_of"):  # the way not taken, by the same bound
        alt = planner.estimate_speed(profile, {**res, **res["instead_of"]}, facts, devs, cpu_bw)
        if alt:
            res["instead_of"]["tokens_per_s"] = alt["tokens_per_s"]
    out = {
        "schema_version": 1, "recipe": d.recipe, "backend": d.backend, "runtime": res.get("runtime"),
        "model": {"spec": model_spec, "name": model.name, "files": model.files,
                  **({k: facts[k] for k in ("arch", "file_type", "params", "n_layer", "n_ctx_train", "weights_bytes")}
                     if facts else {})},
        "fit": {k: res[k] for k in res if k not in ("backend",)},
        "installed": version is not None,
        "install": None if version is not None or d.backend == "system" else f"pick-backend install {d.recipe}",
        "executable": exe, "args": argv, "env": planner.plan_env(d.run_env, res),
        "command": shlex.join([exe or binary or "llama-server"] + argv),
        "lemonade": planner.lemonade_line(rec, d, res, model) if model.name else None,
        "lemonade_note": planner.lemonade_note(res) if model.name and header_model else None,
        "device_ids_known": bool(res.get("devices")) and all(x.get("id") for x in res["devices"]),
        "speed_estimate": speed,
        "speed_missing": planner.speed_missing(profile, res, devs, cpu_bw) if facts and not speed else None,
        "warnings": (_engine_env_warnings(os.environ) if not (o.root or o.profile_path) else []) + _split_order_warning(res),
        "described": next((w.message for w in profile.warnings if w.probe == "described"), None),
    }
    if do_exec:
        if exe is None:
            raise Fail(EXIT_INSTALL, f"{d.recipe} {d.backend} is not installed; run `pick-backend install {d.recipe}` first")
        if res["status"] == "no":
            raise Fail(EXIT_UNSUPPORTED, f"{model.label} does not fit here; not starting it")
        # LLAMA_ARG_* variables are llama-server's own options: the line pins them, the shell's must not
        # change what it allocates (LLAMA_ARG_SWA_FULL, LLAMA_ARG_REPACK, ...)
        env = {**{k: val for k, val in os.environ.items() if not k.startswith("LLAMA_ARG_")}, **out["env"]}
        sys.stdout.flush()
        os.execve(exe, [exe, *argv, *extra], env)
    if as_json:
        render.emit_json(out)
    else:
        _plan_human(render.console(), out, res, d, model, devs)
    if res["status"] == "no":
        sys.exit(EXIT_UNSUPPORTED)


def _cpu_bandwidth(o: Opts, profile, cache: str) -> tuple[float, str] | None:
    """System memory bandwidth for a plan that reads weights there: the tables (a CPU sharing a known
    device's memory), else measured once on this machine and kept in the cache; a machine that is
    only replayed (--root, --profile) is never measured: its CPU platform's peak from the tables, or
    nothing."""
    import datetime

    from selector import store
    from selector.models.speed import cpu_bandwidth, cpu_platform_bandwidth

    known = cpu_bandwidth(profile)
    if known:
        return known
    if o.root or o.profile_path or o.described:  # another machine: its platform's peak, never a measurement here
        return cpu_platform_bandwidth(profile)
    cpu = profile.cpu
    threads = cpu.cores or os.cpu_count() or 1
    rec_path = store.path(cache, "machine", f"memory-bandwidth:{cpu.brand}:{threads}:{cpu.memory_bytes}")
    rec = store.read(rec_path)
    if not (rec and isinstance(rec.get("gbps"), (int, float)) and rec["gbps"] > 0 and isinstance(rec.get("at"), str)):
        from probes.bandwidth import measure_read

        sys.stderr.write("pick-backend: measuring this machine's memory bandwidth (about a second; kept in the "
                         "cache)...\n")
        rec = {"gbps": measure_read(threads), "threads": threads,
               "at": datetime.date.today().isoformat()}
        try:
            store.write(rec_path, rec)
        except OSError as e:  # a read-only cache: measured again next time, and said so
            sys.stderr.write(f"pick-backend: the measurement cannot be kept ({e.strerror or e}); it is taken again "
                             "on every plan\n")
    return float(rec["gbps"]), f"measured here on {rec['at']}: {threads} threads reading memory"


def _split_order_warning(res: dict) -> list[str]:
    """Unequal --tensor-split shares over Vulkan GPUs the line cannot name: Vulkan numbers its devices in
    its own order, so the shares may land on other cards than the plan's."""
    shares = res.get("tensor_split") or []
    if res.get("runtime") != "vulkan" or len(set(shares)) < 2 or all(x.get("id") for x in res.get("devices", [])):
        return []
    return ["--tensor-split gives its shares in Vulkan's device order, which this plan does not know: the shares "
            "are for the GPUs in the order listed here; `pick-backend verify llamacpp` reads the build's order, and "
            "the plan then names each device (--device)"]


def _engine_env_warnings(env) -> list[str]:
    """llama-server reads LLAMA_ARG_<OPTION> from its environment: set in this shell, they change what the
    printed line allocates when it is run from here (``--exec`` drops them)."""
    names = sorted(k for k in env if k.startswith("LLAMA_ARG_"))
    if not names:
        return []
    return [f"{', '.join(f'{k}={env[k]}' for k in names)} in this environment set llama-server options the plan "
            "does not count (llama-server reads LLAMA_ARG_* variables); --exec drops them, a line run from this "
            "shell does not"]


def _check_parallel(n: int) -> None:
    from selector.models.fit import MAX_SLOTS

    if not 1 <= n <= MAX_SLOTS:
        raise Fail(EXIT_USAGE, f"--parallel {n}: llama-server takes 1 to {MAX_SLOTS} slots (LLAMA_MAX_SEQ)")


def _file_size(path: str) -> int:
    from selector.models.gguf_header import ModelError

    try:
        return os.stat(path).st_size
    except OSError as e:
        raise ModelError(f"{path}: cannot be read ({e.strerror})") from None


def _plan_human(con, out: dict, res: dict, d, model, devs) -> None:
    from selector.models.planner import size

    say = lambda text, **k: con.print(text, markup=False, highlight=False, soft_wrap=True, **k)  # noqa: E731
    where = " + ".join(f"{x['name']} ({x['described']})" for x in devs) if devs else "the CPU"
    say(f"{model.label} on {d.backend} ({where})", style="bold")
    if out.get("described"):
        say(out["described"], style="yellow")
    s = res["status"]
    trained = res.get("trained_ctx")
    ctx = res.get("ctx")
    n = res.get("parallel", 1)
    slots = f", {n} slots of that context each" if n > 1 else ""
    held = res.get("devices", [])
    gpus = f"{len(held)} GPUs" if len(held) > 1 else "GPU"
    split = f", --tensor-split {','.join(f'{x:g}' for x in res['tensor_split'])}" if res.get("tensor_split") else ""
    if s == "fits":
        say(f"fits: all {res.get('n_layer', 0) + 1 if 'n_layer' in res else ''} layers"
            + (f", context {ctx}" + (" (the header gives no trained context; 4096 is assumed as its limit)"
                                     if trained is None else f" of {trained} trained" if trained != ctx
                                     else " (its trained context)") + slots
               if ctx else "") if "n_layer" in res else "fits (from the file size)")
    elif s == "split":
        say(f"fits split over {len(res['devices'])} GPUs (--tensor-split {','.join(f'{x:g}' for x in res['tensor_split'])}), "
            f"context {ctx}{slots}")
    elif s == "partial":
        say(f"partly: {res['ngl']} of {res['n_layer'] + 1} layers on the {gpus} (-ngl {res['ngl']}{split}), the rest "
            f"on the CPU, context {ctx}{slots}")
    elif s == "experts":
        say(f"fits with the experts of the first {res['n_cpu_moe']} layers in system memory "
            f"(--n-cpu-moe {res['n_cpu_moe']}) and everything else on the {gpus}{split and f' ({split[2:]})'}, "
            f"context {ctx}{slots}")
    elif s == "cpu":
        say("runs on the CPU in system memory" + (f", context {ctx}" if ctx else "") + slots)
    else:
        say("does not fit" + (f" at context {ctx}" if ctx else ""), style="red")
    for x in res.get("devices", []):
        parts = [f"{size(x[k])} {w}" for k, w in (("weights_bytes", "weights"), ("kv_bytes", "KV"),
                                                   ("compute_bytes", "compute")) if x.get(k) is not None]
        say(f"  {x['name']}: {' + '.join(parts) + ' = ' if parts else ''}{size(x['needs_bytes'])} of "
            f"{size(x['budget_bytes'])} usable" + (f" ({x['memory']})" if x.get("memory") and s != "no" else ""))
    cpu = res.get("cpu")
    if cpu and s in ("partial", "experts", "cpu", "fits", "split", "no"):
        terms = [(cpu["weights"], "model (mapped)" if s == "cpu" or s == "no" and not res.get("devices") else
                  "weights" if s in ("partial", "no") else "token embeddings and experts (mapped)" if s == "experts"
                  else "token embeddings (mapped)"),
                 (cpu["repack"], "repacked"), (cpu["kv"], "KV"), (cpu["compute"], "compute"), (cpu["output"], "output")]
        text = " + ".join(f"{size(b)} {w}" for b, w in terms if b)
        budget = res.get("cpu_budget")
        say(f"  system memory: {text} = {size(cpu['total'])}" + (f" of {size(budget)} usable" if budget else ""))
    elif res.get("cpu_bytes") and s in ("partial", "cpu", "fits", "split"):
        say(f"  system memory: {size(res['cpu_bytes'])}")
    alt = res.get("instead_of")
    if alt:
        alt_words = (f"-ngl {alt['ngl']} ({alt['ngl']} of {res['n_layer'] + 1} layers on the GPU)" if alt["status"] == "partial"
                     else f"--n-cpu-moe {alt['n_cpu_moe']} (the experts of the first {alt['n_cpu_moe']} layers in system memory)")
        e = out["speed_estimate"]
        why = (f"at most ~{e['tokens_per_s']:.0f} tokens/s against ~{alt['tokens_per_s']:.0f}"
               if e and alt.get("tokens_per_s") else "system memory is the slower to read")
        say(f"  rather than {alt_words}, which would read {size(alt['cpu_read_bytes'])} per token from system memory; "
            f"this reads {size(res['cpu_read_bytes'])} ({why})", style="dim")
    for sug in res.get("suggest", []) if s in ("no", "partial", "experts") else []:
        say(f"  would fit better: {sug['says']}" + (f" ({' '.join(sug['flags'])})" if sug.get("flags") else ""))
    for w in out.get("warnings", []):
        say(f"! {w}", style="yellow")
    if out["speed_estimate"]:
        e = out["speed_estimate"]
        est = e.get("estimate")
        if est:
            say(f"speed: ~{est['tokens_per_s']:.0f} tokens/s generated ({est['low']:.0f}-{est['high']:.0f}; "
                f"{est['basis']}); at most ~{e['tokens_per_s']:.0f} by the bandwidth bound ({e['basis']})", style="dim")
        else:
            say(f"speed: at most ~{e['tokens_per_s']:.0f} tokens/s generated (estimate: {e['basis']})"
                # a plan all on GPUs says why it has the bound alone; a CPU share is the bound's by nature
                + (f"; no estimate nearer: {e['no_estimate']}" if e.get("no_estimate") and s in ("fits", "split") else ""),
                style="dim")
        pr = e.get("prompt")
        if pr:
            say(f"prompt: ~{pr['tokens_per_s']:.0f} tokens/s processed ({pr['test']}"
                + (f", {pr['low']:.0f}-{pr['high']:.0f}" if pr["runs"] > 1 else "") + f"; {pr['basis']})", style="dim")
    elif out.get("speed_missing"):
        say(f"speed: no estimate ({out['speed_missing']})", style="dim")
    if s == "no":
        return
    if out["install"]:
        say("install first:", style="bold")
        say(f"  {out['install']}")
    say("run:", style="bold")
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in out["env"].items())
    say(f"  {env + ' ' if env else ''}{out['command']}")
    if not out["device_ids_known"] and res.get("devices"):
        say(f"  (the build's own device name, for --device, is known after `pick-backend verify {d.recipe}`)", style="dim")
    if out["lemonade"]:
        say("in Lemonade:", style="bold")
        say(f"  {out['lemonade']}")
    elif out.get("lemonade_note"):
        say(f"in Lemonade: {out['lemonade_note']}", style="dim")
