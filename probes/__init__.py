"""Hardware probes.  ``probe(host)`` runs every probe for the host's OS and returns a Profile.

Each probe is exception-safe: a probe that fails becomes a warning and the others still run.
"""

from __future__ import annotations

import time

from probes.profile import Profile

# A probe slower than this is reported: the whole run should cost milliseconds.
SLOW_PROBE_S = 2.0


def _linux_probes():
    from probes.linux import amd, board, cpu, intel, libc, npu, nvidia, os_, vulkan

    return [("os", os_.probe), ("libc", libc.probe), ("cpu", cpu.probe), ("amd_gpu", amd.probe),
            ("nvidia", nvidia.probe), ("intel_gpu", intel.probe), ("board", board.probe),
            ("npu", npu.probe), ("vulkan", vulkan.probe)]


def probe(host, detailed: bool = False) -> Profile:
    profile = Profile()
    system = host.system
    if system == "Linux":
        steps = _linux_probes()
    elif system == "Windows":
        from probes import windows

        steps = windows.PROBES
    elif system == "Darwin":
        from probes import macos

        steps = macos.PROBES
    else:
        from probes.linux import cpu

        profile.os.name = system.lower()
        profile.os.version = host.release
        profile.warn("os", f"unsupported operating system {system!r}: only the CPU is probed")
        steps = [("cpu", cpu.probe)]
    from probes import runtime_env

    _run("device_env", runtime_env.record, host, profile)
    for name, fn in steps:
        _run(name, fn, host, profile)
    _run("executables", _executables, host, profile)
    from probes import engines

    _run("engines", engines.probe, host, profile)
    if detailed:
        _run("cpu_detailed", _cpuinfo_detailed, host, profile)
    return profile


def _run(name, fn, host, profile) -> None:
    t0 = time.perf_counter()
    try:
        fn(host, profile)
    except Exception as e:  # a broken probe is a warning, never a traceback
        profile.warn(name, f"probe failed: {type(e).__name__}: {e}")
    dt = time.perf_counter() - t0
    if dt > SLOW_PROBE_S:
        profile.warn(name, f"probe took {dt:.1f} s")


def _executables(host, profile) -> None:
    from probes.host import EXECUTABLES

    for exe in EXECUTABLES:
        path = host.which(exe)
        if path:
            profile.executables[exe] = path


def _cpuinfo_detailed(host, profile) -> None:
    """py-cpuinfo: slow (over a second), so only behind ``probe --detailed`` on the live host."""
    if host.is_capture:
        profile.warn("cpu_detailed", "--detailed reads the live CPU; ignored for a capture")
        return
    from probes.linux.cpu import detailed

    detailed(profile)
