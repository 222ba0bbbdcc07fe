"""Windows probes.  ``read_live()`` is the thin adapter to the machine (``winreg`` and ``ctypes``
only: no PowerShell, no WMI process); what it returns is exactly capture.json's ``"windows"``
section (docs/captures.md).  The probes in ``PROBES`` read only that answer (plus NVML, the Vulkan
loader and the environment through the Host), so a Windows capture replays on Linux.

* OS: ``platform.win32_ver`` and ``HKLM\\SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion``.
* CPU: the machine's architecture from ``IsWow64Process2`` (an x64 Python on Windows on ARM is
  emulated and must not make the machine x86_64); brand from ``CentralProcessor\\0``.
* GPUs: the display-adapter class keys; AMD gfx target and APU flag from the PCI-id table (never
  from marketing names), NVIDIA from NVML, else the name table.
* NPU: ``Enum\\PCI\\VEN_1022&DEV_17F0...`` keys; whether a driver is installed.
* Vulkan: ``vulkan-1.dll`` (the Host) and the ICD manifests the loader would read.
"""

from __future__ import annotations

import re

from probes import tables
from probes.linux.cpu import normalize_arch
from probes.linux.vulkan import CPU_ICDS
from probes.profile import PCI, AmdGpu, IntelGpu, NvidiaGpu, Npu
from probes.section import Section, section
from probes import runtime_env

CLASS_KEY = r"SYSTEM\CurrentControlSet\Control\Class"
ENUM_PCI = r"SYSTEM\CurrentControlSet\Enum\PCI"
CURRENT_VERSION = r"SOFTWARE\Microsoft\Windows NT\CurrentVersion"
PROCESSOR = r"HARDWARE\DESCRIPTION\System\CentralProcessor\0"
KHRONOS_DRIVERS = r"SOFTWARE\Khronos\Vulkan\Drivers"

ADAPTER_VALUES = ("MatchingDeviceId", "DriverDesc", "DriverVersion", "ProviderName", "DriverDate",
                  "HardwareInformation.qwMemorySize", "HardwareInformation.MemorySize", "VulkanDriverName")
ENUM_VALUES = ("DeviceDesc", "FriendlyName", "Driver", "Service", "ClassGUID", "Class", "Mfg",
               "LocationInformation", "HardwareID", "ConfigFlags")

_PCI_ID = re.compile(r"ven_([0-9a-f]{4})&dev_([0-9a-f]{4})(?:&subsys_([0-9a-f]{8}))?(?:&rev_([0-9a-f]{2}))?", re.I)
_LOCATION = re.compile(r"PCI bus (\d+), device (\d+), function (\d+)", re.I)

AMD_DRIVER_FIX = "Install AMD's graphics driver (AMD Software: Adrenalin Edition or PRO Edition)"
NVIDIA_DRIVER_FIX = "Install the NVIDIA driver"
INTEL_DRIVER_FIX = "install Intel's graphics driver"
NPU_DRIVER_FIX = ("install AMD's NPU driver (with Ryzen AI Software); Device Manager then lists the "
                  "device as 'NPU Compute Accelerator Device'")


def _section(host, profile, probe: str) -> Section:
    return section(host, "windows", profile, probe)


def parse_pci_id(text) -> dict | None:
    """``pci\\ven_1002&dev_744c&rev_c8`` (MatchingDeviceId) or an Enum key name
    ``VEN_1022&DEV_17F0&SUBSYS_8EF8103C&REV_10`` -> {vendor, device, subsys, revision} as 0x-hex."""
    if not isinstance(text, str):
        return None
    m = _PCI_ID.search(text)
    if m is None:
        return None
    ven, dev, sub, rev = (g.lower() if g else None for g in m.groups())
    return {"vendor": "0x" + ven, "device": "0x" + dev, "subsys": sub, "revision": "0x" + rev if rev else None}


def _desc(value) -> str | None:
    """Registry device descriptions carry an INF reference: ``@oem12.inf,%npu.devicedesc%;NPU
    Compute Accelerator Device`` -> the text after the last ';'."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.rsplit(";", 1)[-1].strip() or None


def _bus_id(location) -> str | None:
    m = _LOCATION.search(location) if isinstance(location, str) else None
    if m is None:
        return None
    bus, dev, fn = (int(x) for x in m.groups())
    return f"0000:{bus:02x}:{dev:02x}.{fn}"


# -----------------------------------------------------------------------------------------------
# OS and CPU


def probe_os(host, profile) -> None:
    s = _section(host, profile, "os")
    p = profile.os
    p.name = "windows"
    for err in s.get("list", "errors") or []:
        profile.warn("os", f"reading Windows facts: {err}")
    version = s.get("str", "win32_ver", "version") or ""
    build = s.get("str", "current_version", "CurrentBuildNumber") or s.get("str", "current_version", "CurrentBuild")
    if not build and version.count(".") >= 2:
        build = version.split(".")[2]
    if build and not build.isdecimal():
        profile.warn("os", f"windows.current_version.CurrentBuildNumber {build!r} is not a number; ignored")
        build = None
    p.version = version or (f"10.0.{build}" if build else host.release)
    p.build = build or None
    p.distro.id = "windows"
    if build:
        p.distro.version = "11" if int(build) >= tables.load("windows")["windows11_first_build"] else "10"
    else:
        p.distro.version = s.get("str", "win32_ver", "release") or host.release or ""
        profile.warn("os", "Windows build number unknown (no CurrentBuildNumber in the registry answer)")
    p.distro.like = ""


def _machine_arch(code) -> str | None:
    return tables.load("windows")["image_file_machine"].get(f"0x{code:04x}")


def probe_cpu(host, profile) -> None:
    s = _section(host, profile, "cpu")
    cpu = profile.cpu
    process = normalize_arch(host.machine)  # platform.machine(): the process's view
    native = None
    native_code = s.get("int", "is_wow64_process2", "native_machine")
    process_code = s.get("int", "is_wow64_process2", "process_machine")
    if native_code is not None:
        native = _machine_arch(native_code)
        if native is None:
            profile.warn("cpu", f"IsWow64Process2 reports an unknown machine type 0x{native_code:04x}")
        if process_code:  # a WOW64 process (x86 on x64/ARM64): its own machine type
            process = _machine_arch(process_code) or process
    else:
        wow = host.env.get("PROCESSOR_ARCHITEW6432")
        if wow:
            native = normalize_arch(wow)
        profile.warn("cpu", "IsWow64Process2 did not answer (Windows older than 10 version 1709?): the "
                            "architecture is the Python process's, which may be emulated")
    cpu.arch = native or process
    cpu.emulated = bool(native and process and native != process)
    if cpu.emulated:
        profile.warn("cpu", f"Python runs emulated: this is an {process} Python on an {native} machine; "
                            f"backends are judged for {native} (install an {native} Python to run natively)")
    brand = s.get("str", "processor", "ProcessorNameString")
    cpu.brand = brand.strip() if brand else ""
    cores = s.get("int", "cpu_count")
    cpu.cores = cores or None
    cpu.memory_bytes = s.get("int", "memory_bytes") or None


# -----------------------------------------------------------------------------------------------
# GPUs


def _adapters(s: Section, pci_only: bool = True) -> list[tuple[str, dict, dict | None]]:
    """(subkey, values, parsed PCI id) of every present (PCI) display adapter, in subkey order."""
    adapters = s.get("dict", "display_adapters") or {}
    present = s.get("list", "present_drivers")
    display = tables.load("windows")["display_class"]
    out = []
    for key in sorted(adapters):
        values = adapters[key]
        if not isinstance(values, dict):
            s._bad(("display_adapters", key), values, "an object")
            continue
        if present is not None and f"{display}\\{key}".lower() not in {str(x).lower() for x in present}:
            continue  # a driver key left behind by a device that is gone
        ids = parse_pci_id(values.get("MatchingDeviceId"))
        if ids is None and pci_only:
            continue  # not a PCI device (Basic Display Adapter, ACPI GPUs of Arm SoCs, remote display)
        out.append((key, values, ids))
    return out


def _driverless(s: Section, vendor: str) -> list[tuple[dict, str, str | None]]:
    """PCI display devices of ``vendor`` that are present but run without their vendor's driver
    (Windows shows them as "Microsoft Basic Display Adapter"), from ``display_enum``: (PCI ids,
    bus id, what Windows calls the device).  A device whose ``Driver`` reference leads to an
    adapter key with the vendor's own PCI id is driven, and counted by ``_adapters`` instead."""
    adapters = s.get("dict", "display_adapters") or {}
    display = tables.load("windows")["display_class"].lower()
    driven = set()
    for key, values in adapters.items():
        if isinstance(values, dict) and parse_pci_id(values.get("MatchingDeviceId")) is not None:
            driven.add(f"{display}\\{key}".lower())
    out = []
    enum = s.get("dict", "display_enum") or {}
    for hwkey in sorted(enum):
        ids = parse_pci_id(hwkey)
        if ids is None or ids["vendor"] != vendor:
            continue
        for inst in sorted(s.get("dict", "display_enum", hwkey) or {}):
            values = s.get("dict", "display_enum", hwkey, inst)
            if values is None or values.get("present") is False:
                continue
            driver = s.get("str", "display_enum", hwkey, inst, "Driver")
            if driver and driver.lower() in driven:
                continue
            desc = _desc(values.get("FriendlyName")) or _desc(values.get("DeviceDesc"))
            out.append((ids, _bus_id(values.get("LocationInformation")), desc))
    return out


def _no_driver_words(desc: str | None) -> str:
    return f"runs without its driver (Windows uses '{desc or 'Microsoft Basic Display Adapter'}')"


def _memory(s: Section, key: str) -> int | None:
    """VRAM: ``HardwareInformation.qwMemorySize`` (QWORD), else the older 4-byte
    ``HardwareInformation.MemorySize`` (capped at 4 GB).  Drivers write either as an integer or as
    REG_BINARY, recorded as ``{"binary": "<little-endian hex>"}``."""
    for name in ("HardwareInformation.qwMemorySize", "HardwareInformation.MemorySize"):
        raw = s.at("display_adapters", key, name)
        if raw is None:
            continue
        if isinstance(raw, dict) and isinstance(raw.get("binary"), str):
            try:
                value = int.from_bytes(bytes.fromhex(raw["binary"]), "little")
            except ValueError:
                value = None
        else:
            value = s.get("int", "display_adapters", key, name)
        if value and value > 0:
            return value
    return None


def probe_amd(host, profile) -> None:
    s = _section(host, profile, "amd_gpu")
    gpus = []
    for key, values, ids in _adapters(s):
        if ids["vendor"] != "0x1002":
            continue
        row = tables.amd_pci(ids["device"], ids["revision"])
        gfx = row["gfx"] if row else None
        desc = s.get("str", "display_adapters", key, "DriverDesc")
        name = desc or (row["name"] if row else f"AMD GPU [1002:{ids['device'][2:]}]")
        if row is None:
            profile.warn("amd_gpu", f"{name} (PCI 1002:{ids['device'][2:]}): gfx target unknown "
                                    "(device id not in the PCI table)")
        gpus.append(AmdGpu(
            index=len(gpus),
            name=name,
            pci=PCI(vendor="0x1002", device=ids["device"], revision=ids["revision"]),
            gfx=gfx,
            gfx_effective=gfx,
            integrated=bool(row["apu"]) if row else (bool(gfx) and tables.gfx_is_apu(gfx)),
            vram_bytes=_memory(s, key),
            source="registry+pci-table" if row else "registry",
            driver=s.get("str", "display_adapters", key, "DriverVersion"),
        ))
    for ids, bus_id, desc in _driverless(s, "0x1002"):
        row = tables.amd_pci(ids["device"], ids["revision"])
        gfx = row["gfx"] if row else None
        name = row["name"] if row else f"AMD GPU [1002:{ids['device'][2:]}]"
        gpus.append(AmdGpu(
            index=len(gpus), name=name,
            pci=PCI(vendor="0x1002", device=ids["device"], revision=ids["revision"], bus_id=bus_id),
            gfx=gfx, gfx_effective=gfx,
            integrated=bool(row["apu"]) if row else (bool(gfx) and tables.gfx_is_apu(gfx)),
            source="pci-table" if row else "pci", driver=None,
            usable_compute=False, usable_graphics=False, access_fix=AMD_DRIVER_FIX,
        ))
        profile.warn("amd_gpu", f"{name} ({gfx or 'gfx unknown'}, PCI 1002:{ids['device'][2:]}) {_no_driver_words(desc)}: "
                                f"no backend can use it until {AMD_DRIVER_FIX[0].lower()}{AMD_DRIVER_FIX[1:]}")
    hip = 0
    runtime_env.rocm_visibility(host, profile, gpus, rocr=False)  # Windows has no ROCr: HIP's variables only
    for g in gpus:
        if g.usable_compute:  # the index HIP_VISIBLE_DEVICES selects it by (run_env replaces the variable)
            if g.visible:
                g.hip_index = hip
            hip += 1
    profile.amd_gpus = gpus


def probe_nvidia(host, profile) -> None:
    from probes.linux.nvidia import apply_cuda_visible, describe_nvml_error, from_nvml

    s = _section(host, profile, "nvidia")
    nv = host.nvml()
    if isinstance(nv.get("gpus"), list):
        gpus, uuids = from_nvml(nv, profile, lambda: s.get("int", "memory_bytes"), "GlobalMemoryStatusEx", "memory")
    else:
        words = describe_nvml_error(str(nv.get("error") or "Unknown"))
        gpus, uuids = [], []
        for key, values, ids in _adapters(s):
            if ids["vendor"] != "0x10de":
                continue
            name = s.get("str", "display_adapters", key, "DriverDesc") or f"NVIDIA GPU [10de:{ids['device'][2:]}]"
            cc = tables.nvidia_cc_from_name(name)
            gpus.append(NvidiaGpu(
                index=len(gpus),
                name=name,
                sm=f"sm_{cc[0]}{cc[1]}" if cc else None,
                compute_capability=list(cc) if cc else None,
                memory_bytes=_memory(s, key),
                source="registry+name-table" if cc else "registry",
                pci=PCI(vendor="0x10de", device=ids["device"], revision=ids["revision"]),
                usable=False, access_fix=NVIDIA_DRIVER_FIX,
            ))
            uuids.append(None)
            judged = (f"compute capability {cc[0]}.{cc[1]} taken from the product name" if cc
                      else "compute capability unknown, so CUDA backends cannot be judged")
            profile.warn("nvidia", f"{name}: {words}; {judged} (install or repair the NVIDIA driver, then run again)")
    for ids, bus_id, desc in _driverless(s, "0x10de"):
        name = tables.nvidia_pci_name(ids["device"]) or f"NVIDIA GPU [10de:{ids['device'][2:]}]"
        gpus.append(NvidiaGpu(index=len(gpus), name=name, source="pci", driver_loaded=False, usable=False,
                              access_fix=NVIDIA_DRIVER_FIX,
                              pci=PCI(vendor="0x10de", device=ids["device"], revision=ids["revision"], bus_id=bus_id)))
        uuids.append(None)
        profile.warn("nvidia", f"{name} (PCI 10de:{ids['device'][2:]}) {_no_driver_words(desc)}: CUDA cannot use it "
                               f"until {NVIDIA_DRIVER_FIX[0].lower()}{NVIDIA_DRIVER_FIX[1:]}")
    apply_cuda_visible(host, gpus, uuids, profile)
    profile.nvidia_gpus = gpus


def probe_intel(host, profile) -> None:
    """Intel GPUs as on Linux: vendor 0x8086 display adapters, Arc by device id."""
    s = _section(host, profile, "intel_gpu")
    gpus = []
    for key, values, ids in _adapters(s):
        if ids["vendor"] != "0x8086":
            continue
        row = tables.intel_gpu(ids["device"])
        name = (row["name"] if row else None) or s.get("str", "display_adapters", key, "DriverDesc") \
            or f"Intel GPU [8086:{ids['device'][2:]}]"
        gpus.append(IntelGpu(name=name, pci=PCI(vendor="0x8086", device=ids["device"], revision=ids["revision"]),
                             arc=bool(row and row.get("arc")), index=len(gpus)))
    for ids, bus_id, desc in _driverless(s, "0x8086"):
        row = tables.intel_gpu(ids["device"])
        name = row["name"] if row else f"Intel GPU [8086:{ids['device'][2:]}]"
        gpus.append(IntelGpu(name=name, pci=PCI(vendor="0x8086", device=ids["device"], revision=ids["revision"],
                                                bus_id=bus_id),
                             arc=bool(row and row.get("arc")), index=len(gpus), usable_graphics=False,
                             access_fix=INTEL_DRIVER_FIX))
        profile.warn("intel_gpu", f"{name} (PCI 8086:{ids['device'][2:]}) {_no_driver_words(desc)}: {INTEL_DRIVER_FIX}")
    profile.intel_gpus = gpus


# -----------------------------------------------------------------------------------------------
# NPU


def probe_npu(host, profile) -> None:
    s = _section(host, profile, "npu")
    table = tables.load("amd_npu")
    facts = tables.load("windows")
    enum = s.get("dict", "pci_enum") or {}
    for hwkey in sorted(enum):
        ids = parse_pci_id(hwkey)
        if ids is None or ids["vendor"] != table["vendor"]:
            continue
        row = tables.npu(ids["device"], ids["revision"])
        if row is None:
            continue
        instances = s.get("dict", "pci_enum", hwkey) or {}
        for inst in sorted(instances):
            values = s.get("dict", "pci_enum", hwkey, inst)
            if values is None:
                continue
            if values.get("present") is False:
                continue  # a device Windows remembers but that is not in this machine now
            name = _desc(values.get("FriendlyName")) or _desc(values.get("DeviceDesc"))
            driver_key = s.get("str", "pci_enum", hwkey, inst, "Driver")
            cls = s.get("str", "pci_enum", hwkey, inst, "ClassGUID")
            is_npu_driver = (name is not None and facts["npu_device_name"].lower() in name.lower()) or (
                cls is not None and cls.lower() == facts["compute_accelerator_class"])
            bound = bool(driver_key) and is_npu_driver
            npu = Npu(
                vendor="amd",
                pci=PCI(vendor=ids["vendor"], device=ids["device"], revision=ids["revision"],
                        bus_id=_bus_id(values.get("LocationInformation"))),
                generation=row["generation"],
                codename=row["codename"],
                driver_bound=bound,
                device_node=None,
                name=name if bound else None,
            )
            profile.npus.append(npu)
            what = f"AMD {npu.generation} NPU ({npu.codename}, {ids['device']} rev {ids['revision']})"
            if not bound:
                if driver_key:
                    profile.warn("npu", f"{what} has a driver that is not AMD's NPU driver ({name or 'unnamed'}): "
                                        f"NPU backends cannot use it; {NPU_DRIVER_FIX}")
                else:
                    profile.warn("npu", f"{what} is present but its driver is not installed: {NPU_DRIVER_FIX}")


# -----------------------------------------------------------------------------------------------
# Vulkan


def _icd_stem(path) -> str | None:
    if not isinstance(path, str) or not path.lower().endswith(".json"):
        return None
    return re.split(r"[\\/]", path)[-1][:-5] or None


def probe_vulkan(host, profile) -> None:
    s = _section(host, profile, "vulkan")
    profile.vulkan.loader = host.vulkan_loader()
    paths = []
    for key, values, ids in _adapters(s, pci_only=False):
        v = values.get("VulkanDriverName")
        paths += v if isinstance(v, list) else [v]
    drivers = s.get("dict", "vulkan_drivers") or {}
    paths += [p for p, on in drivers.items() if type(on) is int and on == 0]  # DWORD 0 = enabled
    out = []
    for p in paths:
        stem = _icd_stem(p)
        if stem and stem not in out and stem.split(".")[0] not in CPU_ICDS:
            out.append(stem)
    profile.vulkan.gpu_drivers = out
    runtime_env.vulkan_devices(host, profile)
    if not profile.vulkan.loader and (profile.amd_gpus or profile.nvidia_gpus):
        profile.warn("vulkan", "vulkan-1.dll is missing: Vulkan backends need the GPU driver's Vulkan runtime")


PROBES = [("os", probe_os), ("cpu", probe_cpu), ("amd_gpu", probe_amd), ("nvidia", probe_nvidia),
          ("intel_gpu", probe_intel), ("npu", probe_npu), ("vulkan", probe_vulkan)]


# -----------------------------------------------------------------------------------------------
# The live adapter (Windows only; never imported by the probes above on other systems)


def read_live() -> dict:
    """Read this Windows machine into the shape of capture.json ``"windows"``.  Every part that
    fails is left out and named in ``errors``."""
    import os
    import platform

    out: dict = {}
    errors: list[str] = []

    def part(name, fn):
        try:
            value = fn()
        except Exception as e:  # a failed read is data, never a traceback
            errors.append(f"{name}: {type(e).__name__}: {e}")
            return
        if value is not None:
            out[name] = value

    rel, ver, csd, ptype = platform.win32_ver()
    out["win32_ver"] = {"release": rel, "version": ver, "csd": csd, "ptype": ptype}
    part("current_version", lambda: _reg_values(CURRENT_VERSION, ("ProductName", "DisplayVersion",
                                                                  "CurrentBuildNumber", "CurrentBuild", "UBR", "EditionID")))
    part("processor", lambda: _reg_values(PROCESSOR, ("ProcessorNameString", "Identifier", "VendorIdentifier", "~MHz")))
    part("cpu_count", os.cpu_count)
    part("memory_bytes", _total_memory)
    part("is_wow64_process2", _is_wow64_process2)
    display = tables.load("windows")["display_class"]
    part("display_adapters", lambda: _each(errors, "display_adapters",
                                           {k: rf"{CLASS_KEY}\{display}\{k}" for k in _reg_subkeys(rf"{CLASS_KEY}\{display}")
                                            if k.isdecimal()}, ADAPTER_VALUES))
    part("present_drivers", _present_drivers)
    part("pci_enum", lambda: _pci_enum(errors, "pci_enum", _is_npu))
    part("display_enum", lambda: _pci_enum(errors, "display_enum", _is_gpu))
    part("vulkan_drivers", lambda: _reg_values(KHRONOS_DRIVERS, None))
    if errors:
        out["errors"] = errors
    return out


def _reg_json(value, kind):
    import winreg

    if kind == winreg.REG_BINARY or isinstance(value, (bytes, bytearray)):
        return {"binary": bytes(value or b"").hex()}
    if kind == winreg.REG_MULTI_SZ:
        return list(value or [])
    if isinstance(value, (str, int)):
        return value
    return None if value is None else str(value)


def _reg_values(path: str, names) -> dict | None:
    """Values of ``HKLM\\path`` (only ``names`` when given), as JSON; None when the key is absent."""
    import winreg

    try:
        key = winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, path)
    except FileNotFoundError:
        return None
    out = {}
    with key:
        if names is None:
            i = 0
            while True:
                try:
                    name, value, kind = winreg.EnumValue(key, i)
                except OSError:
                    break
                out[name] = _reg_json(value, kind)
                i += 1
        else:
            for name in names:
                try:
                    value, kind = winreg.QueryValueEx(key, name)
                except OSError:
                    continue
                out[name] = _reg_json(value, kind)
    return out


def _reg_subkeys(path: str) -> list[str]:
    import winreg

    try:
        key = winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, path)
    except OSError:
        return []
    names = []
    with key:
        i = 0
        while True:
            try:
                names.append(winreg.EnumKey(key, i))
            except OSError:
                break
            i += 1
    return sorted(names)


def _total_memory() -> int:
    import ctypes
    from ctypes import wintypes

    class MEMORYSTATUSEX(ctypes.Structure):
        _fields_ = [("dwLength", wintypes.DWORD), ("dwMemoryLoad", wintypes.DWORD),
                    ("ullTotalPhys", ctypes.c_ulonglong), ("ullAvailPhys", ctypes.c_ulonglong),
                    ("ullTotalPageFile", ctypes.c_ulonglong), ("ullAvailPageFile", ctypes.c_ulonglong),
                    ("ullTotalVirtual", ctypes.c_ulonglong), ("ullAvailVirtual", ctypes.c_ulonglong),
                    ("ullAvailExtendedVirtual", ctypes.c_ulonglong)]

    st = MEMORYSTATUSEX()
    st.dwLength = ctypes.sizeof(st)
    if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(st)):
        raise ctypes.WinError()
    return int(st.ullTotalPhys)


def _is_wow64_process2() -> dict | None:
    import ctypes
    from ctypes import wintypes

    k32 = ctypes.WinDLL("kernel32", use_last_error=True)
    fn = getattr(k32, "IsWow64Process2", None)  # Windows 10 version 1709 and later
    if fn is None:
        return None
    fn.argtypes = [wintypes.HANDLE, ctypes.POINTER(ctypes.c_ushort), ctypes.POINTER(ctypes.c_ushort)]
    fn.restype = wintypes.BOOL
    k32.GetCurrentProcess.restype = wintypes.HANDLE
    proc, native = ctypes.c_ushort(0), ctypes.c_ushort(0)
    if not fn(k32.GetCurrentProcess(), ctypes.byref(proc), ctypes.byref(native)):
        raise ctypes.WinError(ctypes.get_last_error())
    return {"process_machine": proc.value, "native_machine": native.value}


def _device_present(instance_id: str) -> bool | None:
    """cfgmgr32 CM_Locate_DevNodeW with CM_LOCATE_DEVNODE_NORMAL finds only devices present now."""
    import ctypes
    from ctypes import wintypes

    try:
        cfg = ctypes.WinDLL("cfgmgr32")
    except OSError:
        return None
    devinst = wintypes.DWORD(0)
    return cfg.CM_Locate_DevNodeW(ctypes.byref(devinst), ctypes.c_wchar_p(instance_id), 0) == 0


def _present_drivers() -> list[str] | None:
    """Class-key references (``{4d36e968-...}\\0001``) of the PCI display devices present now, so
    the probe skips driver keys that devices removed long ago left behind."""
    display = tables.load("windows")["display_class"]
    refs = []
    for hw in _reg_subkeys(ENUM_PCI):
        for inst in _reg_subkeys(rf"{ENUM_PCI}\{hw}"):
            values = _reg_values(rf"{ENUM_PCI}\{hw}\{inst}", ("Driver", "ClassGUID")) or {}
            driver = values.get("Driver")
            if not isinstance(driver, str) or not driver.lower().startswith(display):
                continue
            present = _device_present(rf"PCI\{hw}\{inst}")
            if present is None:
                return None  # cannot tell: keep every adapter
            if present:
                refs.append(driver)
    return refs


def _each(errors: list, where: str, keys: dict, names) -> dict:
    """Values of several registry keys; a key that cannot be read (PermissionError on one
    adapter's key) is left out and named in ``errors``, and the others are still read."""
    out = {}
    for name, path in keys.items():
        try:
            values = _reg_values(path, names)
        except OSError as e:
            errors.append(f"{where}.{name}: {type(e).__name__}: {e}")
            continue
        if values is not None:
            out[name] = values
    return out


def _is_npu(ids: dict) -> bool:
    table = tables.load("amd_npu")
    return ids["vendor"] == table["vendor"] and ids["device"][2:] in {row["device"] for row in table["devices"]}


def _is_gpu(ids: dict) -> bool:
    return ids["vendor"] in ("0x1002", "0x10de", "0x8086")


def _pci_enum(errors: list, where: str, wanted) -> dict:
    """``Enum\\PCI\\<hardware id>\\<instance>`` values of the devices ``wanted`` accepts, with
    ``present``.  For GPUs (``display_enum``) only display-class instances are kept."""
    display = tables.load("windows")["display_class"].lower()
    out = {}
    for hw in _reg_subkeys(ENUM_PCI):
        ids = parse_pci_id(hw)
        if ids is None or not wanted(ids):
            continue
        found = _each(errors, f"{where}.{hw}", {inst: rf"{ENUM_PCI}\{hw}\{inst}"
                                                for inst in _reg_subkeys(rf"{ENUM_PCI}\{hw}")}, ENUM_VALUES)
        for inst, values in found.items():
            if wanted is _is_gpu and str(values.get("ClassGUID", "")).lower() != display:
                continue  # the GPU's audio or USB function
            present = _device_present(rf"PCI\{hw}\{inst}")
            if present is not None:
                values["present"] = present
            out.setdefault(hw, {})[inst] = values
    return out
