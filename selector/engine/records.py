"""What the engine answers: the settings it is asked under, the devices it names, a verdict per
backend and the decision per recipe (the Pick JSON of docs/json.md), the typed result of judging
one device against one row, and the basis of a choice: its reasons as data, said in words last
(selector/engine/words.py)."""

from __future__ import annotations

import enum

from types import MappingProxyType

from probes.record import Record, field
from selector.choices import CHANNELS, METRICS, POLICIES

__all__ = ["CHANNELS", "INSTALLED_STATES", "METRICS", "POLICIES", "Basis", "Choice", "Decision", "Device", "Judgement",
           "Miss", "RowResult", "Settings", "Unmeasured", "Verdict"]
INSTALLED_STATES = ("installed", "update_available", "update_required")


class Settings(Record):
    """What a pick is asked under, built once (selector/settings.py: flags, environment, config.json)
    and never changed afterwards: ``replace`` gives a copy with other values."""

    channel: str = "stable"
    prefer_system: bool = False
    policy: str = "accelerator-first"
    backends: dict[str, str] = field(default_factory=dict)  # recipe -> pinned backend
    backend_sources: dict[str, str] = field(default_factory=dict)  # recipe -> "--backend" | "config.json"
    prefer_system_by_recipe: dict[str, bool] = field(default_factory=dict)
    metric: str = "tg"  # --policy measured: generation (tg) or prompt processing (pp) speed
    depth: int = 0  # --policy measured: the context depth compared (llama-bench's -d; bench records it)
    measurements: dict = field(default_factory=dict)  # recipe -> fresh bench records (selector/bench.py)
    # published llama-bench results (selector/evidence.py): a function giving them, called only where two
    # backends run on the chosen device (their file is read only when it can change what is printed)
    published: object = field(default=None, compare=False)
    # the recipes `bench` can measure (None: not asked): --policy measured suggests it only for those
    measurable: frozenset | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        d = self.__dict__
        for name in ("backends", "backend_sources", "prefer_system_by_recipe", "measurements"):
            d[name] = MappingProxyType(dict(d[name]))  # read-only: a pin added later would be a second source

    def __setattr__(self, name, value):
        raise AttributeError(f"Settings are frozen: Settings.replace({name}=...) gives a copy")

    def replace(self, **changes) -> Settings:
        return Settings(**{**{f: getattr(self, f) for f in self._fields}, **changes})

    def prefer_system_for(self, recipe: str) -> bool:
        return self.prefer_system_by_recipe.get(recipe, self.prefer_system)

    def to_dict(self) -> dict:
        out = {"channel": self.channel, "prefer_system": self.prefer_system, "policy": self.policy}
        if self.policy == "measured":
            out["metric"] = self.metric
            if self.depth:
                out["depth"] = self.depth
        return out


class Device(Record):
    """A device a backend runs on, as the JSON names it.  ``family`` is what the support row judged (the
    effective gfx, the sm, the NPU generation, the CPU arch)."""

    type: str
    family: str | None
    index: int | None = None
    name: str | None = None
    memory_bytes: int | None = None
    bus_id: str | None = None
    uuid: str | None = None

    gpu: object = field(default=None, compare=False)  # the Profile record behind it (not serialised)
    token: str | None = field(default=None, compare=False)  # the row token it matched (gfx110X)
    unit: object = field(default=None, compare=False)  # the engine's record of it (devices.Unit)

    def __init__(self, type, family, index=None, name=None, memory_bytes=None, bus_id=None, uuid=None,
                 gpu=None, token=None, unit=None):  # hot path: spelled out
        self.type, self.family, self.index, self.name = type, family, index, name
        self.memory_bytes, self.bus_id, self.uuid = memory_bytes, bus_id, uuid
        self.gpu, self.token, self.unit = gpu, token, unit

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
    # what published llama-bench runs say of the backends that run on the chosen device (evidence.Result)
    evidence: list = field(default_factory=list)
    evidence_words: str = ""
    evidence_scopes: list = field(default_factory=list)  # per row: "gpu" (this GPU model) or "family" (another of it)

    def __init__(self, recipe, backend, device, state, reason, run_args, backends, pinned=False, warnings=None,
                 notes=None, channel="stable", run_env=None, run_devices=None, evidence=None,
                 evidence_words="", evidence_scopes=None):  # hot path: one per recipe decided, spelled out
        self.recipe, self.backend, self.device, self.state = recipe, backend, device, state
        self.reason, self.run_args, self.backends, self.pinned = reason, run_args, backends, pinned
        self.warnings = [] if warnings is None else warnings
        self.notes = [] if notes is None else notes
        self.channel = channel
        self.run_env = {} if run_env is None else run_env
        self.run_devices = [] if run_devices is None else run_devices
        self.evidence = [] if evidence is None else evidence
        self.evidence_words = evidence_words
        self.evidence_scopes = [] if evidence_scopes is None else evidence_scopes

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
            "evidence": [{**r.to_dict(), "scope": scope} for r, scope in zip(self.evidence, self.evidence_scopes)],
        }


class Miss(enum.Enum):
    """What kept a device from a row entry, in the judge's order (selector/engine/match.py judge)."""

    REFUSED = "refused"  # the device is refused outright (no driver; an override ROCm refuses)
    EXCLUDED = "excluded"  # the catalog excludes its family from this backend (a hardware fact)
    UNKNOWN_FAMILY = "unknown_family"  # its family is not in the tables
    FAMILY = "family"  # its family is not among the row's
    GATE = "gate"  # a gate of the recipe on its family (OS, channel, a kernel feature)
    CLOSED = "closed"  # this process cannot open it
    REQUIRES = "requires"  # another requirement of the row (driver, libc, ...)


class Judgement:
    """One device judged against one row entry.  ``why`` is None when the device satisfies it, else the
    device's own words and ``miss`` what failed; ``token`` is the row token its family matched (gfx110X
    for gfx1102), ``family`` the family it was judged as (a ROCm build judges an overridden gfx),
    ``merges`` whether its family miss is said with other GPUs' in one sentence (the device's kind says
    so and the row has no words of its own), ``note`` a remark on a device that fits (the override it
    was judged through)."""

    __slots__ = ("why", "token", "family", "miss", "merges", "note")

    def __init__(self, why: str | None, family: str | None, token: str | None = None, miss: Miss | None = None,
                 note: str | None = None, merges: bool = False):
        self.why, self.family, self.token, self.miss, self.note = why, family, token, miss, note
        self.merges = merges

    @property
    def fits(self) -> bool:
        return self.why is None

    @property
    def family_miss(self) -> bool:
        return self.miss is Miss.FAMILY


class Basis(enum.Enum):
    """What chose a backend."""

    PINNED = "pinned"  # --backend or config.json
    ORDER = "order"  # the first supported backend in the catalog's order
    INSTALLED = "installed"  # an installed backend over earlier ones that are only installable
    SYSTEM = "system"  # no accelerator: the build on PATH first, as prefer_system asks
    MEASURED = "measured"  # fresh bench results on this machine
    PUBLISHED = "published"  # published llama-bench runs on this GPU or its family
    NONE = "none"  # no backend is supported


class Unmeasured(enum.Enum):
    """Why --policy measured found no measurement to decide by."""

    NOTHING = "nothing"  # no fresh result of the metric on this machine
    NOISY = "noisy"  # only results whose runs disagreed
    ALONE = "alone"  # one backend measured: nothing to compare it with
    UNMEASURABLE = "unmeasurable"  # pick-backend has no benchmark tool for the recipe


class Choice:
    """The pick among the verdicts and its reasons as data; selector/engine/words.py says it.

    ``among``: the candidates the order ran over ("any", "accelerator", "cpu"); ``over``: for
    INSTALLED, the first backend that is only installable; ``measured``: the fresh results compared,
    fastest first, of ``metric`` at ``depth``; ``unmeasured``/``alone``: why --policy measured fell back (and the backend measured
    alone); ``published``: (rows, where) of the published comparison that chose; ``uncompared``: the
    builds that run on the device and that nothing published compares; ``fallback``: the
    accelerator-first choice taken instead of a measurement; ``source``: who pinned."""

    __slots__ = ("verdict", "basis", "among", "over", "measured", "metric", "depth", "unmeasured", "alone",
                 "published", "uncompared", "fallback", "source")

    def __init__(self, verdict, basis: Basis, among: str = "any", over: str = "", measured=(), metric: str = "tg",
                 unmeasured: Unmeasured | None = None, alone: str = "", published=None, uncompared=(),
                 fallback: Choice | None = None, source: str = "", depth: int = 0):
        self.verdict, self.basis, self.among, self.over = verdict, basis, among, over
        self.measured, self.metric, self.unmeasured, self.alone = tuple(measured), metric, unmeasured, alone
        self.published, self.uncompared, self.fallback, self.source = published, tuple(uncompared), fallback, source
        self.depth = depth  # the context depth the speeds are of (--depth; 0: an empty context)

    @property
    def by_speed(self) -> bool:
        """A speed chose (a measurement, or a published comparison), not the catalog's order."""
        return self.basis in (Basis.MEASURED, Basis.PUBLISHED)


class RowResult:
    """What one row says on this machine: the devices it runs on (best first; none: ``reason``)."""

    __slots__ = ("devices", "reason", "notes", "passed_over", "cpu_because")

    def __init__(self, devices, reason, notes, passed_over=(), cpu_because=()):
        self.devices, self.reason, self.notes = devices, reason, notes
        self.passed_over, self.cpu_because = list(passed_over), list(cpu_because)
