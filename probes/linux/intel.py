"""Intel GPUs: PCI vendor 0x8086 with a display class (0x03xxxx), from the shared PCI scan.
Discrete Arc cards are recognized by device id (probes/tables/intel_gpu.json); any other Intel
display function (UHD / Iris Xe iGPU) is an Intel GPU that is not Arc.  Vulkan needs the GPU's
render node (``/sys/bus/pci/devices/<bdf>/drm/renderD*``) read-write, as on AMD."""

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
        render = None
        for entry in host.listdir(f"{pci.BASE}/{d.bus_id}/drm"):
            if entry.startswith("renderD") and entry[7:].isdecimal():
                render = f"/dev/dri/{entry}"
        gpu = IntelGpu(name=name, pci=PCI(vendor="0x8086", device=d.device or "", revision=d.revision,
                                          bus_id=d.bus_id), arc=bool(row and row.get("arc")), index=len(gpus),
                       render_node=render)
        if render is not None:  # no render node: no driver bound, nothing to judge access by
            access = host.dev_access(render)
            if access != "rw":
                gpu.usable_graphics = False
                gpu.access_fix = FIX_CONTAINER if profile.os.container and access is None else FIX_GROUP
                profile.warn("intel_gpu", f"{name} at {d.bus_id}: Vulkan cannot use it here "
                                          f"({render} {'missing' if access is None else 'not read-write'}): {gpu.access_fix}")
        gpus.append(gpu)
    profile.intel_gpus = gpus


FIX_CONTAINER = "add --device /dev/dri to the container"
FIX_GROUP = "add this user to the render group"
