#!/usr/bin/env python3
"""The speed model against the published runs, each GPU model left out of its own fit.

For every GPU model with published generation runs of a model whose shape the catalog knows, the
model of speed (speed.speed_fit: read bytes over bandwidth plus a per-layer cost, fitted to the runs of
the GPU's family or vendor) is fitted without that GPU's runs and set against them: the error is the
median over its runs of estimate / measured - 1, apart for its runs at an empty context and at a depth.
This repository's own captures (the catalog's "captures") are runs like the published ones.  Prints
the markdown table docs/models.md carries; tests/test_evidence.py checks the doc against it.
``--prompt``: the same for the prompt processing estimate, each pp512 run predicted from its source's
runs of other models.
"""

from __future__ import annotations

import os
import sys
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from selector import evidence  # noqa: E402
from selector.models import speed  # noqa: E402

BACKENDS = ("cuda", "rocm", "vulkan", "metal", "sycl")


def rows():
    return speed.leave_one_out(list(evidence.load()) + list(speed.captured()), BACKENDS)


def markdown() -> str:
    rs = rows()
    lines = ["| GPU | backend | OS | context | runs | measured (median) | error without its own runs | fitted to |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rs:
        ctx = "empty" if r["depth"] == 0 else "depth " + ", ".join(str(d) for d in r["depths"])
        err = f"{r['error']:+.0%}" if r["error"] is not None else "no fit (too few other GPUs, or of its kind of model)"
        lines.append(f"| {r['gpu']} | {r['backend']} | {r['os']} | {ctx} | {r['runs']} | {r['measured']:.1f} t/s | {err} | "
                     f"{r['group'] or '-'} |")
    lines.append("")
    for backend in BACKENDS:
        for depth, limit, words in ((0, 0.20, "at an empty context"), ("depth", 0.25, "at the published depths")):
            errs = [abs(r["error"]) for r in rs if r["backend"] == backend and r["depth"] == depth and r["error"] is not None]
            if errs:
                within = sum(1 for e in errs if e <= limit)
                lines.append(f"- {backend} {words}: {within} of {len(errs)} GPU models within {limit:.0%} "
                             f"(median error {median(errs):.0%}, the largest {max(errs):.0%})")
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
