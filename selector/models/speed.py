"""Peak memory bandwidth of a device (catalogs/bandwidth.json, from vendor spec sheets)."""

from __future__ import annotations

import json
import re
from functools import lru_cache

from probes.record import Record, field

from selector.bandwidth import VENDOR, by_match, memory_kind, row_for, table  # noqa: F401 - the table is the GPU table's


def bandwidth_of(profile, device) -> tuple[float, str] | None:
    """(GB/s, source) for the device, matched by its marketing name; None when not in the table."""
    row = row_for(device.type, profile.metal.chip if device.type == "metal" else device.name, device.memory_bytes)
    return (float(row["gbps"]), row.get("source", "")) if row else None


def cpu_bandwidth(profile) -> tuple[float, str] | None:
    """(GB/s, words) of system memory from the tables, where the CPU shares one memory with a device
    whose bandwidth is known (a Strix Halo or other APU, a GB10 or Jetson, an Apple chip); None
    otherwise (the caller measures the machine, or says nothing)."""
    shared = []
    if profile.metal.available and profile.metal.chip:
        shared.append(("metal", profile.metal.chip))
    for g in profile.amd_gpus:
        if getattr(g, "integrated", False):
            shared.append(("amd_gpu", g.name or ""))
    for g in profile.nvidia_gpus:
        if getattr(g, "unified", False):
            shared.append(("nvidia_gpu", g.name or ""))
    for kind, name in shared:
        for row in table().get(VENDOR[kind], []):
            if row["match"].lower() in name.lower():
                if row.get("typical"):
                    break  # the APU's memory is whatever was fitted: a typical figure is not this machine's
                return float(row["gbps"]), f"the CPU shares the {name}'s memory ({row.get('note') or row.get('source', '')})"
    return None


def cpu_platform_bandwidth(profile) -> tuple[float, str] | None:
    """(GB/s, words) of the CPU platform's peak memory bandwidth (catalogs/bandwidth.json "cpu", else the
    family's, "cpu_families"): for a machine that is replayed, where nothing can be measured; an upper
    bound."""
    brand = profile.cpu.brand or ""
    for row in table().get("cpu", []):
        if row["match"].lower() in brand.lower():
            return float(row["gbps"]), f"{row['note']}; not measured"
    for row in table().get("cpu_families", []):  # a model the table lacks: its family's platform
        if re.search(row["pattern"], brand, re.I):
            return float(row["gbps"]), f"{row['note']}; not measured"
    return None


def family_group(family: str | None) -> str | None:
    """The family a calibration pools: gfx1100 -> gfx110X, sm_89 -> sm_8X, sm_120 -> sm_12X."""
    if not family:
        return None
    if family.startswith("gfx"):
        return family[:-1] + "X"
    if family.startswith("sm_"):
        return family[:-1] + "X"
    return family


MIN_CALIBRATION_GIB = 2  # the prompt estimate's runs: a smaller model's rate is bound by overhead more than compute


def _dense(model: str) -> bool:
    """A model every weight of which is read per token: not a mixture of experts, whose file size is not
    what a token reads (qwen3moe, gpt-oss, Qwen3-Next, DeepSeek, a 30B.A3B), nor a Gemma 3n or 4 "E4B",
    whose per-layer embeddings are looked up, not read whole (an RTX 4070 Ti's gemma3n E4B Q8_0 run would
    have read its 9.86 GiB at 135% of the card's bandwidth)."""
    return not re.search(r"moe|gpt-oss|qwen3next|deepseek|\bA\d+(\.\d+)?B\b|\d+x\d+B|\bE\d+B\b", model, re.I)


CALIBRATION_LEAST = 4  # GPU models pooled: with one left out, three remain (what docs/models.md's error is over)
VENDOR_WORDS = {"amd": "AMD", "nvidia": "NVIDIA", "intel": "Intel", "apple": "Apple"}


def _vendor_of_group(group: str) -> str:
    """gfx110X -> amd, sm_8X -> nvidia; a vendor's own group (an Apple chip's, an Intel GPU's) is itself."""
    return "amd" if group.startswith("gfx") else "nvidia" if group.startswith("sm_") else group


PROMPT_TEST = "pp512"  # the prompt test llama-bench runs by default, and the one most published


def prompt_estimate(results, runtime: str, match: str, params: int, exclude_model: str | None = None) -> dict | None:
    """Prompt processing tokens/s of a dense model of ``params`` weights on GPU model ``match`` with
    ``runtime``, from the published pp512 runs of dense models (2 GiB or more) on that GPU and backend:
    a prompt's cost is about two operations per weight per token, so a run's rate times its parameters,
    over this model's, is this model's rate.  Only the latest source's runs are taken (one page, one
    build, or one day where the page names no build: prompt speed changes a lot between builds).  None where none was published.
    ``exclude_model``: a model left out (the check of docs/models.md).  {"tokens_per_s", "low", "high",
    "runs", "gpu", "models", "url", "date", "build"}."""
    from statistics import median

    runs = [r for r in results if r.backend == runtime and r.match == match and r.test == PROMPT_TEST
            and r.params_b and r.size_gib and r.size_gib >= MIN_CALIBRATION_GIB and _dense(r.model)
            and r.model != exclude_model]
    if not runs or params <= 0:
        return None
    # a source: one page's runs of one build (a page that names none: of one day)
    latest = max(runs, key=lambda r: (r.date, r.url))
    runs = [r for r in runs if r.url == latest.url and (r.build or r.date) == (latest.build or latest.date)]
    rates = sorted(r.tps * r.params_b * 1e9 / params for r in runs)
    builds = {r.build for r in runs}
    return {"tokens_per_s": median(rates), "low": rates[0], "high": rates[-1], "runs": len(runs), "gpu": match,
            "models": sorted({r.model for r in runs}), "url": latest.url, "date": latest.date,
            "build": builds.pop() if len(builds) == 1 else None}


# --- the model of generation speed -------------------------------------------------------------------
# Per generated token a device reads the weights of its layers (of a mixture of experts, the active
# experts), and at depth d the KV cache of d positions in every layer that attends to the whole context
# (a sliding-window layer only its window), at its memory bandwidth; and each layer costs the backend a
# fixed time on that kind of device (kernel launches, synchronisation) that no bandwidth shortens.  Both
# are fitted to the published llama-bench runs: time per token = read bytes / (bandwidth x efficiency) +
# layers x per-layer cost.  Runs of models of several sizes on GPUs of several bandwidths separate them.

KV_BYTES = 2  # llama-bench's default cache type, f16: two bytes per value
NO_BUILD_WEIGHT = 0.5  # a run whose post names no build counts half: which code ran cannot be told
HALF_LIFE_DAYS = 365  # a run a year older than the pool's newest counts half: each build's per-token overhead
# is lower than the last's (CUDA graphs, fused kernels), and the build a user installs is the newest


class Arch(Record):
    """A model's shape as far as speed needs it (catalogs/llama-bench-published.json "models")."""

    model: str
    params_b: float
    layers: int
    kv_heads: int
    head_dim: int
    active_b: float | None = None  # a mixture of experts: the parameters one token reads
    full_layers: int | None = None  # layers that attend to the whole context (None: every layer)
    window: int | None = None  # the other layers' window (0: they keep no KV cache, linear attention)
    aliases: tuple = ()  # other names the posts give it ("Llama2-7b")
    sizes_gib: dict = field(default_factory=dict)  # llama-bench's size of a quantization, for rows that print none
    source: str = ""
    what: str = ""

    def kv_per_position(self, depth: int) -> float:
        """Bytes of KV cache a token reads at ``depth``, per position of the context, summed over layers."""
        full = self.layers if self.full_layers is None else self.full_layers
        per_layer = 2 * self.kv_heads * self.head_dim * KV_BYTES
        if not depth:
            return 0.0
        window = depth if self.window is None else self.window  # 0: linear attention, a state of fixed size
        return per_layer * (full + (self.layers - full) * min(depth, window) / depth)


@lru_cache(maxsize=1)
def archs() -> tuple[Arch, ...]:
    from selector import evidence

    try:
        with open(evidence.PATH, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return ()
    out = []
    for m in data.get("models", []):
        try:
            out.append(Arch(**m))
        except TypeError:
            continue
    return tuple(out)


def arch_of(model: str, params_b: float | None) -> Arch | None:
    """The shape of a model llama-bench names ``model`` with ``params_b`` parameters: the table's row of its
    architecture (the name's first word) whose parameters are within 2% (two 7B models share a name), or
    where the row prints no parameters, the row one of whose names starts it; None where no one row is."""
    word = model.split()[0].lower() if model.split() else ""
    if params_b is None:
        found = [a for a in archs() if any(re.match(re.escape(n) + r"\b", model) for n in (a.model, *a.aliases))]
    else:
        found = [a for a in archs() if a.model.split()[0].lower() == word and abs(a.params_b - params_b) <= 0.02 * a.params_b]
    return found[0] if len(found) == 1 else None


def _size_gib(r, arch: Arch) -> float | None:
    """The run's size, or where the row prints none, llama-bench's size of its quantization of this model."""
    if r.size_gib:
        return r.size_gib
    return next((gib for q, gib in arch.sizes_gib.items() if re.search(r"\b" + re.escape(q) + r"\b", r.model)), None)


@lru_cache(maxsize=1)
def captured() -> tuple:
    """This repository's own llama-bench runs (the catalog's "captures", from tests/data/device/): results
    the speed model fits beside the published ones, never shown as someone's post."""
    from selector import evidence

    try:
        with open(evidence.PATH, encoding="utf-8") as f:
            rows = json.load(f).get("captures", [])
    except (OSError, ValueError):
        return ()
    out = []
    for c in rows:
        try:
            out.append(evidence.Result(
                gpu=c["gpu"], match=c["match"], family=c.get("family"), backend=c["backend"], runtime=None,
                build=c.get("build"), date=c["date"], model=c["model"], size_gib=evidence._size(c.get("size"), "", ""),
                params_b=evidence._size(c.get("params"), "", ""), ngl=c.get("ngl"), fa=c.get("fa"), test=c["test"],
                tps=float(c["tps"]), url="", where=c["where"], pair=None, quote=c["capture"], depth=c.get("depth", 0)))
        except (KeyError, TypeError, ValueError, evidence.InputError):
            continue
    return tuple(out)


class Point(Record):
    """One published generation run as the model sees it."""

    gpu: str
    seconds: float  # measured time per token
    read_s: float  # the bytes it read over the GPU's peak bandwidth
    layers: int
    weight: float
    moe_layers: int = 0  # of them, layers of a mixture of experts (routing, the experts' own kernels)
    depth: int
    result: object = None


def point(r) -> Point | None:
    """A published generation run (evidence.Result) as a Point, or None where its model's shape, its size
    or its GPU's bandwidth is not known."""
    if not r.test.startswith("tg"):
        return None
    arch = arch_of(r.model, r.params_b)
    kind_row = by_match().get(r.match)
    size = _size_gib(r, arch) if arch else None
    if arch is None or kind_row is None or not size:
        return None
    gbps = float(kind_row[1]["gbps"])
    weights = size * (1 << 30) * ((arch.active_b / arch.params_b) if arch.active_b else 1.0)
    # tgN at depth d: the N tokens read d .. d+N-1 positions; the middle one stands for them
    depth = r.depth + int(re.sub(r"\D", "", r.test) or 0) // 2 if r.depth else r.depth
    read = weights + arch.kv_per_position(depth) * depth
    return Point(gpu=r.match, seconds=1 / r.tps, read_s=read / (gbps * 1e9), layers=arch.layers,
                 moe_layers=arch.layers if arch.active_b else 0,
                 weight=NO_BUILD_WEIGHT if not r.build else 1.0, depth=r.depth, result=r)


class SpeedFit(Record):
    """Time per token = read_s x ``slowdown`` + layers x ``per_layer_s`` (+ ``per_moe_layer_s`` more for each
    layer of a mixture of experts), fitted to ``gpus``' runs.  ``moe``: whether runs of a mixture of experts
    were among them (without them, the extra cost of such a layer is not known)."""

    backend: str
    group: str  # the GPUs pooled, in words
    slowdown: float  # 1 / the fraction of peak bandwidth reached
    per_layer_s: float
    gpus: tuple
    runs: int
    dates: tuple
    per_moe_layer_s: float = 0.0
    moe: bool = False
    dense: bool = True

    def seconds(self, read_s: float, layers: int, moe_layers: int = 0) -> float:
        return read_s * self.slowdown + layers * self.per_layer_s + moe_layers * self.per_moe_layer_s

    def covers(self, p) -> bool:
        """Whether runs of its kind (a mixture of experts, or not) on two GPU models or more were fitted."""
        return self.moe if p.moe_layers else self.dense


def _solve(points: list[Point]) -> tuple[float, float, float] | None:
    """(slowdown, per-layer seconds, extra seconds per layer of a mixture of experts) minimising the squared
    relative error of the predicted time, each GPU model weighing the same (its runs share its weight), a
    run a year older than the newest half; all kept physical (slowdown >= 1, costs >= 0): where the free
    optimum is not, the best with some of them at their bounds."""
    import datetime
    from itertools import product

    newest = max(datetime.date.fromisoformat(p.result.date) for p in points)
    per_gpu: dict[str, float] = {}
    for p in points:
        per_gpu[p.gpu] = per_gpu.get(p.gpu, 0.0) + p.weight
    rows = []  # (weight, features / measured time): predicted / measured = a x + c y + m z, aimed at 1
    for p in points:
        age = (newest - datetime.date.fromisoformat(p.result.date)).days / HALF_LIFE_DAYS
        rows.append((p.weight / per_gpu[p.gpu] * 0.5 ** age,
                     (p.read_s / p.seconds, p.layers / p.seconds, p.moe_layers / p.seconds)))
    bounds = (1.0, 0.0, 0.0)
    best = None
    for free in product((True, False), repeat=3):  # which parameters are free; the others at their bounds
        got = _least_squares(rows, free, bounds)
        if got is None or got[0] < 1 - 1e-9 or got[1] < -1e-12 or got[2] < -1e-12:
            continue
        loss = sum(w * (1 - sum(g * f for g, f in zip(got, fs))) ** 2 for w, fs in rows)
        if best is None or loss < best[0] - 1e-12:  # a tie keeps the one with more parameters at their bounds
            best = (loss, got)
    return best[1] if best else None


def _least_squares(rows, free, bounds) -> tuple | None:
    """The weighted least squares of ``rows`` over the ``free`` parameters, the others at ``bounds``."""
    idx = [i for i, f in enumerate(free) if f]
    fixed = [(i, bounds[i]) for i, f in enumerate(free) if not f]
    n = len(idx)
    m = [[0.0] * n for _ in range(n)]
    v = [0.0] * n
    for w, fs in rows:
        rest = 1 - sum(b * fs[i] for i, b in fixed)
        for r, i in enumerate(idx):
            v[r] += w * fs[i] * rest
            for c, j in enumerate(idx):
                m[r][c] += w * fs[i] * fs[j]
    sol = _gauss(m, v) if n else []
    if sol is None:
        return None
    out = list(bounds)
    for r, i in enumerate(idx):
        out[i] = sol[r]
    return tuple(out)


def _gauss(m: list, v: list) -> list | None:
    """Solve m x = v (small and dense); None where m is singular (a parameter the runs cannot tell)."""
    n = len(v)
    a = [row[:] + [v[i]] for i, row in enumerate(m)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[piv][col]) < 1e-18 * max(1.0, max(abs(x) for row in a for x in row[:-1])):
            return None
        a[col], a[piv] = a[piv], a[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col])]
    return [a[i][n] / a[i][i] for i in range(n)]


def _group_of(r) -> tuple[str, str] | None:
    """(family group or vendor, kind of memory) of a published run's GPU."""
    kind_row = by_match().get(r.match)
    if kind_row is None:
        return None
    kind, row = kind_row
    return family_group(r.family) or VENDOR[kind], memory_kind(kind, row)


VULKAN_SHARED = ("amd", "nvidia")  # Intel's Vulkan runs reached a third of the B70's bandwidth: not pooled


def speed_fit(results, backend: str, family: str | None, vendor: str, memory: str = "own",
              exclude: str | None = None, least: int = CALIBRATION_LEAST, moe: bool | None = None) -> SpeedFit | None:
    """The model fitted to the published generation runs of ``backend`` on GPUs of this family group
    where ``least`` GPU models or more were measured, else on every GPU of the vendor with this kind of
    memory (``memory``: bandwidth.memory_kind).  ``exclude``: a GPU model left out (leave-one-out).
    None without enough GPU models."""
    pts: dict[tuple, list[Point]] = {}
    for r in results:
        if r.backend != backend or r.match == exclude:
            continue
        p = point(r)
        g = _group_of(r) if p else None
        if p is not None and g is not None:
            pts.setdefault(g, []).append(p)
    group = family_group(family)
    pool = pts.get((group, memory), []) if group else []
    words = group + (" with HBM" if memory == "hbm" else "") if group else ""
    # ``moe``: the kind of model asked about; a family whose runs hold too few of that kind is widened too
    kind = len({p.gpu for p in pool if bool(p.moe_layers) == moe}) >= 2 if moe is not None else True
    if len({p.gpu for p in pool}) < least or not kind:
        groups = [g for g in pts if g[1] == memory and _vendor_of_group(g[0]) == vendor]
        pool = [p for g in groups for p in pts[g]]
        kind = "" if vendor == "apple" else {"shared": "integrated ", "hbm": "HBM "}.get(memory, "discrete ")
        words = f"{VENDOR_WORDS.get(vendor, vendor)} {kind}GPUs"
        families = sorted({g[0] for g in groups if g[0] != vendor})
        if families:
            words += " of " + ", ".join(families) + (f", none of {group}" if group and group not in families else "")
    if len({p.gpu for p in pool}) < least and backend == "vulkan" and vendor in VULKAN_SHARED:
        # Vulkan is one code path on AMD's and NVIDIA's GPUs (RADV and NVIDIA's driver alike reach most of
        # the bandwidth): too few of this vendor's, the other's of this kind of memory speak for it (said so)
        pool = [p for g in pts if g[1] == memory and _vendor_of_group(g[0]) in VULKAN_SHARED for p in pts[g]]
        kind = {"shared": "integrated ", "hbm": "HBM "}.get(memory, "discrete ")
        words = f"AMD and NVIDIA {kind}GPUs"
    gpus = sorted({p.gpu for p in pool})
    if len(gpus) < least:
        return None
    solved = _solve(pool)
    if solved is None:
        return None
    dates = [p.result.date for p in pool]
    return SpeedFit(backend=backend, group=words, slowdown=solved[0], per_layer_s=solved[1], gpus=tuple(gpus),
                    runs=len(pool), dates=(min(dates), max(dates)), per_moe_layer_s=solved[2],
                    moe=len({p.gpu for p in pool if p.moe_layers}) >= 2,
                    dense=len({p.gpu for p in pool if not p.moe_layers}) >= 2)


def leave_one_out(results, backends=("cuda", "rocm", "vulkan", "metal", "sycl")) -> list[dict]:
    """Each GPU model's published generation runs on one OS against the model fitted without them, to that
    OS's runs (the pool its family or vendor gives it, as a plan's estimate would have it): {"gpu",
    "backend", "os", "depth" (0, or "depth" for its runs at a depth), "depths", "runs", "measured" (t/s, the
    median run), "error" (the median of estimate / measured - 1 over its runs), "group"}; error None where
    the rest are too few to fit."""
    from statistics import median

    out = []
    for backend in backends:
        by_gpu: dict[tuple, list[Point]] = {}
        for r in results:
            if r.backend == backend and (p := point(r)) is not None:
                by_gpu.setdefault((r.match, r.os), []).append(p)
        for (gpu, os_name), pts in sorted(by_gpu.items()):
            kind, row = by_match()[gpu]
            for at_depth in (False, True):
                some = [p for p in pts if bool(p.depth) == at_depth]
                if not some:
                    continue
                # each run against the pool a plan of its kind of model (a mixture of experts, or not) would have
                fits = {moe: speed_fit([r for r in results if r.os == os_name], backend, pts[0].result.family,
                                       VENDOR[kind], memory_kind(kind, row), exclude=gpu,
                                       least=CALIBRATION_LEAST - 1, moe=moe) for moe in {bool(p.moe_layers) for p in some}}
                errs = [p.seconds / f.seconds(p.read_s, p.layers, p.moe_layers) - 1 for p in some
                        if (f := fits[bool(p.moe_layers)]) and f.covers(p)]
                groups = sorted({f.group for f in fits.values() if f})
                out.append({"gpu": gpu, "backend": backend, "os": os_name, "depth": "depth" if at_depth else 0,
                            "runs": len(some), "depths": sorted({p.depth for p in some}),
                            "measured": median(1 / p.seconds for p in some),
                            "error": median(errs) if errs else None, "group": "; ".join(groups) or None})
    return out


# --- a plan's speed at a depth --------------------------------------------------------------------

class Share(Record):
    """What one memory reads per generated token under a plan: its weights and, at the depth, the KV
    cache of the layers it holds, at its peak bandwidth; the layers a GPU runs (its per-layer cost)."""

    name: str  # the GPU's name, or "system memory"
    gbps: float
    weights: int
    kv: int
    layers: int
    gpu: bool = True
    moe_layers: int = 0  # of its layers, those of a mixture of experts

    @property
    def read(self) -> int:
        return self.weights + self.kv


def kv_read(facts: dict, layers, depth: int, type_k: str = "f16", type_v: str = "f16") -> int:
    """Bytes of KV cache one generated token reads at ``depth`` over ``layers``: every cached position of a
    layer that attends to the whole context, the window of a sliding-window one, none of a recurrent one."""
    from selector.models.fit import cache_bytes

    if depth <= 0:
        return 0
    kb, kd = cache_bytes(type_k)
    vb, vd = cache_bytes(type_v)
    total = 0
    for il in layers:
        heads = facts["n_head_kv"][il]
        if not heads:
            continue
        n = min(depth, facts["n_swa"]) if facts["swa"][il] and facts["n_swa"] else depth
        total += n * heads * (facts["head_k"] * kb // kd + facts["head_v"] * vb // vd)
    return total


def shares(facts: dict, lay, depth: int, gpus: list[tuple[str, float]], cpu_gbps: float | None,
           type_k: str = "f16", type_v: str = "f16") -> list[Share] | None:
    """Each memory's reads per token for a layout (fit.Layout) at ``depth``: ``gpus`` the (name, GB/s) of
    the GPUs it holds, in its order; ``cpu_gbps`` system memory's (None: unknown).  Weights as the layout
    reads them (a GPU's share in proportion to the weights it holds); KV where its layer is: on a GPU for
    the layers offloaded, in system memory for -ngl's others (--n-cpu-moe keeps every layer's attention
    and KV on the GPUs).  None where a bandwidth it needs is not known."""
    from selector.models import fit

    n = facts["n_layer"]
    status = fit.Status(lay.status)
    if status is fit.Status.CPU:
        if not cpu_gbps:
            return None
        return [Share(name="system memory", gbps=cpu_gbps, weights=fit.active_bytes(facts),
                      kv=kv_read(facts, range(n), depth, type_k, type_v), layers=n, gpu=False)]
    if not gpus or any(not g for _n, g in gpus):
        return None
    start = fit.gpu_start(n, lay.ngl) if status is fit.Status.PARTIAL else 0
    on_gpu = range(start, n)
    gpu_weights = lay.gpu_read if lay.gpu_read is not None else fit.active_bytes(facts)
    held = [d.weights for d in lay.devices][:len(gpus)] or [1]
    total = sum(held) or 1
    # the device of each layer, as llama.cpp assigns them for -ngl and --tensor-split
    where = fit.layer_devices(n, lay.ngl, list(lay.tensor_split)) if lay.tensor_split else [0] * (n + 1)
    out = []
    for k, (name, gbps) in enumerate(gpus):
        mine = [il for il in on_gpu if where[il] == k]
        out.append(Share(name=name, gbps=gbps, weights=gpu_weights * held[min(k, len(held) - 1)] // total,
                         kv=kv_read(facts, mine, depth, type_k, type_v), layers=len(mine),
                         moe_layers=sum(1 for il in mine if facts["expert_bytes"][il])))
    if status in (fit.Status.PARTIAL, fit.Status.EXPERTS):
        if not cpu_gbps:
            return None
        cpu_kv = kv_read(facts, range(start), depth, type_k, type_v) if status is fit.Status.PARTIAL else 0
        out.append(Share(name="system memory", gbps=cpu_gbps, weights=lay.cpu_read or 0, kv=cpu_kv, layers=start,
                         gpu=False))
    return out


def bound_seconds(parts: list[Share]) -> float:
    """Seconds per token if every memory were read at its peak bandwidth, one after the other."""
    return sum(s.read / (s.gbps * 1e9) for s in parts)


def model_seconds(parts: list[Share], fit_: SpeedFit | None) -> float | None:
    """Seconds per token by the fitted model: each GPU's reads at its bandwidth times the fit's slowdown
    plus its layers' per-layer cost, and system memory's reads at its peak (no published run fitted a
    CPU's share: its part is the bound's).  None without a fit, without a part on a GPU (a CPU build's
    speed is the bound's alone), or where the fit saw no runs of this kind of model (a mixture of experts,
    or not) on two GPU models."""
    if fit_ is None or not any(s.gpu for s in parts) or not all(fit_.covers(s) for s in parts if s.gpu):
        return None
    return sum(fit_.seconds(s.read / (s.gbps * 1e9), s.layers, s.moe_layers) if s.gpu else s.read / (s.gbps * 1e9)
               for s in parts)
