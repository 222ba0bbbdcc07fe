"""NVIDIA GPUs: NVML answers (through the Host), else PCI + /proc/driver/nvidia, plus Jetson."""

from __future__ import annotations

from probes import tables
from probes.linux import pci
from probes.profile import PCI, NvidiaGpu
from probes.util import meminfo_total, visible_indices

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
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in cc)):
            cc = None
        name = str(g.get("name") or "NVIDIA GPU")
        mem = g.get("memory_total")
        source = "nvml"
        if not isinstance(mem, int) or isinstance(mem, bool):
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
                driver_version=nv.get("driver_version") if isinstance(nv.get("driver_version"), str) else None,
                cuda_driver_version=nv.get("cuda_driver_version") if isinstance(nv.get("cuda_driver_version"), int) else None,
                source=source,
                pci=PCI(vendor="0x10de", device="", bus_id=bus) if isinstance(bus, str) else None,
            )
        )
        uuids.append(g.get("uuid") if isinstance(g.get("uuid"), str) else None)
    return gpus, uuids


def apply_cuda_visible(host, gpus: list[NvidiaGpu], uuids: list[str | None]) -> None:
    chosen = visible_indices(host.env.get("CUDA_VISIBLE_DEVICES"), len(gpus), uuids)
    if chosen is not None:
        for i, g in enumerate(gpus):
            g.visible = i in chosen


def probe(host, profile) -> None:
    nv = host.nvml()
    gpus: list[NvidiaGpu] = []
    uuids: list[str | None] = []
    if isinstance(nv.get("gpus"), list):
        gpus, uuids = from_nvml(nv, profile, lambda: meminfo_total(host.read("/proc/meminfo")))
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
            gpus.append(
                NvidiaGpu(
                    index=len(gpus),
                    name=name,
                    driver_version=driver,
                    source="pci",
                    pci=PCI(vendor="0x10de", device=d.device or "", revision=d.revision, bus_id=d.bus_id),
                )
            )
            uuids.append(None)
            profile.warn(
                "nvidia",
                f"{name} at {d.bus_id}: {words}; CUDA backends cannot be judged without the driver "
                "(install the NVIDIA driver, then run again)",
            )
        compat = compatible_strings(host)
        board = tables.jetson_board(compat)
        if board is None and host.exists("/etc/nv_tegra_release"):
            board = {"board": "Jetson", "cc": None}
        if board is not None and not gpus:
            cc = board.get("cc")
            gpus.append(
                NvidiaGpu(
                    index=0,
                    name=board["board"],
                    sm=_sm(cc),
                    compute_capability=list(cc) if cc else None,
                    memory_bytes=meminfo_total(host.read("/proc/meminfo")),
                    driver_version=driver,
                    source="jetson",
                )
            )
            uuids.append(None)
            profile.board = board["board"]
        elif not cards:
            profile.warn("nvidia", f"{words[0].upper()}{words[1:]}")
    apply_cuda_visible(host, gpus, uuids)
    profile.nvidia_gpus = gpus
