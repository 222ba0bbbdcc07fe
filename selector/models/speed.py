"""Peak memory bandwidth of a device (catalogs/bandwidth.json, from vendor spec sheets)."""

from __future__ import annotations

import json
import os
from functools import lru_cache

VENDOR = {"amd_gpu": "amd", "nvidia_gpu": "nvidia", "intel_gpu": "intel", "metal": "apple"}


@lru_cache(maxsize=None)
def table() -> dict:
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "catalogs", "bandwidth.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError:
        return {}


def bandwidth_of(profile, device) -> tuple[float, str] | None:
    """(GB/s, source) for the device, matched by its marketing name; None when not in the table."""
    vendor = VENDOR.get(device.type)
    name = (profile.metal.chip if device.type == "metal" else device.name) or ""
    for row in table().get(vendor, []) if vendor else []:
        if row["match"].lower() in name.lower():
            return float(row["gbps"]), row.get("source", "")
    return None
