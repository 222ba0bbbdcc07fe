"""The GPU table (catalogs/bandwidth.json): each GPU model by the name its maker sells it under, its
peak memory bandwidth and memory, from vendor spec sheets.  ``row_for`` names the model a device is,
the one rule every part that asks (the speed bound, published evidence, a described machine) uses."""

from __future__ import annotations

import json
import os
import re
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


def _names(name: str) -> list[str]:
    """A device name as each card it can be: trademark signs out ("Radeon(TM) 890M"), and a name the
    PCI table gives several cards ("RX 7900 XTX/XT/GRE") as each of them."""
    clean = " ".join(re.sub(r"\((?:tm|r)\)|™|®", " ", name, flags=re.I).split())
    m = re.search(r"\S+(?:/\S+)+", clean)
    if not m:
        return [clean]
    return [clean[:m.start()] + part + clean[m.end():] for part in m[0].split("/")]


# a word after a model's name that makes it another card: "M5" is not an "M5 Max", "RTX 3060" not an
# "RTX 3060 Ti" (where the table has no row of the variant, the name is of no row, not of the base card)
_NOT_A_VARIANT = r"(?![ -]+(?:pro|max|ultra|ti|super|xtx|xt|gre|laptop|mobile)(?![A-Za-z0-9]))"


def candidates(kind: str, name: str | None) -> list[dict]:
    """The table's rows a device named ``name`` can be, in the table's order: each row whose name is in
    one of its names as whole words, the longest where one contains another ("RTX 4090 Laptop", not
    "RTX 4090"; "RX 9070 XT", not "RX 9070")."""
    out: list[dict] = []
    for alt in _names(name or ""):
        found = [row for row in table().get(VENDOR.get(kind, ""), [])
                 if re.search(r"(?<![A-Za-z0-9])" + re.escape(row["match"]) + r"(?![A-Za-z0-9])" + _NOT_A_VARIANT, alt, re.I)]
        found = [r for r in found if not any(r is not o and r["match"].lower() in o["match"].lower() for o in found)]
        out += [r for r in found if r not in out]
    return out


def row_for(kind: str, name: str | None, memory_bytes: int | None = None, exact: bool = False) -> dict | None:
    """The table's row of a device of ``kind`` named ``name`` ("NVIDIA GeForce RTX 4090").  Where the
    name fits several cards (the PCI table's "RX 7900 XTX/XT/GRE"), its memory tells them apart; failing
    that, ``exact`` answers None (which card it is cannot be told) and otherwise the fastest of them is
    taken, so that a bandwidth bound stays a bound."""
    cands = candidates(kind, name)
    if len(cands) > 1 and memory_bytes:
        sized = [r for r in cands if r.get("memory_gb") and abs(r["memory_gb"] * (1 << 30) - memory_bytes) <= 0.1 * memory_bytes]
        if len(sized) == 1:
            return sized[0]
    if len(cands) == 1:
        return cands[0]
    if not cands or exact:
        return None
    return max(cands, key=lambda r: r["gbps"])
