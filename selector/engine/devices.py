"""The machine as the engine sees it: one record per device, whatever its vendor.

A Profile keeps each vendor's devices in the vendor's own terms (an AMD GPU's gfx and KFD node, an
NVIDIA GPU's sm and NVML driver, an NPU's generation).  ``MAPPINGS`` turns each into a ``Unit``: its
kind, its family (the hardware's and the one a compute runtime judges it as), what it can be opened
for and, in words, why not, the facts a gate may need, and what names it to a runtime.  The judge
(selector/engine/match.py) reads Units only: a new vendor is a probe record, a kind in
catalogs/device-kinds.json and a mapping here, not a branch in the judge.

Words a device contributes are templates with ``{backend}`` and ``{families}`` (filled in by the
judge, which knows the row) beside the device's own values (``{name}``, ``{family}``, ...).
"""

from __future__ import annotations

from probes import memory
from probes.util import parse_override

from selector.engine.records import Device
from selector.engine.words import vulkan_fix
from selector.kinds import ACCELERATORS, GPU_TYPES


def family_token(value: str | None, families) -> str | None:
    """The row token ``value`` matches (``gfx1102`` -> ``gfx110X``: a token ending in X takes every
    family that starts with the rest), or None."""
    if value is None:
        return None
    for fam in families:
        if fam.endswith("X") and len(fam) > 1:
            if value.startswith(fam[:-1]):
                return fam
        elif value == fam:
            return fam
    return None


def matches_family(value: str | None, families) -> bool:
    """An empty family list takes any device; else ``value`` must match one token."""
    return not families or family_token(value, families) is not None


UNKNOWN = "{name}: its family is unknown, so no {backend} build can be matched to it ({backend} needs {families})"
MISMATCH = "{name}: {backend} is built for {families}, not {judged}"


class Unit:
    """One device as the judge sees it.

    ``family`` is the hardware's (gfx1031, sm_89, XDNA2, arc); ``runs_as`` the family a compute
    runtime judges (an HSA override makes a gfx1031 run as gfx1030).  ``refused`` (any access) and
    ``refused_compute`` are why it cannot be used at all, said before its family is looked at (no
    driver drives it; ROCm refuses the override); ``closed`` why this process cannot open it for
    ``compute`` or ``graphics`` ("" where it can).  ``unknown`` and ``mismatch`` are its words when
    a row's families cannot be matched.  ``facts`` are what a gate may need (``cwsr``).  ``key``: two
    units with equal keys are judged alike (a node of eight MI300X is judged once per row)."""

    __slots__ = ("kind", "record", "family", "runs_as", "override", "name", "label", "index", "memory_bytes",
                 "bus_id", "uuid", "integrated", "refused", "refused_compute", "closed", "unknown", "mismatch",
                 "merges", "own_words", "facts", "key", "values", "enumerated", "runtime_index", "_usable")

    def __init__(self, kind: str, record, family: str | None, *, name: str = "", label=None, index=None,
                 memory_bytes=None, bus_id=None, uuid=None, runs_as=None, override=None, integrated=False,
                 refused="", refused_compute="", closed=None, unknown=None, mismatch=None, merges=False,
                 own_words=True, facts=None, key=(), values=None, enumerated=True, runtime_index=None):
        self.kind, self.record, self.family = kind, record, family
        self.runs_as = family if runs_as is None else runs_as
        self.override = override
        self.name, self.label, self.index = name, name if label is None else label, index
        self.memory_bytes, self.bus_id, self.uuid = memory_bytes, bus_id, uuid
        self.integrated = integrated
        self.refused, self.refused_compute = refused, refused_compute
        self.closed = closed or {"compute": "", "graphics": ""}
        # a kind without words of its own gets plain ones: the judge never passes a device over in silence
        self.unknown = UNKNOWN if unknown is None else unknown
        self.mismatch = MISMATCH if mismatch is None else mismatch
        self.merges, self.own_words = merges, own_words
        self.facts = facts or {}
        self.key = key
        self.values = {"name": name, "family": family, **(values or {})}
        self.enumerated, self.runtime_index = enumerated, runtime_index
        self._usable = None

    def judged_family(self, access: str) -> str | None:
        """A Vulkan build judges the hardware: an HSA override is ROCm's alone."""
        return self.family if access == "graphics" else self.runs_as

    def usable_memory(self) -> int:
        """The memory an engine can allocate on it: an APU's GTT counts (probes/memory.py)."""
        if self._usable is None:
            self._usable = (memory.amd(self.record).usable or 0) if self.kind == "amd_gpu" else (self.memory_bytes or 0)
        return self._usable


# ------------------------------------------------------------------------------------------------
# Words shared by GPUs: opening one, and its Vulkan driver


def _cannot_open(g, what: str) -> str:
    fix = g.access_fix
    if getattr(g, "source", None) == "kfd" and g.render_node is None:  # a KFD node whose DRM node is missing
        text = "{name}: it has no render node (/dev/dri/renderD*), so {backend} cannot use it"
    else:
        text = "{name}: this process cannot open " + what.replace("{", "{{").replace("}", "}}") + \
            ", so {backend} cannot use it"
    return text + (" ({fix})" if fix else "")


def _graphics(g, m, usable: bool, what: str) -> str:
    """Why a Vulkan build cannot use ``g``: its driver, the loader (said once for the machine), the
    variable hiding it, or its device nodes."""
    if not g.vulkan_driver:
        return "{name}: no Vulkan driver for it is installed, so {backend} cannot use it ({vk_fix})"
    if not m.vulkan_loader:  # the driver is there, but nothing loads it into the build
        return "the Vulkan loader is not installed, so {backend} finds no GPU through its Vulkan driver ({loader_fix})"
    if not g.vulkan_visible:
        return "{name}: GGML_VK_VISIBLE_DEVICES hides it from llama.cpp's Vulkan backend"
    return "" if usable else _cannot_open(g, what)


def _vk_values(m, vendor: str) -> dict:
    return {"vk_fix": _Lazy(vendor, m.os), "loader_fix": _Lazy(vendor, m.os, "loader")}


class _Lazy:
    """A Vulkan fix read from its table only when a sentence names it."""

    __slots__ = ("args",)

    def __init__(self, *args):
        self.args = args

    def __format__(self, spec) -> str:
        return vulkan_fix(*self.args)


def _bus(g):
    return g.pci.bus_id if g.pci else None


# ------------------------------------------------------------------------------------------------
# The mappings: each vendor's Profile records into Units, best first


def _amd(m, profile) -> list[Unit]:
    out = []
    for g in sorted(profile.amd_gpus, key=lambda g: (g.integrated, -(g.vram_bytes or 0), g.index)):
        refused = ""
        values = {"fix": g.access_fix, **_vk_values(m, "amd")}
        if g.gfx_override_refused:
            # the variable is set (it is what was refused); the default only keeps a hand-made profile printable
            value = profile.device_env.get(g.gfx_override, "")  # pragma: no mutate
            refused = ("{name}: {var}={value} asks ROCm to run this {family} as {target}, across a major version, "
                       "which ROCm refuses (ROCm/rocm-systems#5686)")
            values.update(var=g.gfx_override, value=value, target=parse_override(value) or value)
        override = g.gfx_override or "HSA_OVERRIDE_GFX_VERSION"
        node = g.render_node
        closed = {"compute": "" if g.usable_compute else _cannot_open(g, "/dev/kfd and its render node"),
                  "graphics": _graphics(g, m, g.usable_graphics, f"its render node{' ' + node if node else ''}")}
        eff = g.gfx_effective or g.gfx
        out.append(Unit(
            "amd_gpu", g, g.gfx, runs_as=eff, override=override, name=g.name, index=g.index,
            memory_bytes=g.vram_bytes, bus_id=_bus(g), uuid=g.unique_id, integrated=g.integrated,
            refused_compute=refused, closed=closed,
            unknown=("{name}: its gfx target is unknown (not in the tables), so no {backend} build can be matched "
                     "to it ({backend} needs {families})"),
            mismatch="Unsupported GPU: {judged} ({backend} needs {families})", merges=True,
            facts={"cwsr": g.cwsr}, values=values, enumerated=g.usable_compute, runtime_index=g.hip_index,
            key=(g.gfx, eff, g.name, g.usable_compute, g.usable_graphics, g.cwsr, g.access_fix,
                 g.gfx_override_refused, g.vulkan_driver, g.vulkan_visible, g.visible)))
    return out


def _nvidia(m, profile) -> list[Unit]:
    out = []
    for g in sorted(profile.nvidia_gpus, key=lambda g: (-(g.memory_bytes or 0), g.index)):
        no_driver = not g.driver_loaded or (g.sm is None and g.driver_version is None)
        # the driver is loaded and the capability unread: a Jetson's SoC is not in the tables (it has no
        # NVML), any other card's NVML did not answer (`probe` says why)
        cause = "its SoC is not in the tables" if g.source == "jetson" else "NVML did not answer"
        vk = "nvidia" if g.driver_loaded else "nvidia_no_driver"
        closed = {"compute": "" if g.usable else _cannot_open(g, "its device nodes"),
                  "graphics": _graphics(g, m, g.usable, "its device nodes (/dev/nvidia*)")}
        out.append(Unit(
            "nvidia_gpu", g, g.sm, name=g.name, index=g.index, memory_bytes=g.memory_bytes, bus_id=_bus(g),
            uuid=g.uuid,
            refused=("{name}: no NVIDIA driver drives it (none loaded, or the card is bound to another), so "
                     "{backend} cannot run on it") if no_driver else "",
            closed=closed,
            unknown=("{name}: its compute capability is unknown ({cause}), so no {backend} build can be matched to "
                     "it ({backend} needs {families})"),
            mismatch="No NVIDIA GPU with {families} (found {judged}, {name})",
            values={"cause": cause, "fix": g.access_fix, **_vk_values(m, vk)},
            enumerated=g.usable and g.driver_loaded,
            # requires.check reads the driver and the capability of the card (CUDA builds' gates)
            key=(g.sm, tuple(g.compute_capability or ()), g.name, g.driver_loaded, g.usable, g.driver_version,
                 g.cuda_driver_version, g.source, g.access_fix, g.vulkan_driver, g.vulkan_visible, g.visible)))
    return out


def _npu(m, profile) -> list[Unit]:
    out = []
    # (XDNA2 before XDNA1 orders NPUs of two generations: no machine has two NPUs to tell)
    for n in sorted(profile.npus, key=lambda n: (not n.driver_bound, not n.usable,
                                                  n.generation != "XDNA2")):  # pragma: no mutate
        if not n.driver_bound:
            closed = ("{family} NPU found but its driver is not installed" if m.os == "windows"
                      else "{family} NPU found but the amdxdna driver is not loaded")
        elif not n.usable:
            closed = "{family} NPU found but this process cannot open {node}" + (" ({fix})" if n.access_fix else "")
        else:
            closed = ""
        out.append(Unit(
            "amd_npu", n, n.generation, name=n.name or "", label=n.name or f"{n.codename} NPU", index=0,
            closed={"compute": closed, "graphics": closed}, own_words=False,
            mismatch="Requires an AMD {families_or} NPU (found {family} {codename})",
            values={"codename": n.codename, "node": n.device_node or "its /dev/accel node", "fix": n.access_fix},
            key=(n.generation, n.codename, n.name, n.driver_bound, n.usable, n.device_node, n.access_fix)))
    return out


def _intel(m, profile) -> list[Unit]:
    out = []
    for g in sorted(profile.intel_gpus or [], key=lambda g: (not g.arc, g.index)):
        node = g.render_node
        # every Intel backend reaches the GPU through its render node and (llama.cpp's SYCL and Vulkan
        # builds alike, as judged so far) its Vulkan driver
        text = _graphics(g, m, g.usable_graphics, f"its render node{' ' + node if node else ''}")
        out.append(Unit(
            "intel_gpu", g, "arc" if g.arc else "intel", name=g.name, index=g.index, integrated=not g.arc,
            closed={"compute": text, "graphics": text},
            mismatch="Requires an Intel {families_or} GPU (found {name})",
            values={"fix": g.access_fix, **_vk_values(m, "intel")},
            key=(g.arc, g.name, g.usable_graphics, g.render_node, g.access_fix, g.vulkan_driver, g.vulkan_visible)))
    return out


def _metal(m, profile) -> list[Unit]:
    mt = profile.metal
    if not mt.available:
        return []
    return [Unit("metal", None, "metal", label=mt.chip, index=0, key=("metal",))]  # no record: as a CPU entry


def _hidden_amd(profile, units) -> str | None:
    if any(g.gfx for g in profile.amd_gpus):
        return "No visible AMD GPU (HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES hide them)"
    return None


def _hidden_nvidia(profile, units) -> str | None:
    return "No visible NVIDIA GPU (CUDA_VISIBLE_DEVICES hides them)" if profile.nvidia_gpus else None


def _no_metal(profile, units) -> str | None:
    return profile.metal.note or "Requires an Apple Silicon GPU (Metal)"


class Mapping:
    """How one kind's Profile records become Units: ``units(machine, profile)`` every device best first;
    ``visible(record)`` whether its compute runtime sees it; ``none(profile, units)`` why the machine has
    none visible to offer, when that is a fact of its own (variables hiding them, an Intel Mac)."""

    __slots__ = ("units", "visible", "none")

    def __init__(self, units, visible=None, none=None):
        self.units, self.visible, self.none = units, visible, none


MAPPINGS: dict[str, Mapping] = {
    "amd_gpu": Mapping(_amd, lambda g: g.visible, _hidden_amd),  # visible to ROCm (HIP/ROCR_VISIBLE_DEVICES)
    "nvidia_gpu": Mapping(_nvidia, lambda g: g.visible, _hidden_nvidia),  # visible to CUDA (CUDA_VISIBLE_DEVICES)
    "amd_npu": Mapping(_npu),
    "intel_gpu": Mapping(_intel),
    "metal": Mapping(_metal, none=_no_metal),
}


class Machine:
    """The Profile as the engine sees it: the Units of every kind, best first (discrete before
    integrated, then more memory, then lower index).  ``visible[kind]``: those its compute runtime sees;
    ``every[kind]``: all of them, as a Vulkan build does (RADV, ANV and NVIDIA's Vulkan driver read none
    of the runtimes' variables).  A row is judged against them; the first that satisfies it is the
    device the backend runs on."""

    def __init__(self, profile):
        self.profile = profile
        self.os = profile.os.name
        self.arch = profile.cpu.arch
        # the build reaches a GPU's Vulkan driver through the loader (libvulkan.so.1, vulkan-1.dll); MoltenVK
        # is both on a Mac
        self.vulkan_loader = bool(profile.vulkan.loader)
        self.executables = profile.executables
        self.every: dict[str, list[Unit]] = {}
        self.visible: dict[str, list[Unit]] = {}
        self.none: dict[str, str] = {}  # kind -> why none is visible, where the machine says why
        for kind, mapping in MAPPINGS.items():
            units = mapping.units(self, profile)
            shown = [u for u in units if mapping.visible(u.record)] if mapping.visible else units
            self.every[kind], self.visible[kind] = units, shown
            if not shown and mapping.none is not None:
                why = mapping.none(profile, units)
                if why:
                    self.none[kind] = why
        self._runs: dict = {}
        self._devices: dict = {}
        self._present: list[str] | None = None

    def first(self, kind: str):
        """The Profile record of the best visible device of a kind (host-wide facts, such as the NVIDIA
        driver version, are read through it), or None."""
        units = self.visible.get(kind)
        return units[0].record if units else None

    def units(self, kind: str, access: str) -> list[Unit]:
        """The devices of a kind a backend of this access sees: Vulkan every GPU, a compute runtime
        those its own variable leaves visible."""
        if access == "graphics" and kind in GPU_TYPES:
            return self.every.get(kind, [])
        return self.visible.get(kind, [])

    def runs(self, kind: str, access: str) -> list[tuple[tuple, list[Unit]]]:
        """The devices in best-first order as runs of neighbours that every row judges alike, so a node
        of 64 identical GPUs is judged once per row and the order stays exactly best-first."""
        got = self._runs.get((kind, access))
        if got is None:
            got = []
            for u in self.units(kind, access):
                if got and got[-1][0] == u.key:
                    got[-1][1].append(u)
                else:
                    got.append((u.key, [u]))
            self._runs[(kind, access)] = got
        return got

    def devices(self, key, units: list[Unit], family, token) -> list[Device]:
        """The Devices of one run of alike units, made once per machine."""
        ck = (key, id(units[0]), family, token)
        devs = self._devices.get(ck)
        if devs is None:
            devs = self._devices[ck] = [Device(u.kind, family, u.index, u.label, u.memory_bytes, u.bus_id, u.uuid,
                                               u.record, token, u) for u in units]
        return devs

    def cpu_device(self) -> Device:
        return Device("cpu", self.arch, 0, self.profile.cpu.brand or None)

    def present_types(self) -> list[str]:
        """Accelerator kinds this machine has a visible device of: GPUs first."""
        if self._present is None:
            order = [*GPU_TYPES, *(k for k in ACCELERATORS if k not in GPU_TYPES)]
            self._present = [k for k in order if self.visible.get(k)]
        return self._present
