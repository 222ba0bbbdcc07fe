"""Peak memory bandwidth of a device (catalogs/bandwidth.json, from vendor spec sheets)."""

from __future__ import annotations

import re

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
    """(GB/s, words) of the CPU platform's peak memory bandwidth (catalogs/bandwidth.json "cpu"): for a
    machine that is replayed or described, where nothing can be measured; an upper bound."""
    brand = (profile.cpu.brand or "").lower()
    for row in table().get("cpu", []):
        if row["match"].lower() in brand:
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


MIN_CALIBRATION_GIB = 2  # a smaller model's tokens are bound by per-token overhead more than by bandwidth


def _dense(model: str) -> bool:
    """A model every weight of which is read per token: not a mixture of experts, whose file size is not
    what a token reads (qwen3moe, gpt-oss, Qwen3-Next, DeepSeek, a 30B.A3B), nor a Gemma 3n or 4 "E4B",
    whose per-layer embeddings are looked up, not read whole (an RTX 4070 Ti's gemma3n E4B Q8_0 run would
    have read its 9.86 GiB at 135% of the card's bandwidth)."""
    return not re.search(r"moe|gpt-oss|qwen3next|deepseek|\bA\d+(\.\d+)?B\b|\d+x\d+B|\bE\d+B\b", model, re.I)


def efficiencies(results, runtime: str, exclude: str | None = None) -> dict[str, list[tuple[str, float]]]:
    """What fraction of the bandwidth bound each published generation run reached, by GPU family group:
    {group: [(GPU model, fraction, (first date, last date)), ...]}, one fraction per GPU model (the median of its runs) so a GPU
    measured often does not outweigh the rest.  ``exclude``: a GPU model left out (leave-one-out)."""
    from statistics import median

    by_gpu: dict[tuple, list[float]] = {}
    dates: dict[tuple, list[str]] = {}
    for r in results:
        if r.backend != runtime or not r.test.startswith("tg") or not r.size_gib or r.match == exclude \
                or r.size_gib < MIN_CALIBRATION_GIB or not _dense(r.model):
            continue
        kind, row = by_match().get(r.match, (None, None))
        if row is None:
            continue
        # the whole file over the bandwidth: llama-bench prints no other size (the estimate applies the
        # fraction to the same kind of bound)
        bound = float(row["gbps"]) * 1e9 / (r.size_gib * (1 << 30))
        group = (family_group(r.family) or VENDOR[kind], memory_kind(kind, row))
        by_gpu.setdefault((group, r.match), []).append(r.tps / bound)
        dates.setdefault((group, r.match), []).append(r.date)
    out: dict[tuple, list[tuple[str, float, tuple[str, str]]]] = {}
    for (group, match), effs in by_gpu.items():
        ds = dates[(group, match)]
        out.setdefault(group, []).append((match, median(effs), (min(ds), max(ds))))
    return out


CALIBRATION_LEAST = 4  # GPU models pooled: with one left out, three remain (what docs/models.md's error is over)


def calibration(results, runtime: str, family: str | None, vendor: str, memory: str = "own",
                exclude: str | None = None, least: int = CALIBRATION_LEAST) -> dict | None:
    """The fraction of the bound real runs reach, for a backend on a family: from the published runs of
    GPUs of its family group where at least ``least`` GPU models were measured, else of the backend on
    every GPU of the vendor; either way only GPUs of this one's kind of memory (``memory``:
    bandwidth.memory_kind, the machine's shared memory, a card's HBM or its GDDR).  {"low", "mid",
    "high" (fractions), "gpus", "group", "dates": the first and last day the pooled runs were published}."""
    from statistics import median

    effs = efficiencies(results, runtime, exclude)
    group = family_group(family)  # none for an Apple chip or an Intel GPU: the vendor's pool is theirs
    pool, words = (effs.get((group, memory), []), group + (" with HBM" if memory == "hbm" else "")) if group else ([], "")
    if len(pool) < least:
        vendor_groups = [g for g in effs if g[1] == memory and _vendor_of_group(g[0]) == vendor]
        pool = [x for g in vendor_groups for x in effs[g]]
        kind = "" if vendor == "apple" else {"shared": "integrated ", "hbm": "HBM "}.get(memory, "discrete ")
        words = f"{VENDOR_WORDS.get(vendor, vendor)} {kind}GPUs"
        families = sorted({g[0] for g in vendor_groups if effs[g] and g[0] != vendor})
        if families:  # which families the runs are of, and that this GPU's is not among them where it is not
            words += " of " + ", ".join(families)
            if group and group not in families:
                words += f", none of {group}"
    if len(pool) < least:
        return None
    values = sorted(e for _m, e, _d in pool)
    return {"low": values[0], "mid": median(values), "high": values[-1], "gpus": [m for m, _e, _d in pool],
            "group": words, "dates": (min(d[0] for _m, _e, d in pool), max(d[1] for _m, _e, d in pool))}


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
