"""AMD GPUs: KFD topology first, DRM/PCI as the fallback.

KFD gives the exact gfx target (``gfx_target_version``) and, through ``drm_render_minor``, the
DRM device with PCI ids, VRAM and driver.  Without KFD (a kernel without ROCm support) the DRM
devices of vendor 0x1002 are read instead: the GC IP version from ``ip_discovery`` through the
kernel's map, else the PCI device-id table.  A KFD node without ``gfx_target_version`` (kernels
before about 4.19) takes its gfx target from its ``device_id`` the same way, with a warning.

Device access: ROCm needs ``/dev/kfd`` and the GPU's render node read-write, Vulkan the render
node (``Host.dev_access``; pyamdgpuinfo failing to open the node counts as evidence too).  A GPU
this process cannot use is still reported, with ``access_fix`` in words.  pyamdgpuinfo (libdrm)
names the GPU and sizes its VRAM and GTT; sysfs, the system's ``amdgpu.ids`` and the PCI table
are the fallbacks.
"""

from __future__ import annotations

from probes import tables
from probes.profile import PCI, AmdGpu
from probes import runtime_env
from probes.util import parse_hex, parse_int, parse_kv, parse_override  # noqa: F401 (parse_override: tests)

KFD = "/sys/class/kfd/kfd/topology/nodes"
DRM = "/sys/class/drm"
KFD_DEV = "/dev/kfd"
# libdrm's marketing-name table: the distribution's package, then AMD's amdgpu-install copy
AMDGPU_IDS = ("/usr/share/libdrm/amdgpu.ids", "/opt/amdgpu/share/libdrm/amdgpu.ids")

FIX_CONTAINER = "add --device /dev/kfd --device /dev/dri to the container"
FIX_NO_RENDER = "the amdgpu driver created no render node for it: check dmesg for amdgpu errors"
FIX_GROUP = "add this user to the render group"
FIX_GROUP_CONTAINER = "add --group-add render to the container (the device nodes belong to the render group)"
FIX_NO_KFD = ("the kernel has no KFD (ROCm) support: use a kernel with amdgpu's KFD "
              "(CONFIG_HSA_AMD), such as the distribution's generic kernel")


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
        "gtt": parse_int(rd("mem_info_gtt_total")),
        "vram_used": parse_int(rd("mem_info_vram_used")),
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


def parse_amdgpu_ids(text: str | None) -> dict[tuple[str, str], str]:
    """libdrm's ``amdgpu.ids``: "DEVICE,\tREVISION,\tNAME" lines (hex, upper case) after a
    version line -> {("0x1586", "0xc1"): "AMD Radeon 8060S Graphics"}."""
    out: dict[tuple[str, str], str] = {}
    for line in (text or "").splitlines():
        if line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) != 3 or not parts[2]:
            continue
        try:
            dev, rev = int(parts[0], 16), int(parts[1], 16)
        except ValueError:
            continue
        out[(f"0x{dev:04x}", f"0x{rev:02x}")] = parts[2]
    return out


def _system_ids(host) -> dict:
    """The machine's ``amdgpu.ids`` (the first of AMDGPU_IDS there is), parsed; {} without one."""
    for path in AMDGPU_IDS:
        try:
            text = host.read(path)
        except PermissionError:
            text = None
        if text:
            return parse_amdgpu_ids(text)
    return {}


class _SystemNames:
    """Marketing names from the machine's ``amdgpu.ids``, for one probe run: the file is read at
    the first GPU that needs a name from it, and only then."""

    __slots__ = ("host", "table")

    def __init__(self, host):
        self.host, self.table = host, None

    def get(self, device: str, revision: str) -> str | None:
        if self.table is None:
            self.table = _system_ids(self.host)
        return self.table.get((device, revision))


def _access(host, profile, gpu: AmdGpu, compute_possible: bool, info: dict | None) -> None:
    """usable_compute / usable_graphics / access_fix of one GPU from its device nodes."""
    render = host.dev_access(gpu.render_node) if gpu.render_node else None
    if info and info.get("error") == "PermissionError" and render == "rw":
        render = "none"  # libdrm could not open it: trust the failure over the mode bits
    kfd = host.dev_access(KFD_DEV) if compute_possible else None
    gpu.usable_graphics = render == "rw"
    gpu.usable_compute = compute_possible and kfd == "rw" and gpu.usable_graphics
    if gpu.usable_compute:
        return
    container = profile.os.container
    node = gpu.render_node or "a render node (/dev/dri/renderD*)"
    missing = [n for n, a in ((KFD_DEV, kfd if compute_possible else "rw"), (node, render)) if a is None]
    if not compute_possible and gpu.usable_graphics:
        gpu.access_fix = FIX_CONTAINER if container else FIX_NO_KFD
        return  # the probe warns once for every GPU: no KFD topology
    if missing:
        if gpu.render_node is None and KFD_DEV not in missing:
            gpu.access_fix = FIX_NO_RENDER  # the node does not exist at all: no group can help
        else:
            gpu.access_fix = FIX_CONTAINER if container else (
                FIX_NO_KFD if KFD_DEV in missing else "load the amdgpu driver for this GPU")
        what = f"{' and '.join(missing)} missing" if gpu.render_node or KFD_DEV in missing else \
            "the amdgpu driver gives it no render node (/dev/dri/renderD*)"
    else:
        gpu.access_fix = FIX_GROUP_CONTAINER if container else FIX_GROUP
        blocked = [n for n, a in ((KFD_DEV, kfd), (gpu.render_node, render)) if a not in (None, "rw")]
        what = f"no read-write access to {' and '.join(blocked)}"
    uses = "ROCm" if gpu.usable_graphics else "ROCm and Vulkan"
    profile.warn("amd_gpu", f"{describe(gpu)}: {uses} cannot use it here ({what}): {gpu.access_fix}")


def describe(gpu: AmdGpu) -> str:
    """"AMD Radeon 8060S (gfx1151) at 0000:c5:00.0": the gfx target once, and a place that exists."""
    gfx = gpu.gfx or "gfx unknown"
    name = gpu.name if gfx in gpu.name else f"{gpu.name} ({gfx})"
    where = gpu.pci.bus_id or gpu.render_node or (f"KFD node {gpu.kfd_node}" if gpu.kfd_node is not None else None)
    return f"{name} at {where}" if where else name


def _finish(host, profile, gpu: AmdGpu, facts: dict, row: dict | None, compute_possible: bool,
            answers: dict, names: _SystemNames) -> None:
    """Name, memory and access of a GPU, pyamdgpuinfo first, then sysfs and the tables."""
    info = answers.get(gpu.render_node) if gpu.render_node else None
    info = info if isinstance(info, dict) else None
    ok = info is not None and "error" not in info
    name = info.get("name") if ok and isinstance(info.get("name"), str) and info.get("name") else None
    if name is None and gpu.pci.device and gpu.pci.revision:
        name = names.get(gpu.pci.device, gpu.pci.revision)
    if name is not None:
        gpu.name = name
    vram = info.get("vram_size") if ok else None
    gtt = info.get("gtt_size") if ok else None
    gpu.vram_bytes = vram if _count(vram) else facts.get("vram")
    gpu.gtt_bytes = gtt if _count(gtt) else facts.get("gtt")
    used = facts.get("vram_used")
    gpu.vram_used_bytes = used if isinstance(used, int) and gpu.vram_bytes and used <= gpu.vram_bytes else None
    _access(host, profile, gpu, compute_possible, info)


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _node_place(host, props: dict) -> tuple[int | None, str | None]:
    """A KFD node's render minor and PCI address (old kernels print no drm_render_minor: found from the
    PCI device's drm directory)."""
    minor = parse_int(props.get("drm_render_minor"))
    bus_id = None
    domain, loc = parse_int(props.get("domain")), parse_int(props.get("location_id"))
    if loc is not None:
        bus_id = f"{domain or 0:04x}:{loc >> 8:02x}:{(loc >> 3) & 0x1f:02x}.{loc & 7}"
    if (minor is None or minor < 0) and bus_id:  # old kernels: no drm_render_minor
        for entry in host.listdir(f"/sys/bus/pci/devices/{bus_id}/drm"):
            if entry.startswith("renderD") and entry[7:].isdecimal():
                minor = int(entry[7:])
    return minor, bus_id


def _node_gfx(profile, node: str, version: int | None, facts: dict, row, device: str):
    """(gfx, source) of a KFD node: its gfx_target_version, else (a kernel before 4.19) its GC IP version or
    the PCI table, said in a warning."""
    if version:
        return tables.gfx_name(version), "kfd"
    source = "kfd"
    gfx = tables.gfx_from_gc(facts["gc"]) if facts.get("gc") else None
    if gfx is None and row is not None:
        gfx, source = row["gfx"], "pci-table"
    profile.warn(
        "amd_gpu",
        f"KFD node {node}: no gfx_target_version (a kernel older than 4.19?); "
        + (f"gfx {gfx} taken from device id {device} through the "
           + ("GC IP version" if source == "kfd" else "PCI table")
           if gfx else f"device id {device} is not in the PCI table: gfx target unknown"),
    )
    return gfx, source


def _from_kfd(host, profile) -> list[tuple[AmdGpu, dict | None, dict | None]] | None:
    """(GPU, its DRM facts, its PCI table row) of each GPU node of the KFD topology (facts None: a
    node this process may not read); None without a topology."""
    nodes = host.listdir(KFD)
    if not nodes:
        return None
    gpus = []
    pci_of: dict[int, dict] = {}  # unique_id -> DRM facts of the node whose DRM device is the PCI one
    for node in sorted(nodes, key=lambda n: (not n.isdecimal(), int(n) if n.isdecimal() else 0, n)):
        try:
            text = host.read(f"{KFD}/{node}/properties")
        except PermissionError:
            gpus.append((
                AmdGpu(name=f"AMD GPU (KFD node {node}, hidden)", visible=False, source="kfd", gfx=None,
                       usable_compute=False, usable_graphics=False),
                None, None))
            continue
        props = parse_kv(text)
        if not props:
            if text is not None:
                profile.warn("amd_gpu", f"KFD node {node}: properties unreadable or empty; skipped")
            continue
        version = parse_int(props.get("gfx_target_version"))
        device_id = parse_int(props.get("device_id"))
        old_kernel = "gfx_target_version" not in props and bool(device_id)
        if not version and not old_kernel:
            continue  # CPU node
        if version is not None and (version < 0 or version > 999999):
            profile.warn("amd_gpu", f"KFD node {node}: implausible gfx_target_version {version}; skipped")
            continue
        minor, bus_id = _node_place(host, props)
        vendor_id = parse_int(props.get("vendor_id"))
        facts = _drm_facts(host, f"{DRM}/renderD{minor}/device") if minor is not None and minor >= 0 else {}
        uid = parse_int(props.get("unique_id"))
        if uid and facts.get("vendor"):
            pci_of.setdefault(uid, facts)
        elif uid and uid in pci_of:
            # A compute partition (MI300X in CPX mode): its render node sits on a platform device
            # (amdgpu_xcp.N) without PCI attributes, and its location_id has the partition number
            # in the function bits.  The GPU's PCI identity is that of the node sharing its
            # unique_id; its memory is not the whole GPU's, so that stays unknown.
            facts = {**facts, **{k: pci_of[uid].get(k) for k in
                                 ("vendor", "device", "revision", "class", "driver", "bus_id", "gc")}}
        device = facts.get("device") or (f"0x{device_id:04x}" if device_id is not None else "")
        vendor = facts.get("vendor") or (f"0x{vendor_id:04x}" if vendor_id is not None else "0x1002")
        row = tables.amd_pci(device, facts.get("revision")) if device else None
        gfx, source = _node_gfx(profile, node, version, facts, row, device)
        bus_id = facts.get("bus_id") or bus_id
        gpu = AmdGpu(
            name=_name(row, gfx),
            pci=PCI(vendor=vendor, device=device, revision=facts.get("revision"), bus_id=bus_id),
            gfx=gfx,
            gfx_effective=gfx,
            integrated=_integrated(facts.get("gc"), gfx, row),
            vram_bytes=facts.get("vram"),
            source=source,
            driver=facts.get("driver"),
            render_node=f"/dev/dri/renderD{minor}" if minor is not None and minor >= 0 else None,
            cwsr="cwsr_size" in props and "ctl_stack_size" in props,
            unique_id=_uuid_hex(props.get("unique_id")),
            kfd_node=int(node) if node.isdecimal() else None,
        )
        gpus.append((gpu, facts, row))
    return gpus or None


def _from_drm(host, profile) -> list[tuple[AmdGpu, dict, dict | None]]:
    """(GPU, its DRM facts, its PCI table row) of each AMD display or compute device in DRM."""
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
        row = tables.amd_pci(facts["device"], facts["revision"]) if facts["device"] else None
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
        gpu = AmdGpu(
            name=_name(row, gfx),
            pci=PCI(vendor="0x1002", device=facts["device"] or "", revision=facts["revision"], bus_id=facts["bus_id"]),
            gfx=gfx,
            gfx_effective=gfx,
            integrated=_integrated(facts["gc"], gfx, row),
            vram_bytes=facts["vram"],
            source=source,
            driver=facts["driver"],
            render_node=_render_node(host, entry, facts["bus_id"]),
        )
        gpus.append((gpu, facts, row))
    return gpus


def _render_node(host, entry: str, bus_id: str | None) -> str | None:
    if entry.startswith("renderD"):
        return f"/dev/dri/{entry}"
    for name in host.listdir(f"{DRM}/{entry}/device/drm"):
        if name.startswith("renderD") and name[7:].isdecimal():
            return f"/dev/dri/{name}"
    return None


def _is_device_entry(name: str) -> bool:
    for prefix in ("card", "renderD"):
        if name.startswith(prefix) and name[len(prefix):].isdecimal():
            return True
    return False


def probe(host, profile) -> None:
    found = _from_kfd(host, profile)
    kfd = found is not None
    if found is None:
        found = _from_drm(host, profile)
        if found and host.exists("/sys/class/kfd") is False:
            profile.warn(
                "amd_gpu",
                "no KFD topology (/sys/class/kfd): ROCm cannot use these GPUs here "
                "(in a container, pass /dev/kfd and /dev/dri); gfx taken from DRM",
            )
    gpus = [gpu for gpu, _facts, _row in found]
    nodes = [g.render_node for g in gpus if g.render_node]
    answers = {}
    if nodes:
        answer = host.amdgpuinfo(nodes)
        answers = answer.get("gpus") if isinstance(answer.get("gpus"), dict) else {}
    names = _SystemNames(host)
    for i, (gpu, facts, row) in enumerate(found):
        gpu.index = i
        if facts is not None:  # not a hidden KFD node
            _finish(host, profile, gpu, facts, row, kfd, answers, names)

    # visibility: ROCR_VISIBLE_DEVICES selects first, HIP_VISIBLE_DEVICES indexes what is left
    rocr = runtime_env.rocm_visibility(host, profile, gpus)
    # hip_index: the index HIP_VISIBLE_DEVICES selects the GPU by (what a pick's run_env sets, replacing
    # any HIP_VISIBLE_DEVICES of this shell): its place among the GPUs ROCm can open that
    # ROCR_VISIBLE_DEVICES leaves, in KFD order
    hip = [i for i in rocr if gpus[i].usable_compute] if kfd else []
    for n, i in enumerate(hip):
        if gpus[i].visible:
            gpus[i].hip_index = n
    runtime_env.rocm_overrides(host, profile, gpus)
    profile.amd_gpus = gpus


def _uuid_hex(unique_id: str | None) -> str | None:
    n = parse_int(unique_id)
    return f"GPU-{n:016x}" if n else None
