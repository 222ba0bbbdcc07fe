"""AMD XDNA NPUs: PCI functions of vendor 0x1022 from the (device, revision) table, or any device
bound to amdxdna; whether the driver is bound; the /dev/accel node."""

from __future__ import annotations

from probes import tables
from probes.linux import pci
from probes.profile import PCI, Npu

FIX = (
    "load the amdxdna driver (in Linux 6.14 and newer; older kernels need AMD's xdna-driver "
    "module): sudo modprobe amdxdna"
)


def probe(host, profile) -> None:
    table = tables.load("amd_npu")
    accel = {}
    for node in host.listdir("/sys/class/accel"):
        if node.startswith("accel") and node[5:].isdigit():
            target = host.link_name(f"/sys/class/accel/{node}/device")
            if target:
                accel[target] = node
    for dev in pci.scan(host):
        if dev.vendor != table["vendor"]:
            continue
        row = tables.npu(dev.device or "", dev.revision)
        bound = dev.driver == table["driver"]
        if row is None and not bound:
            continue
        node = accel.get(dev.bus_id)
        device_node = f"/dev/accel/{node}" if node and host.exists(f"/dev/accel/{node}") else None
        name = None
        if bound:
            try:
                name = (host.read(f"{pci.BASE}/{dev.bus_id}/vbnv") or "").strip() or None
            except PermissionError:
                name = None
        npu = Npu(
            vendor="amd",
            pci=PCI(vendor=dev.vendor, device=dev.device or "", revision=dev.revision, bus_id=dev.bus_id),
            generation=row["generation"] if row else "unknown",
            codename=row["codename"] if row else "unknown",
            driver_bound=bound,
            device_node=device_node,
            name=name,
        )
        profile.npus.append(npu)
        what = f"AMD {npu.generation} NPU ({npu.codename}, {dev.device} rev {dev.revision}) at {dev.bus_id}"
        if not bound:
            if dev.driver:
                profile.warn("npu", f"{what} is bound to '{dev.driver}', not amdxdna: NPU backends cannot use it")
            else:
                profile.warn("npu", f"{what} has no driver bound: {FIX}")
        elif device_node is None:
            profile.warn("npu", f"{what}: amdxdna is bound but no /dev/accel node exists (container without --device /dev/accel?)")
