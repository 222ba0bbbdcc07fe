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


@lru_cache(maxsize=None)
def by_match() -> dict[str, tuple[str, dict]]:
    """Every GPU model of the table by its name (``match``): (the device kind, its row), a part sold under
    another's name (a row's ``variants``: the RTX 3080 12GB) as a row of its own."""
    out: dict[str, tuple[str, dict]] = {}
    for kind, vendor in VENDOR.items():
        for row in table().get(vendor, []):
            out.setdefault(row["match"], (kind, row))
            for v in row.get("variants", ()):
                out.setdefault(v["match"], (kind, {**row, **v, "variants": ()}))
    return out


def _clean(name: str) -> str:
    return " ".join(re.sub(r"\((?:tm|r)\)|™|®", " ", name, flags=re.I).split())


def _names(name: str) -> list[str]:
    """A device name as each card it can be: trademark signs out ("Radeon(TM) 890M"), and a name the PCI
    table gives several cards as each of them, a suffix taking the model number before it: "RX 7900
    XTX/XT/GRE" is the RX 7900 XTX, XT and GRE; "RX 6800/6800 XT/6900 XT" the RX 6800, 6800 XT and
    6900 XT ("MI25 / Radeon Pro V340": each full name, as "MI25 Radeon Pro V340" holds it)."""
    parts = [p.strip() for p in _clean(name).split("/") if p.strip()]
    if len(parts) < 2:
        return parts
    words = parts[0].split()
    numbered = [k for k, w in enumerate(words) if re.search(r"\d", w)] or [len(words) - 1]
    prefix, base = " ".join(words[:numbered[-1]]), words[numbered[-1]]
    out = [parts[0]]
    for p in parts[1:]:
        own = re.search(r"\d", p.split()[0])  # "6800 XT": a model of its own; "XT": the model before it
        out.append(" ".join(x for x in (prefix, p if own else f"{base} {p}") if x))
    return out


@lru_cache(maxsize=4096)
def _matching(kind: str, alt: str) -> list[dict]:
    """The rows whose name is in ``alt`` as whole words, the longest where one contains another ("RTX 4090
    Laptop", not "RTX 4090"; "RX 9070 XT", not "RX 9070")."""
    found = [row for row in table().get(VENDOR.get(kind, ""), [])
             if re.search(r"(?<![A-Za-z0-9])" + re.escape(_clean(row["match"])) + r"(?![A-Za-z0-9])" + _NOT_A_VARIANT,
                          alt, re.I)]
    return [r for r in found if not any(r is not o and r["match"].lower() in o["match"].lower() for o in found)]


# a word after a model's name that makes it another card: "M5" is not an "M5 Max", "RTX 3060" not an
# "RTX 3060 Ti", "RTX 2000 Ada" not an "RTX 2000 Ada Generation Laptop GPU" (where the table has no row of
# the variant, the name is of no row, not of the base card)
_NOT_A_VARIANT = r"(?![ -]+(?:generation[ -]+)?(?:pro|max|ultra|ti|super|xtx|xt|gre|laptop|mobile)(?![A-Za-z0-9]))"


def candidates(kind: str, name: str | None) -> list[dict]:
    """The table's rows a device named ``name`` can be, in the order of its names."""
    out: list[dict] = []
    for alt in _names(name or ""):
        out += [r for r in _matching(kind, alt) if r not in out]
    return out


def shares_memory(kind: str, row: dict) -> bool:
    """A GPU that reads the machine's own memory (an APU's iGPU, an Apple chip, a Jetson or GB10) rather
    than memory of its own: its runs reach a different share of the bound than a card's."""
    return kind == "metal" or bool(row.get("typical") or row["match"] in ("Orin", "Xavier") or re.search(
        r"igpu|unified|system memory|soc\b|jetson|apu", row.get("note", ""), re.I))


def memory_kind(kind: str, row: dict) -> str:
    """"shared" (the machine's own memory: shares_memory), "hbm" (a card's stacked HBM, by the table's
    note) or "own" (a card's GDDR): llama.cpp's generation kernels reach a different share of each kind's
    bound (docs/models.md: A100 and H100 cards about 43% of theirs, GDDR cards of the same families 60-90%),
    so the estimate pools them apart."""
    if shares_memory(kind, row):
        return "shared"
    return "hbm" if re.search(r"\bHBM", row.get("note", "")) else "own"


@lru_cache(maxsize=4096)  # the table does not change while the process runs; a fleet asks of the same cards
def row_for(kind: str, name: str | None, memory_bytes: int | None = None, exact: bool = False) -> dict | None:
    """The table's row of a device of ``kind`` named ``name`` ("NVIDIA GeForce RTX 4090").  Where the
    name fits several cards (the PCI table's "RX 7900 XTX/XT/GRE"), its memory tells them apart; failing
    that, ``exact`` answers None (which card it is cannot be told) and otherwise the fastest of them is
    taken, so that a bandwidth bound stays a bound.  A name of which one card is not in the table ("RX
    9060 XT/9060") is, for ``exact``, of none: the card may be the one the table lacks.  A part sold under
    another's name (the RTX 3080's 12 GB, a row's ``variants``) is told by its memory; without it, ``exact``
    takes the row's own part (the one a source naming no memory benchmarked: XiongjieDai's "3080 10GB")
    and a bound the fastest."""
    alts = [_matching(kind, alt) for alt in _names(name or "")]
    if exact and len(alts) > 1 and not all(alts):
        return None
    cands = candidates(kind, name)
    for v in (cands[0].get("variants", ()) if len(cands) == 1 else ()):
        if re.search(r"(?<![A-Za-z0-9])" + re.escape(v["match"]) + r"(?![A-Za-z0-9])", _clean(name or ""), re.I):
            return {**cands[0], **v, "variants": ()}  # the name says which part: "RTX 3080 12GB"
    if memory_bytes and len(cands) == 1:
        # a part sold under the same name with other memory and bandwidth (the RTX 3080's 12 GB): its own row
        for v in cands[0].get("variants", ()):
            if abs(v["memory_gb"] * (1 << 30) - memory_bytes) <= 0.1 * memory_bytes:
                return {**cands[0], **v, "variants": ()}
    if not memory_bytes and not exact and len(cands) == 1 and cands[0].get("variants"):
        # which part it is cannot be told: the fastest, so that a bound stays a bound
        return max([cands[0]] + [{**cands[0], **v, "variants": ()} for v in cands[0]["variants"]], key=lambda r: r["gbps"])
    if len(cands) > 1 and memory_bytes:
        sized = [r for r in cands if r.get("memory_gb") and abs(r["memory_gb"] * (1 << 30) - memory_bytes) <= 0.1 * memory_bytes]
        if len(sized) == 1:
            return sized[0]
    if len(cands) == 1:
        return cands[0]
    if not cands or exact:
        return None
    return max(cands, key=lambda r: r["gbps"])
