"""Peak memory bandwidth of a device (catalogs/bandwidth.json, from vendor spec sheets)."""

from __future__ import annotations

from selector.bandwidth import VENDOR, row_for, table  # noqa: F401 - the table is the GPU table's


def bandwidth_of(profile, device) -> tuple[float, str] | None:
    """(GB/s, source) for the device, matched by its marketing name; None when not in the table."""
    row = row_for(device.type, profile.metal.chip if device.type == "metal" else device.name)
    return (float(row["gbps"]), row.get("source", "")) if row else None


def cpu_bandwidth(profile) -> tuple[float, str] | None:
    """(GB/s, words) of system memory from the tables, where the CPU shares one memory with a device
    whose bandwidth is known (a Strix Halo or other APU, a GB10 or Jetson, an Apple chip); None
    otherwise (the caller measures the machine, or says nothing)."""
    shared = []
    if profile.metal.available and profile.metal.chip:
        shared.append(("metal", profile.metal.chip))
    for g in profile.amd_gpus:
        if getattr(g, "integrated", False):
            shared.append(("amd_gpu", g.name or ""))
    for g in profile.nvidia_gpus:
        if getattr(g, "unified", False):
            shared.append(("nvidia_gpu", g.name or ""))
    for kind, name in shared:
        for row in table().get(VENDOR[kind], []):
            if row["match"].lower() in name.lower():
                if row.get("typical"):
                    break  # the APU's memory is whatever was fitted: a typical figure is not this machine's
                return float(row["gbps"]), f"the CPU shares the {name}'s memory ({row.get('note') or row.get('source', '')})"
    return None


def cpu_platform_bandwidth(profile) -> tuple[float, str] | None:
    """(GB/s, words) of the CPU platform's peak memory bandwidth (catalogs/bandwidth.json "cpu"): for a
    machine that is replayed or described, where nothing can be measured; an upper bound."""
    brand = (profile.cpu.brand or "").lower()
    for row in table().get("cpu", []):
        if row["match"].lower() in brand:
            return float(row["gbps"]), f"{row['note']}; not measured"
    return None
