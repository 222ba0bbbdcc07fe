#!/usr/bin/env python3
"""Generate probes/tables/amd_pci.json: every AMD GPU since Vega (GCN5 / gfx9) by PCI device id.

Sources (download them, then run this script; nothing is fetched here):
  * GPUOpen-Tools/device_info ``DeviceInfo.cpp`` (``kCardInfo``): one row per (device id, revision)
    with the gfx target, the APU flag and a marketing name.  It is AMD's own table (the developer
    tools use it), the only public one that gives the gfx target per device id.
    https://github.com/GPUOpen-Tools/device_info/blob/master/DeviceInfo.cpp
  * libdrm ``data/amdgpu.ids`` (the file Linux distributions install as
    /usr/share/libdrm/amdgpu.ids): marketing names per (device id, revision).
    https://gitlab.freedesktop.org/mesa/drm/-/blob/main/data/amdgpu.ids
  * the kernel's pciidlist (drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c, ROCm/amdgpu mirror commit
    031b3904cbd2): device id -> ASIC (CHIP_VEGA10, CHIP_NAVI10, ...) for the chips from before IP
    discovery; CHIP_GFX below maps each ASIC to its gfx target as kfd_device.c does
    (kgd2kfd_probe()).  Chips from gfx11 on are matched by PCI class
    ("CHIP_IP_DISCOVERY"), so their device ids come from DeviceInfo.cpp alone.
  * probes/tables/amd_pci_curated.json: rows checked by hand against the kernel's pciidlist,
    pci.ids and libdrm data/amdgpu.ids; they win over generated ones (names the
    fixtures and users see, the MI300A APU flag, which DeviceInfo gets wrong).

A device id whose revisions have different gfx targets (0x73ff: gfx1032, but rev 0xdf is an
RX 6750 GRE, gfx1031) keeps the most common target in ``gfx`` and the others in
``gfx_by_revision``.

Usage:  python3 probes/tables/gen_amd_pci.py DeviceInfo.cpp amdgpu_drv.c [amdgpu.ids ...] > probes/tables/amd_pci.json
"""

from __future__ import annotations

import collections
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# GDT_HW_GENERATION_* of gfx9 (Vega) and everything after it
GENERATIONS = {"GFX9", "CDNA", "CDNA2", "CDNA3", "CDNA4", "GFX10", "GFX103", "GFX11", "GFX12"}
# kfd_device.c: the ASIC of a pciidlist entry -> its gfx target (only gfx9 and later); name for rows
# no marketing-name table knows
CHIP_GFX = {
    "VEGA10": ("gfx900", "Vega 10"), "VEGA12": ("gfx904", "Vega 12"), "VEGA20": ("gfx906", "Vega 20"),
    "RAVEN": ("gfx902", "Raven"), "ARCTURUS": ("gfx908", "Arcturus"), "RENOIR": ("gfx90c", "Renoir"),
    "ALDEBARAN": ("gfx90a", "Aldebaran"), "NAVI10": ("gfx1010", "Navi 10"), "NAVI12": ("gfx1011", "Navi 12"),
    "NAVI14": ("gfx1012", "Navi 14"), "CYAN_SKILLFISH": ("gfx1013", "Cyan Skillfish"),
    "SIENNA_CICHLID": ("gfx1030", "Navi 21"), "NAVY_FLOUNDER": ("gfx1031", "Navi 22"),
    "DIMGREY_CAVEFISH": ("gfx1032", "Navi 23"), "BEIGE_GOBY": ("gfx1034", "Navi 24"),
    "YELLOW_CARP": ("gfx1035", "Rembrandt"),
}
PCIID = re.compile(r"\{0x1002,\s*0x([0-9A-Fa-f]{4}),[^}]*CHIP_(\w+?)(\|[^}]*)?\}")
ROW = re.compile(r'\{(GDT_\w+),\s*0x([0-9A-Fa-f]{4}),\s*0x([0-9A-Fa-f]{2}),\s*GDT_HW_GENERATION_(\w+),\s*'
                 r'(true|false),\s*"([^"]*)",\s*"([^"]*)"\}')


def clean(name: str) -> str | None:
    name = re.sub(r"\s+", " ", name.replace("(TM)", "").replace("(tm)", "")).strip()
    if not name or re.fullmatch(r"[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}", name) or not re.match(r"(AMD|ATI|Radeon)\b", name):
        return None  # DeviceInfo's placeholders ("66AF:C0") and internal names ("Ryzen9")
    return name


def parse_ids(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) == 3 and re.fullmatch(r"[0-9A-Fa-f]{4}", parts[0]) and re.fullmatch(r"[0-9A-Fa-f]{2}", parts[1]):
            out[(parts[0].lower(), parts[1].lower())] = parts[2]
    return out


def generate(device_info: str, pciidlist: str, ids_texts: list[str], curated: dict) -> dict:
    ids: dict = {}
    for text in ids_texts:
        ids.update(parse_ids(text))
    per_device: dict[str, list] = collections.defaultdict(list)
    for enum, dev, rev, gen, apu, gfx, name in ROW.findall(device_info):
        if gen in GENERATIONS and gfx.startswith("gfx"):
            per_device[dev.lower()].append((rev.lower(), gfx, apu == "true", name))
    rows = {}
    for dev, revs in per_device.items():
        gfxs = collections.Counter(g for _, g, _, _ in revs)
        gfx = gfxs.most_common(1)[0][0]
        names: list[str] = []
        for rev, _, _, name in revs:
            n = clean(ids.get((dev, rev)) or name)
            if n and n not in names:
                names.append(n)
        if len(names) > 1 and "AMD Radeon Graphics" in names:
            names.remove("AMD Radeon Graphics")
        row = {"device": dev, "gfx": gfx, "apu": any(a for _, _, a, _ in revs),
               "name": " / ".join(names[:4]) if names else f"AMD GPU [1002:{dev}] ({gfx})", "codename": None}
        other = {rev: g for rev, g, _, _ in revs if g != gfx}
        if other:
            row["gfx_by_revision"] = dict(sorted(other.items()))
        rows[dev] = row
    for dev, chip, flags in PCIID.findall(pciidlist):
        dev = dev.lower()
        if chip not in CHIP_GFX:
            continue  # before Vega
        gfx, codename = CHIP_GFX[chip]
        kernel_apu = "AMD_IS_APU" in (flags or "")
        if dev in rows:
            rows[dev]["codename"] = rows[dev]["codename"] or codename
            if rows[dev]["gfx"] != gfx:  # the kernel drives the chip: its ASIC wins
                print(f"note: {dev}: DeviceInfo says {rows[dev]['gfx']}, the kernel's {chip} is {gfx}", file=sys.stderr)
                rows[dev]["gfx"] = gfx
            continue
        names = []
        for (d, _rev), name in sorted(ids.items()):
            n = clean(name) if d == dev else None
            if n and n not in names:
                names.append(n)
        rows[dev] = {"device": dev, "gfx": gfx, "apu": kernel_apu,
                     "name": " / ".join(names[:4]) if names else f"AMD Radeon ({codename})", "codename": codename}
    for row in curated["devices"]:
        merged = dict(rows.get(row["device"], {}))
        merged.update(row)
        rows[row["device"]] = merged
    return {
        "_source": ("Generated by probes/tables/gen_amd_pci.py from GPUOpen-Tools/device_info DeviceInfo.cpp "
                    "(kCardInfo, commit a44c00c0c5f8, 2026-01-29: gfx target, APU flag, names), the kernel's amdgpu_drv.c pciidlist "
                    "(ROCm/amdgpu 031b3904cbd2: device id -> ASIC -> gfx as kfd_device.c maps it), libdrm data/amdgpu.ids "
                    "(libdrm 2.4.114: marketing names) and the hand-checked rows of amd_pci_curated.json ("
                    + curated["_source"] + "). Every AMD GPU since Vega (gfx9), Radeon, Radeon PRO, Instinct and APUs; "
                    "one row per PCI device id (vendor 0x1002); gfx_by_revision where revisions differ."),
        "devices": [rows[d] for d in sorted(rows)],
    }


def dump(table: dict) -> str:
    lines = ["{", f'  "_source": {json.dumps(table["_source"])},', '  "devices": [']
    rows = table["devices"]
    lines += [f"    {json.dumps(r)}" + ("," if i < len(rows) - 1 else "") for i, r in enumerate(rows)]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        device_info = f.read()
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        pciidlist = f.read()
    ids_texts = []
    for path in argv[2:] or ["/usr/share/libdrm/amdgpu.ids"]:
        with open(path, encoding="utf-8") as f:
            ids_texts.append(f.read())
    with open(os.path.join(HERE, "amd_pci_curated.json"), encoding="utf-8") as f:
        curated = json.load(f)
    sys.stdout.write(dump(generate(device_info, pciidlist, ids_texts, curated)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
