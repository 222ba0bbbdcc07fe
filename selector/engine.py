"""The rule engine: pure functions over plain data, no I/O.

``decide(profile, catalog, recipe, installed, settings, pins)`` gives a Decision: a verdict for every
backend of the recipe in preference order (supported or not, why, on which device, tier, format,
state), and the pick.  ``Machine`` is the Profile seen as the engine needs it (one chosen device per
type), built once per profile and reused for every recipe.
"""

from __future__ import annotations

from probes.record import Record, field

from selector import requires
from selector.catalog import ACCELERATORS, DISPLAY_FIELDS, Catalog, Recipe, Row

POLICIES = ("accelerator-first", "lemonade")
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

    def prefer_system_for(self, recipe: str) -> bool:
        return self.prefer_system_by_recipe.get(recipe, self.prefer_system)

    def to_dict(self) -> dict:
        return {"channel": self.channel, "prefer_system": self.prefer_system, "policy": self.policy}


class Device(Record):
    type: str
    family: str | None
    index: int | None = None
    name: str | None = None

    def __init__(self, type, family, index=None, name=None):  # hot path: spelled out
        self.type, self.family, self.index, self.name = type, family, index, name

    def to_dict(self) -> dict:
        return {"type": self.type, "family": self.family, "index": self.index, "name": self.name}


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

    def __init__(self, name, tier, format, supported, state, reason, device, notes=None, extra=None):  # hot path
        self.name, self.tier, self.format, self.supported = name, tier, format, supported
        self.state, self.reason, self.device = state, reason, device
        self.notes = [] if notes is None else notes
        self.extra = {} if extra is None else extra

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
    """Chosen devices of a Profile.  On hybrid machines each device type is chosen once, and the same
    device serves support, the reported target and the install: discrete before integrated, then
    more memory, then lower index."""

    def __init__(self, profile):
        self.profile = profile
        self.os = profile.os.name
        self.arch = profile.cpu.arch
        amd = [g for g in profile.amd_gpus if g.visible and g.gfx]
        amd.sort(key=lambda g: (g.integrated, -(g.vram_bytes or 0), g.index))
        self.amd = amd[0] if amd else None
        self.amd_hidden = not amd and any(g.gfx for g in profile.amd_gpus)
        nv = [g for g in profile.nvidia_gpus if g.visible]
        nv.sort(key=lambda g: (-(g.memory_bytes or 0), g.index))
        self.nvidia = nv[0] if nv else None
        self.nvidia_hidden = not nv and bool(profile.nvidia_gpus)
        npus = sorted(profile.npus, key=lambda n: (not n.driver_bound, n.generation != "XDNA2"))
        self.npu = npus[0] if npus else None
        intel = sorted(getattr(profile, "intel_gpus", []) or [], key=lambda g: not g.arc)
        self.intel = intel[0] if intel else None
        self.metal = profile.metal.available
        self.executables = profile.executables

    def cpu_device(self) -> Device:
        return Device("cpu", self.arch, 0, self.profile.cpu.brand or None)


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
# One device entry of one row


def _match_entry(m: Machine, catalog: Catalog, recipe: Recipe, row: Row, dtype: str, fams, settings: Settings,
                 channel: str) -> tuple[Device | None, str, list[str]]:
    """(device, reason-when-not, notes)"""
    backend = row.backend
    if dtype == "cpu":
        if _matches_family(m.arch, fams):
            return m.cpu_device(), "", []
        return None, f"Requires a {' or '.join(fams)} CPU (found {m.arch})", []

    if dtype == "amd_gpu":
        g = m.amd
        if g is None:
            if m.amd_hidden:
                return None, "No visible AMD GPU (HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES hide them)", []
            return None, "No AMD GPU found", []
        if settings.policy != "lemonade":
            for ex in catalog.exclusions_for(backend, "amd_gpu"):
                if _matches_family(g.gfx, ex.families):
                    return None, f"{ex.reason} ({g.name}, {g.gfx})", []
        eff = g.gfx_effective or g.gfx
        notes = []
        overridden = eff != g.gfx
        if fams and not _matches_family(eff, fams):
            extra = f" (HSA_OVERRIDE_GFX_VERSION makes {g.gfx} run as {eff})" if overridden else ""
            return None, (_family_reason(row, eff, g.name) or
                          f"Unsupported GPU: {eff} ({backend} needs {describe_families(fams)})") + extra, []
        gate = catalog.gates_for(recipe.name, backend).get(eff)
        if gate is not None and (m.os not in gate.os or channel not in gate.channels):
            return None, gate.reason, []
        if fams and overridden:
            notes.append(f"judged as {eff} through HSA_OVERRIDE_GFX_VERSION (hardware: {g.gfx})")
        return Device("amd_gpu", eff if fams else g.gfx, g.index, g.name), "", notes

    if dtype == "nvidia_gpu":
        g = m.nvidia
        if g is None:
            if m.nvidia_hidden:
                return None, "No visible NVIDIA GPU (CUDA_VISIBLE_DEVICES hides them)", []
            return None, "No NVIDIA GPU found", []
        if fams and g.sm is None:
            return None, (f"{g.name}: compute capability unknown without the NVIDIA driver "
                          f"({backend} needs {describe_families(fams)})"), []
        if fams and not _matches_family(g.sm, fams):
            return None, _family_reason(row, g.sm, g.name) or \
                f"No NVIDIA GPU with {describe_families(fams)} (found {g.sm}, {g.name})", []
        return Device("nvidia_gpu", g.sm, g.index, g.name), "", []

    if dtype == "amd_npu":
        n = m.npu
        want = " or ".join(fams) if fams else "XDNA"
        if n is None:
            return None, f"Requires an AMD {want} NPU (none found)", []
        if fams and n.generation not in fams:
            return None, f"Requires an AMD {want} NPU (found {n.generation} {n.codename})", []
        if not n.driver_bound:
            if m.os == "windows":
                return None, f"{n.generation} NPU found but its driver is not installed", []
            return None, f"{n.generation} NPU found but the amdxdna driver is not loaded", []
        return Device("amd_npu", n.generation, 0, n.name or f"{n.codename} NPU"), "", []

    if dtype == "metal":
        if m.metal:
            return Device("metal", "metal", 0, m.profile.metal.chip), "", []
        return None, m.profile.metal.note or "Requires an Apple Silicon GPU (Metal)", []

    if dtype == "intel_gpu":
        g = m.intel
        if g is None:
            return None, "No Intel GPU found", []
        fam = "arc" if g.arc else "intel"
        if fams and fam not in fams:
            return None, _family_reason(row, fam, g.name) or \
                f"Requires an Intel {' or '.join(fams)} GPU (found {g.name})", []
        return Device("intel_gpu", fam, 0, g.name), "", []

    return None, f"unknown device type {dtype}", []


def _family_reason(row: Row, family, name) -> str:
    """The row's own words for "this device type, but not this family" (catalog ``family_reason``)."""
    text = row.extra.get("family_reason")
    return text.replace("{family}", str(family)).replace("{name}", str(name)) if text else ""


_HAS_DEVICE = {
    "amd_gpu": lambda m: m.amd is not None,
    "nvidia_gpu": lambda m: m.nvidia is not None,
    "intel_gpu": lambda m: m.intel is not None,
    "amd_npu": lambda m: m.npu is not None,
    "metal": lambda m: bool(m.metal),
    "cpu": lambda m: True,
}


def _check_requires(m: Machine, row: Row, gpu=None) -> str:
    """Extra conditions of a row beyond OS and device; '' when met."""
    if row.format == "container" and not (m.executables.get("docker") or m.executables.get("podman")):
        return "needs docker or podman"
    return requires.check(m, row, gpu)


def evaluate_row(m: Machine, catalog: Catalog, recipe: Recipe, row: Row, settings: Settings,
                 channel: str) -> tuple[Device | None, str, list[str]]:
    if m.os not in row.os:
        return None, _os_reason(row.os), []
    if row.requires.get("arch") and m.arch not in row.requires["arch"]:  # a platform fact, like the OS
        return None, requires.arch_reason(m.arch, row.requires["arch"]), []
    entries = sorted(row.devices, key=lambda e: e[0] == "cpu")  # accelerators before the CPU
    reasons = []
    for dtype, fams in entries:
        dev, why, notes = _match_entry(m, catalog, recipe, row, dtype, fams, settings, channel)
        if dev is not None:
            missing = _check_requires(m, row, {"nvidia_gpu": m.nvidia, "amd_gpu": m.amd, "intel_gpu": m.intel}.get(dtype))
            if missing:
                return None, missing, []
            if row.note:
                notes = notes + [row.note]
            for dt, text in row.extra.get("device_notes", {}).items():
                if _HAS_DEVICE[dt](m):
                    notes = notes + [text]
            if dtype == "cpu" and reasons:
                notes = notes + [f"runs on the CPU: {'; '.join(reasons)}"]
            return dev, "", notes
        if why and why not in reasons:
            reasons.append(why)
    return None, "; ".join(reasons), []


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
    return "installed" if have == want else "update_required"


def verdicts(m: Machine, catalog: Catalog, recipe: Recipe, settings: Settings, installed: dict, pins: dict,
             channel: str) -> list[Verdict]:
    out: list[Verdict] = []
    by_name: dict[str, Verdict] = {}
    for row in recipe.rows:
        dev, why, notes = evaluate_row(m, catalog, recipe, row, settings, channel)
        v = by_name.get(row.backend)
        shown = _shown(row)
        if v is None:
            v = by_name[row.backend] = Verdict(row.backend, row.tier, row.format, dev is not None, "", why, dev, notes,
                                               shown)
            out.append(v)
        elif not v.supported and (dev is not None or m.os in row.os):
            # a later row of the same backend is the one for this OS: its verdict counts
            v.supported, v.reason, v.device, v.notes = dev is not None, why, dev, notes
            v.tier, v.format, v.extra = row.tier, row.format, shown
    for v in out:
        if not v.supported:
            oses = _row_os_of(recipe, v.name)
            if m.os not in oses:
                v.reason = _os_reason(oses)
        v.state = state_for(recipe, v.name, channel, v.supported, installed, pins, m)
    return out


def _shown(row: Row) -> dict:
    """The row's display fields (install command, env), computed once per catalog row."""
    shown = row.__dict__.get("_shown")
    if shown is None:
        shown = row.__dict__["_shown"] = {k: row.extra[k] for k in DISPLAY_FIELDS if k in row.extra}
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


def choose(vs: list[Verdict], recipe: Recipe, settings: Settings) -> tuple[Verdict | None, str]:
    prefer_system = settings.prefer_system_for(recipe.name)
    cands = [v for v in vs if v.supported and (v.name != "system" or prefer_system)]
    if settings.policy == "lemonade":
        return _first_with_installed_wins(cands)
    acc = [v for v in cands if v.device is not None and v.device.type in ACCELERATORS]
    if acc:
        v, why = _first_with_installed_wins(acc)
        return v, why.replace("first supported backend", "first supported accelerator backend")
    v, why = _first_with_installed_wins(cands)
    if v is not None:
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
    vs = verdicts(m, catalog, recipe, settings, installed, pins, channel)
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
        if settings.policy != "lemonade":
            lem_settings = Settings(settings.channel, settings.prefer_system, "lemonade",
                                    prefer_system_by_recipe=settings.prefer_system_by_recipe)
            # Lemonade's rule lets Vulkan match any AMD GPU: its verdicts differ only where an
            # exclusion applies
            excluded = m.amd is not None and any(
                ex.device_type == "amd_gpu" and ex.backend in recipe.backends and _matches_family(m.amd.gfx, ex.families)
                for ex in catalog.exclusions)
            lem = verdicts(m, catalog, recipe, lem_settings, installed, pins, channel) if excluded else vs
            other, _ = choose(lem, recipe, lem_settings)
            if chosen is not None and other is not None and other.name != chosen.name:
                notes.append(f"--policy lemonade would pick {other.name} (Lemonade takes the first supported row; "
                             f"accelerator-first prefers {chosen.name} on the {TYPE_WORDS[chosen.device.type]})")
    if chosen is None:
        no_fit = catalog.extra.get("no_fit_reason") or "no backend of {recipe} is supported on this machine"
        return Decision(recipe_name, None, None, None, no_fit.replace("{recipe}", recipe_name), None, vs,
                        False, warnings, notes, channel)
    if chosen.supported and chosen.on_cpu and chosen.name not in ("cpu", "system"):
        why_cpu = [n.split(": ", 1)[1] for n in chosen.notes if n.startswith("runs on the CPU: ")]
        warnings.append(f"{chosen.name} runs on the CPU here, not on a GPU"
                        + (f" ({why_cpu[0]})" if why_cpu else ""))
    run_args = f"{flag} {chosen.name}" if flag else None
    return Decision(recipe_name, chosen.name, chosen.device, chosen.state, why, run_args, vs, is_pinned,
                    warnings, notes, channel)
