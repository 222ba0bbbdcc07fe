"""The rule engine: pure functions over plain data, no I/O.

``decide(profile, catalog, recipe, installed, settings, pins)`` gives a Decision: a verdict for every
backend of the recipe in preference order (supported or not, why, on which device, tier, format,
state), and the pick.  ``Machine`` is the Profile seen as the engine needs it (one chosen device per
type), built once per profile and reused for every recipe.
"""

from __future__ import annotations

from probes import memory
from probes.record import Record, field
from probes.util import parse_override

from selector import requires
from selector.catalog import ACCELERATORS, DISPLAY_FIELDS, Catalog, Recipe, Row

POLICIES = ("accelerator-first", "lemonade", "measured")
METRICS = ("tg", "pp")
CHANNELS = ("stable", "nightly")
INSTALLED_STATES = ("installed", "update_available", "update_required")
OS_WORDS = {"linux": "Linux", "windows": "Windows", "macos": "macOS"}
TYPE_WORDS = {
    "amd_gpu": "AMD GPU",
    "nvidia_gpu": "NVIDIA GPU",
    "amd_npu": "AMD NPU",
    "metal": "Apple Metal GPU",
    "intel_gpu": "Intel GPU",
    "cpu": "CPU",
}


class Settings(Record):
    channel: str = "stable"
    prefer_system: bool = False
    policy: str = "accelerator-first"
    backends: dict[str, str] = field(default_factory=dict)  # recipe -> pinned backend
    backend_sources: dict[str, str] = field(default_factory=dict)  # recipe -> "--backend" | "config.json"
    prefer_system_by_recipe: dict[str, bool] = field(default_factory=dict)
    metric: str = "tg"  # --policy measured: generation (tg) or prompt processing (pp) speed
    measurements: dict = field(default_factory=dict)  # recipe -> fresh bench records (selector/bench.py)

    def prefer_system_for(self, recipe: str) -> bool:
        return self.prefer_system_by_recipe.get(recipe, self.prefer_system)

    def to_dict(self) -> dict:
        out = {"channel": self.channel, "prefer_system": self.prefer_system, "policy": self.policy}
        if self.policy == "measured":
            out["metric"] = self.metric
        return out


class Device(Record):
    """A device a backend runs on.  ``family`` is what the support row judged (the effective gfx, the
    sm, the NPU generation, the CPU arch); ``gpu`` is the Profile record behind it (not serialised)."""

    type: str
    family: str | None
    index: int | None = None
    name: str | None = None
    memory_bytes: int | None = None
    bus_id: str | None = None
    uuid: str | None = None

    def __init__(self, type, family, index=None, name=None, memory_bytes=None, bus_id=None, uuid=None,
                 gpu=None, token=None):  # hot path: spelled out
        self.type, self.family, self.index, self.name = type, family, index, name
        self.memory_bytes, self.bus_id, self.uuid = memory_bytes, bus_id, uuid
        self.gpu, self.token = gpu, token  # the Profile record; the row token it matched (gfx110X)

    def to_dict(self) -> dict:
        d = {"type": self.type, "family": self.family, "index": self.index, "name": self.name}
        if self.memory_bytes is not None:
            d["memory_bytes"] = self.memory_bytes
        if self.bus_id is not None:
            d["bus_id"] = self.bus_id
        if self.uuid is not None:
            d["uuid"] = self.uuid
        return d


class Verdict(Record):
    name: str
    tier: str
    format: str
    supported: bool
    state: str
    reason: str
    device: Device | None
    notes: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # catalog display fields of the row (install, env)
    devices: list[Device] = field(default_factory=list)  # every usable device satisfying the row, best first
    passed_over: list[tuple[Device, str]] = field(default_factory=list)  # devices of the row's types that do not fit
    cpu_because: list[str] = field(default_factory=list)  # on the CPU: why no accelerator entry of the row fit
    # what the backend opens on a GPU: "compute" (ROCm/CUDA) or "graphics" (Vulkan); every Verdict is given one
    access: str = "compute"  # pragma: no mutate

    def __init__(self, name, tier, format, supported, state, reason, device, notes=None, extra=None,
                 devices=None, passed_over=None, cpu_because=None, access="compute"):  # hot path
        self.name, self.tier, self.format, self.supported = name, tier, format, supported
        self.state, self.reason, self.device = state, reason, device
        self.notes = [] if notes is None else notes
        self.extra = {} if extra is None else extra
        self.devices = ([device] if device is not None else []) if devices is None else devices
        self.passed_over = [] if passed_over is None else passed_over
        self.cpu_because = [] if cpu_because is None else cpu_because
        self.access = access

    @property
    def on_cpu(self) -> bool:
        return self.device is not None and self.device.type == "cpu"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "tier": self.tier,
            "format": self.format,
            "supported": self.supported,
            "state": self.state,
            "reason": self.reason,
            "device": self.device.to_dict() if self.device else None,
            "devices": [d.to_dict() for d in self.devices],
            "passed_over": [{"device": d.to_dict(), "reason": r} for d, r in self.passed_over],
            "notes": list(self.notes),
            **self.extra,
        }


class Decision(Record):
    recipe: str
    backend: str | None
    device: Device | None
    state: str | None
    reason: str
    run_args: str | None
    backends: list[Verdict]
    pinned: bool = False
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    channel: str = "stable"
    run_env: dict[str, str] = field(default_factory=dict)  # makes the engine use the chosen device(s)
    run_devices: list[Device] = field(default_factory=list)  # the devices run_env keeps (not serialised)

    @property
    def ok(self) -> bool:
        """A backend that runs here was chosen (exit 0); else exit 3."""
        v = self.verdict(self.backend) if self.backend else None
        return v is not None and v.supported

    def verdict(self, backend: str) -> Verdict | None:
        for v in self.backends:
            if v.name == backend:
                return v
        return None

    def to_dict(self) -> dict:
        chosen = self.verdict(self.backend) if self.backend else None
        return {
            "backend": self.backend,
            "device": self.device.to_dict() if self.device else None,
            "state": self.state,
            "reason": self.reason,
            "run_args": self.run_args,
            "run_env": dict(self.run_env),
            **(chosen.extra if chosen is not None else {}),  # install command, env (catalog display fields)
            "pinned": self.pinned,
            "channel": self.channel,
            "backends": [v.to_dict() for v in self.backends],
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }


# ------------------------------------------------------------------------------------------------
# The machine as the engine sees it


class Machine:
    """The Profile as the engine sees it: every visible device of each type, best first (discrete
    before integrated, then more memory, then lower index).  A row is judged against all of them; the
    first device that satisfies it is the one the backend runs on.  ``amd`` / ``nvidia`` / ``npu`` /
    ``intel`` name the best device of the type (host-wide facts such as the NVIDIA driver version are
    read through them)."""

    def __init__(self, profile):
        self.profile = profile
        self.os = profile.os.name
        self.arch = profile.cpu.arch
        # every AMD GPU, best first; a GPU of unknown gfx target still serves Vulkan
        every_amd = sorted(profile.amd_gpus, key=lambda g: (g.integrated, -(g.vram_bytes or 0), g.index))
        amd = [g for g in every_amd if g.visible]  # visible to ROCm (HIP/ROCR_VISIBLE_DEVICES)
        self.amd_all = amd
        self.amd = amd[0] if amd else None
        self.amd_hidden = not amd and any(g.gfx for g in profile.amd_gpus)
        every_nv = sorted(profile.nvidia_gpus, key=lambda g: (-(g.memory_bytes or 0), g.index))
        nv = [g for g in every_nv if g.visible]  # visible to CUDA (CUDA_VISIBLE_DEVICES)
        self.nvidia_all = nv
        self.nvidia = nv[0] if nv else None
        self.nvidia_hidden = not nv and bool(profile.nvidia_gpus)
        # (XDNA2 before XDNA1 orders NPUs of two generations: no machine has two NPUs to tell)
        npus = sorted(profile.npus, key=lambda n: (not n.driver_bound, not getattr(n, "usable", True),
                                                    n.generation != "XDNA2"))  # pragma: no mutate
        self.npu_all = npus
        self.npu = npus[0] if npus else None
        intel = sorted(getattr(profile, "intel_gpus", []) or [], key=lambda g: (not g.arc, g.index))
        self.intel_all = intel
        self.intel = intel[0] if intel else None
        self.metal = profile.metal.available
        # the build reaches a GPU's Vulkan driver through the loader (libvulkan.so.1, vulkan-1.dll); MoltenVK
        # is both on a Mac
        self.vulkan_loader = bool(profile.vulkan.loader)
        self.executables = profile.executables
        # compute runtimes see the GPUs their own variable leaves; Vulkan sees every GPU (RADV, ANV
        # and NVIDIA's Vulkan driver read none of those variables)
        self.by_type = {"amd_gpu": amd, "nvidia_gpu": nv, "amd_npu": npus, "intel_gpu": intel}
        self.graphics = {"amd_gpu": every_amd, "nvidia_gpu": every_nv, "intel_gpu": intel}
        self.devices: dict = {}  # (id(profile device), family, token) -> Device, shared across rows

    def cpu_device(self) -> Device:
        return Device("cpu", self.arch, 0, self.profile.cpu.brand or None)

    def amd_runs(self, graphics: bool = False) -> list:
        """The AMD GPUs in best-first order as runs of neighbours that every row judges alike (same
        gfx, override, name, access, CWSR), so a node of 64 identical GPUs is judged once per row
        and the order stays exactly best-first.  ``graphics``: every GPU, as Vulkan sees them."""
        name = "_amd_runs_g" if graphics else "_amd_runs"
        runs = self.__dict__.get(name)
        if runs is None:
            runs = []
            for g in (self.graphics["amd_gpu"] if graphics else self.amd_all):
                key = (g.gfx, g.gfx_effective or g.gfx, g.name, g.usable_compute, g.usable_graphics, g.cwsr,
                       g.access_fix, g.gfx_override_refused, g.vulkan_driver, g.vulkan_visible, g.visible)
                if runs and runs[-1][0] == key:
                    runs[-1][1].append(g)
                else:
                    runs.append((key, [g]))
            # the memo only saves time: without it each row recomputes the same runs
            self.__dict__[name] = runs  # pragma: no mutate
        return runs

    def present_types(self) -> list[str]:
        """Accelerator types this machine has a visible device of."""
        out = [t for t in ("amd_gpu", "nvidia_gpu", "intel_gpu", "amd_npu") if self.by_type[t]]
        if self.metal:
            out.append("metal")
        return out


def _matches_family(value: str | None, families) -> bool:
    if not families:
        return True
    if value is None:
        return False
    for fam in families:
        if fam.endswith("X") and len(fam) > 1:
            if value.startswith(fam[:-1]):
                return True
        elif value == fam:
            return True
    return False


def _sm_number(sm: str) -> int:
    try:
        return int(sm.split("_", 1)[1].rstrip("abf"))
    except (IndexError, ValueError):
        return 0


def describe_families(families) -> str:
    fams = list(families)
    if fams and all(f.startswith("sm_") for f in fams):
        fams.sort(key=_sm_number)
        return f"{fams[0]}..{fams[-1]}" if len(fams) > 2 else ", ".join(fams)
    return ", ".join(fams)


def _os_reason(oses) -> str:
    words = [OS_WORDS.get(o, o) for o in oses]
    if len(words) == 1:
        return f"Requires {words[0]}"
    return "Requires " + ", ".join(words[:-1]) + " or " + words[-1]


# ------------------------------------------------------------------------------------------------
# One device entry of one row: every device of the type, each satisfying the row or not


def _token(value: str, families) -> str | None:
    """The row token ``value`` matches (``gfx1102`` -> ``gfx110X``), or None."""
    for fam in families:
        if fam.endswith("X") and len(fam) > 1:
            if value.startswith(fam[:-1]):
                return fam
        elif value == fam:
            return fam
    return None


def _access_reason(g, backend: str, access: str, m: Machine | None = None) -> str:
    if access == "graphics":
        os_name = m.os if m is not None else "linux"
        if not g.vulkan_driver:  # every GPU record has both fields (probes/profile.py)
            return f"{g.name}: no Vulkan driver for it is installed, so {backend} cannot use it ({vulkan_fix(g, os_name)})"
        if m is not None and not m.vulkan_loader:  # the driver is there, but nothing loads it into the build:
            # a fact of the machine, said once for all its GPUs
            return (f"the Vulkan loader is not installed, so {backend} finds no GPU through its Vulkan driver "
                    f"({vulkan_fix(g, os_name, 'loader')})")
        if not g.vulkan_visible:
            return f"{g.name}: GGML_VK_VISIBLE_DEVICES hides it from llama.cpp's Vulkan backend"
        if getattr(g, "usable_graphics", getattr(g, "usable", True)):
            return ""
        node = getattr(g, "render_node", None)
        what = (f"its render node{' ' + node if node else ''}" if hasattr(g, "usable_graphics")
                else "its device nodes (/dev/nvidia*)")
    else:
        if _compute_usable(g):
            return ""
        what = "/dev/kfd and its render node" if hasattr(g, "usable_compute") else \
            "its render node" if not hasattr(g, "usable") else "its device nodes"
    fix = getattr(g, "access_fix", None)
    if getattr(g, "source", None) == "kfd" and g.render_node is None:  # a KFD node whose DRM node is missing
        return f"{g.name}: it has no render node (/dev/dri/renderD*), so {backend} cannot use it" + \
            (f" ({fix})" if fix else "")
    return f"{g.name}: this process cannot open {what}, so {backend} cannot use it" + (f" ({fix})" if fix else "")


def _compute_usable(g) -> bool:
    """A compute runtime can open the device: ROCm /dev/kfd and the render node (AMD), CUDA its nodes
    (NVIDIA), XDNA its accel node (NPU), Level Zero the render node (an Intel GPU)."""
    if hasattr(g, "usable_compute"):
        return g.usable_compute
    if hasattr(g, "usable"):
        return g.usable
    return g.usable_graphics


def vulkan_fix(g, os_name: str = "linux", what: str | None = None) -> str:
    """What installs the GPU's Vulkan driver, or ``what`` ("loader"), on this OS
    (probes/tables/vulkan_icds.json "fix")."""
    from probes.tables import load

    vendor = "amd" if hasattr(g, "usable_compute") else "intel" if hasattr(g, "arc") else "nvidia"
    if vendor == "nvidia" and not g.driver_loaded:
        vendor = "nvidia_no_driver"
    fixes = load("vulkan_icds")["fix"]
    return fixes.get(os_name, fixes["linux"])[what or vendor]


def _integrated(d: Device) -> bool:
    """Shares system memory: an AMD APU, an Intel GPU that is not an Arc card."""
    g = d.gpu
    if d.type == "intel_gpu":
        return not getattr(g, "arc", False)
    return bool(getattr(g, "integrated", False))


def _usable(d: Device) -> int:
    """The memory an engine can allocate on it: an APU's GTT counts (probes/memory.py)."""
    g = d.gpu
    if d.type == "amd_gpu" and g is not None:
        return memory.amd(g).usable or 0  # (GTT on Linux; Windows' shared memory is an estimate, not counted)
    return d.memory_bytes or 0


def _amd_device(m: Machine, g, fam, token) -> Device:
    key = (id(g), fam, token)
    dev = m.devices.get(key)
    if dev is None:
        dev = m.devices[key] = Device("amd_gpu", fam, g.index, g.name, g.vram_bytes, g.pci.bus_id if g.pci else None,
                                      getattr(g, "unique_id", None), g, token)
    return dev


def _judge_amd(m: Machine, catalog: Catalog, recipe: Recipe, row: Row, fams, channel: str,
               access: str, g) -> tuple[str, str | None, bool]:
    """(why not, or ''; the row token matched; whether the family is what failed) for one AMD GPU.
    A Vulkan build judges the hardware target: HSA_OVERRIDE_GFX_VERSION is ROCm's alone."""
    eff = g.gfx if access == "graphics" else (g.gfx_effective or g.gfx)
    if access != "graphics" and getattr(g, "gfx_override_refused", False):
        # the variable is set (it is what was refused); the default only keeps a hand-made profile printable
        value = m.profile.device_env.get(g.gfx_override, "")  # pragma: no mutate
        return (f"{g.name}: {g.gfx_override}={value} asks ROCm to run this {g.gfx} as "
                f"{parse_override(value) or value}, across a major version, which ROCm refuses "
                f"(ROCm/rocm-systems#5686)"), None, False
    # an exclusion is a hardware fact (CDNA has no Vulkan driver), so it holds under every policy: under
    # --policy lemonade the order is Lemonade's, and the device named is still the one the build runs on
    for ex in catalog.exclusions_for(row.backend, "amd_gpu"):
        if _matches_family(g.gfx, ex.families):
            return f"{ex.reason} ({g.name}, {g.gfx})", None, False
    token = None
    if fams and eff is None:
        return (f"{g.name}: its gfx target is unknown (not in the tables), so no {row.backend} build can be "
                f"matched to it ({row.backend} needs {describe_families(fams)})"), None, False
    if fams:
        token = _token(eff, fams)
        if token is None:
            why = _family_reason(row, eff, g.name) or f"Unsupported GPU: {eff} ({row.backend} needs {describe_families(fams)})"
            if eff != g.gfx:
                why += f" ({g.gfx_override or 'HSA_OVERRIDE_GFX_VERSION'} makes {g.gfx} run as {eff})"
            return why, None, True
    for gate in catalog.gates_for(recipe.name, row.backend).get(eff, ()):
        if m.os not in gate.os or channel not in gate.channels:
            return gate.reason, token, False
        if "cwsr" in gate.needs and getattr(g, "cwsr", None) is False:
            return gate.reason, token, False
    return _access_reason(g, row.backend, access, m) or requires.check(m, row, g), token, False


def _match_amd(m: Machine, catalog: Catalog, recipe: Recipe, row: Row, fams, channel: str,
               access: str):
    found, passed, notes = [], [], []
    memo: dict = {}  # identical GPUs (a node of eight MI300X) are judged once
    for key, gpus in m.amd_runs(access == "graphics"):
        verdict = memo.get(key)
        if verdict is None:
            verdict = memo[key] = _judge_amd(m, catalog, recipe, row, fams, channel, access, gpus[0])
        why, token, _ = verdict
        g = gpus[0]
        eff = g.gfx if access == "graphics" else (g.gfx_effective or g.gfx)
        devs = _amd_devices(m, key, gpus, eff if fams else g.gfx, token)
        if why:
            passed.extend((dev, why) for dev in devs)
            continue
        if fams and eff != g.gfx:
            note = f"judged as {eff} through {g.gfx_override or 'HSA_OVERRIDE_GFX_VERSION'} (hardware: {g.gfx})"
            if note not in notes:
                notes.append(note)
        found.extend(devs)
    mismatch = [v for v in memo.values() if v[2]]
    return found, passed, _reasons(passed, len(mismatch), row, fams), notes


def _amd_devices(m: Machine, key, gpus, fam, token) -> list[Device]:
    """The Devices of one run of identical GPUs, made once per machine."""
    ck = (key, id(gpus[0]), fam, token)
    devs = m.devices.get(ck)
    if devs is None:
        devs = m.devices[ck] = [_amd_device(m, g, fam, token) for g in gpus]
    return devs


def _reasons(passed, mismatches: int, row: Row, fams) -> list[str]:
    """Words for the devices passed over, each distinct reason once; when several kinds of GPU miss the
    row's families, one sentence names them all."""
    out = []
    merged = mismatches > 1 and not row.extra.get("family_reason")
    if merged:
        kinds = []
        for dev, why in passed:
            if why.startswith("Unsupported GPU: ") and f"{dev.family} ({dev.name})" not in kinds:
                kinds.append(f"{dev.family} ({dev.name})")
        out.append(f"Unsupported GPUs: {', '.join(kinds)} ({row.backend} needs {describe_families(fams)})")
    for dev, why in passed:
        if merged and why.startswith("Unsupported GPU: "):
            continue
        if why not in out:
            out.append(why)
    return out


def _nv_device(g, fam, token=None) -> Device:
    return Device("nvidia_gpu", fam, g.index, g.name, g.memory_bytes, g.pci.bus_id if g.pci else None,
                  getattr(g, "uuid", None), g, token)


def _sort_out(judged) -> tuple[list, list, list, list]:
    """(devices that fit, devices passed over with why, each distinct reason once, notes) from
    (device, why-not) pairs."""
    found, passed, reasons = [], [], []
    for dev, why in judged:
        if not why:
            found.append(dev)
            continue
        passed.append((dev, why))
        if why not in reasons:
            reasons.append(why)
    return found, passed, reasons, []


def _judge_nvidia(m: Machine, row: Row, fams, access: str = "compute"):
    backend = row.backend
    for g in (m.graphics["nvidia_gpu"] if access == "graphics" else m.nvidia_all):
        if not getattr(g, "driver_loaded", True) or (g.sm is None and g.driver_version is None):
            why = f"{g.name}: no NVIDIA driver drives it (none loaded, or the card is bound to another), so {backend} cannot run on it"
        elif fams and g.sm is None:
            # the driver is loaded (the branch above) and the capability unread: a Jetson's SoC is not in the
            # tables (it has no NVML), any other card's NVML did not answer (`probe` says why)
            cause = "its SoC is not in the tables" if g.source == "jetson" else "NVML did not answer"
            why = (f"{g.name}: its compute capability is unknown ({cause}), so no {backend} build can "
                   f"be matched to it ({backend} needs {describe_families(fams)})")
        elif fams and _token(g.sm, fams) is None:
            why = _family_reason(row, g.sm, g.name) or \
                f"No NVIDIA GPU with {describe_families(fams)} (found {g.sm}, {g.name})"
        else:
            why = _access_reason(g, backend, access, m) or requires.check(m, row, g)
        yield _nv_device(g, g.sm, _token(g.sm, fams) if fams and g.sm else None), why


def _judge_npu(m: Machine, row: Row, fams):
    want = " or ".join(fams) if fams else "XDNA"
    for n in m.npu_all:
        dev = Device("amd_npu", n.generation, 0, n.name or f"{n.codename} NPU", gpu=n)
        if fams and n.generation not in fams:
            why = f"Requires an AMD {want} NPU (found {n.generation} {n.codename})"
        elif not n.driver_bound:
            why = (f"{n.generation} NPU found but its driver is not installed" if m.os == "windows"
                   else f"{n.generation} NPU found but the amdxdna driver is not loaded")
        elif not getattr(n, "usable", True):
            fix = getattr(n, "access_fix", None)
            node = n.device_node or "its /dev/accel node"
            why = f"{n.generation} NPU found but this process cannot open {node}" + (f" ({fix})" if fix else "")
        else:
            why = requires.check(m, row, n)
        yield dev, why


def _judge_intel(m: Machine, row: Row, fams):
    for g in m.intel_all:
        fam = "arc" if g.arc else "intel"
        if fams and fam not in fams:
            why = _family_reason(row, fam, g.name) or f"Requires an Intel {' or '.join(fams)} GPU (found {g.name})"
        else:
            why = _access_reason(g, row.backend, "graphics", m) or requires.check(m, row, g)
        yield Device("intel_gpu", fam, g.index, g.name, gpu=g), why


def _absent_reason(m: Machine, row: Row, dtype: str, fams, access: str = "compute") -> str:
    """Why an entry of a type the machine lacks does not fit.  A row that takes *any* device of a type
    (an API build such as Vulkan) but not the machine's own accelerator says so precisely; a Vulkan
    build judges the machine's other GPUs itself (each says why it does not run there)."""
    if dtype == "amd_gpu" and m.amd_hidden:
        return "No visible AMD GPU (HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES hide them)"
    if dtype == "nvidia_gpu" and m.nvidia_hidden:
        return "No visible NVIDIA GPU (CUDA_VISIBLE_DEVICES hides them)"
    if not fams and access != "graphics":
        listed = {t for t, _ in row.devices}
        others = [t for t in m.present_types() if t not in listed and t != "amd_npu"]
        if others:
            kinds = [TYPE_WORDS[t] for t, _ in row.devices if t != "cpu"]
            found = ", ".join(_type_example(m, t) for t in others)
            return f"this {row.backend} build is listed for {' and '.join(k + 's' for k in kinds)} only (found {found})"
    if dtype == "amd_npu":
        return f"Requires an AMD {' or '.join(fams) if fams else 'XDNA'} NPU (none found)"
    if dtype == "intel_gpu":
        return "No Intel GPU found"
    return f"No {TYPE_WORDS[dtype]} found"


def _type_example(m: Machine, t: str) -> str:
    if t == "metal":
        return f"{TYPE_WORDS[t]}"
    g = m.by_type[t][0]
    return f"{TYPE_WORDS[t]}: {g.name}" if g.name else TYPE_WORDS[t]  # every device record has a name (maybe empty)


def _match_entry(m: Machine, catalog: Catalog, recipe: Recipe, row: Row, dtype: str, fams, channel: str,
                 access: str):
    """(satisfying devices best first, devices passed over with why, reasons in words, notes)"""
    if dtype == "cpu":
        if _matches_family(m.arch, fams) or requires.emulation_note(m, fams):
            return [m.cpu_device()], [], [], []
        return [], [], [f"Requires a {' or '.join(fams)} CPU (found {m.arch})"], []
    if dtype == "metal":
        if m.metal:
            return [Device("metal", "metal", 0, m.profile.metal.chip)], [], [], []
        return [], [], [m.profile.metal.note or "Requires an Apple Silicon GPU (Metal)"], []
    if not _devices_of(m, dtype, access):
        return [], [], [_absent_reason(m, row, dtype, fams, access)], []
    if dtype == "amd_gpu":
        return _match_amd(m, catalog, recipe, row, fams, channel, access)
    if dtype == "nvidia_gpu":
        return _sort_out(_judge_nvidia(m, row, fams, access))
    if dtype == "amd_npu":
        return _sort_out(_judge_npu(m, row, fams))
    return _sort_out(_judge_intel(m, row, fams))


def _devices_of(m: Machine, dtype: str, access: str) -> list:
    """The devices of a type that a backend of this access sees: Vulkan every GPU, a compute
    runtime those its own variable leaves visible."""
    if access == "graphics" and dtype in m.graphics:
        return m.graphics[dtype]
    return m.by_type.get(dtype) or []


def _family_reason(row: Row, family, name) -> str:
    """The row's own words for "this device type, but not this family" (catalog ``family_reason``)."""
    text = row.extra.get("family_reason")
    return text.replace("{family}", str(family)).replace("{name}", str(name)) if text else ""


def _check_requires(m: Machine, row: Row) -> str:
    """Row conditions that do not depend on the device (container runtime, host-wide gates)."""
    if row.format == "container" and not (m.executables.get("docker") or m.executables.get("podman")):
        return "needs docker or podman"
    return ""


class RowResult:
    """What one row says on this machine."""

    __slots__ = ("devices", "reason", "notes", "passed_over", "cpu_because")

    def __init__(self, devices, reason, notes, passed_over=(), cpu_because=()):
        self.devices, self.reason, self.notes = devices, reason, notes
        self.passed_over, self.cpu_because = list(passed_over), list(cpu_because)


def row_access(catalog: Catalog, row: Row) -> str:
    """'graphics' when the backend opens a GPU through its render node alone (Vulkan), else 'compute'
    (ROCm needs /dev/kfd too, CUDA the NVIDIA nodes).  Catalog data: ``graphics_backends``."""
    return "graphics" if row.backend in catalog.extra.get("graphics_backends", ("vulkan",)) else "compute"


def evaluate_row(m: Machine, catalog: Catalog, recipe: Recipe, row: Row, channel: str) -> RowResult:
    if m.os not in row.os:
        return RowResult([], _os_reason(row.os), [])
    emulated = None
    if row.requires.get("arch") and m.arch not in row.requires["arch"]:  # a platform fact, like the OS
        emulated = requires.emulation_note(m, row.requires["arch"])
        if emulated is None:
            return RowResult([], requires.arch_reason(m.arch, row.requires["arch"]), [])
    res = _evaluate_entries(m, catalog, recipe, row, channel)
    if res.devices and res.devices[0].type == "cpu" and emulated is None:
        fams = dict(row.devices).get("cpu") or []
        if m.arch not in fams:
            emulated = requires.emulation_note(m, fams)
    if emulated and res.devices and emulated not in res.notes:
        res.notes.append(emulated)
    return res


def _evaluate_entries(m: Machine, catalog: Catalog, recipe: Recipe, row: Row, channel: str) -> RowResult:
    access = row_access(catalog, row)
    entries = sorted(row.devices, key=lambda e: e[0] == "cpu")  # accelerators before the CPU
    unlisted: list[str] = []
    if access == "graphics":  # a Vulkan build runs on any GPU with a Vulkan driver, listed or not
        listed = {t for t, _ in row.devices}
        unlisted = [t for t in GPU_TYPES if t not in listed and m.graphics[t]]
        cut = next((i for i, e in enumerate(entries) if e[0] == "cpu"), len(entries))
        entries[cut:cut] = [(t, []) for t in unlisted]
    reasons: list[str] = []
    passed_all: list = []
    acc_found: list = []  # satisfying devices of every accelerator type of the row
    acc_notes: list[str] = []
    acc_types = 0  # how many device types contributed: one needs no sort (it costs, on a node of 64 GPUs)
    for dtype, fams in entries:
        # a speed guard: with a fit found, a type this machine lacks, or the CPU, adds nothing (judging
        # it changes no verdict)
        if acc_found and (dtype == "cpu" or not _devices_of(m, dtype, access)):  # pragma: no mutate
            continue
        found, passed, why, notes = _match_entry(m, catalog, recipe, row, dtype, fams, channel, access)
        if found:
            missing = _check_requires(m, row) or (requires.check(m, row, None) if dtype == "cpu" else "")
            if missing:
                return RowResult([], missing, [], passed_all + passed)
        passed_all += passed
        if found and dtype != "cpu":
            acc_found += found
            acc_notes += [n for n in notes if n not in acc_notes]
            acc_types += 1
            continue
        if found:
            return _row_found(m, row, found, notes, passed_all, reasons)
        for w in why:
            if w and w not in reasons:
                reasons.append(w)
    if acc_found:
        # the best of every type (Vulkan rows take several): discrete first, then memory; the sort is
        # stable, so within one type the type's own order (lower index first) stays, and one type is
        # already in that order (so sorting it would change nothing: a speed guard, not a rule)
        if acc_types > 1:  # pragma: no mutate
            acc_found.sort(key=lambda d: (_integrated(d), -_usable(d)))
        if acc_found[0].type in unlisted:
            acc_notes.append(_unlisted_note(catalog, row, acc_found[0]))
        return _row_found(m, row, acc_found, acc_notes, passed_all, [])
    return RowResult([], "; ".join(reasons), [], passed_all)


GPU_TYPES = ("amd_gpu", "nvidia_gpu", "intel_gpu")


def _and(items: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _unlisted_note(catalog: Catalog, row: Row, dev: Device) -> str:
    """The words for a Vulkan build on a GPU type its catalog row does not list."""
    listed = _and([TYPE_WORDS[t] + "s" for t, _ in row.devices])
    owner = catalog.extra.get("owner") or catalog.name
    icd = getattr(dev.gpu, "vulkan_driver", None)
    return (f"{owner}'s matrix lists this build for {listed}; it runs on this {TYPE_WORDS[dev.type]} "
            f"through its Vulkan driver" + (f" ({icd})" if icd else ""))


def _row_found(m: Machine, row: Row, found, notes, passed_all, reasons) -> RowResult:
    """The row fits on ``found``; ``reasons`` (why no accelerator entry fit) when that is the CPU."""
    notes = list(notes)
    if row.note:
        notes.append(row.note)
    present = m.present_types()
    for dt, text in row.extra.get("device_notes", {}).items():
        if dt == "cpu" or dt in present:
            notes.append(text)
    cpu_because = []
    if found[0].type == "cpu" and reasons:
        cpu_because = list(reasons)
        notes.append(f"runs on the CPU: {'; '.join(reasons)}")
    return RowResult(found, "", notes, passed_all, cpu_because)


def recipe_channel(recipe: Recipe, settings: Settings) -> str:
    """The ROCm channel clamped to what the recipe offers (sd-cpp is stable-only)."""
    if recipe.rocm_channels and settings.channel not in recipe.rocm_channels:
        return recipe.rocm_channels[0]
    return settings.channel


def install_dir_name(recipe: Recipe, backend: str, channel: str) -> str:
    """Name of the backend's directory in the cache: rocm on a channel-capable recipe is
    ``rocm-<channel>``."""
    if backend == "rocm" and recipe.rocm_channels:
        return f"rocm-{channel}"
    return backend


def state_for(recipe: Recipe, backend: str, channel: str, supported: bool, installed: dict, pins: dict,
              m: Machine | None = None) -> str:
    if not supported:
        return "unsupported"
    if backend == "system":
        return "installed"  # it is the binary on PATH
    dirname = install_dir_name(recipe, backend, channel)
    inst = installed.get(recipe.name, {})
    if dirname not in inst:
        return "installable"
    have = inst[dirname]
    rpins = pins.get(recipe.name, {})
    want = rpins.get(dirname, rpins.get(backend))
    if want is None:
        return "installed" if have else "update_required"
    # an installed "<pin>-<suffix>" matches, as in Lemonade (system_info.cpp: vllm writes
    # vllm0.20.1-rocm7.12.0-gfx1151 for the pin vllm0.20.1-rocm7.12.0)
    return "installed" if have == want or (have or "").startswith(want + "-") else "update_required"


def verdicts(m: Machine, catalog: Catalog, recipe: Recipe, installed: dict, pins: dict,
             channel: str) -> list[Verdict]:
    """Every backend's verdict: the same under every policy (the policy only chooses among them)."""
    out: list[Verdict] = []
    by_name: dict[str, Verdict] = {}
    for row in recipe.rows:
        res = evaluate_row(m, catalog, recipe, row, channel)
        ok = bool(res.devices)
        dev = res.devices[0] if ok else None
        v = by_name.get(row.backend)
        shown = _shown(row)
        if v is None:
            v = by_name[row.backend] = Verdict(row.backend, row.tier, row.format, ok, "", res.reason, dev, res.notes,
                                               shown, res.devices, res.passed_over, res.cpu_because,
                                               row_access(catalog, row))
            out.append(v)
        elif not v.supported and (ok or m.os in row.os):
            # a later row of the same backend is the one for this OS: its verdict counts
            v.supported, v.reason, v.device, v.notes = ok, res.reason, dev, res.notes
            v.devices, v.passed_over, v.cpu_because = res.devices, res.passed_over, res.cpu_because
            v.tier, v.format, v.extra = row.tier, row.format, shown
    for v in out:
        if not v.supported:
            oses = _row_os_of(recipe, v.name)
            if m.os not in oses:
                v.reason = _os_reason(oses)
        elif v.name == "system" and SYSTEM_NOTE not in v.notes:
            # the device named is where a build of this tool's choosing would run; the system build is the
            # user's, and where it runs is its own (verify asks it)
            v.notes = [SYSTEM_NOTE, *v.notes]
        v.state = state_for(recipe, v.name, channel, v.supported, installed, pins, m)
    return out


SYSTEM_NOTE = "the build on PATH, which runs where that build runs; `pick-backend verify` shows where"


def _shown(row: Row) -> dict:
    """The row's display fields (install command, env), computed once per catalog row."""
    shown = row.__dict__.get("_shown")
    if shown is None:
        # a memo: under another key it is only recomputed
        shown = row.__dict__["_shown"] = {k: row.extra[k] for k in DISPLAY_FIELDS if k in row.extra}  # pragma: no mutate
    return shown


def _row_os_of(recipe: Recipe, backend: str) -> list[str]:
    """Every OS any row of ``backend`` names, in catalog order (cached on the recipe)."""
    cache = recipe.__dict__.setdefault("_oses", {})
    seen = cache.get(backend)
    if seen is None:
        seen = []
        for r in recipe.rows:
            if r.backend == backend:
                seen += [o for o in r.os if o not in seen]
        cache[backend] = seen
    return seen


def _first_with_installed_wins(cands: list[Verdict]) -> tuple[Verdict | None, str]:
    if not cands:
        return None, ""
    first = cands[0]
    if first.state in INSTALLED_STATES:
        return first, "first supported backend in preference order"
    for v in cands[1:]:
        if v.state in INSTALLED_STATES:
            return v, (f"already installed ({v.state}); an installed backend wins over earlier ones "
                       f"that are only installable ({first.name})")
    return first, "first supported backend in preference order"


def system_preferred(recipe: Recipe, settings: Settings) -> bool:
    """--prefer-system / config first; else, under --policy lemonade, Lemonade's own default for the
    recipe (catalog ``prefer_system_default``: true for llamacpp in its defaults.json)."""
    if recipe.name in settings.prefer_system_by_recipe:
        return settings.prefer_system_by_recipe[recipe.name]
    if settings.prefer_system:
        return True
    return settings.policy == "lemonade" and bool(recipe.extra.get("prefer_system_default", False))


def device_key(dev: Device | None) -> str:
    """The same device across runs: its UUID, else its PCI address, else its kind and index; the CPU
    is "cpu" (bench.devices_of keys the machine's devices the same way)."""
    if dev is None or dev.type == "cpu":
        return "cpu"
    return dev.uuid or dev.bus_id or f"{dev.type}:{dev.index}"


def _fastest(cands: list[Verdict], recipe: Recipe, settings: Settings) -> tuple[Verdict | None, str]:
    """--policy measured: the supported backend whose fresh result on its device is fastest, over the
    model measured on the most backends (then the latest).  (None, why) when nothing can decide."""
    recs = settings.measurements.get(recipe.name, [])
    prefix = "pp" if settings.metric == "pp" else "tg"
    channel = recipe_channel(recipe, settings)
    by_model: dict[str, dict[str, dict]] = {}
    noisy = 0
    for v in cands:
        key = device_key(v.device)
        dirname = install_dir_name(recipe, v.name, channel)  # rocm-nightly's speed is not rocm-stable's
        for r in recs:
            if r["dir"] == dirname and r["device"].get("key") == key and r["test"].startswith(prefix) \
                    and "+" not in r["test"]:
                if r.get("noisy"):  # its runs disagreed: it says more about the machine's load than the build
                    noisy += 1
                    continue
                best = by_model.setdefault(r["model"]["key"], {})
                if v.name not in best or r["at"] > best[v.name]["at"]:  # tg128 and tg256: the latest run
                    best[v.name] = r
    if not by_model:
        if noisy:
            return None, (f"the fresh {prefix} measurements of {recipe.name} on this machine are noisy (their runs "
                          f"disagreed by more than a tenth of their mean); measure again on a quiet machine")
        return None, (f"no fresh {prefix} measurement of {recipe.name} on this machine "
                      f"(`pick-backend bench {recipe.name} --model M` makes them)")
    model = max(by_model, key=lambda m: (len(by_model[m]), max(r["at"] for r in by_model[m].values())))
    results = sorted(by_model[model].values(), key=lambda r: -r["avg_ts"])
    win = results[0]
    chosen = next(v for v in cands if v.name == win["backend"])
    words = " vs ".join(f"{r['backend']} {r['avg_ts']:.0f} t/s" for r in results)
    one = "" if len(results) > 1 else " (the only backend measured)"
    return chosen, (f"measured: {words}{one} ({win['test']}, {win['model'].get('label', model)}, "
                    f"{win['at'][:10]})")


def choose(vs: list[Verdict], recipe: Recipe, settings: Settings) -> tuple[Verdict | None, str]:
    prefer_system = system_preferred(recipe, settings)
    cands = [v for v in vs if v.supported and (v.name != "system" or prefer_system)]
    if settings.policy == "lemonade":
        return _first_with_installed_wins(cands)
    if settings.policy == "measured":  # a measured system build competes on its speed like the others
        v, why = _fastest([v for v in vs if v.supported], recipe, settings)
        if v is not None:
            return v, why
        fallback, fwhy = choose(vs, recipe, Settings(channel=settings.channel, prefer_system=settings.prefer_system,
                                                     prefer_system_by_recipe=settings.prefer_system_by_recipe))
        return fallback, f"{why}; accelerator-first instead: {fwhy}"
    acc = [v for v in cands if v.device is not None and v.device.type in ACCELERATORS]
    if acc:
        v, why = _first_with_installed_wins(acc)
        return v, why.replace("first supported backend", "first supported accelerator backend")
    v, why = _first_with_installed_wins(cands)
    if v is not None and v.name == "system":
        why = "no accelerator backend is supported here; the build on PATH comes first, as prefer_system asks"
    elif v is not None:
        why = "no accelerator backend is supported here; " + why.replace("first supported backend", "first supported CPU backend")
    return v, why


def decide(profile, catalog: Catalog, recipe_name: str, installed: dict | None = None,
           settings: Settings | None = None, pins: dict | None = None, machine: Machine | None = None) -> Decision:
    settings = settings or Settings()
    installed = installed or {}
    pins = pins or {}
    m = machine or Machine(profile)
    recipe = catalog.recipes[recipe_name]
    channel = recipe_channel(recipe, settings)
    vs = verdicts(m, catalog, recipe, installed, pins, channel)
    flag = recipe.backend_flag
    warnings: list[str] = []
    notes: list[str] = []
    pinned = settings.backends.get(recipe_name)
    if pinned and pinned != "auto":
        v = next((x for x in vs if x.name == pinned), None)
        source = settings.backend_sources.get(recipe_name, "--backend")
        if v is None:
            raise KeyError(pinned)
        if v.supported:
            reason = f"pinned by {source}"
        else:
            reason = f"pinned by {source}, but not supported here: {v.reason}"
        chosen, why, is_pinned = v, reason, True
    else:
        chosen, why = choose(vs, recipe, settings)
        is_pinned = False
        if settings.policy != "lemonade":  # pragma: no mutate (under lemonade the same choice: no note)
            lem_settings = Settings(settings.channel, settings.prefer_system, "lemonade",
                                    prefer_system_by_recipe=settings.prefer_system_by_recipe)
            # the verdicts are the same under every policy (an exclusion is a hardware fact): only the
            # choice among them is Lemonade's
            other, _ = choose(vs, recipe, lem_settings)
            if chosen is not None and other is not None and other.name != chosen.name:
                if other.name == "system" and not system_preferred(recipe, settings):
                    # --prefer-system only allows the system build: accelerator-first still puts a GPU
                    # build before it, so the flag is named only where it would choose system
                    allowed = Settings(settings.channel, True, settings.policy,
                                       prefer_system_by_recipe={**settings.prefer_system_by_recipe, recipe_name: True})
                    with_flag = choose(vs, recipe, allowed)[0]
                    flags = "--prefer-system or --backend system" if with_flag is not None and \
                        with_flag.name == "system" else "--backend system"
                    notes.append(f"--policy lemonade would pick system (Lemonade prefers a llama-server on PATH for "
                                 f"{recipe_name}); prefer_system is off outside --policy lemonade: {flags} chooses it")
                else:
                    # what chose instead: the measurement, or accelerator-first (also measured's fallback)
                    ours = ("the measurement prefers" if why.startswith("measured:") else "accelerator-first prefers")
                    notes.append(f"--policy lemonade would pick {other.name} (Lemonade takes the first supported "
                                 f"row; {ours} {chosen.name} on the {TYPE_WORDS[chosen.device.type]})")
        if chosen is not None:
            why += _losers(vs, chosen, catalog, recipe_name)
    if chosen is None:
        no_fit = catalog.extra.get("no_fit_reason") or "no backend of {recipe} is supported on this machine"
        return Decision(recipe_name, None, None, None, no_fit.replace("{recipe}", recipe_name), None, vs,
                        False, warnings, notes, channel)
    if chosen.supported and chosen.on_cpu and chosen.name not in ("cpu", "system"):
        warnings.append(f"{chosen.name} runs on the CPU here, not on a GPU"
                        + (f" ({'; '.join(chosen.cpu_because)})" if chosen.cpu_because else ""))
    run_env, env_note, kept = run_env_for(m, chosen) if chosen.supported else ({}, "", [])
    if env_note:
        notes.append(env_note)
    if chosen.supported and chosen.access != "graphics" and chosen.device is not None and \
            chosen.device.type == "amd_gpu":
        notes += _override_notes(m, chosen)
    run_args = f"{flag} {chosen.name}" if flag else None
    return Decision(recipe_name, chosen.name, chosen.device, chosen.state, why, run_args, vs, is_pinned,
                    warnings, notes, channel, run_env, kept)


def _losers(vs: list[Verdict], chosen: Verdict, catalog: Catalog, recipe: str) -> str:
    """Why each later installable accelerator backend lost: the catalog's order, and how to choose it."""
    after = vs[vs.index(chosen) + 1:]  # accelerator-first chose an accelerator whenever one is supported
    lost = [v.name for v in after if v.supported and v.state == "installable" and v.device is not None
            and v.device.type in ACCELERATORS and v.name != "system"]
    if not lost:
        return ""
    owner = catalog.extra.get("owner") or catalog.name
    order = f"{owner}'s order"  # only accelerator-first names losers: under --policy lemonade the first row wins
    names = _and(lost)
    flags = " or ".join(f"--backend {n}" for n in lost)
    return f"; {chosen.name} comes before {names} in {order} for {recipe}; {flags} chooses {'it' if len(lost) == 1 else 'one'}"


def _override_notes(m: Machine, v: Verdict) -> list[str]:
    """A process-wide HSA_OVERRIDE_GFX_VERSION that ROCm refuses for some GPUs: how to say it per node."""
    env = m.profile.device_env
    value = env.get("HSA_OVERRIDE_GFX_VERSION")
    every = m.profile.amd_gpus
    refused = [g for g in every if g.gfx_override == "HSA_OVERRIDE_GFX_VERSION" and g.gfx_override_refused]
    if value is None or not refused:
        return []
    fits = [d.gpu for d in v.devices if d.gpu is not None and d.gpu.gfx_override == "HSA_OVERRIDE_GFX_VERSION"
            and d.gpu.gfx_effective != d.gpu.gfx]
    names = ", ".join(f"{g.name} ({g.gfx})" for g in refused)
    out = f"HSA_OVERRIDE_GFX_VERSION={value} applies to every AMD GPU of the process; ROCm refuses it for {names}"
    per_node = [f"HSA_OVERRIDE_GFX_VERSION_{g.kfd_node}={value}" for g in fits if g.kfd_node is not None]
    if per_node:
        out += (f": to override only {', '.join(g.name for g in fits)}, set {' '.join(per_node)} instead "
                f"(ROCr reads HSA_OVERRIDE_GFX_VERSION_<KFD node>)")
    return [out]


# Runtime facts: the variable each compute runtime reads to choose its GPUs.  HIP takes indices among
# the GPUs it sees; CUDA takes indices or UUIDs (UUIDs survive re-enumeration, so they are preferred).
VISIBLE_ENV = {"amd_gpu": "HIP_VISIBLE_DEVICES", "nvidia_gpu": "CUDA_VISIBLE_DEVICES"}


def run_env_for(m: Machine, v: Verdict) -> tuple[dict[str, str], str, list[Device]]:
    """The environment that makes the engine run on the chosen device when several of its type are
    visible, and a note where it cannot be given.

    A compute build (ROCm, CUDA) is pinned to the satisfying devices that the same build serves: for
    ROCm the devices matched by the same row token as the chosen one (a gfx110X build never gets a
    gfx1032); for CUDA every satisfying device (the row lists the build's targets).  Nothing is set
    when every visible device of the type is among them.  Vulkan's device order is not known before
    the build runs, so it gets a note instead of a guess."""
    dev = v.device
    if dev is not None and dev.type in GPU_TYPES and v.access == "graphics":
        # Vulkan enumerates the GPUs of every vendor that have a Vulkan driver
        gpus = {t: n for t in GPU_TYPES if (n := sum(1 for g in m.graphics[t] if not _access_reason(g, v.name, "graphics", m)))}
        total = sum(gpus.values())
        if total < 2:
            return {}, "", []
        what = f"{total} {TYPE_WORDS[dev.type]}s" if len(gpus) == 1 else \
            f"{total} GPUs ({', '.join(f'{n} {TYPE_WORDS[t]}' for t, n in gpus.items())})"
        return {}, (f"{what} are visible; Vulkan numbers devices in its own order, "
                    f"so pin one with GGML_VK_VISIBLE_DEVICES after `pick-backend verify` lists them"), []
    if dev is None or dev.type not in VISIBLE_ENV:
        return {}, "", []
    visible = m.by_type[dev.type]
    # the devices the compute runtime enumerates: those it can open
    visible = [g for g in visible if getattr(g, "usable_compute", True) and getattr(g, "usable", True)
               and getattr(g, "driver_loaded", True)]
    # a shell CUDA_VISIBLE_DEVICES is read in CUDA's order, which may be a guess: pin by UUID anyway,
    # so the engine gets the GPU judged here whatever the order
    pin_anyway = dev.type == "nvidia_gpu" and "CUDA_VISIBLE_DEVICES" in m.profile.device_env and \
        len(m.profile.nvidia_gpus) > 1
    if len(visible) < 2 and not pin_anyway:
        return {}, "", []
    if dev.type == "amd_gpu":
        group = [d for d in v.devices if d.token == dev.token]
    else:
        group = list(v.devices)
    if len(group) == len(visible) and not pin_anyway:
        return {}, "", []
    group.sort(key=lambda d: d.index)  # an AMD or NVIDIA GPU always has its index
    if dev.type == "nvidia_gpu" and all(d.uuid for d in group):
        ids = [d.uuid for d in group]
    elif dev.type == "nvidia_gpu":
        # by index: CUDA counts fastest first unless told PCI order, and run_env replaces any
        # CUDA_VISIBLE_DEVICES of this shell, so the index is the GPU's place in PCI (NVML) order
        # among every GPU CUDA can use, visible here or not
        usable = sorted((g for g in m.profile.nvidia_gpus if g.usable and g.driver_loaded), key=lambda g: g.index)
        pos = {id(g): n for n, g in enumerate(usable)}
        ids = [str(pos.get(id(d.gpu), d.index)) for d in group]
        return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", VISIBLE_ENV[dev.type]: ",".join(ids)}, "", group
    else:
        ids = [str(_first_int(getattr(d.gpu, "hip_index", None), d.index)) for d in group]
    return {VISIBLE_ENV[dev.type]: ",".join(ids)}, "", group


def _first_int(*values) -> int:
    for v in values:
        if isinstance(v, int):
            return v
    return 0
