"""From a pick and a model to a plan: the devices, where the model fits, the launch line.

Machine facts come from the Profile (probes/memory.py), the device numbering from the last
``verify`` of the build (its record in the cache), the model from its header; nothing here reads
the machine.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import replace
from functools import lru_cache

from probes import memory
from selector.models import fit, prompt_copy

GIB = 1 << 30
def runtime_of(decision, verdict) -> str:
    """Which llama.cpp backend the chosen build runs on its device: rocm, cuda, vulkan, metal, sycl or cpu
    (a build the fit table does not name, such as LocalAI's cuda12 or intel, runs on its device's)."""
    from selector.kinds import runtime

    return runtime(decision.backend or "", decision.device.type if decision.device else "cpu", verdict.access)


def targets(profile, decision, verdict, device_ids: dict | None = None) -> list[dict]:
    """The devices the build will use, best first: {name, budget, memory(need) -> words, id}."""
    dev = decision.device
    if dev is None or dev.type == "cpu":
        return []
    if decision.run_devices:
        group = list(decision.run_devices)
    elif verdict.access == "graphics":
        group = list(verdict.devices)  # llama.cpp's Vulkan backend takes every Vulkan GPU
    elif dev.type == "amd_gpu":
        group = [d for d in verdict.devices if d.type == dev.type and d.token == dev.token]
    else:
        group = [d for d in verdict.devices if d.type == dev.type]
    if any(not _integrated(d) for d in group):
        # llama.cpp adds integrated GPUs to its default devices only when there is no discrete one
        # (common/common.cpp, the device list: igpus only if devices is empty)
        group = [d for d in group if not _integrated(d)]
        if _integrated(dev):
            dev = group[0]
    # several: in the engine's own order, which --tensor-split's shares follow (run_env lists them by
    # index; HIP enumerates them so, CUDA too under CUDA_DEVICE_ORDER=PCI_BUS_ID, which plan_env adds)
    group = sorted(group, key=lambda d: d.index) if len(group) > 1 else [dev]
    out = []
    for d in group:
        mem = memory.metal(profile) if d.type == "metal" else memory.of(profile, d.gpu)
        budget = mem.usable_free if mem.usable_free is not None else mem.usable
        out.append({"name": d.name or d.type, "budget": budget or 0, "memory": _where(mem), "device": d,
                    "described": mem.describe(), "id": (device_ids or {}).get(_key(d)),
                    "shared": _integrated(d)})  # its memory is system memory: nothing to move out to
    return out


def _integrated(d) -> bool:
    g = d.gpu
    return d.type == "metal" or bool(getattr(g, "integrated", False) or getattr(g, "unified", False)) or \
        (d.type == "intel_gpu" and not getattr(g, "arc", False))


def _key(d) -> str:
    from selector.engine import device_key

    return device_key(d)


def _where(mem):
    """need -> the memory it lands in: "VRAM", "VRAM + GTT", "unified", "working set"."""
    def words(need: int) -> str:
        if mem.dedicated and need <= (mem.dedicated_free if mem.dedicated_free is not None else mem.dedicated):
            return "VRAM"
        if mem.shared_kind and mem.dedicated:
            return f"VRAM + {mem.shared_kind}"
        return mem.shared_kind or "VRAM"
    return words


class UnknownMemory(Exception):
    """The build's GPU has no memory the probe read: said in words (exit 3)."""


def fit_model(profile, decision, verdict, facts: dict, ctx: int | None = None, type_k="f16", type_v="f16",
              device_ids: dict | None = None, parallel: int = 1, cpu_bw=None, devs: list[dict] | None = None,
              offload: bool = True) -> fit.Plan:
    """The plan of a model on the pick's device: ``devs`` the pick's ``targets`` (worked out here when not
    given), ``cpu_bw`` system memory's bandwidth, (GB/s, words) or a function giving it
    (system_bandwidth.SystemBandwidth), asked for only where -ngl and --n-cpu-moe both fit."""
    runtime = runtime_of(decision, verdict)
    devs = targets(profile, decision, verdict, device_ids) if devs is None else devs
    fa = runtime in fit.fit_table()["flash_attention"]["backends"]
    if type_v != "f16" and not fa:
        raise fit.FitError(f"a quantized V cache (--cache-type-v {type_v}) needs flash attention, which "
                           f"llama.cpp's {runtime} backend lacks")
    if devs and not any(d["budget"] for d in devs):
        # the build runs on a GPU whose memory the probe does not read (an Intel GPU): a plan on the CPU
        # would not be the line's, and a plan on the GPU has no budget to fit in
        raise UnknownMemory(f"the memory of {', '.join(dict.fromkeys(d['name'] for d in devs))} is not known to the "
                            f"probe, so no plan for it can say what fits")
    on_cpu = not devs  # the build runs on the CPU alone: its weights are mapped and repacked there
    cpu = (profile.cpu.arch, tuple(profile.cpu.flags or ())) if on_cpu else None
    run = fit.Run(ctx=ctx or 0, parallel=parallel, flash_attn=fa, type_k=type_k, type_v=type_v,
                  backend="cpu" if on_cpu else runtime)
    gpu_bw = _slowest(profile, devs)

    def bandwidth():
        got = cpu_bw() if callable(cpu_bw) else cpu_bw
        if not gpu_bw or not got:
            return gpu_bw[0] if gpu_bw else None, got[0] if got else None
        # -ngl K against --n-cpu-moe N: the time per token at the planned context's full depth, where the
        # KV cache of -ngl's layers in system memory is read from there for every token
        return lambda lay, depth: _seconds_at(profile, runtime, facts, lay, devs, got, run, depth)
    return fit.plan(facts, devs, "cpu" if on_cpu else runtime, run, profile.cpu.memory_bytes, cpu, bandwidth=bandwidth,
                    offload=offload, runtime=runtime)


def _ngl(p: fit.Plan) -> list[str]:
    """-ngl for a build that gives layers to a GPU: every layer, K of them, or none where it does not fit."""
    if not p.gpu_layers or p.status is fit.Status.CPU:
        return []
    return ["-ngl", str(p.ngl if p.fits else 0)]


def _pinned(p: fit.Plan) -> tuple[list[str], list[str]]:
    """What the line pins besides the context, the layers and the devices, before and after -ngl:
    the slots and whether they share one cache, the batch sizes, flash attention, the cache types;
    --n-cpu-moe and the split."""
    run = p.run
    before = ["--parallel", str(run.parallel)]
    if run.parallel > 1:
        before += ["--no-kv-unified"]  # a stream of its own context per slot, as the plan counts them
    before += ["--batch-size", str(run.batch), "--ubatch-size", str(run.ubatch),
               "--flash-attn", "on" if run.flash_attn else "off",
               "--cache-type-k", run.type_k, "--cache-type-v", run.type_v]
    after = ["--n-cpu-moe", str(p.n_cpu_moe)] if p.n_cpu_moe else []
    if p.tensor_split:
        after += ["--split-mode", "layer", "--tensor-split", ",".join(f"{s:g}" for s in p.tensor_split)]
    return before, after


def _device_ids(p: fit.Plan) -> list[str]:
    """The build's names of the GPUs the plan uses, where a verify read every one (a CPU plan has none)."""
    ids = [d.id for d in p.devices]
    return ids if ids and all(ids) else []


def llama_server_args(p: fit.Plan, model_arg: list[str]) -> list[str]:
    """llama-server's line for the plan, pinning every parameter the memory depends on (the context
    of all slots, the slots and whether they share one cache, the batch sizes, flash attention, the
    cache types, the layers on the GPU, the experts kept in system memory, the split and the
    devices), so a build with other defaults allocates what the plan says."""
    before, after = _pinned(p)
    ids = _device_ids(p)
    return [*model_arg, "--ctx-size", str(p.ctx * p.parallel), *before, *_ngl(p), *after,
            *(["--device", ",".join(ids)] if ids else [])]


def plan_env(run_env: dict, p: fit.Plan) -> dict:
    """The run environment of a plan: a CUDA split also fixes CUDA's device order to PCI order (its
    default is fastest first), the order the --tensor-split shares are given in."""
    if p.tensor_split and p.runtime == "cuda" and "CUDA_DEVICE_ORDER" not in run_env:
        return {**run_env, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    return dict(run_env)


def launch(p: fit.Plan, model_arg: list[str], run_env: dict) -> tuple[list[str], dict[str, str]]:
    """The llama-server arguments (without the executable) and the environment that run the plan as it
    is counted: every parameter the memory depends on pinned, the pick's run environment and what the
    split needs.  A plan that does not fit gives the line it was judged by (-ngl 0)."""
    return llama_server_args(p, model_arg), plan_env(run_env, p)


def model_arg(model, hf: bool = True) -> list[str]:
    """How llama-server is told the model: a path, Hugging Face's org/repo:QUANT, or a URL.  Servers
    without llama.cpp's downloader (``hf=False``: whisper-server, sd-server) get the file's name,
    which Lemonade (``lemonade pull``) or the user downloads."""
    first = model.files[0]
    if not first.startswith(("http://", "https://")):
        return ["-m", first]
    if not hf:
        return ["-m", first.rsplit("/", 1)[-1]]
    if model.checkpoint and ":" in model.checkpoint and not model.checkpoint.lower().endswith(".gguf"):
        return ["-hf", model.checkpoint]
    return ["--model-url", first]


LEMONADE_NGL = 99  # Lemonade passes -ngl 99 to llama-server (0 for its cpu backend) and reserves the flag
# (lemonade-sdk/lemonade src/cpp/server/backends/llamacpp_server.cpp: push_arg(args, reserved_flags, "-ngl", ...))


def lemonade_line(recipe, decision, p: fit.Plan, model) -> str | None:
    """The same plan as `lemonade run` flags (the recipe's options, Lemonade's backend reference), or None
    where Lemonade cannot run it as planned (``lemonade_note`` says why)."""
    if lemonade_note(p) or not p.fits:
        return None
    opts = {o["name"]: o.get("flag") for o in recipe.options}
    name = model.name or model.checkpoint
    if not name:
        return None
    words = ["lemonade", "run", name]
    b = opts.get(f"{recipe.name}_backend")
    if b and decision.backend:
        words += [b, decision.backend]
    dflag = opts.get(f"{recipe.name}_device")
    ids = _device_ids(p)
    if dflag and ids:
        words += [dflag, ",".join(ids)]
    if opts.get("ctx_size") and p.ctx:
        words += [opts["ctx_size"], str(p.ctx * p.parallel)]
    # Lemonade gives llama-server the model, the context, the port and -ngl itself; what else the memory
    # depends on goes through its pass-through option, as the llama-server line pins it
    before, after = _pinned(p)
    if opts.get(f"{recipe.name}_args"):
        words += [opts[f"{recipe.name}_args"], " ".join(before + after)]
    return shlex.join(words)


def lemonade_note(p: fit.Plan) -> str | None:
    """Why Lemonade cannot run this plan as it is printed, or None."""
    if p.status is fit.Status.PARTIAL:
        return (f"not through Lemonade: it gives llama-server -ngl {LEMONADE_NGL} and reserves the flag, so it "
                f"cannot keep {p.n_layer + 1 - p.ngl} layers on the CPU as this plan does")
    if p.status in (fit.Status.FITS, fit.Status.SPLIT, fit.Status.EXPERTS) and p.gpu_layers and p.ngl > LEMONADE_NGL:
        return (f"not through Lemonade: it gives llama-server -ngl {LEMONADE_NGL}, which leaves "
                f"{p.ngl - LEMONADE_NGL} of this model's {p.ngl} layers on the CPU")
    return None


def estimate_speed(profile, p: fit.Plan, facts: dict, devs: list[dict], cpu_bw: tuple[float, str] | None = None,
                   layout: fit.Layout | None = None, depth: int | None = None) -> dict | None:
    """Generation tokens/s bounded by memory bandwidth: every active weight is read once per token,
    from the device that holds it (a GPU's share at its bandwidth, the CPU's at system memory's).
    An upper bound at an empty context; None where a bandwidth the plan needs is not known.
    ``layout``: one of the plan's layouts (default the chosen one; ``p.instead_of`` for the other).
    ``depth``: the depth the speed is also given at (default the planned context's, a slot filled):
    ``depths`` lists both, with the fitted model's estimate (speed.speed_fit) and the bound."""
    lay = layout or p.layout
    used = _used(lay, devs)
    shares = _shares(profile, lay, facts, used, cpu_bw)
    if shares is None:
        return None
    shares, source = shares
    seconds = sum(b / (g * 1e9) for b, g, _w in shares if b)
    per_token = sum(b for b, _g, _w in shares)
    if seconds <= 0:
        return None
    if len(shares) > 1:
        words = " + ".join(f"{size(b)} at {w}" for b, _g, w in shares if b) + " read per token"
    else:
        words = f"{shares[0][2]} / {size(shares[0][0])} of weights read per token"
    bound = 1 / seconds
    out = {"tokens_per_s": round(bound, 1), "bandwidth_gbps": round(per_token / seconds / 1e9, 1),
           "bytes_per_token": per_token, "source": source,
           "basis": f"{words}; an upper bound at an empty context, real runs come below it"}
    rows = depth_speeds(profile, p, facts, used, cpu_bw, lay, [0, p.ctx if depth is None else depth])
    if rows:
        out["depths"] = rows
    if layout is None:
        out.update(_nearer(profile, p, facts, used, rows))
    return out


def depth_speeds(profile, p: fit.Plan, facts: dict, used: list[dict], cpu_bw, lay: fit.Layout,
                 depths: list[int]) -> list[dict]:
    """At each depth: the fitted model's tokens/s (None where no fit is had), the bound at that depth
    (weights and the KV cache of ``depth`` positions at peak bandwidth), and the basis in words."""
    from selector.models import speed

    gpus = [(d["name"], (speed.bandwidth_of(profile, d["device"]) or (0.0, ""))[0]) for d in used]
    fitted, _why = _speed_fit(profile, p.runtime, used, bool(facts.get("n_expert")))
    out = []
    for depth in dict.fromkeys(depths):
        parts = speed.shares(facts, lay, depth, gpus, cpu_bw[0] if cpu_bw else None, p.run.type_k, p.run.type_v)
        if parts is None:
            return []
        t = speed.model_seconds(parts, fitted)
        def said(x) -> str:  # what one memory reads: its weights and, at a depth, its layers' KV cache
            what = [x.name] if len(parts) > 1 else []
            what += [f"{size(x.kv)} of it KV cache"] if x.kv else []
            return f"{size(x.read)} at {x.gbps:g} GB/s" + (f" ({', '.join(what)})" if what else "")
        basis = " + ".join(said(x) for x in parts if x.read) + (f" per token at depth {depth}" if depth else " per token")
        row = {"depth": depth, "tokens_per_s": round(1 / t, 1) if t else None,
               "bound": round(1 / speed.bound_seconds(parts), 1), "basis": basis}
        copy = prompt_copy.prompt_copy(facts, lay, depth, p.run)
        out.append({**row, "prompt_copy_bytes": copy.bytes} if copy else row)
    return out


def _speed_fit(profile, runtime: str, used: list[dict], moe: bool = False):
    """(the model fitted to the published runs of this backend on the pool of the plan's first GPU, or
    None; words: what it was fitted to, or why there is none)."""
    from selector.bandwidth import VENDOR, memory_kind
    from selector.models import speed

    if not used:
        return None, ""
    dev = used[0]["device"]
    row = _row(profile, dev)
    results, broken = _published()
    if broken:
        return None, f"no estimate: the published runs could not be read ({broken})"
    if row is None:
        return None, ""
    got = _fit_for(profile.os.name, runtime, dev.family if dev.type != "metal" else None, VENDOR.get(dev.type, ""),
                   memory_kind(dev.type, row), moe)
    os_words = OS_WORDS.get(profile.os.name, profile.os.name)
    if got is None:
        return None, (f"no estimate: fewer than {speed.CALIBRATION_LEAST} models of {_kind_words(used, profile)} have "
                      f"published {runtime} generation runs on {os_words} of a model whose shape the catalog knows")
    if not (got.moe if moe else got.dense):
        kind = "a mixture of experts" if moe else "a dense model"
        return None, (f"no estimate: fewer than two of the {len(got.gpus)} GPU models pooled ({got.group}) have published "
                      f"{runtime} generation runs of {kind} on {os_words}, whose layers cost another time")
    slower = f"{got.slowdown:.2f} times the read time at peak bandwidth" if got.slowdown > 1.005 else \
        "the read time at peak bandwidth"
    more = f" ({got.per_layer_s * 1e6 + got.per_moe_layer_s * 1e6:.0f} µs a layer of experts)" if moe else ""
    return got, (f"{slower} and {got.per_layer_s * 1e6:.0f} µs a layer on the GPU{more}, fitted to {runtime} generation "
                 f"runs on {len(got.gpus)} GPU models ({got.group}, {_span(got.dates)}; llama-bench-published.json)")


@lru_cache(maxsize=64)
def _fit_for(os_name: str, runtime: str, family: str | None, vendor: str, memory: str, moe: bool):
    """speed.speed_fit over the published runs and the captures of one OS, once per pool (`models` plans
    every model of a catalog)."""
    from selector.models import speed

    results, _broken = _published()
    runs = [r for r in results + list(speed.captured()) if r.os == os_name]
    return speed.speed_fit(runs, runtime, family, vendor, memory, moe=moe)


def _seconds_at(profile, runtime: str, facts: dict, lay: fit.Layout, devs: list[dict], cpu_bw, run: fit.Run,
                depth: int) -> float | None:
    """Seconds of a turn of a layout at ``depth`` (prompt_copy.turn_seconds): its generated tokens at the
    fitted model's speed where there is one, else the bound's, and its prompt's copies to the GPU."""
    from selector.models import speed

    used = _used(lay, devs)
    gpus = [(d["name"], (speed.bandwidth_of(profile, d["device"]) or (0.0, ""))[0]) for d in used]
    parts = speed.shares(facts, lay, depth, gpus, cpu_bw[0], run.type_k, run.type_v)
    if parts is None:
        return None
    fitted = _speed_fit(profile, runtime, used, bool(facts.get("n_expert")))[0]
    gen = speed.model_seconds(parts, fitted) or speed.bound_seconds(parts)
    planned = replace(run, ctx=run.ctx or depth)  # the context the plan settled on, where none was asked
    return prompt_copy.turn_seconds(gen, prompt_copy.prompt_copy(facts, lay, depth, planned), planned)


def _used(lay: fit.Layout, devs: list[dict]) -> list[dict]:
    """The GPUs given a part (a share of 0 holds none)."""
    held = {d.name for d in lay.devices}
    return [d for d in devs if d["name"] in held] or devs[:1]


def _shares(profile, lay: fit.Layout, facts: dict, used: list[dict], cpu_bw) -> tuple[list, str] | None:
    """(bytes read per token, GB/s, words) from each memory the layout reads, and the sources."""
    status = lay.status
    if status in (fit.Status.FITS, fit.Status.SPLIT) and used:
        return _per_gpu(profile, used, lay, fit.active_bytes(facts), "peak bandwidth")
    if status in (fit.Status.PARTIAL, fit.Status.EXPERTS) and used and cpu_bw:
        gpu = _per_gpu(profile, used, lay, lay.gpu_read, "on the GPU")
        if gpu is None:
            return None
        return [*gpu[0], (lay.cpu_read, cpu_bw[0], f"{cpu_bw[0]:g} GB/s in system memory ({cpu_bw[1]})")], \
            f"{gpu[1]}; {cpu_bw[1]}"
    if status is fit.Status.CPU and cpu_bw:
        return [(fit.active_bytes(facts), cpu_bw[0], f"{cpu_bw[0]:g} GB/s system memory bandwidth ({cpu_bw[1]})")], \
            cpu_bw[1]
    return None


def _nearer(profile, p: fit.Plan, facts: dict, used: list[dict], rows: list[dict]) -> dict:
    """The estimate at an empty context (the fitted model's, ``rows[0]``) and the prompt rate; or why there
    is none (``no_estimate``)."""
    out: dict = {}
    first = rows[0] if rows else None
    fitted, words = _speed_fit(profile, p.runtime, used, bool(facts.get("n_expert")))
    if first and first["tokens_per_s"] and fitted is not None:
        out["estimate"] = {"tokens_per_s": first["tokens_per_s"], "gpus": list(fitted.gpus), "group": fitted.group,
                           "dates": list(fitted.dates), "slowdown": round(fitted.slowdown, 3),
                           "per_layer_us": round(fitted.per_layer_s * 1e6, 1),
                           "per_moe_layer_us": round(fitted.per_moe_layer_s * 1e6, 1), "basis": f"{first['basis']}; {words}"}
    else:
        out["no_estimate"] = ("a CPU build's speed is the bound's: no published run of one is fitted"
                              if p.status is fit.Status.CPU else words.split("no estimate: ", 1)[-1] if words
                              else "the GPU is not in the GPU table")
    results, _broken = _published()
    # a name several cards share (Strix Halo's "8060S/8050S/8040S") is of none of them: prompts are
    # bound by compute, which differs between them
    exact = _row(profile, used[0]["device"], exact=True) if used else None
    prompt = _prompt(p.runtime, exact["match"], facts.get("params") or 0, profile.os.name, results) if exact else None
    one_model = len({(_row(profile, d["device"]) or {}).get("match") for d in used}) == 1
    if prompt is not None and one_model and p.status in (fit.Status.FITS, fit.Status.SPLIT):
        out["prompt"] = prompt
    return out


OS_WORDS = {"linux": "Linux", "windows": "Windows", "macos": "macOS"}


def _row(profile, dev, exact: bool = False) -> dict | None:
    """The GPU table's row of a device (an Apple GPU by its chip)."""
    from selector.bandwidth import row_for

    return row_for(dev.type, profile.metal.chip if dev.type == "metal" else dev.name, dev.memory_bytes, exact)


def _published() -> tuple[list, str]:
    """The published llama-bench results, and where the file is broken, what is wrong with it (the
    estimates are extra: the plan says why it has none, and keeps the rest)."""
    from probes.inputs import InputError
    from selector import evidence

    try:
        return list(evidence.load()), ""
    except InputError as e:
        return [], str(e)


def _prompt(runtime: str, match: str, params: int, os_name: str, results: list) -> dict | None:
    """The prompt processing estimate (speed.prompt_estimate) on GPU model ``match``: one card, or a
    split over cards of that model (it processes a prompt layer after layer, as one card would)."""
    from selector.models.speed import PROMPT_TEST, prompt_estimate

    est = prompt_estimate([r for r in results if r.os == os_name], runtime, match, params)
    if est is None:
        return None
    made = f"{est['build']}, " if est["build"] else ""
    return {"test": PROMPT_TEST, "tokens_per_s": round(est["tokens_per_s"], 1), "low": round(est["low"], 1),
            "high": round(est["high"], 1), "runs": est["runs"], "gpu": est["gpu"], "source": est["url"],
            "date": est["date"],
            "basis": (f"{est['runs']} published {runtime} {PROMPT_TEST} runs of dense models" if est["runs"] > 1 else
                      f"a published {runtime} {PROMPT_TEST} run of {est['models'][0]}")
                     + f" on the {est['gpu']}, scaled by parameters ({made}{est['date'][:7]}; {est['url']})"}


def _kind_words(used: list[dict], profile) -> str:
    """The GPUs the estimate would pool, in words: the vendor's, of this one's kind of memory (its family
    group is tried first, and has no more of them)."""
    from selector.bandwidth import VENDOR, memory_kind
    from selector.models.speed import VENDOR_WORDS

    dev = used[0]["device"]
    row = _row(profile, dev)
    vendor = VENDOR.get(dev.type, "")
    if vendor == "apple":
        return "Apple chips"
    memory = {"shared": "sharing the machine's memory", "hbm": "with HBM", "own": "with memory of their own"}[
        memory_kind(dev.type, row)] if row else ""
    return " ".join(x for x in (VENDOR_WORDS.get(vendor, vendor), "GPUs", memory) if x)


def _span(dates) -> str:
    """The months the runs were published in: "2024-05" or "2024-05 to 2026-03" (builds change speed)."""
    first, last = dates[0][:7], dates[1][:7]
    return first if first == last else f"{first} to {last}"


def speed_missing(profile, p: fit.Plan, devs: list[dict], cpu_bw: tuple | None) -> str | None:
    """Why a plan that fits has no speed estimate, in words; None where it does not fit."""
    from selector.models.speed import bandwidth_of

    if not p.fits:
        return None
    held = {d.name for d in p.devices}
    unknown = [d["name"] for d in devs if d["name"] in held and bandwidth_of(profile, d["device"]) is None]
    if p.status is not fit.Status.CPU and unknown:
        return f"the memory bandwidth of {', '.join(dict.fromkeys(unknown))} is not in the GPU table"
    if p.status in (fit.Status.CPU, fit.Status.PARTIAL, fit.Status.EXPERTS) and not cpu_bw:
        return (f"the system memory bandwidth of {profile.cpu.brand or 'this CPU'} is known only for the CPU "
                f"platforms in the tables, and a replayed machine is not measured")
    return None


def _per_gpu(profile, used: list[dict], lay: fit.Layout, active: int, words: str) -> tuple[list, str] | None:
    """The bytes each GPU reads per token at its own bandwidth: ``active`` bytes shared in proportion to
    the weights the layout puts on each (layer after layer, the times add up).  None where a GPU's
    bandwidth is not known."""
    from selector.models.speed import bandwidth_of

    bws = [bandwidth_of(profile, d["device"]) for d in used]
    if not bws or any(b is None for b in bws):
        return None
    source = "; ".join(dict.fromkeys(bw[1] for bw in bws))
    weights = [x.weights for x in lay.devices][:len(used)]
    total = sum(weights)
    if len({bw[0] for bw in bws}) == 1 or not total or len(weights) != len(used):
        # one bandwidth (or no shares to weigh): the same time as one device reading it all
        n = f" ({len(used)} GPUs in turn)" if len(used) > 1 else ""
        return [(active, bws[0][0], f"{bws[0][0]:g} GB/s {words}{n}")], source
    parts = [active * w // total for w in weights]
    names = [d["name"] for d in used]  # a device's index is its vendor's: the name says which GPU
    labels = [n if names.count(n) == 1 else f"{n} #{names[:i + 1].count(n)}" for i, n in enumerate(names)]
    return [(b, bw[0], f"{bw[0]:g} GB/s on {label}") for b, bw, label in zip(parts, bws, labels)], source


def _slowest(profile, devs: list[dict]) -> tuple[float, str] | None:
    """The lowest peak bandwidth of the GPUs that hold weights (layer after layer, the slowest bounds
    them), or None where one is not known."""
    from selector.models.speed import bandwidth_of

    bws = [bandwidth_of(profile, d["device"]) for d in devs]
    return min(bws) if bws and all(b is not None for b in bws) else None


def gib(n) -> str:
    return f"{n / GIB:.1f} GiB" if n is not None else "-"


def size(n) -> str:
    """Bytes in the unit llama.cpp prints its buffers in (MiB), GiB from 1 GiB up."""
    if n is None:
        return "-"
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / (1 << 20):.2f} MiB"


def exe_path(cache: str, recipe: str, dirname: str, binary: str | None, os_name: str) -> str | None:
    from selector.verify import installed_binary

    return installed_binary(os.path.join(cache, "bin", recipe, dirname), binary, os_name)
