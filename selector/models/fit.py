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
from enum import Enum

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



class Status(str, Enum):
    """Where the model goes: one GPU (``fits``), several (``split``), the last ``ngl`` layers on the GPUs
    and the rest on the CPU (``partial``), every layer on the GPUs but the experts of the first
    ``n_cpu_moe`` layers (``experts``), a CPU build in system memory (``cpu``), or nowhere (``no``)."""
    FITS = "fits"
    SPLIT = "split"
    PARTIAL = "partial"
    EXPERTS = "experts"
    CPU = "cpu"
    NO = "no"


class Context(str, Enum):
    """Why the plan has its context: asked (--ctx-size), the largest that fits whole (up to the trained
    context), or, where the whole model fits at no context from MIN_CTX up, the default DEFAULT_CTX
    (the trained context where that is smaller)."""
    ASKED = "asked"
    LARGEST = "largest"
    DEFAULT = "default"


class Memory(str, Enum):
    """The memory a shortfall is of."""
    VRAM = "VRAM"
    GPUS = "VRAM over the GPUs"
    SHARED = "memory"  # a GPU whose memory is system memory
    SYSTEM = "system memory"


@dataclass(frozen=True)
class DeviceNeed:
    """What one GPU holds, as llama.cpp's buffers (weights, KV of which kv_swa in the sliding-window
    cache, compute), and what it can give (its budget less the runtime's reserve)."""
    name: str
    weights: int
    kv: int
    kv_swa: int
    compute: int
    budget: int
    memory: str | None = None  # the memory it lands in, in the probe's words: VRAM, VRAM + GTT, unified
    id: str | None = None  # the build's own name of the device (ROCm0), from a verify

    @property
    def total(self) -> int:
        return self.weights + self.kv + self.compute


@dataclass(frozen=True)
class HostNeed:
    """System memory, as llama.cpp's CPU buffers: weights (the mapped file on a CPU build; token_embd
    and what -ngl / --n-cpu-moe leave there on a GPU build), the repacked copy, KV, compute, output."""
    weights: int
    repack: int
    kv: int
    kv_swa: int
    compute: int
    output: int

    @property
    def total(self) -> int:
        return self.weights + self.repack + self.kv + self.compute + self.output


@dataclass(frozen=True)
class Layout:
    """One placement of the model: the status, -ngl, --n-cpu-moe, --tensor-split, what each GPU and
    system memory hold, and the weights read per generated token from each (partial, experts)."""
    status: Status
    ngl: int
    devices: tuple[DeviceNeed, ...] = ()
    host: HostNeed | None = None
    n_cpu_moe: int = 0
    tensor_split: tuple[float, ...] = ()
    cpu_read: int | None = None
    gpu_read: int | None = None


@dataclass(frozen=True)
class Suggestion:
    """What would fit instead: ``memory`` (``bytes`` more of ``memory``), ``cache_type`` (a q8_0 cache
    saves ``bytes``), ``ctx_size`` (the context ``ctx`` per slot fits), ``quant`` (weights of at most
    ``bytes``; this model's are ``current``)."""
    kind: str
    bytes: int = 0
    memory: Memory | None = None
    ctx: int | None = None
    parallel: int = 1
    current: int = 0
    part: bool = False  # memory: the system memory that runs it with part of it there (-ngl, --n-cpu-moe)

    @property
    def flags(self) -> tuple[str, ...]:
        if self.kind == "cache_type":
            return ("--cache-type-k", "q8_0", "--cache-type-v", "q8_0")
        if self.kind == "ctx_size":
            return ("--ctx-size", str(self.ctx * self.parallel))
        return ()


@dataclass(frozen=True)
class Plan:
    """The plan of one model on one machine, planned once: the layout chosen, the one not taken
    (``instead_of``), the parameters the line pins (``run``; ``run.ctx`` is the planned context of one
    slot), system memory's budget, and what would fit better."""
    runtime: str
    gpu_layers: bool  # whether the line says -ngl: a build running on the CPU has no GPU to give layers
    n_layer: int
    trained_ctx: int | None
    run: Run
    asked_ctx: int | None
    context: Context
    layout: Layout
    host_budget: int | None  # system memory usable by the engine, less the reserve; None: not known
    instead_of: Layout | None = None
    suggest: tuple[Suggestion, ...] = ()
    shared: bool = False  # the GPU's memory is system memory: there is no other memory to move to

    status = property(lambda self: self.layout.status)
    ngl = property(lambda self: self.layout.ngl)
    n_cpu_moe = property(lambda self: self.layout.n_cpu_moe)
    tensor_split = property(lambda self: self.layout.tensor_split)
    devices = property(lambda self: self.layout.devices)
    host = property(lambda self: self.layout.host)
    ctx = property(lambda self: self.run.ctx)
    n_ctx = property(lambda self: self.run.n_ctx)
    parallel = property(lambda self: self.run.parallel)

    @property
    def fits(self) -> bool:
        return self.status is not Status.NO

    @property
    def padded(self) -> bool:
        """The context is below llama.cpp's least: it allocates more cells than asked (n_ctx)."""
        return self.run.n_ctx > self.run.ctx * self.run.parallel


def _need(d: dict, need: dict, budget: int) -> DeviceNeed:
    memory = d.get("memory")
    return DeviceNeed(d["name"], need["weights"], need["kv"], need["kv_swa"], need["compute"], max(budget, 0),
                      memory(need["total"]) if callable(memory) else memory, d.get("id") or None)


def _host(h: dict) -> HostNeed:
    return HostNeed(h["weights"], h["repack"], h["kv"], h["kv_swa"], h["compute"], h["output"])


DEFAULT_CTX = 4096  # the context planned where the whole model fits at no context from MIN_CTX up


def plan(facts: dict, devices: list[dict], backend: str, run: Run | None = None, cpu_budget: int | None = None,
         cpu: tuple | None = None, ctx: int | None = None, bandwidth=None, offload: bool = True,
         runtime: str | None = None) -> Plan:
    """Where the model goes.  ``devices``: the GPUs the build serves, best first, each ``{"name",
    "budget"}`` (bytes an engine may allocate there, the reserve not yet taken off; optional "memory":
    need -> words, "id", "shared").  ``run``: the engine parameters; its ``ctx`` is the context asked
    for, or 0 for the largest that fits (``ctx=`` says the same).  ``cpu``: (arch, flags) of the
    machine, for a CPU build's repacked weights.  ``bandwidth``: GB/s of the slowest GPU and of
    system memory (or a function giving them, called only where they are needed), which decide between "partial" and "experts" where both fit (without them, the
    one that reads less from system memory per token wins); the other is ``instead_of``.  ``offload``
    False: an engine that cannot keep part of the model in system memory (whisper.cpp, sd.cpp)."""
    run = run or Run(ctx=0)
    if ctx is not None:
        run = replace(run, ctx=ctx)
    asked, train = _checked(facts, run)
    host_budget = None if cpu_budget is None else max(cpu_budget - reserve("cpu"), 0)
    gpus = [d for d in devices if d.get("budget")]
    if backend == "cpu" or not gpus:
        c, why, layout, suggest = _cpu_plan(facts, run, asked, train, host_budget, cpu or ("", ()))
        alt = None
    else:
        c, why, layout, alt, suggest = _gpu_plan(facts, gpus, backend, run, asked, train, cpu_budget, bandwidth,
                                                 offload)
    return Plan(runtime=runtime or backend, gpu_layers=bool(devices), n_layer=facts["n_layer"], trained_ctx=facts.get("n_ctx_train"),
                run=replace(run, ctx=c), asked_ctx=asked, context=why, layout=layout, host_budget=host_budget,
                instead_of=alt, suggest=tuple(suggest), shared=bool(gpus and gpus[0].get("shared")))


def _checked(facts: dict, run: Run) -> tuple[int | None, int]:
    """(the context asked, or None; the largest a search may try): refuses what llama.cpp would."""
    cache_bytes(run.type_k), cache_bytes(run.type_v)
    if not 1 <= run.parallel <= MAX_SLOTS:
        raise FitError(f"--parallel {run.parallel}: llama-server takes 1 to {MAX_SLOTS} slots (LLAMA_MAX_SEQ)")
    asked = run.ctx or None
    train = facts.get("n_ctx_train") or DEFAULT_CTX
    if asked is not None:
        if asked <= 0:
            raise FitError(f"--ctx-size {asked}: a context is a positive number of tokens")
        if asked > train and facts.get("n_ctx_train"):
            raise FitError(f"--ctx-size {asked} is past the context the model was trained for ({train}); "
                           "llama.cpp would need rope scaling (--rope-scaling) for that")
        train = max(train, asked)
    return asked, train


def _context(fits, asked: int | None, train: int) -> tuple[int | None, Context]:
    """The context at which ``fits`` holds: the one asked, else the largest from MIN_CTX to ``train``."""
    if asked is not None:
        return (asked if fits(asked) else None), Context.ASKED
    return _largest_ctx(fits, min(MIN_CTX, train), train), Context.LARGEST


def _default(asked: int | None, train: int) -> tuple[int, Context]:
    """The context of a plan where the whole model fits at none: the one asked, else DEFAULT_CTX."""
    return (asked, Context.ASKED) if asked is not None else (min(train, DEFAULT_CTX), Context.DEFAULT)


def _cpu_plan(facts, run, asked, train, budget, cpu):
    """A CPU build: every layer in system memory, the file mapped and the repacked copy beside it."""
    at = lambda c: replace(run, ctx=c)  # noqa: E731
    need = lambda c: on_cpu(facts, 0, at(c), cpu)  # noqa: E731
    fits = lambda c: need(c)["total"] <= (budget or 0)  # noqa: E731
    got, why = _context(fits, asked, train)
    c, why = (got, why) if got is not None else _default(asked, train)
    host = need(c)
    if got is None:
        short = host["total"] - (budget or 0)
        return c, why, Layout(Status.NO, 0, host=_host(host)), _suggest(facts, short, at(c), fits, Memory.SYSTEM,
                                                                         host["repack"])
    return c, why, Layout(Status.CPU, 0, host=_host(host)), []


def _gpu_plan(facts, gpus, backend, run, asked, train, cpu_budget, bandwidth, offload=True):
    """A GPU build: the whole model on one GPU, split over several, else part of it in system memory."""
    n_layer, all_layers = facts["n_layer"], facts["n_layer"] + 1
    budget0 = gpus[0]["budget"] - reserve(backend)
    at = lambda c: replace(run, ctx=c)  # noqa: E731
    spread = _split(facts, gpus, backend, run) if len(gpus) > 1 else None
    if spread is None:
        whole = lambda c: on_gpu(facts, all_layers, at(c))["total"] <= budget0  # noqa: E731
    else:
        whole = lambda c: spread(c) is not None  # noqa: E731
    got, why = _context(whole, asked, train)
    if got is not None:
        host = _host(on_cpu(facts, all_layers, at(got)))
        if spread is None:
            return got, why, Layout(Status.FITS, all_layers, (_need(gpus[0], on_gpu(facts, all_layers, at(got)),
                                                                     budget0),), host), None, []
        shares, needs = spread(got)
        return got, why, Layout(Status.SPLIT, all_layers, _needs(gpus, needs, backend), host,
                                tensor_split=tuple(shares)), None, []
    c, why = _default(asked, train)

    def place(ngl, cpu_moe=0):
        if spread is not None:
            return spread(c, ngl, cpu_moe)
        need = on_gpu(facts, ngl, at(c), cpu_moe=cpu_moe)
        return (None, [need]) if need["total"] <= budget0 else None

    short = spread.short(c) if spread is not None else on_gpu(facts, all_layers, at(c))["total"] - budget0
    memory = Memory.SHARED if gpus[0].get("shared") else Memory.VRAM if spread is None else Memory.GPUS
    suggest = _suggest(facts, short, at(c), whole, memory)
    cands, over = _candidates(facts, gpus, backend, at(c), place, cpu_budget) if offload else ([], 0)
    if not cands:
        host0 = None if gpus[0].get("shared") else _host(on_cpu(facts, 0, at(c)))
        layout = Layout(Status.NO, 0, (_need(gpus[0], on_gpu(facts, all_layers, at(c)), budget0),), host0)
        more = [Suggestion("memory", over, Memory.SYSTEM, part=True)] if over else []
        return c, why, layout, None, suggest[:1] + more + suggest[1:]
    # the faster turn at the planned context's depth, its prompt's copies to the GPU and its generated tokens
    # (a timer the caller gives: prompt_copy.turn_seconds over speed.py's model), else by the bandwidth bound
    # at an empty context; without bandwidths, the one reading less from system memory
    bw = (bandwidth() if callable(bandwidth) else bandwidth) if len(cands) > 1 else None
    timed = [(bw(x, c) if callable(bw) else _seconds(x, bw), x) for x in cands]
    best = min(timed, key=lambda t: (t[0] if t[0] is not None else 0, t[1].cpu_read))[1]
    other = next((x for x in cands if x is not best), None)
    return c, why, best, other, suggest


def _candidates(facts, gpus, backend, run, place, cpu_budget) -> tuple[list[Layout], int]:
    """The layouts with part of the model in system memory that fit: -ngl K (the last K layers on the
    GPUs) and --n-cpu-moe N (the experts of the first N layers in system memory); and, where -ngl K
    would fit the GPUs but not system memory, by how many bytes system memory is short."""
    n_layer, all_layers = facts["n_layer"], facts["n_layer"] + 1
    if gpus[0].get("shared"):  # the GPU's memory is system memory: what moves out takes the same room
        return [], 0
    room = (cpu_budget or 0) - reserve("cpu")
    fits_host = lambda h: cpu_budget is None or h["total"] <= room  # noqa: E731
    out, short = [], []
    k = next((ngl for ngl in range(n_layer, 0, -1) if place(ngl) is not None), 0)
    if k:
        host = on_cpu(facts, k, run)
        if fits_host(host):
            out.append(_layout(facts, gpus, backend, Status.PARTIAL, k, 0, place(k), host,
                               sum(layer_active(facts, il) for il in range(gpu_start(n_layer, k)))))
        else:
            short.append(host["total"] - room)
    n_moe = _fewest_cpu_moe(facts, lambda n: place(all_layers, n) is not None)
    if n_moe is not None:
        host = on_cpu(facts, all_layers, run, cpu_moe=n_moe)
        if fits_host(host):
            out.append(_layout(facts, gpus, backend, Status.EXPERTS, all_layers, n_moe, place(all_layers, n_moe), host,
                               sum(expert_active(facts, il) for il in range(n_moe))))
        else:
            short.append(host["total"] - room)
    return out, (min(short) if short and not out else 0)


def _layout(facts, gpus, backend, status, ngl, n_cpu_moe, placed, host, cpu_read) -> Layout:
    shares, needs = placed
    return Layout(status, ngl, _needs(gpus, needs, backend), _host(host), n_cpu_moe, tuple(shares or ()),
                  cpu_read, active_bytes(facts) - cpu_read)


def _needs(gpus, needs, backend) -> tuple[DeviceNeed, ...]:
    """The GPUs that hold a part (a GPU given a share of 0 holds none)."""
    return tuple(_need(g, n, g["budget"] - reserve(backend)) for g, n in zip(gpus, needs) if n is not None)

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


def _seconds(cand: Layout, bandwidth) -> float | None:
    """Seconds per token by the bandwidth bound: the GPU's share at its bandwidth, the CPU's at system
    memory's; None when either is unknown."""
    gpu, cpu = bandwidth or (None, None)
    if not gpu or not cpu:
        return None
    return cand.gpu_read / (gpu * 1e9) + cand.cpu_read / (cpu * 1e9)


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




def _suggest(facts, short: int, run: Run, fits, memory: Memory, repack: int = 0) -> list[Suggestion]:
    """What would fit instead of ``short`` bytes too many at ``run.ctx``: more memory, a q8_0 cache, the
    largest context that fits (``fits(ctx)``), a smaller quantization.  ``repack``: the CPU's repacked
    copy of these weights, which a smaller quantization of the same kind has in the same proportion."""
    out = [Suggestion("memory", short, memory)] if short > 0 else []
    kv = kv_bytes(facts, run)["total"]
    if run.type_k == "f16" and kv:
        saved = kv - kv_bytes(facts, replace(run, type_k="q8_0", type_v="q8_0"))["total"]
        if saved >= short:
            out.append(Suggestion("cache_type", saved))
    step = fit_table()["ctx_pad"]
    if kv and run.ctx > step:
        smaller = _largest_ctx(fits, step, run.ctx - step)
        if smaller is not None:
            out.append(Suggestion("ctx_size", ctx=smaller, parallel=run.parallel))
    weights = facts["weights_bytes"]
    if weights + repack > short:
        # weights w of this kind take w * (weights + repack) / weights: the room left, in weights
        out.append(Suggestion("quant", (weights + repack - short) * weights // (weights + repack), current=weights))
    return out
