"""What `plan --check` measured, kept for the plans after it (``<cache>/pick-backend/check/``).

A record is filed under everything the engine's figures depend on: the build (its file, as bench
records know it: a new build at the same path is another file), the devices and their driver, the
model file, and the plan's placement (context, slots, cache types, -ngl, --n-cpu-moe, the split).
A later plan on the same machine with the same of each uses the measured compute buffers and, on each
GPU, the runtime's measured share in place of the reserve, and says so; a newer build or driver is
another key, so an old measurement is never used for it.
"""

from __future__ import annotations

import datetime
from dataclasses import replace

from selector import store
from selector.models import fit
from selector.models.engine_report import HOST

KIND = "check"
MAX_BYTES = 1 << 44  # 16 TiB: a buffer past this is a damaged record, not a measurement


def placement(p: fit.Plan) -> dict:
    r = p.run
    return {"runtime": p.runtime, "ctx": r.ctx, "parallel": r.parallel, "type_k": r.type_k, "type_v": r.type_v,
            "ubatch": r.ubatch, "batch": r.batch, "flash_attn": r.flash_attn, "ngl": p.layout.ngl,
            "n_cpu_moe": p.layout.n_cpu_moe, "tensor_split": list(p.layout.tensor_split)}


def key(build: dict | None, drivers: list[str], model: str, p: fit.Plan) -> str:
    """``build``: the executable's identity (selector/bench.py identity); ``drivers``: what a driver
    upgrade changes on the devices used; ``model``: the model file's key (name and size)."""
    b = build or {}
    where = placement(p)
    return "|".join([f"{b.get('path')}:{b.get('size')}:{b.get('mtime_ns')}", ";".join(drivers),
                     ";".join(d.name for d in p.devices), model,
                     ",".join(f"{k}={where[k]}" for k in sorted(where))])


def save(cache: str, k: str, verdict, gpus: list[str]) -> dict:
    """Keep what the engine answered: each device's compute buffer (the engine's names, ``gpus`` in the
    plan's device order; allocated by a server start, or projected by llama-fit-params where that
    answer stood), and on each GPU what the driver saw beyond the buffers (a server start only)."""
    rec = {
        "key": k,
        "date": datetime.date.today().isoformat(),
        "build": verdict.build,
        "way": verdict.way,  # a server start allocated them; llama-fit-params projected them
        "gpus": gpus,
        "compute": {r.device: r.engine for r in verdict.rows if r.term == "compute" and r.engine is not None},
        "overhead": {rt.device: rt.overhead for rt in verdict.runtime},
    }
    store.write(store.path(cache, KIND, k), rec)
    return rec


def load(cache: str, k: str) -> dict | None:
    """The record under ``k``, or None (none, unreadable, or not one this module wrote)."""
    rec = store.read(store.path(cache, KIND, k))
    if not rec or rec.get("key") != k or not isinstance(rec.get("compute"), dict) or \
            not isinstance(rec.get("gpus"), list) or not isinstance(rec.get("overhead"), dict):
        return None
    sizes = [*rec["compute"].values(), *rec["overhead"].values()]
    if not all(type(v) is int and 0 <= v <= MAX_BYTES for v in sizes):  # not a bool, not absurd
        return None
    if not all(isinstance(g, str) for g in rec["gpus"]):
        return None
    return rec


def apply(p: fit.Plan, rec: dict) -> fit.Plan:
    """The plan with the measured compute buffers, and each GPU's budget with the runtime's measured
    share in place of the reserve (the budget a device gives is its memory less that share)."""
    devices = []
    for i, d in enumerate(p.devices):
        name = rec["gpus"][i] if i < len(rec["gpus"]) else None
        compute = rec["compute"].get(name, d.compute)
        budget = d.budget + fit.reserve(p.runtime) - rec["overhead"][name] if name in rec["overhead"] else d.budget
        devices.append(replace(d, compute=compute, budget=max(budget, 0)))
    host = p.layout.host
    if host is not None and HOST in rec["compute"]:
        host = replace(host, compute=rec["compute"][HOST])
    return replace(p, layout=replace(p.layout, devices=tuple(devices), host=host))


def over(p: fit.Plan) -> list[str]:
    """The devices (and system memory) whose measured needs are past what they can give."""
    out = [d.name for d in p.devices if d.total > d.budget]
    h = p.layout.host
    if h is not None and p.host_budget is not None and h.total > p.host_budget:
        out.append("system memory")
    return out
