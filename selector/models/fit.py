"""Where a model fits: the memory llama.cpp allocates on each device, and the largest context.

One term per buffer llama.cpp prints when it loads a model (``-lv 4`` at build 11312), so a user
can hold each number against the engine's own line:

- **model buffer**: the bytes of the tensors a device holds (exact, from the header); on a CPU
  build, the whole file mapped (``CPU_Mapped``) plus the layer weights the CPU repacks for its
  kernels (``CPU_REPACK``: Q4_0, Q4_K, IQ4_NL, MXFP4 on AVX2, more on Arm);
- **KV buffer**: cells x KV heads x (key + value head size) x bytes per cached value, per stream
  (exact); sliding-window layers in their own, smaller cache;
- **compute buffer**: the largest set of intermediate tensors alive at once while the worst-case
  batch runs (estimated from the graph's shapes: attention, feed-forward, output) plus the
  attention masks (exact);
- **output buffer**: one row of logits per slot.

The rules, their constants and the llama.cpp source of each are in catalogs/llamacpp-fit.json
and docs/models.md; tests/test_real_engine.py holds every term to the sizes a real build prints,
tests/test_models.py to public logs of GPU builds.  Pure arithmetic: no machine, no file.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass, replace

from selector.models.facts import fit_table

MIN_CTX = 2048  # below this a chat model is not useful; the search for the largest context stops here
MAX_SLOTS = 256  # LLAMA_MAX_SEQ (src/llama-cparams.h): llama-server refuses more sequences
F32 = 4


class FitError(Exception):
    pass


def _pad(n: int, to: int) -> int:
    return (n + to - 1) // to * to


@dataclass(frozen=True)
class Run:
    """The engine parameters the memory depends on.  The launch line pins every one of them
    (planner.llama_server_args), so the plan holds for the line it prints, whatever a newer build's
    defaults are.

    ``ctx`` is the context of one slot; ``parallel`` slots each get their own (``--ctx-size
    ctx*parallel --parallel N --no-kv-unified``: one cache stream per slot).  ``outputs`` is the rows
    of logits the engine reserves in its worst-case graph: one per slot since
    ggml-org/llama.cpp#23861 (llama-server, 2026-05), the whole micro-batch before it.
    """
    ctx: int
    parallel: int = 1
    ubatch: int = 512
    batch: int = 2048
    flash_attn: bool = True
    type_k: str = "f16"
    type_v: str = "f16"
    outputs: int | None = None
    backend: str = "cpu"  # the build's backend: what its compute buffers hold differs (compute_bytes)

    @property
    def n_ctx(self) -> int:
        """llama_context's n_ctx: the asked size padded to 256, then a whole number of slots of
        n_ctx / slots padded to 256 (src/llama-context.cpp)."""
        pad = fit_table()["ctx_pad"]
        return _pad(_pad(self.ctx * self.parallel, pad) // self.parallel, pad) * self.parallel

    @property
    def tokens(self) -> int:
        """The micro-batch the compute graph is reserved for: n_ubatch, at most n_batch, which a causal
        model caps at the asked context before it is padded (llama_context: n_batch = min(n_ctx,
        n_batch), n_ubatch = min(n_batch, n_ubatch))."""
        return min(self.ubatch, self.batch, self.ctx * self.parallel)

    @property
    def logit_rows(self) -> int:
        return min(self.tokens, self.outputs if self.outputs is not None else self.parallel)


def cache_bytes(type_: str) -> tuple[int, int]:
    t = fit_table()["cache_types"]
    if type_ not in t or type_ == "note":
        raise FitError(f"cache type {type_!r} is not one llama.cpp has; one of: "
                       + ", ".join(k for k in t if k != "note"))
    return tuple(t[type_])


def cells(facts: dict, run: Run) -> tuple[int, int, int]:
    """(streams, cells per stream of a full-attention layer, of a sliding-window layer): one stream per
    slot (src/llama-kv-cache.cpp n_stream), a sliding-window stream of the window and a micro-batch
    (src/llama-kv-cache-iswa.cpp size_swa)."""
    pad = fit_table()["ctx_pad"]
    streams = run.parallel
    full = run.n_ctx // streams
    if not facts["n_swa"]:
        return streams, full, full
    return streams, full, min(full, _pad(facts["n_swa"] + run.tokens, pad))


def kv_bytes(facts: dict, run: Run, layers=None) -> dict:
    """K and V bytes of the KV cache over ``layers`` (default all): llama_kv_cache's tensors,
    n_embd_k_gqa x cells x streams per layer, the sliding-window layers in their own cache."""
    zero = {"k": 0, "v": 0, "total": 0, "swa": 0, "cells": 0, "swa_cells": 0, "streams": 1}
    if facts.get("recurrent") and not any(facts["n_head_kv"]):
        return zero
    streams, full, swa = cells(facts, run)
    kb, kd = cache_bytes(run.type_k)
    vb, vd = cache_bytes(run.type_v)
    k = v = swa_bytes = 0
    for il in range(facts["n_layer"]) if layers is None else layers:
        heads = facts["n_head_kv"][il]
        if not heads:
            continue  # a recurrent or attention-free layer: no KV cells
        n = (swa if facts["swa"][il] else full) * streams
        lk = n * heads * facts["head_k"] * kb // kd
        lv = n * heads * facts["head_v"] * vb // vd
        k, v = k + lk, v + lv
        if facts["swa"][il]:
            swa_bytes += lk + lv
    return {"k": k, "v": v, "total": k + v, "swa": swa_bytes, "cells": full, "swa_cells": swa, "streams": streams}


def mask_bytes(facts: dict, run: Run, layers=None) -> int:
    """The attention masks, inputs of the graph: one per kind of attention the layers use (full,
    sliding window), cells per stream x tokens, f16 with flash attention and f32 without
    (llm_graph_input_attn_kv: self_kq_mask, and self_kq_mask_swa)."""
    if facts.get("recurrent") and not any(facts["n_head_kv"]):
        return 0
    _streams, full, swa = cells(facts, run)
    idx = range(facts["n_layer"]) if layers is None else layers
    kinds = {bool(facts["swa"][il]) for il in idx if facts["n_head_kv"][il]}
    each = 2 if run.flash_attn else F32
    return sum((swa if k else full) * run.tokens * each for k in kinds)


def compute_bytes(facts: dict, run: Run, where: str = "gpu", layers=None, with_output: bool = True) -> int:
    """The compute buffer: the largest set of intermediate tensors alive at once (an estimate; llama.cpp
    measures it by allocating the worst-case graph, catalogs/llamacpp-fit.json "compute_buffer").

    ``where``: "gpu" (a device holding layers: the peak), "cpu" (a CPU build: the peak and the
    masks, which are graph inputs on the CPU), "host" (a GPU build's CPU side: the masks and the
    token embeddings it looks up)."""
    tab = fit_table()["compute_buffer"]
    t = run.tokens
    idx = list(range(facts["n_layer"]) if layers is None else layers)
    masks = mask_bytes(facts, run, idx)
    gpu = tab["gpu_builds"].get(run.backend, tab["gpu_builds"]["default"])
    if where == "host":
        return masks + gpu["host_embd_rows"] * t * facts["n_embd"] * F32
    e = facts["n_embd"]
    q = max((facts["n_head"][il] for il in idx), default=0) * facts["head_k"]
    ekv = max((facts["n_head_kv"][il] for il in idx), default=0) * facts["head_k"]
    heads = max((facts["n_head"][il] for il in idx), default=0)
    _s, full, swa = cells(facts, run)
    n_kv = max((swa if facts["swa"][il] else full for il in idx if facts["n_head_kv"][il]), default=0)
    a = tab["attention"]
    attn = t * (a["n_embd"] * e + a["n_embd_q"] * q + a["n_embd_kv"] * ekv) * F32
    if not run.flash_attn:
        attn += t * n_kv * heads * F32  # KQ, scores of every head over every cell
    f = tab["feed_forward"]
    width = max((facts["n_ff"][il] for il in idx), default=0) if facts.get("n_ff") else 0
    ffn = t * (f["n_embd"] * e + f["n_ff"] * width) * F32 if idx else 0
    if facts.get("n_expert_used") and idx:  # each used expert's down-projection rows, where the build keeps them
        ffn += t * gpu["expert_rows"] * e * facts["n_expert_used"] * F32
    out = (run.logit_rows * facts["n_vocab"] + t * e) * F32 if with_output else 0
    peak = max(attn if idx else 0, ffn, out)
    return peak + masks if where == "cpu" or gpu["masks_on_device"] else peak


def output_bytes(facts: dict, run: Run) -> int:
    """The output buffer: a row of logits (n_vocab floats) per slot, in system memory
    (llama_context::output_reserve(n_seq_max))."""
    return facts["n_vocab"] * max(run.parallel, 1) * F32


def repack_bytes(facts: dict, cpu_arch: str | None, cpu_flags, layers=None, with_output: bool = True) -> int:
    """The CPU_REPACK buffer: the matrix weights the CPU backend copies into its interleaved layouts,
    by type, row multiple and the CPU features its kernels need (catalogs/llamacpp-fit.json
    "cpu_repack", from ggml-cpu/repack.cpp)."""
    rules = fit_table()["cpu_repack"].get(cpu_arch or "", [])
    flags = set(cpu_flags or ())
    usable = {}
    for r in rules:
        if r["type"] not in usable and any(set(need) <= flags for need in r["any_of"]):
            usable[r["type"]] = 0 if r["rows"] == 8 else 1
    if not usable:
        return 0
    total = 0
    blocks = [facts["matmul"][il] for il in (range(facts["n_layer"]) if layers is None else layers)]
    if with_output:
        blocks.append(facts.get("output_matmul") or {})
    for b in blocks:
        for type_, sizes in b.items():
            if type_ in usable:
                total += sizes[usable[type_]]
    return total


def reserve(backend: str) -> int:
    return fit_table()["reserve"].get(backend, fit_table()["reserve"]["cpu"])


def gpu_start(n_layer: int, ngl: int) -> int:
    """The first repeating layer ``-ngl`` puts on a GPU.  Since ggml-org/llama.cpp#18148 (merged
    2025-12-17; every build Lemonade pins is later) the output layer is offloaded first and then the
    repeating layers from the last: i_gpu_start = n_layer + 1 - n_gpu_layers (src/llama-model.cpp
    load_tensors), so -ngl K holds the output layer and K - 1 layers."""
    return min(max(n_layer + 1 - ngl, 0), n_layer)


def on_gpu(facts: dict, ngl: int, run: Run, layers=None, with_output=None, cpu_moe: int = 0) -> dict:
    """Bytes on one GPU holding ``layers`` (default: those ``-ngl ngl`` offloads, with the output layer:
    ``gpu_start``), less the expert tensors of the first ``cpu_moe`` layers, which --n-cpu-moe keeps in
    system memory."""
    n_layer = facts["n_layer"]
    if layers is None:
        layers = range(gpu_start(n_layer, ngl), n_layer)
    if with_output is None:
        with_output = ngl >= 1
    weights = sum(facts["layer_bytes"][il] - (facts["expert_bytes"][il] if il < cpu_moe else 0) for il in layers) \
        + (facts["output_bytes"] if with_output else 0)
    kv = kv_bytes(facts, run, layers)
    compute = compute_bytes(facts, run, "gpu", layers, with_output) if (layers or with_output) else 0
    return {"weights": weights, "kv": kv["total"], "kv_swa": kv["swa"], "compute": compute,
            "total": weights + kv["total"] + compute}


def on_cpu(facts: dict, ngl: int, run: Run, cpu: tuple | None = None, cpu_moe: int = 0) -> dict:
    """Bytes in system memory.  ``cpu`` = (arch, flags) for a CPU build: every layer runs there, the
    whole file is mapped and the repacked weights come on top.  Otherwise a GPU build: token_embd
    always, and the layers -ngl leaves on the CPU, its masks and the output buffer."""
    n_layer = facts["n_layer"]
    if cpu is not None:
        weights = facts["weights_bytes"]
        repack = repack_bytes(facts, cpu[0], cpu[1])
        kv = kv_bytes(facts, run)
        compute = compute_bytes(facts, run, "cpu")
    else:
        kept = range(0, gpu_start(n_layer, ngl))
        weights = facts["input_bytes"] + sum(facts["layer_bytes"][il] for il in kept) \
            + sum(facts["expert_bytes"][il] for il in range(len(kept), min(cpu_moe, n_layer)))
        if ngl < 1:
            weights += facts["output_bytes"] - (facts["input_bytes"] if facts["tied_embeddings"] else 0)
        repack = 0
        kv = kv_bytes(facts, run, kept)
        compute = compute_bytes(facts, run, "host")
    out = output_bytes(facts, run)
    return {"weights": weights, "repack": repack, "kv": kv["total"], "kv_swa": kv["swa"], "compute": compute,
            "output": out, "total": weights + repack + kv["total"] + compute + out}


def _largest_ctx(fits, lo: int, hi: int) -> int | None:
    """The largest context in [lo, hi] (multiples of 256, and hi itself) for which fits(ctx) holds."""
    if fits(hi):
        return hi
    if not fits(lo):
        return None
    step = fit_table()["ctx_pad"]
    a, b = lo // step, hi // step  # fits(a*step), not fits(b*step)
    while b - a > 1:
        mid = (a + b) // 2
        if fits(mid * step):
            a = mid
        else:
            b = mid
    return a * step


def plan(facts: dict, devices: list[dict], backend: str, run: Run | None = None, cpu_budget: int | None = None,
         cpu: tuple | None = None, ctx: int | None = None, bandwidth: tuple | None = None) -> dict:
    """Where the model goes.  ``devices``: the GPUs the build serves, best first, each
    ``{"name", "budget"}`` (bytes an engine may allocate there, the reserve not yet taken off).
    ``run``: the engine parameters; its ``ctx`` is the context asked for, or 0 for the largest
    that fits (``ctx=`` says the same).  ``cpu``: (arch, flags) of the machine, for a CPU build's
    repacked weights.

    Answer ``status``: "fits" (one device, context ``ctx``), "split" (all layers over several
    devices by ``tensor_split``), "partial" (the last ``ngl`` layers on the GPUs, split as for "split"
    where there are several, the rest on the CPU), "experts" (every layer on the GPUs but the experts
    of the first ``n_cpu_moe`` layers, which stay in system memory: --n-cpu-moe), "cpu" (a CPU build: it fits in system memory),
    or "no" (with ``suggest``).  Where both "partial" and "experts" fit, the faster by the bandwidth
    bound wins (``bandwidth``: GB/s of the first device and of system memory; without them, the one
    that reads less from system memory per token); ``instead_of`` is the other.
    """
    run = run or Run(ctx=0)
    if ctx is not None:
        run = replace(run, ctx=ctx)
    asked = run.ctx or None
    cache_bytes(run.type_k), cache_bytes(run.type_v)
    if not 1 <= run.parallel <= MAX_SLOTS:
        raise FitError(f"--parallel {run.parallel}: llama-server takes 1 to {MAX_SLOTS} slots (LLAMA_MAX_SEQ)")
    n_layer = facts["n_layer"]
    train = facts.get("n_ctx_train") or 4096
    if asked is not None:
        if asked <= 0:
            raise FitError(f"--ctx-size {asked}: a context is a positive number of tokens")
        if asked > train and facts.get("n_ctx_train"):
            raise FitError(f"--ctx-size {asked} is past the context the model was trained for ({train}); "
                           "llama.cpp would need rope scaling (--rope-scaling) for that")
        train = max(train, asked)
    lo = min(MIN_CTX, train)
    all_layers = n_layer + 1
    res = {"backend": backend, "n_layer": n_layer, "trained_ctx": facts.get("n_ctx_train"),
           "flash_attn": run.flash_attn, "type_k": run.type_k, "type_v": run.type_v, "parallel": run.parallel,
           "ubatch": run.ubatch, "batch": run.batch}
    gpus = [d for d in devices if d.get("budget")]
    at = lambda c: replace(run, ctx=c)  # noqa: E731

    if backend == "cpu" or not gpus:
        budget = (cpu_budget or 0) - reserve("cpu")
        need = lambda c: on_cpu(facts, 0, at(c), cpu or ("", ()))  # noqa: E731
        fits = lambda c: need(c)["total"] <= budget  # noqa: E731
        got = (asked if fits(asked) else None) if asked is not None else _largest_ctx(fits, lo, train)
        c = got or asked or lo
        base = {**res, "ctx": c, "n_ctx": at(c).n_ctx, "ngl": 0, "cpu": need(c), "cpu_bytes": need(c)["total"],
                "cpu_budget": max(budget, 0), "devices": []}
        if got is None:
            return {**base, "status": "no",
                    "suggest": _suggest(facts, need(c)["total"] - budget, at(c), fits, "system memory")}
        return {**base, "status": "cpu"}

    first = gpus[0]
    budget0 = first["budget"] - reserve(backend)

    def one(c):
        return on_gpu(facts, all_layers, at(c))["total"] <= budget0

    def devices_of(placed):
        """The GPUs that hold a part (a GPU given a share of 0 holds none), and the split the line gives."""
        shares, needs = placed
        out = {"devices": [_dev(g, n, g["budget"] - reserve(backend)) for g, n in zip(gpus, needs) if n is not None]}
        return {**out, "tensor_split": shares} if shares else out

    # several GPUs serve the build: llama.cpp spreads the layers over all of them unless told otherwise
    # (split mode layer, in proportion to their free memory), so the plan does as the line will
    got = None if len(gpus) > 1 else \
        (asked if one(asked) else None) if asked is not None else _largest_ctx(one, lo, train)
    if got is not None:
        need = on_gpu(facts, all_layers, at(got))
        host = on_cpu(facts, all_layers, at(got))
        return {**res, "status": "fits", "ctx": got, "n_ctx": at(got).n_ctx, "ngl": all_layers,
                "devices": [_dev(first, need, budget0)], "cpu": host, "cpu_bytes": host["total"]}
    if len(gpus) > 1:
        split = _split(facts, gpus, backend, run)
        got = (asked if split(asked) else None) if asked is not None else \
            _largest_ctx(lambda c: split(c) is not None, lo, train)
        if got is not None:
            shares, needs = split(got)
            host = on_cpu(facts, all_layers, at(got))
            return {**res, "status": "split", "ctx": got, "n_ctx": at(got).n_ctx, "ngl": all_layers,
                    **devices_of((shares, needs)), "cpu": host, "cpu_bytes": host["total"]}
    c = asked if asked is not None else min(train, 4096)
    # layers (or experts) left in system memory: over every GPU the build serves, in proportion, as
    # --tensor-split gives llama.cpp the offloaded layers; on one GPU, the last -ngl layers
    spread = _split(facts, gpus, backend, run) if len(gpus) > 1 else None

    def place(ngl, cpu_moe=0):
        if spread is not None:
            return spread(c, ngl, cpu_moe)
        need = on_gpu(facts, ngl, at(c), cpu_moe=cpu_moe)
        return (None, [need]) if need["total"] <= budget0 else None


    k = 0
    for ngl in range(n_layer, 0, -1):
        if place(ngl) is not None:
            k = ngl
            break
    host = on_cpu(facts, k, at(c))
    cpu_room = (cpu_budget or 0) - reserve("cpu")
    short = spread.short(c) if spread is not None else on_gpu(facts, all_layers, at(c))["total"] - budget0
    fits_whole = one if spread is None else (lambda x: spread(x) is not None)
    suggest = _suggest(facts, short, at(c), fits_whole, "memory" if first.get("shared") else
                       "VRAM" if spread is None else "VRAM over the GPUs")
    room = lambda h: cpu_budget is None or h["total"] <= cpu_room  # noqa: E731
    cands = []
    if first.get("shared"):  # the GPU's memory is system memory: layers or experts moved out take the same room
        k = 0
    if k and room(host):
        cands.append({"status": "partial", "ngl": k, "placed": place(k), "host": host,
                      "cpu_read": sum(layer_active(facts, il) for il in range(gpu_start(n_layer, k)))})
    n_moe = None if first.get("shared") else _fewest_cpu_moe(facts, lambda n: place(all_layers, n) is not None)
    if n_moe is not None and room(on_cpu(facts, all_layers, at(c), cpu_moe=n_moe)):
        cands.append({"status": "experts", "ngl": all_layers, "n_cpu_moe": n_moe,
                      "placed": place(all_layers, n_moe),
                      "host": on_cpu(facts, all_layers, at(c), cpu_moe=n_moe),
                      "cpu_read": sum(expert_active(facts, il) for il in range(n_moe))})
    if cands:
        for x in cands:
            x["gpu_read"] = active_bytes(facts) - x["cpu_read"]
            x["seconds"] = _seconds(x, bandwidth)
        # the faster by the bandwidth bound; without bandwidths, the one reading less from system memory
        best = min(cands, key=lambda x: (x["seconds"] if x["seconds"] is not None else 0, x["cpu_read"]))
        other = [x for x in cands if x is not best]
        out = {**res, "status": best["status"], "ctx": c, "n_ctx": at(c).n_ctx, "ngl": best["ngl"],
               **devices_of(best["placed"]), "cpu": best["host"], "cpu_bytes": best["host"]["total"],
               "suggest": suggest, "cpu_read_bytes": best["cpu_read"], "gpu_read_bytes": best["gpu_read"]}
        if "n_cpu_moe" in best:
            out["n_cpu_moe"] = best["n_cpu_moe"]
        if other:
            o = other[0]
            out["instead_of"] = {"status": o["status"], "ngl": o["ngl"], "cpu_read_bytes": o["cpu_read"],
                                 "gpu_read_bytes": o["gpu_read"], **({"n_cpu_moe": o["n_cpu_moe"]} if "n_cpu_moe" in o else {})}
        return out
    host0 = on_cpu(facts, 0, at(c))
    out = {**res, "status": "no", "ctx": c, "n_ctx": at(c).n_ctx, "ngl": 0,
           "devices": [_dev(first, on_gpu(facts, all_layers, at(c)), budget0)],
           "cpu": host0, "cpu_bytes": host0["total"], "suggest": suggest}
    if first.get("shared"):  # one memory: what the GPU needs is the whole of it
        del out["cpu"]
    return out


def layer_active(facts: dict, il: int) -> int:
    """Bytes of layer ``il`` read per generated token: all of it but the experts not routed to."""
    return facts["layer_bytes"][il] - facts["expert_bytes"][il] + expert_active(facts, il)


def expert_active(facts: dict, il: int) -> int:
    """Bytes of layer ``il``'s experts read per token: expert_used_count of expert_count of them."""
    e = facts["expert_bytes"][il]
    if facts["n_expert"] and facts["n_expert_used"]:
        return e * facts["n_expert_used"] // facts["n_expert"]
    return e


def active_bytes(facts: dict) -> int:
    """Weights read per generated token: every layer's active part and the output layer (not token_embd
    nor per-layer embeddings, which are only looked up)."""
    return sum(layer_active(facts, il) for il in range(facts["n_layer"])) + facts["output_bytes"] \
        - facts.get("lookup_bytes", 0)


def _fewest_cpu_moe(facts: dict, fits) -> int | None:
    """The fewest layers whose experts --n-cpu-moe must keep in system memory for every layer to fit on
    the GPUs (``fits(n)``), or None (not a mixture of experts, or not even then)."""
    if not facts["n_expert"] or not any(facts["expert_bytes"]):
        return None
    if not fits(facts["n_layer"]):
        return None
    lo, hi = 0, facts["n_layer"]  # fits with hi, not with lo (the whole model did not fit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _seconds(cand: dict, bandwidth) -> float | None:
    """Seconds per token by the bandwidth bound: the GPU's share at its bandwidth, the CPU's at system
    memory's; None when either is unknown."""
    gpu, cpu = bandwidth or (None, None)
    if not gpu or not cpu:
        return None
    return cand["gpu_read"] / (gpu * 1e9) + cand["cpu_read"] / (cpu * 1e9)


def _dev(d: dict, need: dict, budget: int) -> dict:
    return {"name": d["name"], "needs_bytes": need["total"], "weights_bytes": need["weights"],
            "kv_bytes": need["kv"], "kv_swa_bytes": need["kv_swa"], "compute_bytes": need["compute"],
            "budget_bytes": max(budget, 0),
            **({"memory": d["memory"](need["total"])} if callable(d.get("memory")) else {}),
            **({"id": d["id"]} if d.get("id") else {})}


def _f32(x: float) -> float:
    return array("f", [x])[0]


def layer_devices(n_layer: int, ngl: int, shares: list[float]) -> list[int | None]:
    """The device of each layer, and last of the output layer, for ``-ngl ngl --tensor-split shares``
    (None: the CPU), as llama.cpp assigns them (src/llama-model.cpp load_tensors: the split points are
    the normalised running sums of the shares, in float; the offloaded layers are the last ``ngl``; layer
    il goes to the first device whose split point is above (il - i_gpu_start) / act_gpu_layers)."""
    acc, points = 0.0, []
    for share in shares:
        acc = _f32(acc + _f32(share))
        points.append(acc)
    points = [_f32(p / acc) for p in points]
    start, act = max(n_layer + 1 - ngl, 0), min(ngl, n_layer + 1)
    return [bisect.bisect_right(points, _f32((il - start) / act)) if start <= il and il - start < act else None
            for il in range(n_layer + 1)]


def _split(facts, gpus, backend, run: Run):
    """Layers over ``gpus`` in proportion to their room, as --tensor-split gives them (the shares the line
    prints).  Returns a function of the context, the layers offloaded and the layers whose experts stay
    in system memory: (shares, needs per device) where every device holds its part, else None."""
    budgets = [g["budget"] - reserve(backend) for g in gpus]
    n_layer = facts["n_layer"]
    total = sum(b for b in budgets if b > 0)
    # a GPU with no room past its runtime's reserve gets a share of 0: llama.cpp gives it no layer
    shares = [round(b / total, 2) if b > 0 else 0.0 for b in budgets] if total else []
    if sum(shares) <= 0:
        return lambda c, ngl=n_layer + 1, cpu_moe=0: None

    def needs(c, ngl=n_layer + 1, cpu_moe=0):
        where = layer_devices(n_layer, ngl, shares)
        r = replace(run, ctx=c)
        return [on_gpu(facts, 0, r, layers=[il for il in range(n_layer) if where[il] == i],
                       with_output=where[n_layer] == i, cpu_moe=cpu_moe) if share else None
                for i, share in enumerate(shares)]

    def check(c, ngl=n_layer + 1, cpu_moe=0):
        got = needs(c, ngl, cpu_moe)
        return (shares, got) if all(n is None or n["total"] <= b for n, b in zip(got, budgets)) else None

    check.short = lambda c: sum(n["total"] for n in needs(c) if n) - sum(b for b in budgets if b > 0)  # type: ignore[attr-defined]
    return check


def _suggest(facts, short: int, run: Run, fits, memory: str = "VRAM") -> list[dict]:
    """What would fit instead of ``short`` bytes too many at ``run.ctx``: more memory, a q8_0 cache, the
    largest context that fits (``fits(ctx)``), a smaller quantization."""
    out = [{"kind": "memory", "more_bytes": short,
            "says": f"{-(-short * 10 // (1 << 30)) / 10:.1f} GiB more {memory} holds it whole as it is"}] if short > 0 else []
    kv = kv_bytes(facts, run)["total"]
    if run.type_k == "f16" and kv:
        saved = kv - kv_bytes(facts, replace(run, type_k="q8_0", type_v="q8_0"))["total"]
        if saved >= short:
            out.append({"kind": "cache_type", "flags": ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"],
                        "says": f"a q8_0 KV cache saves {saved / (1 << 30):.1f} GiB (needs flash attention for V)"})
    step = fit_table()["ctx_pad"]
    if kv and run.ctx > step:
        smaller = _largest_ctx(fits, step, run.ctx - step)
        if smaller is not None:
            out.append({"kind": "ctx_size", "flags": ["--ctx-size", str(smaller * run.parallel)],
                        "says": f"a context of {smaller} tokens" + (" per slot" if run.parallel > 1 else "")
                                + " fits"})
    weights = facts["weights_bytes"]
    if weights > short:
        out.append({"kind": "quant", "max_weights_bytes": weights - short,
                    "says": f"a quantization of at most {(weights - short) / (1 << 30):.1f} GiB of weights "
                            f"(this one is {weights / (1 << 30):.1f} GiB)"})
    return out
