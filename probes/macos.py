"""macOS probes.  ``read_live()`` is the thin adapter to the machine (``sysctlbyname`` and Metal's
``MTLCreateSystemDefaultDevice`` through ctypes, no subprocess); what it returns is exactly
capture.json's ``"macos"`` section (docs/captures.md).  The probes in ``PROBES`` read only that
answer (plus the Vulkan loader through the Host), so a Mac capture replays on Linux.

Apple Silicon is ``hw.optional.arm64 == 1``, which stays true under Rosetta, where
``sysctl.proc_translated == 1`` says the Python process itself is translated.  ``metal.available``
means an Apple Silicon GPU: the macOS builds in the catalogs are arm64-only, so an Intel Mac reports
it false with a note that says why.
"""

from __future__ import annotations

from probes.linux.cpu import normalize_arch
from probes.section import Section, section

STRING_NAMES = ("machdep.cpu.brand_string", "hw.model", "kern.osproductversion", "kern.osversion", "kern.osrelease")
INT_NAMES = ("hw.optional.arm64", "sysctl.proc_translated", "hw.memsize", "hw.ncpu", "hw.physicalcpu",
             "hw.logicalcpu", "iogpu.wired_limit_mb")  # the last: a user's raise of Metal's working set (0: default)

INTEL_NOTE = ("Intel Mac: Metal backends for macOS are built for Apple Silicon (arm64) GPUs only, "
              "and this Mac has none")


def _section(host, profile, probe: str) -> Section:
    return section(host, "macos", profile, probe)


def _flag(s: Section, name: str) -> bool | None:
    """A 0/1 sysctl: True, False, or None when the name does not exist (ENOENT) or is garbage."""
    v = s.get("int", "sysctl", name)
    return None if v is None else v == 1


def apple_silicon(s: Section, host) -> bool:
    arm = _flag(s, "hw.optional.arm64")
    if arm is not None:
        return arm
    return normalize_arch(host.machine) == "arm64"


def probe_os(host, profile) -> None:
    s = _section(host, profile, "os")
    p = profile.os
    p.name = "macos"
    for err in s.get("list", "errors") or []:
        profile.warn("os", f"reading macOS facts: {err}")
    version = s.get("str", "mac_ver") or s.get("str", "sysctl", "kern.osproductversion") or ""
    if not version:
        profile.warn("os", "macOS version unknown (no platform.mac_ver or kern.osproductversion answer)")
    p.version = version or host.release
    p.build = s.get("str", "sysctl", "kern.osversion")
    p.distro.id = "macos"
    p.distro.version = version.split(".")[0]  # the release people name ("macos 14"), like "windows 11"
    p.distro.like = ""


def probe_cpu(host, profile) -> None:
    s = _section(host, profile, "cpu")
    cpu = profile.cpu
    arm = apple_silicon(s, host)
    process = normalize_arch(host.machine)
    cpu.arch = "arm64" if arm else process
    translated = _flag(s, "sysctl.proc_translated")
    cpu.emulated = bool(translated) or (arm and process != "arm64")
    if cpu.emulated:
        profile.warn("cpu", f"Python runs translated by Rosetta 2 ({process} Python on an Apple Silicon Mac): "
                            "backends are judged for arm64 (install an arm64 Python to run natively)")
    brand = s.get("str", "sysctl", "machdep.cpu.brand_string")
    cpu.brand = brand.strip() if brand else ""
    cpu.cores = s.get("int", "sysctl", "hw.ncpu") or s.get("int", "sysctl", "hw.logicalcpu") or None
    cpu.memory_bytes = s.get("int", "sysctl", "hw.memsize") or None  # unified memory: the GPU's budget too


def probe_metal(host, profile) -> None:
    s = _section(host, profile, "metal")
    metal = profile.metal
    if not apple_silicon(s, host):
        metal.available = False
        metal.note = INTEL_NOTE
        return
    device = s.at("metal", "default_device")
    if device is not None and not isinstance(device, bool):
        s._bad(("metal", "default_device"), device, "true or false")
        device = None
    brand = (s.get("str", "sysctl", "machdep.cpu.brand_string") or "").strip()
    # under Rosetta the brand string is a virtual CPU's ("VirtualApple @ 2.50GHz processor")
    model = s.get("str", "sysctl", "hw.model")
    metal.chip = brand if brand.startswith("Apple ") else (f"Apple Silicon ({model})" if model else "Apple Silicon")
    if device is False:
        metal.available = False
        metal.note = "Metal reports no GPU device (a virtual machine without GPU access?)"
        profile.warn("metal", f"Apple Silicon Mac ({metal.chip}) but MTLCreateSystemDefaultDevice returned no device")
        return
    metal.available = True
    metal.note = None
    ws = s.at("metal", "recommended_max_working_set")
    wired = s.get("int", "sysctl", "iogpu.wired_limit_mb")
    if isinstance(ws, int) and not isinstance(ws, bool) and ws > 0:
        metal.working_set_bytes = ws
    elif wired:
        metal.working_set_bytes = wired << 20


def probe_vulkan(host, profile) -> None:
    profile.vulkan.loader = host.vulkan_loader()  # MoltenVK
    profile.vulkan.gpu_drivers = ["MoltenVK"] if profile.vulkan.loader else []


PROBES = [("os", probe_os), ("cpu", probe_cpu), ("metal", probe_metal), ("vulkan", probe_vulkan)]


# -----------------------------------------------------------------------------------------------
# The live adapter (macOS only)


def read_live() -> dict:
    """Read this Mac into the shape of capture.json ``"macos"``.  A sysctl name that does not exist
    here (``sysctl.proc_translated`` on an Intel Mac) is left out of ``sysctl``."""
    import ctypes
    import platform

    out: dict = {"mac_ver": platform.mac_ver()[0]}
    errors: list[str] = []
    values: dict = {}
    try:
        libc = ctypes.CDLL("/usr/lib/libSystem.B.dylib", use_errno=True)
        fn = libc.sysctlbyname
        fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p,
                       ctypes.c_size_t]
        fn.restype = ctypes.c_int
        for name in STRING_NAMES + INT_NAMES:
            size = ctypes.c_size_t(0)
            if fn(name.encode(), None, ctypes.byref(size), None, 0) != 0:
                continue  # ENOENT: not on this machine
            buf = ctypes.create_string_buffer(max(size.value, 1))
            if fn(name.encode(), buf, ctypes.byref(size), None, 0) != 0:
                continue
            raw = buf.raw[: size.value]
            if name in STRING_NAMES:
                values[name] = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
            else:
                values[name] = int.from_bytes(raw, "little", signed=False)
    except Exception as e:  # a failed read is data
        errors.append(f"sysctl: {type(e).__name__}: {e}")
    out["sysctl"] = values
    try:
        metal = ctypes.CDLL("/System/Library/Frameworks/Metal.framework/Metal")
        create = metal.MTLCreateSystemDefaultDevice
        create.restype = ctypes.c_void_p
        create.argtypes = []
        device = create()
        out["metal"] = {"default_device": bool(device)}
        if device:
            out["metal"]["recommended_max_working_set"] = _working_set(device)
    except Exception as e:
        errors.append(f"metal: {type(e).__name__}: {e}")
    if errors:
        out["errors"] = errors
    return out


def _working_set(device) -> int | None:
    """[MTLDevice recommendedMaxWorkingSetSize] through the Objective-C runtime (no PyObjC)."""
    import ctypes

    try:
        objc = ctypes.CDLL("/usr/lib/libobjc.A.dylib")
        objc.sel_registerName.restype = ctypes.c_void_p
        objc.sel_registerName.argtypes = [ctypes.c_char_p]
        send = objc.objc_msgSend
        send.restype = ctypes.c_uint64
        send.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        return int(send(device, objc.sel_registerName(b"recommendedMaxWorkingSetSize"))) or None
    except Exception:
        return None
