"""AMD GPUs: KFD topology first, DRM/PCI as the fallback.

KFD gives the exact gfx target (``gfx_target_version``) and, through ``drm_render_minor``, the
DRM device with PCI ids, VRAM and driver.  Without KFD (a container without ``/dev/kfd``, a kernel
without ROCm support) the DRM devices of vendor 0x1002 are read instead: the GC IP version from
``ip_discovery`` through the kernel's map, else the PCI device-id table.
"""

from __future__ import annotations

from probes import tables
from probes.profile import PCI, AmdGpu
from probes.util import parse_hex, parse_int, parse_kv, visible_indices

KFD = "/sys/class/kfd/kfd/topology/nodes"
DRM = "/sys/class/drm"


def _drm_facts(host, devpath: str) -> dict:
    """Facts of one DRM device directory (``/sys/class/drm/renderD128/device``)."""

    def rd(name):
        try:
            return host.read(f"{devpath}/{name}")
        except PermissionError:
            return None

    gc = None
    major, minor, rev = (parse_int(rd(f"ip_discovery/die/0/GC/0/{k}")) for k in ("major", "minor", "revision"))
    if major is not None and minor is not None and rev is not None:
        gc = f"{major}.{minor}.{rev}"
    return {
        "vendor": parse_hex(rd("vendor")),
        "device": parse_hex(rd("device")),
        "revision": parse_hex(rd("revision")),
        "class": parse_hex(rd("class")),
        "vram": parse_int(rd("mem_info_vram_total")),
        "board_info": host.exists(f"{devpath}/board_info"),
        "driver": host.link_name(f"{devpath}/driver"),
        "bus_id": host.link_name(devpath),
        "gc": gc,
    }


def _integrated(gc: str | None, gfx: str | None, row: dict | None) -> bool:
    # The kernel's rule (AMD_IS_APU by GC version) first, then the device table, then the target.
    if gc and gc in tables.load("amd_gfx")["gc_to_gfx_target_version"]:
        if tables.gc_is_apu(gc):
            return True
        if row is not None:
            return bool(row["apu"])  # MI300A: APU by package type, same GC as MI300X
        return False
    if row is not None:
        return bool(row["apu"])
    return bool(gfx) and tables.gfx_is_apu(gfx)


def _name(row: dict | None, gfx: str | None) -> str:
    if row is not None:
        return row["name"]
    return f"AMD GPU ({gfx})" if gfx else "AMD GPU"


def _from_kfd(host, profile) -> list[AmdGpu] | None:
    nodes = host.listdir(KFD)
    if not nodes:
        return None
    gpus = []
    for node in sorted(nodes, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n)):
        try:
            text = host.read(f"{KFD}/{node}/properties")
        except PermissionError:
            gpus.append(
                AmdGpu(name=f"AMD GPU (KFD node {node}, hidden)", visible=False, source="kfd", gfx=None)
            )
            continue
        props = parse_kv(text)
        if not props:
            if text is not None:
                profile.warn("amd_gpu", f"KFD node {node}: properties unreadable or empty; skipped")
            continue
        version = parse_int(props.get("gfx_target_version"))
        if not version:
            continue  # CPU node
        if version < 0 or version > 999999:
            profile.warn("amd_gpu", f"KFD node {node}: implausible gfx_target_version {version}; skipped")
            continue
        gfx = tables.gfx_name(version)
        minor = parse_int(props.get("drm_render_minor"))
        facts = _drm_facts(host, f"{DRM}/renderD{minor}/device") if minor is not None and minor >= 0 else {}
        vendor_id = parse_int(props.get("vendor_id"))
        device_id = parse_int(props.get("device_id"))
        device = facts.get("device") or (f"0x{device_id:04x}" if device_id is not None else "")
        vendor = facts.get("vendor") or (f"0x{vendor_id:04x}" if vendor_id is not None else "0x1002")
        row = tables.amd_pci(device) if device else None
        bus_id = facts.get("bus_id")
        if not bus_id:
            domain, loc = parse_int(props.get("domain")), parse_int(props.get("location_id"))
            if domain is not None and loc is not None:
                bus_id = f"{domain:04x}:{loc >> 8:02x}:{(loc >> 3) & 0x1f:02x}.{loc & 7}"
        gpus.append(
            AmdGpu(
                name=_name(row, gfx),
                pci=PCI(vendor=vendor, device=device, revision=facts.get("revision"), bus_id=bus_id),
                gfx=gfx,
                gfx_effective=gfx,
                integrated=_integrated(facts.get("gc"), gfx, row),
                vram_bytes=facts.get("vram"),
                source="kfd",
                driver=facts.get("driver"),
            )
        )
        gpus[-1]._uuid = props.get("unique_id")  # for *_VISIBLE_DEVICES=GPU-<hex>
    return gpus or None


def _from_drm(host, profile) -> list[AmdGpu]:
    seen = set()
    gpus = []
    entries = [e for e in host.listdir(DRM) if _is_device_entry(e)]
    entries.sort(key=lambda e: (0 if e.startswith("card") else 1, int(e.lstrip("cardrenderD") or 0)))
    for entry in entries:
        facts = _drm_facts(host, f"{DRM}/{entry}/device")
        if facts["vendor"] != "0x1002":
            continue
        if facts["class"] and not facts["class"].startswith(("0x03", "0x12")):
            continue  # display controllers, and processing accelerators (Instinct MI300X: 0x1200)
        key = facts["bus_id"] or entry
        if key in seen:
            continue
        seen.add(key)
        row = tables.amd_pci(facts["device"]) if facts["device"] else None
        gfx, source = None, "drm"
        if facts["gc"]:
            gfx = tables.gfx_from_gc(facts["gc"])
            if gfx is None:
                profile.warn("amd_gpu", f"{entry}: GC IP {facts['gc']} is not in the gfx table")
        if gfx is None and row is not None:
            gfx, source = row["gfx"], "pci-table"
        if gfx is None:
            profile.warn(
                "amd_gpu",
                f"AMD GPU {facts['device']} at {key}: gfx target unknown (no KFD, no ip_discovery, not in the PCI table)",
            )
        gpus.append(
            AmdGpu(
                name=_name(row, gfx),
                pci=PCI(vendor="0x1002", device=facts["device"] or "", revision=facts["revision"], bus_id=facts["bus_id"]),
                gfx=gfx,
                gfx_effective=gfx,
                integrated=_integrated(facts["gc"], gfx, row),
                vram_bytes=facts["vram"],
                source=source,
                driver=facts["driver"],
            )
        )
    return gpus


def _is_device_entry(name: str) -> bool:
    for prefix in ("card", "renderD"):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return True
    return False


def parse_override(value: str) -> str | None:
    """HSA_OVERRIDE_GFX_VERSION "10.3.0" or "gfx1030" -> "gfx1030"."""
    v = value.strip().lower()
    if v.startswith("gfx") and len(v) > 3 and v[3:].isalnum():
        return v
    parts = v.split(".")
    if len(parts) == 3 and all(p.isdigit() for p in parts):
        major, minor, step = (int(p) for p in parts)
        if minor < 16 and step < 16:
            return "gfx%d%x%x" % (major, minor, step)
    return None


def probe(host, profile) -> None:
    gpus = _from_kfd(host, profile)
    if gpus is None:
        gpus = _from_drm(host, profile)
        if gpus and host.exists("/sys/class/kfd") is False:
            profile.warn(
                "amd_gpu",
                "no KFD topology (/sys/class/kfd): ROCm cannot use these GPUs here "
                "(in a container, pass /dev/kfd and /dev/dri); gfx taken from DRM",
            )
    for i, gpu in enumerate(gpus):
        gpu.index = i

    # visibility: ROCR_VISIBLE_DEVICES selects first, HIP_VISIBLE_DEVICES indexes what is left
    order = list(range(len(gpus)))
    uuids = [_uuid_hex(getattr(g, "_uuid", None)) for g in gpus]
    for var in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        chosen = visible_indices(host.env.get(var), len(order), [uuids[i] for i in order])
        if chosen is not None:
            order = [order[i] for i in sorted(chosen)]
    for i, gpu in enumerate(gpus):
        if i not in order:
            gpu.visible = False

    override = host.env.get("HSA_OVERRIDE_GFX_VERSION")
    if override is not None and gpus:
        gfx = parse_override(override)
        if gfx is None:
            profile.warn("amd_gpu", f"HSA_OVERRIDE_GFX_VERSION={override!r} is not a gfx version; ignored")
        else:
            for gpu in gpus:
                if gpu.gfx is not None:
                    gpu.gfx_effective = gfx
            profile.warn(
                "amd_gpu",
                f"HSA_OVERRIDE_GFX_VERSION={override}: ROCm runs every AMD GPU as {gfx} "
                f"(hardware: {', '.join(sorted({g.gfx for g in gpus if g.gfx}))})",
            )
    profile.amd_gpus = gpus


def _uuid_hex(unique_id: str | None) -> str | None:
    n = parse_int(unique_id)
    return f"GPU-{n:016x}" if n else None
