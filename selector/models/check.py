"""The plan against the engine: each device's buffers side by side, each term within its tolerance.

Pure: the plan's terms and the engine's report (selector/models/engine_report.py) come in, a typed
verdict goes out; running the engine is selector/serve.py's, the words are selector/render_check.py's.
The tolerances are data (catalogs/llamacpp-fit.json ``check``), each with the reason it is what it is.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass

from selector.models.engine_report import FIT_PARAMS, HOST, MiB, TERMS, Buffers, Report


class Outcome(enum.Enum):
    CONFIRMED = "confirmed"  # every term within its tolerance: exit 0
    CONTRADICTED = "contradicted"  # the engine says otherwise: exit 3
    NO_ANSWER = "no-answer"  # the engine did not start, crashed, hung or printed no buffer: exit 4


@dataclass(frozen=True)
class Row:
    device: str  # the engine's name: CUDA0, Vulkan0, Host
    term: str  # model, kv, compute, output
    plan: int
    engine: int | None  # None: this way of asking does not report the term (fit-params: output)
    tolerance: int

    @property
    def diff(self) -> int | None:
        return None if self.engine is None else self.plan - self.engine

    @property
    def within(self) -> bool:
        return self.engine is None or abs(self.plan - self.engine) <= self.tolerance


@dataclass(frozen=True)
class Runtime:
    """What a GPU's driver says the engine's process holds beyond its buffers, against the plan's reserve."""
    device: str
    held: int  # the process's memory on the device, as the driver says it
    buffers: int  # the engine's own buffers on it
    reserve: int  # what the plan kept free for the runtime

    @property
    def overhead(self) -> int:
        return self.held - self.buffers

    @property
    def within(self) -> bool:
        return self.overhead <= self.reserve


@dataclass(frozen=True)
class Verdict:
    way: str  # fit-params or server
    outcome: Outcome
    rows: tuple[Row, ...] = ()
    runtime: tuple[Runtime, ...] = ()
    failure: str | None = None  # why there is no answer: a failure code of serve.py, with detail
    detail: str | None = None
    build: str | None = None

    @property
    def off(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if not r.within)


def tolerances() -> dict:
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "catalogs", "llamacpp-fit.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)["check"]


def tolerance(term: str, engine: int, table: dict | None = None) -> int:
    """The difference a term may have: whole MiB for what the engine counts exactly (printed to the
    MiB by fit-params, to 0.01 MiB by the server), a share for the compute buffer (our estimate of
    a graph the allocator packs).  fit-params' compute is a projection (logits of a whole micro-batch,
    where the server reserves one row per slot): where it is off, a server start decides."""
    t = (table or tolerances())[term]
    return max(round(t.get("mib", 0) * MiB), round(t.get("share", 0) * engine))


def compare(plan: tuple[Buffers, ...], report: Report, held: dict | None = None, reserves: dict | None = None,
            table: dict | None = None) -> Verdict:
    """Each term of each device of the plan beside the engine's.  ``held``: {device: bytes the
    driver says the process holds}; ``reserves``: {device: bytes the plan kept for the runtime}."""
    engine = {d.device: d for d in report.devices}
    rows = []
    for p in plan:
        e = engine.get(p.device, Buffers(p.device))
        for term in TERMS:
            got = None if (term == "output" and report.way == FIT_PARAMS) else e.term(term)
            rows.append(Row(p.device, term, p.term(term), got, tolerance(term, got or 0, table)))
    for name in engine.keys() - {p.device for p in plan}:  # a device the plan does not use, and the engine does
        e = engine[name]
        rows += [Row(name, t, 0, e.term(t), tolerance(t, e.term(t), table)) for t in TERMS]
    runtime = tuple(Runtime(d, held[d], engine[d].total if d in engine else 0, (reserves or {}).get(d, 0))
                    for d in sorted(held or {}) if d != HOST)
    ok = all(r.within for r in rows) and all(r.within for r in runtime)
    return Verdict(report.way, Outcome.CONFIRMED if ok else Outcome.CONTRADICTED, tuple(rows), runtime,
                   build=report.build)


def as_projected(plan, facts: dict):
    """The plan as llama-fit-params projects it: its compute graph reserves logits for a whole
    micro-batch (llama_context's n_outputs_max before llama-server sets it to its slots), so the device
    holding the output layer (the CPU on a CPU build, the GPU when every layer is there) has that
    peak.  Other layouts as they are (a server start decides there)."""
    from dataclasses import replace

    from selector.models import fit

    run = replace(plan.run, outputs=plan.run.tokens)
    lay = plan.layout
    if lay.status is fit.Status.CPU and lay.host is not None:
        host = replace(lay.host, compute=fit.compute_bytes(facts, run, "cpu"))
        return replace(plan, layout=replace(lay, host=host))
    if lay.status is fit.Status.FITS and len(lay.devices) == 1:
        dev = replace(lay.devices[0], compute=fit.compute_bytes(facts, run, "gpu"))
        return replace(plan, layout=replace(lay, devices=(dev,)))
    return plan


def plan_buffers(plan, gpu_names: list[str], way: str) -> tuple[Buffers, ...]:
    """The plan's terms per device in the engine's names: its GPUs in order (``gpu_names``: the names
    the engine gave them, CUDA0, Vulkan1 ...), then the host (mapped and repacked weights, its share
    of the KV cache, its compute and the output buffer).  ``plan``: a fit.Plan.  llama-fit-params
    projects the host's model buffer without the CPU's repacked copy (the repack happens as the
    weights load), so against it the host's model term is the mapped weights alone."""
    out = [Buffers(gpu_names[i] if i < len(gpu_names) else f"GPU{i}", model=d.weights, kv=d.kv, compute=d.compute)
           for i, d in enumerate(plan.devices)]
    h = plan.layout.host
    if h is not None:
        repack = 0 if way == FIT_PARAMS else h.repack
        out.append(Buffers(HOST, model=h.weights + repack, kv=h.kv, compute=h.compute, output=h.output))
    return tuple(out)
