"""Guides: "which engine?" advice as data, the third kind of data beside catalogs and pins.

A guide file (``selector/catalogs/guide-*.json``, schema_version 1) carries a community guide's own
content unchanged (``default_id``, ``default_name``, ``notes``, ``engines`` with a verdict per engine)
plus what we add: where it applies (``applies_to``), the order of its verdicts, which catalog recipe
an engine is (``recipes``), and which of its lines to show as warnings on a pick (``advice``).

``load(path)`` reads and validates a guide; a malformed file raises InputError (exit 5) naming the
file and the field.  Everything else here is pure: ``match(guide, profile)`` says whether the guide
applies to a Profile, ``advice_for(guide, profile, decision)`` gives the guide lines that bite on a
Decision.  ``add_advice`` is the hook the pick path calls; it opens the guide only when a line could
apply, so the everyday pick does not pay for it.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import NamedTuple

from probes.inputs import need, read_json
from selector.choices import OSES
from selector.kinds import DEVICE_TYPES

GUIDE_DIR = os.path.join(os.path.dirname(__file__), "catalogs")
DEFAULT_GUIDE = "guide-amd"
SCHEMA_VERSION = 1
# advice kinds the code knows how to detect (see advice_for)
ADVICE_KINDS = ("cuda_on_radeon", "runs_on_cpu")
ENGINE_TEXT = ("id", "name", "short", "verdict", "well", "badly", "when", "run")
ENGINE_OPTIONAL_TEXT = ("href", "homepage")
ENGINE_FLAGS = ("default", "used_on_our_rig")


# NamedTuples, not dataclasses: the pick path imports this module, and defining dataclasses costs
# milliseconds of start-up there.


class Engine(NamedTuple):
    id: str
    name: str
    short: str
    verdict: str
    well: str
    badly: str
    when: str
    run: str
    default: bool = False
    used_on_our_rig: bool = False
    href: str | None = None
    homepage: str | None = None

    def to_dict(self, with_run: bool = True) -> dict:
        d = {"id": self.id, "name": self.name, "short": self.short, "verdict": self.verdict,
             "default": self.default, "used_on_our_rig": self.used_on_our_rig, "href": self.href,
             "homepage": self.homepage, "well": self.well, "badly": self.badly, "when": self.when}
        if with_run:
            d["run"] = self.run
        return d


class AppliesTo(NamedTuple):
    device_types: tuple[str, ...]
    os: tuple[str, ...]
    words: str
    measured_on: dict


class Guide(NamedTuple):
    name: str
    title: str
    source: dict
    applies_to: AppliesTo
    verdict_order: tuple[str, ...]
    recipes: dict[str, str]  # engine id -> catalog recipe
    advice: dict[str, dict]  # kind -> {"text", "from"}
    default_id: str
    default_name: str
    notes: list[str]
    engines: list[Engine]
    path: str

    @property
    def href(self) -> str:
        return self.source.get("href") or self.name

    def engine(self, engine_id: str) -> Engine | None:
        """The engine by its id or by its name as the guide shows it (``llamacpp`` or ``llama.cpp``), in
        any case."""
        low = engine_id.lower()
        return next((e for e in self.engines if e.id == engine_id), None) or \
            next((e for e in self.engines if low in (e.id.lower(), e.name.lower())), None)

    @property
    def default(self) -> Engine:
        return self.engine(self.default_id)

    def ordered(self) -> list[Engine]:
        """Engines in verdict order (default first); the guide's own order within a verdict."""
        rank = {v: i for i, v in enumerate(self.verdict_order)}
        return sorted(self.engines, key=lambda e: (not e.default, rank[e.verdict]))


# ------------------------------------------------------------------------------------------------
# loading and validation


def resolve_path(name_or_path: str | None) -> str:
    name_or_path = name_or_path or DEFAULT_GUIDE
    if os.sep not in name_or_path and "/" not in name_or_path and not name_or_path.endswith(".json"):
        return os.path.join(GUIDE_DIR, f"{name_or_path}.json")
    return name_or_path


def load(name_or_path: str | None = None) -> Guide:
    return _load(os.path.abspath(resolve_path(name_or_path)))


@lru_cache(maxsize=4)
def _load(path: str) -> Guide:
    data = read_json(path, f"guide file not found (built-in guide: {DEFAULT_GUIDE})")
    return parse(data, path)


_need = need


def _text(value, path, where, optional=False):
    if optional and value is None:
        return None
    _need(isinstance(value, str) and value.strip(), path, where, "must be a non-empty string")
    return value


def _strs(value, path, where, allowed=None):
    _need(isinstance(value, list) and value and all(isinstance(v, str) and v for v in value), path, where,
          "must be a non-empty list of strings")
    if allowed:
        bad = [v for v in value if v not in allowed]
        _need(not bad, path, where, f"unknown value {bad[0]!r} (expected one of {', '.join(allowed)})" if bad else "")
    return tuple(value)


def parse(data, path: str = "<guide>") -> Guide:
    _need(isinstance(data, dict), path, "top level", "must be a JSON object")
    _need(data.get("schema_version") == SCHEMA_VERSION, path, "schema_version",
          f"must be {SCHEMA_VERSION}, found {data.get('schema_version')!r}")
    name = _text(data.get("name"), path, "name")
    title = _text(data.get("title", name), path, "title")
    source = data.get("source")
    _need(isinstance(source, dict), path, "source", "must be an object naming where the guide comes from")
    _text(source.get("href"), path, "source.href")

    at = data.get("applies_to")
    _need(isinstance(at, dict), path, "applies_to", "must be an object")
    measured = at.get("measured_on", {})
    _need(isinstance(measured, dict), path, "applies_to.measured_on", "must be an object")
    for key, value in measured.items():
        _text(value, path, f"applies_to.measured_on.{key}")
    applies_to = AppliesTo(_strs(at.get("device_types"), path, "applies_to.device_types", DEVICE_TYPES),
                           _strs(at.get("os", list(OSES)), path, "applies_to.os", OSES),
                           _text(at.get("words"), path, "applies_to.words"), measured)

    order = _strs(data.get("verdict_order"), path, "verdict_order")
    _need(len(set(order)) == len(order), path, "verdict_order", "must not repeat a verdict")

    engines_data = data.get("engines")
    _need(isinstance(engines_data, list) and engines_data, path, "engines", "must be a non-empty list")
    engines: list[Engine] = []
    for i, e in enumerate(engines_data):
        ew = f"engines[{i}]"
        _need(isinstance(e, dict), path, ew, "must be an object")
        if isinstance(e.get("id"), str) and e["id"]:
            ew = f"engines[{i}] ({e['id']})"
        vals = {k: _text(e.get(k), path, f"{ew}.{k}") for k in ENGINE_TEXT}
        vals.update({k: _text(e.get(k), path, f"{ew}.{k}", optional=True) for k in ENGINE_OPTIONAL_TEXT})
        for k in ENGINE_FLAGS:
            _need(isinstance(e.get(k, False), bool), path, f"{ew}.{k}", "must be true or false")
            vals[k] = e.get(k, False)
        _need(vals["verdict"] in order, path, f"{ew}.verdict",
              f"unknown verdict {vals['verdict']!r} (verdict_order: {', '.join(order)})")
        _need(all(x.id != vals["id"] for x in engines), path, f"{ew}.id", "repeats an earlier engine id")
        engines.append(Engine(**vals))

    default_id = _text(data.get("default_id"), path, "default_id")
    ids = [e.id for e in engines]
    _need(default_id in ids, path, "default_id", f"names no engine ({default_id!r}; engines: {', '.join(ids)})")
    defaults = [e.id for e in engines if e.default]
    _need(defaults == [default_id], path, "engines",
          f"exactly the default_id engine ({default_id}) must have \"default\": true (found: {', '.join(defaults) or 'none'})")
    default_name = _text(data.get("default_name", default_id), path, "default_name")

    notes = data.get("notes", [])
    _need(isinstance(notes, list) and all(isinstance(n, str) for n in notes), path, "notes", "must be a list of strings")

    recipes = data.get("recipes", {})
    _need(isinstance(recipes, dict), path, "recipes", "must be an object {engine id: catalog recipe}")
    for k, v in recipes.items():
        _need(k in ids, path, f"recipes.{k}", f"names no engine (engines: {', '.join(ids)})")
        _text(v, path, f"recipes.{k}")

    advice = data.get("advice", {})
    _need(isinstance(advice, dict), path, "advice", "must be an object {kind: {text, from}}")
    for kind, a in advice.items():
        _need(kind in ADVICE_KINDS, path, f"advice.{kind}", f"unknown kind (expected one of {', '.join(ADVICE_KINDS)})")
        _need(isinstance(a, dict), path, f"advice.{kind}", "must be an object {text, from}")
        _text(a.get("text"), path, f"advice.{kind}.text")
        _text(a.get("from"), path, f"advice.{kind}.from")

    return Guide(name, title, source, applies_to, order, dict(recipes), dict(advice), default_id, default_name,
                 list(notes), engines, path)


# ------------------------------------------------------------------------------------------------
# pure rules over a Profile


class Match(NamedTuple):
    applies: bool
    reason: str
    devices: list[str]  # the machine's devices of the guide's types, in words
    measured_here: bool  # this machine has the GPU target the guide's figures were measured on


def _devices_of(profile, dtype: str) -> list[str]:
    if dtype == "amd_gpu":
        return [f"{g.name} ({g.gfx})" if g.gfx else g.name for g in profile.amd_gpus]
    if dtype == "nvidia_gpu":
        return [f"{g.name} ({g.sm})" if g.sm else g.name for g in profile.nvidia_gpus]
    if dtype == "amd_npu":
        return [n.name or f"{n.generation} NPU" for n in profile.npus]
    if dtype == "metal":
        return [profile.metal.chip or "Apple GPU"] if profile.metal.available else []
    if dtype == "intel_gpu":
        return [g.name for g in getattr(profile, "intel_gpus", []) or []]
    if dtype == "cpu":
        return [profile.cpu.brand or profile.cpu.arch]
    return []


def _gpus_in_words(profile) -> str:
    found = _devices_of(profile, "amd_gpu") + _devices_of(profile, "nvidia_gpu") + _devices_of(profile, "intel_gpu") \
        + _devices_of(profile, "metal")
    return ", ".join(found) if found else "no GPU"


def match(guide: Guide, profile) -> Match:
    """Does the guide apply to this machine?  It does when the OS is one of its OSes and the machine
    has a device of one of its device types."""
    at = guide.applies_to
    devices = [d for t in at.device_types for d in _devices_of(profile, t)]
    if profile.os.name not in at.os:
        return Match(False, f"the guide is written for {at.words} on {', '.join(at.os)}; this machine runs "
                            f"{profile.os.name}", devices, False)
    if not devices:
        return Match(False, f"the guide is written for {at.words}; this machine has none "
                            f"(found: {_gpus_in_words(profile)})", [], False)
    gfx = at.measured_on.get("gfx")
    measured_here = bool(gfx) and any(gfx in (g.gfx, g.gfx_effective) for g in profile.amd_gpus)
    return Match(True, f"the guide is written for {at.words}; this machine has {', '.join(devices)}",
                 devices, measured_here)


def _is_cuda(backend: str | None) -> bool:
    return bool(backend) and any(t.startswith("cuda") for t in re.split(r"[^a-z0-9]+", backend.lower()))


def _only_radeon(profile) -> bool:
    return bool(profile.amd_gpus) and not profile.nvidia_gpus and not (getattr(profile, "intel_gpus", None) or [])


def _runs_on_cpu(decision) -> bool:
    v = decision.verdict(decision.backend) if decision.backend else None
    return v is not None and v.supported and v.on_cpu and v.name != "system"


def could_advise(profile, decision) -> bool:
    """Cheap check, no guide needed: could any advice kind fire on this decision?"""
    return (_is_cuda(decision.backend) and _only_radeon(profile)) or _runs_on_cpu(decision)


def advice_for(guide: Guide, profile, decision) -> list[str]:
    """The guide's own lines that bite on this decision, each prefixed with the guide's address."""
    if not could_advise(profile, decision) or not match(guide, profile).applies:
        return []
    kinds = []
    if _is_cuda(decision.backend) and _only_radeon(profile):
        kinds.append("cuda_on_radeon")
    if _runs_on_cpu(decision):
        kinds.append("runs_on_cpu")
    prefix = guide.href.removeprefix("https://").removeprefix("http://")
    return [f"guide {prefix}: {guide.advice[k]['text']}" for k in kinds if k in guide.advice]


def add_advice(profile, decisions, guide: Guide | None = None) -> None:
    """Append the guide's advice to each decision's warnings; the guide file is opened only when a
    line could apply."""
    for d in decisions:
        if could_advise(profile, d):
            g = guide or load()
            for line in advice_for(g, profile, d):
                if line not in d.warnings:
                    d.warnings.append(line)
