"""Intel GPUs: PCI vendor 0x8086 with a display class (0x03xxxx), from the shared PCI scan.
Discrete Arc cards are recognized by device id (probes/tables/intel_gpu.json); any other Intel
display function (UHD / Iris Xe iGPU) is an Intel GPU that is not Arc."""

from __future__ import annotations

from probes import tables
from probes.linux import pci
from probes.profile import PCI, IntelGpu


def probe(host, profile) -> None:
    gpus = []
    for d in pci.scan(host):
        if d.vendor != "0x8086" or not d.is_display:
            continue
        row = tables.intel_gpu(d.device or "")
        dev = (d.device or "0x????")[2:]
        name = row["name"] if row else f"Intel GPU [8086:{dev}]"
        gpus.append(IntelGpu(name=name, pci=PCI(vendor="0x8086", device=d.device or "", revision=d.revision,
                                                bus_id=d.bus_id), arc=bool(row and row.get("arc"))))
    profile.intel_gpus = gpus
