"""What `plan --check` measured, kept for the plans after it (``<cache>/pick-backend/check/``).

A record is filed under everything the engine's figures depend on: the build (its file, as bench
records know it, and the build number it printed), each device and its driver, the model file, the
context, slots, cache types and the placement.  A later plan on the same machine with the same of
each uses the measured compute buffers and the runtime's share of each GPU beside them, and says
so; a newer build or driver is another key, so an old measurement is never used for it.
"""

from __future__ import annotations

import datetime

from selector import store

KIND = "check"


def key(build: dict, devices: list[tuple[str, str | None]], model: str, placement: dict) -> str:
    """``build``: {identity, number}; ``devices``: [(device key, driver)] in the plan's order;
    ``model``: the model file's key (name and size); ``placement``: ctx, slots, cache types, ngl,
    n_cpu_moe, tensor split."""
    ident = build.get("identity") or {}
    parts = [f"{ident.get('path')}:{ident.get('size')}:{ident.get('mtime_ns')}", str(build.get("number")),
             ";".join(f"{k}@{d}" for k, d in devices), model,
             ",".join(f"{k}={placement[k]}" for k in sorted(placement))]
    return "|".join(parts)


def save(cache: str, k: str, verdict, gpu_keys: dict) -> dict:
    """Keep a server start's figures: each device's compute buffer, and on each GPU what the driver
    saw beyond the buffers.  ``gpu_keys``: {engine device name: the plan's device index}."""
    rec = {
        "key": k,
        "date": datetime.date.today().isoformat(),
        "compute": {r.device: r.engine for r in verdict.rows if r.term == "compute" and r.engine is not None},
        "overhead": {rt.device: rt.overhead for rt in verdict.runtime},
        "devices": gpu_keys,
    }
    store.write(store.path(cache, KIND, k), rec)
    return rec


def load(cache: str, k: str) -> dict | None:
    rec = store.read(store.path(cache, KIND, k))
    if not rec or rec.get("key") != k or not isinstance(rec.get("compute"), dict):
        return None
    if not all(isinstance(v, int) and v >= 0 for v in rec["compute"].values()):
        return None
    return rec
