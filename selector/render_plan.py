"""Plans and model lists for people and for JSON (docs/json.md 'plan', 'models'): the words of a
typed plan (selector/models/fit.py Plan), made here and nowhere else."""

from __future__ import annotations

import shlex
import textwrap

from selector.models.fit import Context, Layout, Memory, Plan, Status, Suggestion
from selector.models.planner import size

GIB = 1 << 30


def _gib_up(n: int) -> str:
    """Bytes in GiB, rounded up to a tenth (more memory that holds it must not read as less)."""
    return f"{-(-n * 10 // GIB) / 10:.1f} GiB"


def says(s: Suggestion) -> str:
    """A suggestion in words."""
    if s.kind == "memory":
        if s.part:
            return f"{_gib_up(s.bytes)} more {s.memory.value} runs it with part of it there (-ngl or --n-cpu-moe)"
        return f"{_gib_up(s.bytes)} more {s.memory.value} holds it whole as it is"
    if s.kind == "cache_type":
        return f"a q8_0 KV cache saves {s.bytes / GIB:.1f} GiB (needs flash attention for V)"
    if s.kind == "ctx_size":
        return f"a context of {s.ctx} tokens" + (" per slot" if s.parallel > 1 else "") + " fits"
    return (f"a quantization of at most {s.bytes / GIB:.1f} GiB of weights "
            f"(this one is {s.current / GIB:.1f} GiB)")


def _suggestion_json(s: Suggestion) -> dict:
    out = {"kind": s.kind}
    if s.kind == "memory":
        out["more_bytes"] = s.bytes
    elif s.kind == "quant":
        out["max_weights_bytes"] = s.bytes
    if s.flags:
        out["flags"] = list(s.flags)
    return {**out, "says": says(s)}


def _device_json(d) -> dict:
    return {"name": d.name, "needs_bytes": d.total, "weights_bytes": d.weights, "kv_bytes": d.kv,
            "kv_swa_bytes": d.kv_swa, "compute_bytes": d.compute, "budget_bytes": d.budget,
            **({"memory": d.memory} if d.memory else {}), **({"id": d.id} if d.id else {})}


def _host_json(h) -> dict:
    return {"weights": h.weights, "repack": h.repack, "kv": h.kv, "kv_swa": h.kv_swa, "compute": h.compute,
            "output": h.output, "total": h.total}


def _alt_json(a: Layout, tokens_per_s: float | None, depths=None) -> dict:
    return {"status": a.status.value, "ngl": a.ngl, "cpu_read_bytes": a.cpu_read, "gpu_read_bytes": a.gpu_read,
            **({"n_cpu_moe": a.n_cpu_moe} if a.n_cpu_moe else {}),
            **({"tokens_per_s": tokens_per_s} if tokens_per_s else {}), **({"depths": depths} if depths else {})}


def fit_json(p: Plan, alt_tokens_per_s: float | None = None, alt_depths: list | None = None) -> dict:
    """The plan as docs/json.md's 'fit' object."""
    run = p.run
    out = {"n_layer": p.n_layer, "trained_ctx": p.trained_ctx, "flash_attn": run.flash_attn, "type_k": run.type_k,
           "type_v": run.type_v, "parallel": run.parallel, "ubatch": run.ubatch, "batch": run.batch,
           "status": p.status.value, "ctx": p.ctx, "ctx_basis": p.context.value, "n_ctx": p.n_ctx, "ngl": p.ngl,
           "devices": [_device_json(d) for d in p.devices], "runtime": p.runtime, "gpu_layers": p.gpu_layers}
    if p.host is not None:
        out.update(cpu=_host_json(p.host), cpu_bytes=p.host.total)
    if p.host_budget is not None:
        out["cpu_budget"] = p.host_budget
    if p.tensor_split:
        out["tensor_split"] = list(p.tensor_split)
    if p.n_cpu_moe:
        out["n_cpu_moe"] = p.n_cpu_moe
    if p.layout.cpu_read is not None:
        out.update(cpu_read_bytes=p.layout.cpu_read, gpu_read_bytes=p.layout.gpu_read)
    if p.instead_of is not None:
        out["instead_of"] = _alt_json(p.instead_of, alt_tokens_per_s, alt_depths)
    if p.suggest:
        out["suggest"] = [_suggestion_json(s) for s in p.suggest]
    return out


# -- the plan in words ------------------------------------------------------------------------------

def _context_words(p: Plan) -> str:
    """The context, and why it is this one."""
    slots = f", {p.parallel} slots of that context each" if p.parallel > 1 else ""
    words = f"context {p.ctx}"
    if p.trained_ctx is None:
        words += " (the header gives no trained context; 4096 is assumed as its limit)"
    elif p.context is Context.DEFAULT:
        words += f" of {p.trained_ctx} trained (the default: the whole model fits at no context from 2048 up)"
    elif p.trained_ctx != p.ctx:
        words += f" of {p.trained_ctx} trained"
    elif p.fits:
        words += " (its trained context)"
    if p.padded:
        words += f"; llama.cpp allocates {p.n_ctx} cells, its least"
    return words + slots


def _layers(n: int) -> str:
    return f"the first layer" if n == 1 else f"the first {n} layers"


def _split_words(p: Plan) -> str:
    return ",".join(f"{x:g}" for x in p.tensor_split)


def headline(p: Plan) -> str:
    """What the plan is, in one line."""
    s, ctx = p.status, _context_words(p)
    gpus = f"{len(p.devices)} GPUs" if len(p.devices) > 1 else "GPU"
    split = f", --tensor-split {_split_words(p)}" if p.tensor_split else ""
    if s is Status.FITS:
        return f"fits: all {p.n_layer + 1} layers, {ctx}"
    if s is Status.SPLIT:
        return f"fits split over {len(p.devices)} GPUs (--tensor-split {_split_words(p)}), {ctx}"
    if s is Status.PARTIAL:
        return f"partly: {p.ngl} of {p.n_layer + 1} layers on the {gpus} (-ngl {p.ngl}{split}), the rest on the CPU, {ctx}"
    if s is Status.EXPERTS:
        return (f"fits with the experts of {_layers(p.n_cpu_moe)} in system memory (--n-cpu-moe {p.n_cpu_moe}) "
                f"and everything else on the {gpus}{split and f' ({split[2:]})'}, {ctx}")
    if s is Status.CPU:
        return f"runs on the CPU in system memory, {ctx}"
    return f"does not fit at {ctx}"


def _host_terms(p: Plan) -> list[tuple[int, str]]:
    h, s = p.host, p.status
    gpu_build = bool(p.devices)
    what = ("model (mapped)" if not gpu_build else "weights" if s in (Status.PARTIAL, Status.NO)
            else "token embeddings and experts (mapped)" if s is Status.EXPERTS else "token embeddings (mapped)")
    return [(h.weights, what), (h.repack, "repacked"), (h.kv, "KV"), (h.compute, "compute"), (h.output, "output")]


def memory_lines(p: Plan) -> list[str]:
    """Each device's terms against what it can give, and system memory's; for a plan that does not fit
    on a GPU, the two are each the whole model, alternatives that both fail."""
    alone = p.status is Status.NO and p.devices and p.host is not None
    out = []
    for d in p.devices:
        parts = " + ".join(f"{size(b)} {w}" for b, w in ((d.weights, "weights"), (d.kv, "KV"), (d.compute, "compute")))
        out.append(f"  {d.name}: {parts} = {size(d.total)} of {size(d.budget)} usable"
                   + (f" ({d.memory})" if d.memory and p.fits else "") + (" (all on the GPU)" if alone else ""))
    if p.host is not None:
        text = " + ".join(f"{size(b)} {w}" for b, w in _host_terms(p) if b)
        # a GPU whose memory is system memory has that memory's budget: not counted twice
        budget = f" of {size(p.host_budget)} usable" if p.host_budget is not None and not p.shared else ""
        prefix = "  or in system memory alone: " if alone else "  system memory: "
        out.append(f"{prefix}{text} = {size(p.host.total)}{budget}")
    return out


def alternative_line(p: Plan, speed: dict | None, alt_tokens_per_s: float | None, alt_depths=None) -> str | None:
    a = p.instead_of
    if a is None:
        return None
    words = (f"-ngl {a.ngl} ({a.ngl} of {p.n_layer + 1} layers on the GPU)" if a.status is Status.PARTIAL
             else f"--n-cpu-moe {a.n_cpu_moe} (the experts of {_layers(a.n_cpu_moe)} in system memory)")
    mine = (speed or {}).get("depths") or []
    if mine and alt_depths and len(mine) > 1 and len(alt_depths) > 1:
        # the choice was made at the planned context's depth: say what each gives there
        d, x, y = mine[-1]["depth"], mine[-1], alt_depths[-1]
        rate = lambda r: f"~{r['tokens_per_s']:.0f}" if r["tokens_per_s"] else f"at most ~{r['bound']:.0f}"  # noqa: E731
        return (f"  rather than {words}: at depth {d} (the planned context, full) it would generate {rate(y)} tokens/s "
                f"against {rate(x)} ({y['basis']}); at an empty context {rate(alt_depths[0])} against {rate(mine[0])}"
                + _copy_words(d, x, y))
    why = (f"at most ~{speed['tokens_per_s']:.0f} tokens/s against ~{alt_tokens_per_s:.0f}"
           if speed and alt_tokens_per_s else "system memory is the slower to read")
    return (f"  rather than {words}, which would read {size(a.cpu_read)} per token from system memory; "
            f"this reads {size(p.layout.cpu_read)} ({why})")


def _copy_words(depth: int, mine: dict, other: dict) -> str:
    """What each layout's prompt batches copy to the GPU at ``depth`` (prompt_copy.py), where both do."""
    from selector.models import prompt_copy

    a, b = other.get("prompt_copy_bytes"), mine.get("prompt_copy_bytes")
    if not a or not b:
        return ""
    gbps = prompt_copy.table()["gbps"]
    return (f"; each {prompt_copy.table()['turn']['prompt']}-token prompt batch at depth {depth} would copy "
            f"{size(a)} from system memory to the GPU against {size(b)} (~{a / (gbps * 1e9):.2f} s against "
            f"~{b / (gbps * 1e9):.2f} s at {gbps:g} GB/s, the rate llama.cpp copied at in this project's H200 capture)")


def suggestion_lines(p: Plan) -> list[str]:
    if p.status not in (Status.NO, Status.PARTIAL, Status.EXPERTS):
        return []
    return [f"  would fit better: {says(s)}" + (f" ({' '.join(s.flags)})" if s.flags else "") for s in p.suggest]


def _rate(r: dict) -> str:
    return f"~{r['tokens_per_s']:.0f}" if r["tokens_per_s"] else f"at most ~{r['bound']:.0f}"


def speed_lines(p: Plan, speed: dict | None, missing: str | None) -> list[str]:
    if not speed:
        return [f"speed: no estimate ({missing})"] if missing else []
    est, rows, out = speed.get("estimate"), speed.get("depths") or [], []
    if est:
        out.append(f"speed: ~{est['tokens_per_s']:.0f} tokens/s generated at an empty context ({est['basis']}); "
                   f"at most ~{speed['tokens_per_s']:.0f} by the bandwidth bound ({speed['basis']})")
    else:
        why = speed.get("no_estimate") if p.status is not Status.CPU else None  # a CPU build's is the bound's
        out.append(f"speed: at most ~{speed['tokens_per_s']:.0f} tokens/s generated (estimate: {speed['basis']})"
                   + (f"; no estimate nearer: {why}" if why else ""))
    for r in rows[1:]:
        full = " (the planned context, full)" if r["depth"] == p.ctx else ""
        out.append(f"speed at depth {r['depth']}{full}: {_rate(r)} tokens/s generated ({r['basis']})")
    pr = speed.get("prompt")
    if pr:
        out.append(f"prompt: ~{pr['tokens_per_s']:.0f} tokens/s processed ({pr['test']}"
                   + (f", {pr['low']:.0f}-{pr['high']:.0f}" if pr["runs"] > 1 else "") + f"; {pr['basis']})")
    return out


def print_plan(con, out: dict, p: Plan | None, title: str, recipe: str, measured: dict | None = None) -> None:
    """`plan`'s text: ``out`` is its JSON (docs/json.md 'plan'), ``p`` the typed plan (None for a model
    sized by its file: whisper.cpp, sd.cpp)."""
    say = _sayer(con)
    say(title, style="bold")
    if out.get("described"):
        say(out["described"], style="yellow")
    if p is None:
        say("fits (from the file size)" if out["fit"]["status"] != "no" else "does not fit (from the file size)",
            style=None if out["fit"]["status"] != "no" else "red")
    else:
        say(headline(p), style=None if p.fits else "red")
        for line in memory_lines(p):
            say(line)
        if measured:
            how = "allocated by a llama-server start" if measured.get("way") == "server" else \
                "projected by the build's llama-fit-params"
            build = f", build {measured['build']}" if measured.get("build") else ""
            say(f"  compute: measured here on {measured['date']} ({how}, plan --check{build})", style="dim")
        other = out["fit"].get("instead_of") or {}
        alt = alternative_line(p, out["speed_estimate"], other.get("tokens_per_s"), other.get("depths"))
        if alt:
            say(alt, style="dim")
        for line in suggestion_lines(p):
            say(line)
    if out.get("better_backend"):
        say(f"  would fit better: --backend {out['better_backend']['backend']}, which {out['better_backend']['says']}")
    for w in out.get("warnings", []):
        say(f"! {w}", style="yellow")
    for line in speed_lines(p, out["speed_estimate"], out.get("speed_missing")) if p else []:
        say(line, style="dim")
    if out["command"] is None:
        return
    _run_lines(lambda text, **k: con.print(text, markup=False, highlight=False, soft_wrap=True, **k), out, recipe)


def _sayer(con):
    """Print a line; on a terminal narrower than it, wrapped at words with the continuation indented
    under its own line (the launch line is printed whole, to be copied)."""
    width = con.width if con.is_terminal else None

    def say(text: str, **k) -> None:
        if width and len(text) > width:
            lead = len(text) - len(text.lstrip(" "))
            text = textwrap.fill(text, width, subsequent_indent=" " * (lead + 2), break_long_words=False,
                                 break_on_hyphens=False)
        con.print(text, markup=False, highlight=False, soft_wrap=True, **k)
    return say


def _run_lines(say, out: dict, recipe: str) -> None:
    if out["install"]:
        say("install first:", style="bold")
        say(f"  {out['install']}")
    say("run:", style="bold")
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in out["env"].items())
    say(f"  {env + ' ' if env else ''}{out['command']}")
    if not out["device_ids_known"] and out["fit"].get("devices"):
        say(f"  (the build's own device name, for --device, is known after `pick-backend verify {recipe}`)", style="dim")
    if out["lemonade"]:
        say("in Lemonade:", style="bold")
        say(f"  {out['lemonade']}")
    elif out.get("lemonade_note"):
        say(f"in Lemonade: {out['lemonade_note']}", style="dim")


# -- `models` -------------------------------------------------------------------------------------

def where_words(row) -> str:
    """Where a row's plan puts the model, in docs/json.md's words."""
    p = row.plan
    if p is None:
        return "does not fit"
    s = p.status
    if s in (Status.FITS, Status.SPLIT):
        return ("split: " if s is Status.SPLIT else "") + ", ".join(sorted({d.memory or "VRAM" for d in p.devices}))
    if s is Status.PARTIAL:
        return "VRAM + system memory" if row.basis != "header" else f"{p.ngl}/{p.n_layer + 1} layers, rest on CPU"
    if s is Status.EXPERTS:
        return f"all layers, experts of {p.n_cpu_moe} on CPU"
    return "system memory" if s is Status.CPU else "does not fit"


def row_json(row) -> dict:
    header = row.basis == "header"
    note = row.refused or row.unread
    return {"name": row.name, "checkpoint": row.checkpoint, "size_bytes": row.size_bytes, "labels": list(row.labels),
            "fits": row.fits, "status": row.plan.status.value if row.plan else Status.NO.value,
            "where": where_words(row), "ctx": row.plan.ctx if header and row.plan else None,
            "trained_ctx": row.trained_ctx, "basis": row.basis, "tokens_per_s": row.tokens_per_s,
            "tokens_per_s_estimate": row.tokens_per_s_estimate, "depths": list(row.depths),
            **({"note": note} if note else {})}


def _cells(row, gguf: bool) -> tuple[str, ...]:
    r = row_json(row)
    guessed = gguf and r["basis"] != "header"
    fits = ("weights fit: " if guessed else "") + r["where"] if r["fits"] else "no (guess)" if guessed else "no"
    if not r["fits"] or r["ctx"] is None:
        c = "header not read" if guessed and r["fits"] else "-"
    else:
        c = f"{r['ctx']}" + ("" if r["trained_ctx"] in (None, r["ctx"]) else f"/{r['trained_ctx']}")
    full = r["depths"][-1] if r["depths"] else None  # the planned context, full: where users run
    speed = (f"~{full['tokens_per_s']:.0f} t/s" if full and full["tokens_per_s"] else
             f"≤{full['bound']:.0f} t/s" if full else "-")
    return r["name"], f"{r['size_bytes'] / 1e9:.1f} GB", fits, c, speed, ",".join(r["labels"])


def print_models(con, rows: list, recipe: str, gguf: bool) -> None:
    """The table of `models`, its notes and its legend."""
    say = _sayer(con)
    lines = [("model", "size", "fits", "context", "speed, context full", "labels")] + [_cells(r, gguf) for r in rows]
    widths = [max(len(x[i]) for x in lines) for i in range(5)]
    for i, line in enumerate(lines):  # a table's rows are not wrapped: their columns would not line up
        con.print(("  ".join(x.ljust(w) for x, w in zip(line, widths)) + "  " + line[5]).rstrip(),
                  style="bold" if i == 0 else None, markup=False, highlight=False, soft_wrap=True)
    for r in rows:
        if r.refused:
            say(f"{r.name}: {r.refused}", style="yellow")
    if any(r.depths for r in rows):
        say("speed, context full: tokens/s generated once the planned context is full (its KV cache read for "
            "every token); ~ the model of speed fitted to published runs of the backend, ≤ the memory bandwidth "
            "bound where there is no fit (`plan` gives both depths and the basis)", style="dim")
    if gguf and any(r.basis != "header" for r in rows):
        say("weights fit: a guess from the download (its weights, and the copy a CPU build repacks), without the "
            "KV cache and compute buffers, which are in the GGUF header: "
            f"`pick-backend plan {recipe} --model NAME` or `models --read-headers` reads it (a few MB each)",
            style="dim")


def guess_fit_json(p: Plan) -> dict:
    """The 'fit' of a model sized by its file (whisper.cpp, sd.cpp): where it goes, what each memory holds."""
    out = {"status": p.status.value, "basis": "file size", "ctx": None, "runtime": p.runtime,
           "devices": [{"name": d.name, "needs_bytes": d.total, "budget_bytes": d.budget,
                        **({"memory": d.memory} if d.memory else {})} for d in p.devices]}
    if not p.devices and p.host is not None:
        out.update(cpu_bytes=p.host.total, **({"cpu_budget": p.host_budget} if p.host_budget is not None else {}))
    return out


def plan_json(spec: str, d, model, planned, exe: str | None, binary: str | None, installed: bool, lemonade: str | None,
              lemonade_note: str | None, warnings: list[str], described: str | None, better=None) -> dict:
    """`plan --json` (docs/json.md 'plan')."""
    p, facts = planned.plan, planned.facts
    header = planned.from_header
    return {
        "schema_version": 1, "recipe": d.recipe, "backend": d.backend, "runtime": p.runtime,
        "model": {"spec": spec, "name": model.name, "files": model.files,
                  **({k: facts[k] for k in ("arch", "file_type", "params", "n_layer", "n_ctx_train", "weights_bytes")}
                     if header else {})},
        "fit": fit_json(p, planned.alt_tokens_per_s, planned.alt_depths) if header else guess_fit_json(p),
        "installed": installed,
        "install": None if installed or d.backend == "system" else f"pick-backend install {d.recipe}",
        "executable": exe, "args": planned.args, "env": planned.env,
        "command": shlex.join([exe or binary or "llama-server"] + planned.args) if p.fits else None,
        "lemonade": lemonade, "lemonade_note": lemonade_note,
        "device_ids_known": bool(p.devices) and all(x.id for x in p.devices),
        "speed_estimate": planned.speed, "speed_missing": planned.speed_missing,
        "warnings": warnings, "described": described,
        "better_backend": {"backend": better[0], "status": better[1].status.value, "ctx": better[1].ctx,
                           "says": headline(better[1])} if better else None,
    }


def plan_warnings(p: Plan, env) -> list[str]:
    """What the plan's line does not say: LLAMA_ARG_* variables in ``env`` (this machine's environment;
    None for a replayed one), and Vulkan shares the line cannot tie to its devices."""
    return (_engine_env_warnings(env) if env is not None else []) + _split_order_warning(p)


def _split_order_warning(p: Plan) -> list[str]:
    """Unequal --tensor-split shares over Vulkan GPUs the line cannot name: Vulkan numbers its devices in
    its own order, so the shares may land on other cards than the plan's."""
    shares = p.tensor_split
    if p.runtime != "vulkan" or len(set(shares)) < 2 or all(x.id for x in p.devices):
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
