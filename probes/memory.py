"""Memory each device can use: its own (VRAM), and the system memory it can also allocate.

An integrated GPU's VRAM is a carve-out (often 512 MiB on a Strix Halo); ROCm and RADV allocate
the rest from GTT, system memory the amdgpu driver maps for the GPU up to ``mem_info_gtt_total``.
Unified-memory GPUs (GB10, Jetson, Apple silicon) have no VRAM: they allocate system memory up to
a limit (all of it for CUDA on GB10 and Jetson, Metal's working set on a Mac).  Engines see what
``usable`` says; ``free`` is what was not in use when the probe ran, where the driver said.
"""

from __future__ import annotations

from probes import tables
from probes.record import Record

GIB = 1 << 30


class DeviceMemory(Record):
    dedicated: int | None = None  # VRAM of its own
    dedicated_free: int | None = None
    shared: int | None = None  # system memory it can also allocate
    shared_kind: str | None = None  # "GTT" | "unified" | "working set"
    shared_estimated: bool = False  # the limit is our estimate, not a figure the probe read
    usable: int | None = None  # what an engine on this device can allocate in all
    usable_free: int | None = None  # of that, free when the probe ran (None: not said)

    def describe(self) -> str:
        """"0.5 GiB VRAM + 63.2 GiB GTT", "24.0 GiB VRAM (22.1 free)", "96.0 GiB unified"."""
        parts = []
        if self.dedicated:
            free = f" ({self.dedicated_free / GIB:.1f} free)" if self.dedicated_free is not None else ""
            parts.append(f"{self.dedicated / GIB:.1f} GiB VRAM{free}")
        if self.shared:
            parts.append(f"{'~' if self.shared_estimated else ''}{self.shared / GIB:.1f} GiB {self.shared_kind}")
        return " + ".join(parts) or "-"


def amd(g, system_bytes: int | None = None, os_name: str = "linux") -> DeviceMemory:
    vram = g.vram_bytes
    free = vram - g.vram_used_bytes if vram and g.vram_used_bytes is not None else None
    if g.integrated and g.gtt_bytes:
        # the carve-out and GTT add up: llama.cpp's HIP and Vulkan backends both allocate from GTT
        # on an APU, so a 512 MiB carve-out does not cap the model
        return DeviceMemory(vram, free, g.gtt_bytes, "GTT", False, (vram or 0) + g.gtt_bytes, None)
    if g.integrated and os_name == "windows" and system_bytes:
        # Windows gives every GPU "shared GPU memory" of up to half the system memory (WDDM; Task
        # Manager shows it): an estimate, since the probe reads no figure for it
        shared = int(system_bytes * tables.load("memory")["windows_shared"]["fraction"])
        return DeviceMemory(vram, free, shared, "shared", True, (vram or 0) + shared, None)
    return DeviceMemory(vram, free, None, None, False, vram, free)


def nvidia(g) -> DeviceMemory:
    if g.unified:
        return DeviceMemory(None, None, g.memory_bytes, "unified", False, g.memory_bytes, None)
    return DeviceMemory(g.memory_bytes, g.memory_free_bytes, None, None, False, g.memory_bytes,
                        g.memory_free_bytes)


def metal(profile) -> DeviceMemory:
    ws, estimated = profile.metal.working_set_bytes, False
    ram = profile.cpu.memory_bytes
    if not ws and ram:
        ws, estimated = apple_working_set(ram), True
    return DeviceMemory(None, None, ws, "working set", estimated, ws, None)


def apple_working_set(ram: int) -> int:
    """Metal's default working-set limit for a Mac with ``ram`` bytes (tables/memory.json)."""
    for rule in tables.load("memory")["apple_working_set"]["rules"]:
        if rule["up_to_gib"] is None or ram <= rule["up_to_gib"] * GIB:
            return int(ram * rule["fraction"])
    return ram  # pragma: no cover - the last rule has no bound


def cpu(profile) -> DeviceMemory:
    ram = profile.cpu.memory_bytes
    return DeviceMemory(None, None, ram, "system", False, ram, None)


def of(profile, gpu) -> DeviceMemory:
    """The memory of one Profile GPU record (or None: the CPU)."""
    if gpu is None:
        return cpu(profile)
    if hasattr(gpu, "gfx"):
        return amd(gpu, profile.cpu.memory_bytes, profile.os.name)
    if hasattr(gpu, "sm"):
        return nvidia(gpu)
    return DeviceMemory()  # Intel: i915/xe say nothing of memory in sysfs
