"""Loaded once: the fact tables in ``probes/tables/*.json`` (each file cites its sources)."""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache

_DIR = os.path.join(os.path.dirname(__file__), "tables")


@lru_cache(maxsize=None)
def load(name: str) -> dict:
    with open(os.path.join(_DIR, name + ".json"), encoding="utf-8") as f:
        return json.load(f)


def gfx_name(version: int) -> str:
    """KFD gfx_target_version -> target name: decimal major, one hex digit each for minor and
    stepping (90010 -> gfx90a, 110501 -> gfx1151)."""
    return "gfx%d%x%x" % (version // 10000, (version // 100) % 100, version % 100)


def gfx_from_gc(gc: str) -> str | None:
    """GC IP version from ip_discovery ("11.0.3") -> gfx target through the kernel's map."""
    v = load("amd_gfx")["gc_to_gfx_target_version"].get(gc)
    return gfx_name(v) if v else None


def gc_is_apu(gc: str) -> bool:
    return gc in load("amd_gfx")["apu_gc_versions"]


def gfx_is_apu(gfx: str) -> bool:
    return gfx in load("amd_gfx")["apu_targets"]


@lru_cache(maxsize=None)
def _amd_pci_index() -> dict:
    return {row["device"]: row for row in load("amd_pci")["devices"]}


def amd_pci(device: str, revision: str | None = None) -> dict | None:
    """Row for an AMD GPU PCI device id ("744c" or "0x744c"); with the revision, its gfx target
    where revisions of one device id differ (``gfx_by_revision``)."""
    row = _amd_pci_index().get(_hex4(device))
    if row is not None and revision is not None and row.get("gfx_by_revision"):
        gfx = row["gfx_by_revision"].get(_hex2(revision))
        if gfx:
            row = dict(row, gfx=gfx)
    return row


def npu(device: str, revision: str | None) -> dict | None:
    dev, rev = _hex4(device), _hex2(revision)
    fallback = None
    for row in load("amd_npu")["devices"]:
        if row["device"] != dev:
            continue
        if row["revision"] == rev:
            return row
        if row["revision"] is None:
            fallback = row
    return fallback


@lru_cache(maxsize=None)
def _cc_patterns():
    out = []
    for row in load("nvidia")["compute_capability_by_name"]:
        for token in row["match"]:
            out.append((re.compile(r"(?<![A-Za-z0-9])" + re.escape(token) + r"(?![A-Za-z0-9])", re.I), tuple(row["cc"])))
    return out


def nvidia_cc_from_name(name: str) -> tuple[int, int] | None:
    for pattern, cc in _cc_patterns():
        if pattern.search(name):
            return cc
    return None


def nvidia_pci_name(device: str) -> str | None:
    return load("nvidia")["pci_names"].get(_hex4(device))


def jetson_board(compatible: list[str]) -> dict | None:
    for row in load("nvidia")["jetson"]:
        if row["compatible"] in compatible:
            return row
    return None


def l4t_cuda(release: str | None, revision: str | None) -> str | None:
    """The CUDA release ("12.6") the driver of an L4T release (R36, REVISION 4.3) runs; None if unknown."""
    def nums(text):
        m = re.match(r"\s*(\d+(?:\.\d+)*)", text or "")
        return tuple(int(x) for x in m.group(1).split(".")) if m else None
    for row in load("nvidia").get("l4t_cuda", []):
        if row["release"] != release:
            continue
        need = nums(row.get("revision_min"))
        if need is not None and (nums(revision) or (0,)) < need:
            continue
        return row["cuda"]
    return None


def _hex4(value) -> str:
    s = str(value or "").strip().lower()
    if s.startswith("0x"):
        s = s[2:]
    return s.zfill(4)


def _hex2(value) -> str | None:
    if value is None:
        return None
    s = str(value).strip().lower()
    if s.startswith("0x"):
        s = s[2:]
    return s.zfill(2)


@lru_cache(maxsize=None)
def _intel_index() -> dict:
    return {row["device"]: row for row in load("intel_gpu")["devices"]}


def intel_gpu(device: str) -> dict | None:
    """Row for an Intel GPU PCI device id ("56a0" or "0x56a0"): name, arc."""
    return _intel_index().get(_hex4(device))


def board(compatible: list[str]) -> dict | None:
    """The first device-tree compatible string (most specific first) that names a known SoC."""
    rows = {row["compatible"]: row for row in load("boards")["boards"]}
    for c in compatible:
        if c in rows:
            return rows[c]
    return None


@lru_cache(maxsize=None)
def _icd_vendor() -> dict:
    return {stem: vendor for vendor, stems in load("vulkan_icds")["by_vendor"].items() for stem in stems}


def vulkan_vendor(icd: str) -> str | None:
    """The GPU vendor ("amd", "nvidia", "intel") a Vulkan ICD manifest drives, or None (a CPU
    renderer, a translation layer, another vendor's SoC)."""
    return _icd_vendor().get(icd.split(".")[0].lower())
