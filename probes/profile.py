"""The Profile: everything the probes found, and the only thing that crosses to the engine.

Plain records (probes.record: dataclass-like, cheaper to define) with a JSON round trip (``to_dict`` / ``from_dict``) matching the Profile JSON of
docs/json.md.  ``from_dict`` validates, so a saved profile from another machine (``--profile FILE``)
fails with a message naming the field instead of a traceback.
"""

from __future__ import annotations

from probes.record import Record, as_dict, field

SCHEMA_VERSION = 1


class Distro(Record):
    id: str = ""
    version: str = ""
    like: str = ""


class OS(Record):
    name: str = "linux"  # linux | windows | macos | the raw platform.system() lower-cased
    version: str = ""  # kernel release on Linux, product version on Windows/macOS
    distro: Distro = field(default_factory=Distro)
    wsl: bool = False
    container: bool = False
    build: str | None = None  # Windows build number
    glibc: str | None = None  # Linux: the C library version, when known


class CPU(Record):
    arch: str = "x86_64"
    brand: str = ""
    cores: int | None = None
    flags: list[str] = field(default_factory=list)
    # the flags that decide which CPU builds run fast or at all (AVX2, AVX-512, AMX; SVE, dotprod,
    # i8mm), as /proc/cpuinfo names them, sorted; see probes/linux/cpu.py
    features: list[str] = field(default_factory=list)
    detailed: dict[str, str] | None = None  # probe --detailed: what py-cpuinfo adds
    memory_bytes: int | None = None
    emulated: bool = False  # the Python process runs translated (Rosetta, x64-on-ARM)


class PCI(Record):
    vendor: str = ""
    device: str = ""
    revision: str | None = None
    bus_id: str | None = None


class AmdGpu(Record):
    index: int = 0
    name: str = ""
    pci: PCI = field(default_factory=PCI)
    gfx: str | None = None
    gfx_effective: str | None = None
    integrated: bool = False
    vram_bytes: int | None = None
    visible: bool = True
    source: str = "kfd"
    driver: str | None = None
    # Device access for this process (capture.json 'dev'): ROCm/HIP needs /dev/kfd and the render
    # node read-write ("compute"); Vulkan needs the render node alone ("graphics").  access_fix says
    # in words how to make a blocked GPU usable ("add --device /dev/kfd to the container").
    render_node: str | None = None
    usable_compute: bool = True
    usable_graphics: bool = True
    access_fix: str | None = None
    gtt_bytes: int | None = None
    cwsr: bool | None = None  # KFD node has cwsr_size and ctl_stack_size (kernel CWSR fix); None: unknown
    unique_id: str | None = None  # KFD unique_id as ROCm prints it (GPU-<16 hex>), for ROCR_VISIBLE_DEVICES
    hip_index: int | None = None  # the index HIP_VISIBLE_DEVICES selects it by (after ROCR_VISIBLE_DEVICES)
    kfd_node: int | None = None  # its KFD topology node (HSA_OVERRIDE_GFX_VERSION_<node> names it)
    gfx_override: str | None = None  # the variable that set gfx_effective (HSA_OVERRIDE_GFX_VERSION[_<node>])
    gfx_override_refused: bool = False  # the override crosses a major version: ROCm refuses it
    vulkan_driver: str | None = None  # the Vulkan ICD that drives it (radeon_icd, amd-vulkan64), or None
    vulkan_visible: bool = True  # not hidden from llama.cpp's Vulkan backend by GGML_VK_VISIBLE_DEVICES
    vram_used_bytes: int | None = None  # amdgpu mem_info_vram_used at probe time


class NvidiaGpu(Record):
    index: int = 0
    name: str = ""
    sm: str | None = None
    compute_capability: list[int] | None = None
    memory_bytes: int | None = None
    driver_version: str | None = None
    cuda_driver_version: int | None = None
    visible: bool = True
    source: str = "nvml"
    pci: PCI | None = None
    uuid: str | None = None  # NVML UUID (GPU-...), for CUDA_VISIBLE_DEVICES
    driver_loaded: bool = True  # False: seen on PCI (or NVML absent), no working NVIDIA driver
    usable: bool = True  # device nodes (/dev/nvidiaN, /dev/nvidiactl) usable, or NVML answers
    access_fix: str | None = None
    cuda_index: int | None = None  # index among the CUDA-visible GPUs (after CUDA_VISIBLE_DEVICES)
    memory_free_bytes: int | None = None  # NVML's free memory at probe time
    unified: bool = False  # no memory of its own: it allocates system memory (GB10, Jetson)
    vulkan_driver: str | None = None  # the Vulkan ICD that drives it (nvidia_icd, nv-vk64), or None
    vulkan_visible: bool = True


class Npu(Record):
    vendor: str = "amd"
    pci: PCI = field(default_factory=PCI)
    generation: str = "unknown"  # XDNA1 | XDNA2 | unknown
    codename: str = "unknown"
    driver_bound: bool = False
    device_node: str | None = None
    name: str | None = None
    usable: bool = True  # /dev/accel/accelN exists and is read-write for this user
    access_fix: str | None = None


class IntelGpu(Record):
    name: str = ""
    pci: PCI = field(default_factory=PCI)
    arc: bool = False
    index: int = 0
    render_node: str | None = None
    usable_graphics: bool = True
    access_fix: str | None = None
    vulkan_driver: str | None = None  # the Vulkan ICD that drives it (intel_icd, igvk64), or None
    vulkan_visible: bool = True


class Metal(Record):
    available: bool = False
    chip: str | None = None
    note: str | None = None
    # Metal's recommendedMaxWorkingSetSize: the memory a process's GPU work can hold (captured, or
    # the iogpu.wired_limit_mb setting); None when neither was read (probes/memory.py estimates it)
    working_set_bytes: int | None = None


class Vulkan(Record):
    loader: bool = False
    gpu_drivers: list[str] = field(default_factory=list)


NO_NVIDIA_DRIVER = "no_nvidia_driver"  # Warning_.code: no NVIDIA driver is installed (and no card seen)


class Warning_(Record):
    probe: str
    message: str
    # what the warning is about, for code to act on without reading its words ("no_nvidia_driver": no
    # NVIDIA driver and no NVIDIA card); in JSON only when set
    code: str | None = None


class Profile(Record):
    os: OS = field(default_factory=OS)
    cpu: CPU = field(default_factory=CPU)
    amd_gpus: list[AmdGpu] = field(default_factory=list)
    nvidia_gpus: list[NvidiaGpu] = field(default_factory=list)
    npus: list[Npu] = field(default_factory=list)
    metal: Metal = field(default_factory=Metal)
    vulkan: Vulkan = field(default_factory=Vulkan)
    executables: dict[str, str] = field(default_factory=dict)
    warnings: list[Warning_] = field(default_factory=list)
    intel_gpus: list[IntelGpu] = field(default_factory=list)
    board: str | None = None  # device-tree board (Jetson, Raspberry Pi, Rockchip SoC)
    cuda_toolkits: list[str] = field(default_factory=list)  # majors of /usr/local/cuda-N (probes/engines.py)
    localai_capability: str | None = None  # forced on LocalAI by its env var or run file
    localai_capability_source: str | None = None  # "env" | "run_file"
    # the device-selection variables of this process that were set (HIP_VISIBLE_DEVICES,
    # CUDA_DEVICE_ORDER, GGML_VK_VISIBLE_DEVICES, HSA_OVERRIDE_GFX_VERSION_<node>, ...): each is
    # read by one runtime only (probes/runtime_env.py)
    device_env: dict[str, str] = field(default_factory=dict)
    cuda_order: str = "pci"  # how CUDA numbers the NVIDIA GPUs: "pci" (PCI_BUS_ID) | "fastest" (CUDA's guess)
    schema_version: int = SCHEMA_VERSION

    def warn(self, probe: str, message: str, code: str | None = None) -> None:
        self.warnings.append(Warning_(probe, message, code))

    def to_dict(self) -> dict:
        d = as_dict(self)
        out = {"schema_version": d.pop("schema_version")}
        out.update(d)
        for w in out["warnings"]:
            if w["code"] is None:
                del w["code"]
        return out

    @classmethod
    def from_dict(cls, data, where: str = "profile") -> "Profile":
        if not isinstance(data, dict):
            raise ProfileError(where, "", "must be a JSON object")
        ver = data.get("schema_version")
        if ver != SCHEMA_VERSION:
            raise ProfileError(where, "schema_version", f"must be {SCHEMA_VERSION}, found {ver!r}")
        profile = _build(cls, data, where, "")
        _fill_vulkan_drivers(profile, data)
        return profile


def _fill_vulkan_drivers(profile: "Profile", data: dict) -> None:
    """A profile saved before GPUs carried ``vulkan_driver`` gets it from its own ``vulkan.gpu_drivers``,
    as the probe would have set it (probes/runtime_env.py)."""
    from probes.tables import vulkan_vendor

    by_vendor: dict[str, str] = {}
    for icd in profile.vulkan.gpu_drivers:
        v = vulkan_vendor(icd)
        if v:
            by_vendor.setdefault(v, icd)
    for key, vendor in (("amd_gpus", "amd"), ("nvidia_gpus", "nvidia"), ("intel_gpus", "intel")):
        for raw, gpu in zip(data.get(key) or [], getattr(profile, key)):
            if "vulkan_driver" not in raw and (vendor != "nvidia" or gpu.driver_loaded):
                gpu.vulkan_driver = by_vendor.get(vendor)


class ProfileError(Exception):
    exit_code = 5

    def __init__(self, where, fieldname, message):
        self.path = where
        self.field = fieldname
        super().__init__(f"{where}: field '{fieldname or '<top>'}' {message}")


# -- validation-by-construction -----------------------------------------------------------------

_NESTED = {
    "os": OS,
    "distro": Distro,
    "cpu": CPU,
    "pci": PCI,
    "metal": Metal,
    "vulkan": Vulkan,
}
_LISTS = {
    "amd_gpus": AmdGpu,
    "nvidia_gpus": NvidiaGpu,
    "npus": Npu,
    "warnings": Warning_,
    "intel_gpus": IntelGpu,
}


def _fields(cls):
    return cls._types


def _check_scalar(value, typ: str, where, path):
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
    }
    for alt in typ.replace(" ", "").split("|"):
        if alt == "None" and value is None:
            return value
        if alt == "int" and ok["int"] and value < 0 and str(path).endswith("_bytes"):
            raise ProfileError(where, path, f"must not be negative, found {value}")
        if alt in ok and ok[alt]:
            return value
        if alt == "list[str]" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        if alt == "list[int]" and isinstance(value, list) and all(isinstance(v, int) for v in value):
            return value
        if alt == "dict[str,str]" and isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            return value
    raise ProfileError(where, path, f"must be {_WORDS.get(typ.replace(' ', ''), typ)}, found {_found(value)}")


_WORDS = {"str": "a string", "int": "an integer", "bool": "true or false", "str|None": "a string or null",
          "int|None": "an integer or null", "bool|None": "true, false or null", "list[str]": "a list of strings",
          "list[int]": "a list of integers", "list[int]|None": "a list of integers or null",
          "list[str]|None": "a list of strings or null", "dict[str,str]": "an object of strings",
          "dict[str,str]|None": "an object of strings or null"}


def _found(value) -> str:
    """What a wrong value is, and for a list or object the first entry that is wrong."""
    if isinstance(value, dict):
        bad = next((k for k, v in value.items() if not isinstance(v, str) or not isinstance(k, str)), None)
        return f"an object whose entry {bad!r} is {type(value[bad]).__name__}" if bad is not None else "an object"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"[:80]


# device targets: a string that is no target is refused like a wrong type (a saved profile from outside)
_PATTERNS = {"gfx": r"gfx[0-9]{1,2}[0-9a-f]{2}", "gfx_effective": r"gfx[0-9]{1,2}[0-9a-f]{2}",
             "sm": r"sm_[0-9]{2,3}[a-z]?"}


_COMPILED: dict = {}


def _check_target(name, value, where, path):
    pat = _PATTERNS.get(name)
    if pat is None or not isinstance(value, str):
        return value
    rx = _COMPILED.get(name)
    if rx is None:
        import re

        rx = _COMPILED[name] = re.compile(pat)
    if not rx.fullmatch(value):
        raise ProfileError(where, path, f"must be a {'CUDA' if name == 'sm' else 'gfx'} target "
                                        f"({'sm_89' if name == 'sm' else 'gfx1100, gfx90a'}) or null, found {value!r}")
    return value


def _build(cls, data, where, prefix):
    if not isinstance(data, dict):
        raise ProfileError(where, prefix, "must be a JSON object")
    kwargs = {}
    known = _fields(cls)
    for name, ftype in known.items():
        if name not in data:
            continue
        value = data[name]
        path = f"{prefix}.{name}" if prefix else name
        if name in _LISTS and cls in (Profile,):
            if not isinstance(value, list):
                raise ProfileError(where, path, "must be a list")
            kwargs[name] = [_build(_LISTS[name], v, where, f"{path}[{i}]") for i, v in enumerate(value)]
        elif name in _NESTED and not ftype.startswith(("str", "int", "bool")):
            if value is None and "None" in ftype:
                kwargs[name] = None
            else:
                kwargs[name] = _build(_NESTED[name], value, where, path)
        elif name == "schema_version":
            kwargs[name] = value
        else:
            kwargs[name] = _check_target(name, _check_scalar(value, ftype, where, path), where, path)
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required field (warnings[].probe) is missing
        raise ProfileError(where, prefix, f"is incomplete: {e}") from None
