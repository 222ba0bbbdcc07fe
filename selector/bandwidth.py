"""The GPU table (catalogs/bandwidth.json): each GPU model by the name its maker sells it under, its
peak memory bandwidth and memory, from vendor spec sheets.  ``row_for`` names the model a device is,
the one rule every part that asks (the speed bound, published evidence, a described machine) uses."""

from __future__ import annotations

import json
import os
from functools import lru_cache

VENDOR = {"amd_gpu": "amd", "nvidia_gpu": "nvidia", "intel_gpu": "intel", "metal": "apple"}


@lru_cache(maxsize=None)
def table() -> dict:
    path = os.path.join(os.path.dirname(__file__), "catalogs", "bandwidth.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError:
        return {}


def row_for(kind: str, name: str | None) -> dict | None:
    """The table's row of a device of ``kind`` named ``name`` ("NVIDIA GeForce RTX 4090"): the first row,
    in the table's order (a laptop part before its desktop namesake), whose name it contains."""
    lowered = (name or "").lower()
    for row in table().get(VENDOR.get(kind, ""), []):
        if row["match"].lower() in lowered:
            return row
    return None
