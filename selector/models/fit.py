"""Where a model fits: the memory llama.cpp needs on each device, and the largest context.

Needs on a device = the weights of the layers it holds (exact: the tensor sizes in the header)
+ the KV cache of those layers (exact: cells x KV heads x (key + value head size) x bytes per
cached value, sliding-window layers capped at their window) + the compute buffer (estimated) + the
runtime's reserve (estimated).  The rules and their sources are in catalogs/llamacpp-fit.json and
docs/models.md; tests/test_models_fit.py holds them to sizes llama.cpp printed.

Pure arithmetic: no machine, no file.
"""

from __future__ import annotations

from selector.models.facts import fit_table

MIN_CTX = 2048  # below this a chat model is not useful; the search for the largest context stops here


class FitError(Exception):
    pass


def _pad(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def cache_bytes(type_: str) -> tuple[int, int]:
    t = fit_table()["cache_types"]
    if type_ not in t or type_ == "note":
        raise FitError(f"cache type {type_!r} is not one llama.cpp has; one of: "
                       + ", ".join(k for k in t if k != "note"))
    return tuple(t[type_])


def cells(facts: dict, ctx: int, n_ubatch: int | None = None, n_seq: int = 1) -> tuple[int, int]:
    """(cells of a full-attention layer, cells of a sliding-window layer) for a context."""
    tab = fit_table()
    pad = tab["ctx_pad"]
    full = _pad(ctx, pad)
    ub = n_ubatch or tab["n_ubatch"]
    swa = min(full, _pad(min(full, facts["n_swa"] * n_seq + ub), pad)) if facts["n_swa"] else full
    return full, swa


def kv_bytes(facts: dict, ctx: int, type_k: str = "f16", type_v: str = "f16", layers=None,
             n_ubatch: int | None = None) -> dict:
    """K and V bytes of the KV cache over ``layers`` (default all), llama_kv_cache's arithmetic."""
    if facts.get("recurrent") and not any(facts["n_head_kv"]):
        return {"k": 0, "v": 0, "total": 0, "cells": 0, "swa_cells": 0}
    full, swa = cells(facts, ctx, n_ubatch)
    kb, kd = cache_bytes(type_k)
    vb, vd = cache_bytes(type_v)
    k = v = 0
    for il in range(facts["n_layer"]) if layers is None else layers:
        heads = facts["n_head_kv"][il]
        if not heads:
            continue  # a recurrent or attention-free layer: no KV cells
        n = swa if facts["swa"][il] else full
        k += n * heads * facts["head_k"] * kb // kd
        v += n * heads * facts["head_v"] * vb // vd
    return {"k": k, "v": v, "total": k + v, "cells": full, "swa_cells": swa}


def compute_bytes(facts: dict, ctx: int, flash_attn: bool, with_output: bool, n_ubatch: int | None = None) -> int:
    """The compute buffer on a GPU: an estimate (catalogs/llamacpp-fit.json "compute_buffer")."""
    tab = fit_table()
    ub = min(n_ubatch or tab["n_ubatch"], _pad(ctx, tab["ctx_pad"]))
    full, _ = cells(facts, ctx, n_ubatch)
    attn = 0 if flash_attn else ub * full * max(facts["n_head"] or [0]) * 4
    logits = ub * facts["n_vocab"] * 4 if with_output else 0
    return max(attn, logits) + ub * facts["n_embd"] * 4 * tab["compute_buffer"]["activation_rows"]


def reserve(backend: str) -> int:
    return fit_table()["reserve"].get(backend, fit_table()["reserve"]["cpu"])


def on_gpu(facts: dict, ngl: int, ctx: int, flash_attn: bool, type_k="f16", type_v="f16",
           layers=None, with_output=None) -> dict:
    """Bytes on one GPU holding ``layers`` (default: the last ``ngl``, as llama.cpp offloads)."""
    n_layer = facts["n_layer"]
    if layers is None:
        layers = range(max(0, n_layer - min(ngl, n_layer)), n_layer)
    if with_output is None:
        with_output = ngl > n_layer
    weights = sum(facts["layer_bytes"][il] for il in layers) + (facts["output_bytes"] if with_output else 0)
    kv = kv_bytes(facts, ctx, type_k, type_v, layers)["total"]
    compute = compute_bytes(facts, ctx, flash_attn, with_output) if (layers or with_output) else 0
    return {"weights": weights, "kv": kv, "compute": compute, "total": weights + kv + compute}


def on_cpu(facts: dict, ngl: int, ctx: int, type_k="f16", type_v="f16") -> dict:
    """Bytes in system memory: token_embd always, and what -ngl leaves on the CPU."""
    n_layer = facts["n_layer"]
    kept = range(0, max(0, n_layer - min(ngl, n_layer)))
    weights = facts["input_bytes"] + sum(facts["layer_bytes"][il] for il in kept)
    if ngl <= n_layer:
        weights += facts["output_bytes"] - (facts["input_bytes"] if facts["tied_embeddings"] else 0)
    kv = kv_bytes(facts, ctx, type_k, type_v, kept)["total"]
    return {"weights": weights, "kv": kv, "total": weights + kv}


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


def plan(facts: dict, devices: list[dict], backend: str, ctx: int | None = None, flash_attn: bool = True,
         type_k: str = "f16", type_v: str = "f16", cpu_budget: int | None = None) -> dict:
    """Where the model goes.  ``devices``: the GPUs the build serves, best first, each
    ``{"name", "budget"}`` (bytes an engine may allocate there, the reserve not yet taken off).

    Answer ``status``: "fits" (one device, context ``ctx``), "split" (all layers over several
    devices by ``tensor_split``), "partial" (``ngl`` of the layers on the first device, the rest on
    the CPU), "cpu" (a CPU build: it fits in system memory), or "no" (with ``suggest``).
    """
    cache_bytes(type_k), cache_bytes(type_v)
    n_layer = facts["n_layer"]
    train = facts.get("n_ctx_train") or 4096
    if ctx is not None:
        if ctx <= 0:
            raise FitError(f"--ctx-size {ctx}: a context is a positive number of tokens")
        if ctx > train and facts.get("n_ctx_train"):
            raise FitError(f"--ctx-size {ctx} is past the context the model was trained for ({train}); "
                           "llama.cpp would need rope scaling (--rope-scaling) for that")
        train = max(train, ctx)
    lo = min(MIN_CTX, train)
    all_layers = n_layer + 1
    res = {"backend": backend, "n_layer": n_layer, "trained_ctx": facts.get("n_ctx_train"), "flash_attn": flash_attn,
           "type_k": type_k, "type_v": type_v}
    gpus = [d for d in devices if d.get("budget")]

    def cpu_need(ngl, c):
        return on_cpu(facts, ngl, c, type_k, type_v)["total"]

    if backend == "cpu" or not gpus:
        budget = (cpu_budget or 0) - reserve("cpu")
        need = lambda c: cpu_need(0, c) + compute_bytes(facts, c, flash_attn, True)  # noqa: E731
        got = ctx if ctx is not None and need(ctx) <= budget else (
            None if ctx is not None else _largest_ctx(lambda c: need(c) <= budget, lo, train))
        if got is None:
            return {**res, "status": "no", "ctx": ctx or lo, "ngl": 0, "cpu_bytes": need(ctx or lo),
                    "cpu_budget": max(budget, 0), "devices": [],
                    "suggest": _suggest(facts, need(ctx or lo) - budget, ctx or lo, type_k, type_v,
                                        lambda c: need(c) <= budget)}
        return {**res, "status": "cpu", "ctx": got, "ngl": 0, "cpu_bytes": need(got), "cpu_budget": budget,
                "devices": []}

    first = gpus[0]
    budget0 = first["budget"] - reserve(backend)

    def one(c):
        return on_gpu(facts, all_layers, c, flash_attn, type_k, type_v)["total"] <= budget0

    got = (ctx if one(ctx) else None) if ctx is not None else _largest_ctx(one, lo, train)
    if got is not None:
        need = on_gpu(facts, all_layers, got, flash_attn, type_k, type_v)
        return {**res, "status": "fits", "ctx": got, "ngl": all_layers,
                "devices": [_dev(first, need, budget0)], "cpu_bytes": on_cpu(facts, all_layers, got)["total"]}
    if len(gpus) > 1:
        split = _split(facts, gpus, backend, flash_attn, type_k, type_v)
        got = (ctx if split(ctx) else None) if ctx is not None else _largest_ctx(lambda c: split(c) is not None, lo, train)
        if got is not None:
            shares, needs = split(got)
            return {**res, "status": "split", "ctx": got, "ngl": all_layers, "tensor_split": shares,
                    "devices": [_dev(g, n, g["budget"] - reserve(backend)) for g, n in zip(gpus, needs)],
                    "cpu_bytes": on_cpu(facts, all_layers, got)["total"]}
    c = ctx if ctx is not None else min(train, 4096)
    k = 0
    for ngl in range(n_layer, 0, -1):
        if on_gpu(facts, ngl, c, flash_attn, type_k, type_v)["total"] <= budget0:
            k = ngl
            break
    cpu = on_cpu(facts, k, c, type_k, type_v)["total"]
    cpu_room = (cpu_budget or 0) - reserve("cpu")
    full = on_gpu(facts, all_layers, c, flash_attn, type_k, type_v)["total"]
    suggest = _suggest(facts, full - budget0, c, type_k, type_v, one)
    if k and (cpu_budget is None or cpu <= cpu_room):
        need = on_gpu(facts, k, c, flash_attn, type_k, type_v)
        return {**res, "status": "partial", "ctx": c, "ngl": k, "devices": [_dev(first, need, budget0)],
                "cpu_bytes": cpu, "suggest": suggest}
    return {**res, "status": "no", "ctx": c, "ngl": 0, "devices": [_dev(first, on_gpu(facts, all_layers, c, flash_attn,
            type_k, type_v), budget0)], "cpu_bytes": on_cpu(facts, 0, c)["total"], "suggest": suggest}


def _dev(d: dict, need: dict, budget: int) -> dict:
    return {"name": d["name"], "needs_bytes": need["total"], "weights_bytes": need["weights"],
            "kv_bytes": need["kv"], "compute_bytes": need["compute"], "budget_bytes": max(budget, 0),
            **({"memory": d["memory"](need["total"])} if callable(d.get("memory")) else {}),
            **({"id": d["id"]} if d.get("id") else {})}


def _split(facts, gpus, backend, flash_attn, type_k, type_v):
    """A layer split over ``gpus`` in proportion to their room, as --tensor-split does; the last
    device holds the output layer.  Returns a function of the context: (shares, needs) or None."""
    budgets = [g["budget"] - reserve(backend) for g in gpus]
    if min(budgets) <= 0:
        return lambda c: None
    n_layer = facts["n_layer"]
    total = sum(budgets)
    shares = [round(b / total, 2) for b in budgets]
    bounds, acc = [], 0.0
    for b in budgets:
        start = round(acc / total * n_layer)
        acc += b
        bounds.append(range(start, round(acc / total * n_layer)))

    def check(c):
        needs = [on_gpu(facts, 0, c, flash_attn, type_k, type_v, layers=r, with_output=(i == len(gpus) - 1))
                 for i, r in enumerate(bounds)]
        return (shares, needs) if all(n["total"] <= b for n, b in zip(needs, budgets)) else None

    return check


def _suggest(facts, short: int, ctx: int, type_k: str, type_v: str, fits) -> list[dict]:
    """What would fit instead of ``short`` bytes too many at ``ctx``: a q8_0 cache, the largest
    context that fits (``fits(ctx)``: all layers at that context), a smaller quantization."""
    out = []
    kv = kv_bytes(facts, ctx, type_k, type_v)["total"]
    if type_k == "f16" and kv:
        saved = kv - kv_bytes(facts, ctx, "q8_0", "q8_0")["total"]
        if saved >= short:
            out.append({"kind": "cache_type", "flags": ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"],
                        "says": f"a q8_0 KV cache saves {saved / (1 << 30):.1f} GiB (needs flash attention for V)"})
    step = fit_table()["ctx_pad"]
    if kv and ctx > step:
        smaller = _largest_ctx(fits, step, ctx - step)
        if smaller is not None:
            out.append({"kind": "ctx_size", "flags": ["--ctx-size", str(smaller)],
                        "says": f"a context of {smaller} tokens fits"})
    weights = facts["weights_bytes"]
    if weights > short:
        out.append({"kind": "quant", "max_weights_bytes": weights - short,
                    "says": f"a quantization of at most {(weights - short) / (1 << 30):.1f} GiB of weights "
                            f"(this one is {weights / (1 << 30):.1f} GiB)"})
    return out
