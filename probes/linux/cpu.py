"""CPU: architecture, brand, flags and cores from /proc/cpuinfo; memory from /proc/meminfo."""

from __future__ import annotations

from probes.util import meminfo_total

ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}


def normalize_arch(machine: str) -> str:
    return ARCH.get((machine or "").lower(), (machine or "").lower() or "unknown")


def probe(host, profile) -> None:
    cpu = profile.cpu
    cpu.arch = normalize_arch(host.machine)
    text = host.read("/proc/cpuinfo")
    if text is None:
        profile.warn("cpu", "/proc/cpuinfo is missing: CPU brand and flags unknown")
    else:
        processors = 0
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if not sep:
                continue
            key = key.strip()
            value = value.strip()
            if key == "processor":
                processors += 1
            elif key in ("model name", "Model", "Hardware") and not cpu.brand:
                cpu.brand = value
            elif key in ("flags", "Features") and not cpu.flags:
                cpu.flags = value.split()
        cpu.cores = processors or None
    cpu.memory_bytes = meminfo_total(host.read("/proc/meminfo"))
