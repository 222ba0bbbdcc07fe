#!/usr/bin/env python3
"""The speed estimate against the published runs, each GPU model left out of its own estimate.

For every GPU model with published generation runs (dense models, llama-bench tg, size known) the
fraction of the bandwidth bound it reached (the median of its runs) is set beside the fraction the
estimate would use for it without its own runs (speed.calibration with ``exclude``): the error is
how far the estimate's tokens/s would be from what was measured.  Prints the markdown table
docs/models.md carries; tests/test_evidence.py checks the doc against it.  ``--prompt``: the same for
the prompt processing estimate, each pp512 run predicted from its source's runs of other models.
"""

from __future__ import annotations

import os
import sys
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from selector import evidence  # noqa: E402
from selector.bandwidth import VENDOR, table  # noqa: E402
from selector.models import speed  # noqa: E402


def rows():
    results = evidence.load()
    out = []
    for runtime in ("cuda", "rocm", "vulkan", "metal", "sycl"):
        effs = speed.efficiencies(results, runtime)
        for (group, memory), pool in sorted(effs.items()):
            for match, actual, _dates in sorted(pool):
                vendor = next(v for v in VENDOR.values() if any(x["match"] == match for x in table().get(v, [])))
                family = next((r.family for r in results if r.match == match), None)
                n = sum(1 for r in results if r.match == match and r.backend == runtime and r.test.startswith("tg")
                        and r.size_gib and r.size_gib >= speed.MIN_CALIBRATION_GIB and speed._dense(r.model))
                cal = speed.calibration(results, runtime, family, vendor, memory, exclude=match,
                                        least=speed.CALIBRATION_LEAST - 1)  # the same pool, less this GPU
                out.append({"gpu": match, "backend": runtime, "runs": n, "actual": actual,
                            "predicted": cal["mid"] if cal else None, "pool": cal["group"] if cal else None,
                            "error": cal["mid"] / actual - 1 if cal else None})
    return out


def markdown() -> str:
    rs = rows()
    lines = ["| GPU | backend | runs | reached of the bound | estimate without its own runs | from | error |",
             "|---|---|---|---|---|---|---|"]
    for r in rs:
        pred = f"{r['predicted']:.0%}" if r["predicted"] is not None else "-"
        err = f"{r['error']:+.0%}" if r["error"] is not None else "too few other GPUs"
        lines.append(f"| {r['gpu']} | {r['backend']} | {r['runs']} | {r['actual']:.0%} | {pred} | {r['pool'] or '-'} | {err} |")
    errs = [abs(r["error"]) for r in rs if r["error"] is not None]
    if errs:
        within = sum(1 for e in errs if e <= 0.25)
        lines.append("")
        lines.append(f"{len(errs)} GPU models estimated: median error {median(errs):.0%}, {within} of {len(errs)} "
                     f"within 25%, the largest {max(errs):.0%}.")
    return "\n".join(lines) + "\n"


def prompt_rows():
    """Each published pp512 run of a dense model predicted from the other models' runs of the same source
    (one post, one GPU, one backend, one build), as plan's prompt estimate would without it."""
    results = evidence.load()
    groups: dict[tuple, list] = {}
    for r in results:
        if r.test == speed.PROMPT_TEST and r.params_b and r.size_gib and r.size_gib >= speed.MIN_CALIBRATION_GIB \
                and speed._dense(r.model):
            groups.setdefault((r.match, r.backend, r.url, r.build or r.date), []).append(r)  # one source
    out = []
    for (match, backend, _url, _build), runs in sorted(groups.items()):
        if len({r.model for r in runs}) < 2:
            continue
        for r in runs:
            est = speed.prompt_estimate(runs, backend, match, int(r.params_b * 1e9), exclude_model=r.model)
            out.append({"gpu": match, "backend": backend, "model": r.model, "build": r.build or "-", "actual": r.tps,
                        "predicted": est["tokens_per_s"], "error": est["tokens_per_s"] / r.tps - 1})
    return out


def prompt_markdown() -> str:
    rs = prompt_rows()
    lines = ["| GPU | backend | model | build | pp512 published | from the source's other models | error |",
             "|---|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r['gpu']} | {r['backend']} | {r['model']} | {r['build']} | {r['actual']:.0f} | "
                     f"{r['predicted']:.0f} | {r['error']:+.0%} |")
    errs = [abs(r["error"]) for r in rs]
    within = sum(1 for e in errs if e <= 0.25)
    lines.append("")
    lines.append(f"{len(errs)} runs predicted: median error {median(errs):.0%}, {within} of {len(errs)} within 25%, "
                 f"the largest {max(errs):.0%}.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(prompt_markdown() if "--prompt" in sys.argv[1:] else markdown())
