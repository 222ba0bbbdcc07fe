"""NVIDIA GPUs: NVML answers (through the Host), else PCI + /proc/driver/nvidia, plus Jetson.

An NVIDIA GPU on the PCI bus that NVML does not list (the open kernel module does not drive cards
older than Turing) is reported with a warning, as one the driver cannot use.  Without NVML, CUDA
needs ``/dev/nvidiactl`` and the GPU's ``/dev/nvidiaN`` read-write (``Host.dev_access``).  A Jetson
is named from the device tree's SoC (``nvidia,tegra234``), else from ``/etc/nv_tegra_release``.
"""

from __future__ import annotations

from probes import tables
from probes.linux import pci
from probes.profile import NO_NVIDIA_DRIVER, PCI, NvidiaGpu
from probes.util import meminfo_total

# What an NVML error class means, in words a user acts on.
NVML_ERRORS = {
    "LibraryNotFound": "no NVIDIA driver is installed (NVML library not found)",
    "DriverNotLoaded": "the NVIDIA driver is installed but its kernel module is not loaded",
    "NoPermission": "no permission to query the NVIDIA driver",
    "LibRmVersionMismatch": "the NVIDIA driver was upgraded without a reboot (library and kernel module differ)",
    "GpuIsLost": "an NVIDIA GPU has fallen off the bus",
    "FunctionNotFound": "the NVIDIA driver is too old for this query",
    "Timeout": "NVML did not answer in time",
    "NotSupported": "NVML does not support this query here",
    "Uninitialized": "NVML could not be initialised",
    "Unknown": "NVML failed with an unknown error",
}


def describe_nvml_error(name: str) -> str:
    return NVML_ERRORS.get(name, f"NVML failed ({name})")


def compatible_strings(host) -> list[str]:
    try:
        text = host.read("/proc/device-tree/compatible")
    except PermissionError:
        return []
    if not text:
        return []
    return [s for s in text.replace("\x00", "\n").splitlines() if s]


def _driver_version_from_proc(host) -> str | None:
    text = host.read("/proc/driver/nvidia/version") or ""
    for line in text.splitlines():
        if "Kernel Module" in line:
            # "Kernel Module  570.86.15  ..." or, the open module, "Kernel Module for x86_64  570.86.15"
            parts = [p for p in line.split("Kernel Module")[1].split() if p[:1].isdigit()]
            if parts:
                return parts[0]
    return None


def _sm(cc) -> str | None:
    return f"sm_{cc[0]}{cc[1]}" if cc else None


def from_nvml(nv: dict, profile, system_memory, memory_source: str = "/proc/meminfo",
              source_suffix: str = "meminfo") -> tuple[list[NvidiaGpu], list[str | None]]:
    """GPUs from NVML's answers (capture.json ``nvml`` with a ``gpus`` list), shared by the Linux
    and Windows probes.  ``system_memory()`` gives the memory budget of a GPU whose memory query
    is not supported (GB10: unified memory)."""
    gpus: list[NvidiaGpu] = []
    uuids: list[str | None] = []
    mem_fallback = None
    for i, g in enumerate(nv["gpus"]):
        if not isinstance(g, dict):
            profile.warn("nvidia", f"nvml.gpus[{i}] is not an object; skipped")
            continue
        cc = g.get("compute_capability")
        if not (isinstance(cc, list) and len(cc) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in cc)
                and 0 < cc[0] < 100 and cc[1] < 10):  # sm_<major><one minor digit>: anything else is garbage
            cc = None
        name = str(g.get("name") or "NVIDIA GPU")
        mem = g.get("memory_total")
        source = "nvml"
        free = g.get("memory_free")
        free = free if isinstance(free, int) and not isinstance(free, bool) and 0 <= free <= (mem or 0) else None
        unified = False
        if not isinstance(mem, int) or isinstance(mem, bool) or mem < 0:
            unified = True
            if mem_fallback is None:
                mem_fallback = system_memory()
            mem = mem_fallback
            source = f"nvml+{source_suffix}"
            profile.warn(
                "nvidia", f"{name}: NVML reports no memory size (unified memory); using system memory from {memory_source}"
            )
        bus = g.get("pci_bus_id")
        gpus.append(
            NvidiaGpu(
                index=len(gpus),
                name=name,
                sm=_sm(cc),
                compute_capability=list(cc) if cc else None,
                memory_bytes=mem,
                memory_free_bytes=free,
                unified=unified,
                driver_version=nv.get("driver_version") if isinstance(nv.get("driver_version"), str) else None,
                cuda_driver_version=nv.get("cuda_driver_version") if isinstance(nv.get("cuda_driver_version"), int) else None,
                source=source,
                pci=PCI(vendor="0x10de", device="", bus_id=bus) if isinstance(bus, str) else None,
                uuid=g.get("uuid") if isinstance(g.get("uuid"), str) else None,
            )
        )
        uuids.append(gpus[-1].uuid)
    return gpus, uuids


def apply_cuda_visible(host, gpus: list[NvidiaGpu], uuids: list[str | None], profile) -> None:
    """``visible`` and ``cuda_index`` after CUDA_VISIBLE_DEVICES, in CUDA's own order
    (probes/runtime_env.py)."""
    from probes import runtime_env

    runtime_env.cuda_visibility(host, profile, gpus, uuids)


FIX_CONTAINER = "start the container with --gpus all (NVIDIA Container Toolkit)"
FIX_GROUP = "add this user to the video group"


def _bus(bus_id: str | None) -> str:
    """NVML's "00000000:01:00.0" and sysfs's "0000:01:00.0" to one form."""
    return (bus_id or "").lower()[-12:]


def _device_minor(host, bus_id: str) -> int | None:
    text = host.read(f"/proc/driver/nvidia/gpus/{bus_id}/information") or ""
    for line in text.splitlines():
        if line.startswith("Device Minor:"):
            try:
                return int(line.split(":", 1)[1])
            except ValueError:
                return None
    return None


def _node_access(host, profile, gpu: NvidiaGpu, minor: int | None) -> None:
    """Without NVML answering: CUDA needs /dev/nvidiactl and /dev/nvidiaN read-write."""
    nodes = ["/dev/nvidiactl"] + ([f"/dev/nvidia{minor}"] if minor is not None else [])
    access = {n: host.dev_access(n) for n in nodes}
    if all(a == "rw" for a in access.values()):
        return
    gpu.usable = False
    missing = [n for n, a in access.items() if a is None]
    if missing:
        gpu.access_fix = FIX_CONTAINER if profile.os.container else "load the NVIDIA driver (sudo modprobe nvidia)"
        what = f"{' and '.join(missing)} missing"
    else:
        gpu.access_fix = FIX_CONTAINER if profile.os.container else FIX_GROUP
        what = f"no read-write access to {' and '.join(n for n, a in access.items() if a != 'rw')}"
    profile.warn("nvidia", f"{gpu.name} at {gpu.pci.bus_id if gpu.pci else '?'}: CUDA cannot use it here ({what}): "
                           f"{gpu.access_fix}")


def _unlisted(host, profile, gpus: list[NvidiaGpu], uuids: list) -> None:
    """NVIDIA display functions on the PCI bus that NVML does not list."""
    listed = {_bus(g.pci.bus_id) for g in gpus if g.pci and g.pci.bus_id}
    for d in pci.scan(host):
        if d.vendor != "0x10de" or not d.is_display or _bus(d.bus_id) in listed:
            continue
        name = tables.nvidia_pci_name(d.device or "") or f"NVIDIA GPU [10de:{(d.device or '????')[2:]}]"
        cc = tables.nvidia_cc_from_name(name)
        gpus.append(NvidiaGpu(
            index=len(gpus), name=name, sm=_sm(cc), compute_capability=list(cc) if cc else None,
            source="pci", pci=PCI(vendor="0x10de", device=d.device or "", revision=d.revision, bus_id=d.bus_id),
            driver_loaded=False, usable=False,
            access_fix="install an NVIDIA driver that supports this GPU (the open kernel module drives Turing and newer only)",
        ))
        uuids.append(None)
        profile.warn("nvidia", f"{name} at {d.bus_id} is on the PCI bus but NVML does not list it: the loaded "
                               f"NVIDIA driver does not drive it (driver '{d.driver or 'none'}'), so CUDA cannot use it")


def jetson_from_release(text: str | None) -> dict | None:
    """/etc/nv_tegra_release: "# R36 (release), REVISION: 4.3, GCID: ..., BOARD: generic, ..." ->
    the table row for its L4T release or BOARD, or a Jetson of unknown SoC."""
    if not text:
        return None
    first = text.strip().splitlines()[0] if text.strip() else ""
    release = first.lstrip("# ").split(" ", 1)[0]
    board = ""
    for part in first.split(","):
        if part.strip().startswith("BOARD:"):
            board = part.split(":", 1)[1].strip()
    for row in tables.load("nvidia")["jetson_release"]:
        if row.get("release") == release or (row.get("board_field") and row["board_field"] == board):
            return row
    return {"board": "Jetson", "cc": None}


def l4t_cuda_version(text: str | None) -> int | None:
    """The CUDA version the Jetson driver runs, NVML-style (12060 = 12.6), from /etc/nv_tegra_release
    ("# R36 (release), REVISION: 4.3, ...") and the L4T table; None when unknown."""
    first = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    release = first.lstrip("# ").split(" ", 1)[0]
    revision = None
    for part in first.split(","):
        if part.strip().startswith("REVISION:"):
            revision = part.split(":", 1)[1].strip()
    cuda = tables.l4t_cuda(release, revision)
    if not cuda:
        return None
    major, minor = (int(x) for x in cuda.split(".")[:2])
    return major * 1000 + minor * 10


def _pci_words(error: str, words: str, module: str | None, bound: str | None, loaded: bool) -> str:
    """What a card seen on PCI alone (NVML did not answer) can and cannot be judged by, for this card:
    ``module`` is the loaded kernel module's version, ``bound`` the driver the card is bound to."""
    if loaded:  # the card is on the loaded nvidia module: only NVML is missing or failing
        if error == "LibraryNotFound":
            words = f"the NVIDIA kernel driver {module} is loaded but its NVML library (libnvidia-ml.so.1) is not found"
        return f"{words}; CUDA backends cannot be judged until NVML answers (its compute capability is unknown)"
    if module is not None and bound:  # vfio-pci (passed through to a VM), nouveau, ...
        return (f"bound to {bound}, not to the NVIDIA driver {module}; CUDA backends cannot use it (bind it to "
                "nvidia, then run again)")
    return f"{words}; CUDA backends cannot be judged without the driver (install the NVIDIA driver, then run again)"


def probe(host, profile) -> None:
    nv = host.nvml()
    gpus: list[NvidiaGpu] = []
    uuids: list[str | None] = []
    if isinstance(nv.get("gpus"), list):
        gpus, uuids = from_nvml(nv, profile, lambda: meminfo_total(host.read("/proc/meminfo")))
        _unlisted(host, profile, gpus, uuids)
    else:
        error = str(nv.get("error") or "Unknown")
        words = describe_nvml_error(error)
        cards = [d for d in pci.scan(host) if d.vendor == "0x10de" and d.is_display]
        driver = _driver_version_from_proc(host)
        for d in cards:
            name = None
            info = host.read(f"/proc/driver/nvidia/gpus/{d.bus_id}/information")
            for line in (info or "").splitlines():
                if line.startswith("Model:"):
                    name = line.split(":", 1)[1].strip()
            name = name or tables.nvidia_pci_name(d.device or "") or f"NVIDIA GPU [10de:{(d.device or '????')[2:]}]"
            gpu = NvidiaGpu(
                index=len(gpus),
                name=name,
                driver_version=driver,
                source="pci",
                pci=PCI(vendor="0x10de", device=d.device or "", revision=d.revision, bus_id=d.bus_id),
                driver_loaded=driver is not None and d.driver == "nvidia",
            )
            gpus.append(gpu)
            uuids.append(None)
            if gpu.driver_loaded:
                _node_access(host, profile, gpu, _device_minor(host, d.bus_id))
            else:
                gpu.usable = False
                gpu.access_fix = ("bind it to nvidia, then run again" if driver is not None and d.driver else
                                  "install the NVIDIA driver, then run again")
            profile.warn("nvidia", f"{name} at {d.bus_id}: {_pci_words(error, words, driver, d.driver, gpu.driver_loaded)}")
        compat = compatible_strings(host)
        board = tables.jetson_board(compat)
        try:
            release = host.read("/etc/nv_tegra_release")
        except PermissionError:
            release = None
        if board is None:
            board = jetson_from_release(release)
            if board is not None:
                profile.warn("nvidia", f"Jetson named from /etc/nv_tegra_release, not the device tree: {board['board']}"
                             + ("" if board.get("cc") else " (SoC unknown, so CUDA backends cannot be judged)"))
        if board is not None and not gpus:
            cc = board.get("cc")
            gpus.append(
                NvidiaGpu(
                    index=0,
                    name=board["board"],
                    sm=_sm(cc),
                    compute_capability=list(cc) if cc else None,
                    memory_bytes=meminfo_total(host.read("/proc/meminfo")),
                    unified=True,  # Jetson's GPU shares the SoC's memory
                    driver_version=driver,
                    cuda_driver_version=l4t_cuda_version(release),
                    source="jetson",
                )
            )
            uuids.append(None)
            profile.board = board["board"]
        elif not cards:
            profile.warn("nvidia", f"{words[0].upper()}{words[1:]}",
                         NO_NVIDIA_DRIVER if error == "LibraryNotFound" else None)
    apply_cuda_visible(host, gpus, uuids, profile)
    profile.nvidia_gpus = gpus
