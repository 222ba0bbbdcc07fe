"""CPU: architecture, brand, flags, features and cores from /proc/cpuinfo; memory from /proc/meminfo."""

from __future__ import annotations

from probes.util import meminfo_total

ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}


# The CPU features that decide which CPU build of an engine runs fast or at all, by the names the
# Linux kernel prints in /proc/cpuinfo ('flags' on x86, 'Features' on arm64).  They are the
# features ggml's CPU variants are built for (llama.cpp ggml/src/ggml-cpu: x86 haswell = AVX2+FMA+
# F16C, skylakex = AVX-512 F/BW/DQ/VL/CD, icelake adds VBMI/VNNI, sapphirerapids adds AVX512_BF16/
# FP16 and AMX; arm64 armv8.2 dotprod = 'asimddp', armv8.6 i8mm, SVE/SVE2, SME).
FEATURES = frozenset({
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512dq", "avx512vl",
    "avx512cd", "avx512vbmi", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8",
    "amx_bf16", "amx_fp16",
    "asimd", "asimdhp", "asimddp", "i8mm", "bf16", "sve", "sve2", "svei8mm", "svebf16", "sme",
})


def features(flags) -> list[str]:
    return sorted(set(flags) & FEATURES)


def detailed(profile) -> None:
    """py-cpuinfo's view of this CPU (slow: over a second; only for ``probe --detailed``): what it
    knows beyond /proc/cpuinfo goes into ``cpu.detailed``; brand, flags and cores stay as read."""
    import cpuinfo

    info = cpuinfo.get_cpu_info()
    cpu = profile.cpu
    out = {"source": f"py-cpuinfo {info.get('cpuinfo_version_string', '')}".strip()}
    for key in ("vendor_id_raw", "brand_raw", "hz_advertised_friendly", "hz_actual_friendly", "arch_string_raw",
                "family", "model", "stepping", "l1_data_cache_size", "l1_instruction_cache_size",
                "l2_cache_size", "l3_cache_size", "count"):
        if info.get(key) not in (None, "", 0):
            out[key] = str(info[key])
    extra = sorted(set(info.get("flags") or []) - set(cpu.flags))
    if extra:
        out["flags_beyond_proc_cpuinfo"] = " ".join(extra)
    cpu.detailed = out
    if not cpu.flags and info.get("flags"):  # Windows, macOS: py-cpuinfo is the only source
        cpu.flags = list(info["flags"])
        cpu.features = features(cpu.flags)
    cpu.brand = cpu.brand or info.get("brand_raw") or ""
    cpu.cores = cpu.cores or info.get("count")


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
        cpu.features = features(cpu.flags)
        cpu.cores = processors or None
    cpu.memory_bytes = meminfo_total(host.read("/proc/meminfo"))
