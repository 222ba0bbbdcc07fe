"""AMD XDNA NPUs: PCI functions of vendor 0x1022 from the (device, revision) table, or any device
bound to amdxdna; whether the driver is bound; the /dev/accel node, which must be read-write for
the NPU to be usable (Lemonade opens it too)."""

from __future__ import annotations

from probes import tables
from probes.linux import pci
from probes.profile import PCI, Npu

FIX_CONTAINER = "add --device /dev/accel to the container"
FIX_GROUP = "add this user to the render group"
FIX_RELOAD = "reload the amdxdna driver (sudo modprobe -r amdxdna && sudo modprobe amdxdna)"
FIX = (
    "load the amdxdna driver (in Linux 6.14 and newer; older kernels need AMD's xdna-driver "
    "module): sudo modprobe amdxdna"
)


def probe(host, profile) -> None:
    table = tables.load("amd_npu")
    accel = {}
    for node in host.listdir("/sys/class/accel"):
        if node.startswith("accel") and node[5:].isdecimal():
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
        path = f"/dev/accel/{node}" if node else None
        access = host.dev_access(path) if path and host.exists(path) else None
        device_node = path if access is not None else None
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
        npu.usable = bound and access == "rw"
        if not bound:
            npu.access_fix = FIX
            if dev.driver:
                profile.warn("npu", f"{what} is bound to '{dev.driver}', not amdxdna: NPU backends cannot use it")
            else:
                profile.warn("npu", f"{what} has no driver bound: {FIX}")
        elif device_node is None:
            npu.access_fix = FIX_CONTAINER if profile.os.container else FIX_RELOAD
            profile.warn("npu", f"{what}: amdxdna is bound but no /dev/accel node exists: {npu.access_fix}")
        elif not npu.usable:
            npu.access_fix = FIX_GROUP
            profile.warn("npu", f"{what}: no read-write access to {device_node}: {FIX_GROUP}")
