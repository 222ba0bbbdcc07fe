"""Catalogs: support matrices as data.  ``load(name_or_path)`` reads and validates a catalog file
into typed rows; a malformed file raises InputError (exit 5) naming the file and the entry.

A catalog names recipes; each recipe has support rows in preference order (most preferred first).
A row: backend, tier, format, OS list, and device entries ``{device_type: [family tokens]}``
(an empty list matches any device of that type).  Gates and exclusions are data too.
See docs/catalogs.md for the format.
"""

from __future__ import annotations

import os
from functools import cached_property, lru_cache

from probes.inputs import InputError, need, read_json
from probes.record import FrozenRecord, Record, field
from selector.choices import CHANNELS, OSES
from selector.kinds import ACCELERATORS, DEVICE_TYPES  # noqa: F401 - the kinds a row may name (catalogs/device-kinds.json)

CATALOG_DIR = os.path.join(os.path.dirname(__file__), "catalogs")
BUILTIN = ("lemonade", "localai")
TIERS = ("core", "experimental", "guest")
FORMATS = ("native", "container", "python")


class Row(FrozenRecord):
    backend: str
    tier: str
    format: str
    os: tuple[str, ...]
    devices: tuple[tuple[str, tuple[str, ...]], ...]  # ((type, families), ...) in catalog order
    requires: dict = field(default_factory=dict, compare=False, hash=False)  # extra gates (schema extensions)
    note: str | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)  # catalog-specific fields

    @cached_property
    def entries(self) -> list:
        """``devices`` with the accelerator entries before the CPU's, the order a row is tried in."""
        return sorted(self.devices, key=lambda e: e[0] == "cpu")

    @cached_property
    def shown(self) -> dict:
        """The row's display fields (install command, env) as verdicts show them."""
        return {k: self.extra[k] for k in DISPLAY_FIELDS if k in self.extra}


class Gate(FrozenRecord):
    recipe: str
    backend: str
    family: str
    os: tuple[str, ...]
    channels: tuple[str, ...]
    reason: str
    needs: tuple[str, ...] = ()  # device facts the build needs, from GATE_NEEDS ("cwsr")


# Device facts a gate can require beyond OS and channel; a device whose fact is False fails the gate
# (unknown passes: Windows has no KFD to ask).
GATE_NEEDS = ("cwsr",)  # the KFD node reports cwsr_size and ctl_stack_size (the gfx1151 kernel fix)


class Exclusion(FrozenRecord):
    backend: str
    device_type: str
    families: tuple[str, ...]
    reason: str


class Recipe(Record):
    name: str
    display_name: str
    selectable_backend: bool
    uses_ctx_size: bool
    rocm_channels: tuple[str, ...]
    options: list[dict]
    rows: list[Row]
    extra: dict = field(default_factory=dict)

    @property
    def backends(self) -> list[str]:
        """Backend names in preference order (a backend with several rows appears once)."""
        seen: list[str] = []
        for r in self.rows:
            if r.backend not in seen:
                seen.append(r.backend)
        return seen

    def oses_of(self, backend: str) -> list[str]:
        """Every OS any row of ``backend`` names, in catalog order."""
        return self._oses.get(backend, [])

    @cached_property
    def _oses(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in self.rows:
            seen = out.setdefault(r.backend, [])
            seen += [o for o in r.os if o not in seen]
        return out

    @property
    def backend_flag(self) -> str | None:
        for opt in self.options:
            if opt.get("type") == "BACKEND" and opt.get("flag"):
                return opt["flag"]
        return None


class Catalog(Record):
    name: str
    title: str
    source: str
    path: str
    recipes: dict[str, Recipe]
    gates: list[Gate]
    exclusions: list[Exclusion]
    extra: dict = field(default_factory=dict)

    def gates_for(self, recipe: str, backend: str) -> dict[str, list[Gate]]:
        """{family: [gates]} of one recipe's backend (computed once per catalog)."""
        return self._gate_index.get((recipe, backend), {})

    @cached_property
    def _gate_index(self) -> dict:
        index: dict = {}
        for g in self.gates:
            index.setdefault((g.recipe, g.backend), {}).setdefault(g.family, []).append(g)
        return index

    def exclusions_for(self, backend: str, device_type: str) -> list[Exclusion]:
        return self._exclusion_index.get((backend, device_type), [])

    @cached_property
    def _exclusion_index(self) -> dict:
        index: dict = {}
        for e in self.exclusions:
            index.setdefault((e.backend, e.device_type), []).append(e)
        return index


def resolve_path(name_or_path: str) -> str:
    if name_or_path in BUILTIN or (os.sep not in name_or_path and not name_or_path.endswith(".json")):
        return os.path.join(CATALOG_DIR, f"{name_or_path}.json")
    return name_or_path


def load(name_or_path: str = "lemonade") -> Catalog:
    return _load(os.path.abspath(resolve_path(name_or_path)))


@lru_cache(maxsize=8)
def _load(path: str) -> Catalog:
    data = read_json(path, "catalog file not found (built-in catalogs: " + ", ".join(BUILTIN) + ")")
    return parse(data, path)


_need = need


def _strs(value, path, where, allowed=None, empty_ok=True):
    _need(isinstance(value, list) and all(isinstance(v, str) for v in value), path, where, "must be a list of strings")
    _need(empty_ok or value, path, where, "must not be empty")
    if allowed:
        bad = [v for v in value if v not in allowed]
        if bad:
            raise InputError(path, f"{where}: unknown value {bad[0]!r} (expected one of {', '.join(allowed)})")
    return tuple(value)


# Optional row fields beyond the core schema (kept in Row.extra), validated here:
#   family_reason  reason when the device type is present but its family is not in the row's list;
#                  {family} and {name} are replaced ("the CUDA image has no kernels for {family}")
#   device_notes   {device_type: note}: a note added to the verdict when the machine has that device
#   install        the command that installs this variant ("local-ai backends install cuda13-strata")
#   env            {VAR: value}: environment that forces the same choice in the engine itself
#   source         where the row's facts come from (file, line, commit)
ROW_EXTRAS = ("family_reason", "device_notes", "install", "env", "source")
DISPLAY_FIELDS = ("install", "env")  # surfaced in the verdict / decision JSON when present


def _check_requires(requires: dict, path, where) -> None:
    from selector.requires import KEYS, is_version, parse_sm

    for key, value in requires.items():
        kind = KEYS.get(key)
        _need(kind is not None, path, f"{where}.{key}", f"unknown condition (known: {', '.join(KEYS)})")
        if kind == "str":
            _need(isinstance(value, str) and value, path, f"{where}.{key}", "must be a non-empty string")
        elif kind == "version":
            _need(is_version(value), path, f"{where}.{key}", f"must be a version string like \"580\" or \"2.39\", found {value!r}")
        elif kind == "flag":
            _need(value is True, path, f"{where}.{key}", f"must be true, found {value!r}")
        elif kind == "cuda":
            w = f"{where}.{key}"
            _need(isinstance(value, dict), path, w, 'must be an object {"toolkit": "12.8", "sass": [...], "ptx": [...]}')
            bad = [k for k in value if k not in ("toolkit", "sass", "ptx", "source")]
            _need(not bad, path, w, f"unknown key {bad[0] if bad else ''!r} (expected toolkit, sass, ptx, source)")
            _need(is_version(value.get("toolkit")) and "." in value.get("toolkit", ""), path, f"{w}.toolkit",
                  f"must be a CUDA version like \"12.8\", found {value.get('toolkit')!r}")
            for part in ("sass", "ptx"):
                targets = _strs(value.get(part, []), path, f"{w}.{part}")
                wrong = [t for t in targets if parse_sm(t) is None]
                _need(not wrong, path, f"{w}.{part}", f"{wrong[0] if wrong else ''!r} is not a target like sm_86 or sm_120a")
            _need(value.get("sass") or value.get("ptx"), path, w, "names no sass or ptx target")
        else:
            _strs(value, path, f"{where}.{key}", empty_ok=False)


def _str_map(value, path, where, keys=None) -> None:
    _need(isinstance(value, dict) and value and all(isinstance(k, str) and isinstance(v, str) and v
                                                   for k, v in value.items()),
          path, where, "must be a non-empty object of strings")
    if keys:
        bad = [k for k in value if k not in keys]
        _need(not bad, path, where, f"unknown key {bad[0] if bad else ''!r} (expected one of {', '.join(keys)})")


def _check_row_extras(row: dict, path, rw) -> None:
    for key in ("family_reason", "install", "source"):
        if key in row:
            _need(isinstance(row[key], str) and row[key], path, f"{rw}.{key}", "must be a non-empty string")
    if "device_notes" in row:
        _str_map(row["device_notes"], path, f"{rw}.device_notes", DEVICE_TYPES)
    if "env" in row:
        _str_map(row["env"], path, f"{rw}.env")


def _row(row, path: str, rw: str) -> Row:
    """One support row, checked."""
    _need(isinstance(row, dict), path, rw, "must be an object")
    backend = row.get("backend")
    _need(isinstance(backend, str) and backend, path, f"{rw}.backend", "must be a non-empty string")
    tier = row.get("tier", "core")
    _need(tier in TIERS, path, f"{rw}.tier", f"must be one of {', '.join(TIERS)}, found {tier!r}")
    fmt = row.get("format", "native")
    _need(fmt in FORMATS, path, f"{rw}.format", f"must be one of {', '.join(FORMATS)}, found {fmt!r}")
    oses = _strs(row.get("os"), path, f"{rw}.os", OSES, empty_ok=False)
    devs = row.get("devices")
    _need(isinstance(devs, dict) and devs, path, f"{rw}.devices", "must be a non-empty object {device_type: [families]}")
    devices = []
    for dtype, fams in devs.items():
        _need(dtype in DEVICE_TYPES, path, f"{rw}.devices", f"unknown device type {dtype!r} (expected one of {', '.join(DEVICE_TYPES)})")
        devices.append((dtype, _strs(fams, path, f"{rw}.devices.{dtype}")))
    requires = row.get("requires", {})
    _need(isinstance(requires, dict), path, f"{rw}.requires", "must be an object")
    _check_requires(requires, path, f"{rw}.requires")
    _check_row_extras(row, path, rw)
    note = row.get("note")
    _need(note is None or isinstance(note, str), path, f"{rw}.note", "must be a string")
    known = {"backend", "tier", "format", "os", "devices", "requires", "note"}
    return Row(backend, tier, fmt, oses, tuple(devices), requires, note,
               {k: v for k, v in row.items() if k not in known})


def _recipe(rname: str, r, path: str) -> Recipe:
    """One recipe and its rows, checked."""
    where = f"recipes.{rname}"
    _need(isinstance(r, dict), path, where, "must be an object")
    display = r.get("display_name", rname)
    _need(isinstance(display, str), path, f"{where}.display_name", "must be a string")
    for key in ("selectable_backend", "uses_ctx_size"):
        _need(isinstance(r.get(key, False), bool), path, f"{where}.{key}", "must be true or false")
    channels = _strs(r.get("rocm_channels", []), path, f"{where}.rocm_channels", CHANNELS)
    options = r.get("options", [])
    _need(isinstance(options, list), path, f"{where}.options", "must be a list")
    for i, opt in enumerate(options):
        _need(isinstance(opt, dict) and isinstance(opt.get("name"), str), path, f"{where}.options[{i}]", "must be an object with a 'name'")
        _need(opt.get("flag") is None or isinstance(opt.get("flag"), str), path, f"{where}.options[{i}].flag", "must be a string or null")
    rows_data = r.get("rows")
    _need(isinstance(rows_data, list) and rows_data, path, f"{where}.rows", "must be a non-empty list")
    rows = [_row(row, path, f"{where}.rows[{i}]") for i, row in enumerate(rows_data)]
    if "capabilities" in r:  # LocalAI meta backend: {capability: image} (selector/capability.py)
        from selector.capability import validate_map

        validate_map(r["capabilities"], path, f"{where}.capabilities")
    known_r = {"display_name", "selectable_backend", "uses_ctx_size", "rocm_channels", "options", "rows"}
    return Recipe(rname, display, bool(r.get("selectable_backend", False)), bool(r.get("uses_ctx_size", False)),
                  channels, options, rows, {k: v for k, v in r.items() if k not in known_r})


def _gates(data: dict, recipes: dict, path: str) -> list[Gate]:
    gates = []
    for i, g in enumerate(data.get("gates", [])):
        gw = f"gates[{i}]"
        _need(isinstance(g, dict), path, gw, "must be an object")
        for key in ("recipe", "backend", "family", "reason"):
            _need(isinstance(g.get(key), str) and g.get(key), path, f"{gw}.{key}", "must be a non-empty string")
        _need(g["recipe"] in recipes, path, f"{gw}.recipe", f"unknown recipe {g['recipe']!r}")
        gates.append(Gate(g["recipe"], g["backend"], g["family"], _strs(g.get("os", list(OSES)), path, f"{gw}.os", OSES),
                          _strs(g.get("channels", list(CHANNELS)), path, f"{gw}.channels", CHANNELS), g["reason"],
                          _strs(g.get("needs", []), path, f"{gw}.needs", GATE_NEEDS)))
    return gates


def _exclusions(data: dict, path: str) -> list[Exclusion]:
    exclusions = []
    for i, e in enumerate(data.get("exclusions", [])):
        ew = f"exclusions[{i}]"
        _need(isinstance(e, dict), path, ew, "must be an object")
        for key in ("backend", "device_type", "reason"):
            _need(isinstance(e.get(key), str) and e.get(key), path, f"{ew}.{key}", "must be a non-empty string")
        exclusions.append(Exclusion(e["backend"], e["device_type"], _strs(e.get("families"), path, f"{ew}.families"), e["reason"]))
    return exclusions


def parse(data, path: str = "<catalog>") -> Catalog:
    _need(isinstance(data, dict), path, "top level", "must be a JSON object")
    _need(data.get("schema_version") == 1, path, "schema_version", f"must be 1, found {data.get('schema_version')!r}")
    name = data.get("name")
    _need(isinstance(name, str) and name, path, "name", "must be a non-empty string")
    recipes_data = data.get("recipes")
    _need(isinstance(recipes_data, dict) and recipes_data, path, "recipes", "must be a non-empty object")
    recipes = {rname: _recipe(rname, r, path) for rname, r in recipes_data.items()}
    gates, exclusions = _gates(data, recipes, path), _exclusions(data, path)
    if "no_fit_reason" in data:  # the decision's reason when no backend fits; {recipe} is replaced
        _need(isinstance(data["no_fit_reason"], str) and data["no_fit_reason"], path, "no_fit_reason",
              "must be a non-empty string")
    graphics = data.get("graphics_backends", ["vulkan"])  # backends that open a GPU's render node alone
    _strs(graphics, path, "graphics_backends")
    if "capability" in data:  # the capability rules of an engine that picks its own build
        from selector.capability import validate

        validate(data["capability"], path)
    known_top = {"schema_version", "name", "title", "source", "device_types", "recipes", "gates", "exclusions"}
    return Catalog(name, data.get("title", name), data.get("source", ""), path, recipes, gates, exclusions,
                   {k: v for k, v in data.items() if k not in known_top})


@lru_cache(maxsize=8)
def load_pins(catalog_name: str) -> dict:
    """Bundled version pins ``{recipe: {backend: tag}}`` (``<catalog>-versions.json``)."""
    path = os.path.join(CATALOG_DIR, f"{catalog_name}-versions.json")
    data = read_json(path, "", default={})
    if not isinstance(data, dict):
        raise InputError(path, "version pins must be a JSON object {recipe: {backend: tag}}")
    return {k: v for k, v in data.items() if not k.startswith("_") and isinstance(v, dict)}
