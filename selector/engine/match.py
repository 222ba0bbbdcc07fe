"""Matching: one judge for every device against one row of a recipe, and each backend's verdict.

``judge`` reads a Unit (selector/engine/devices.py), never a vendor's record: the order is the same
for every kind (the device refused outright, an exclusion of its family, its family against the
row's, the recipe's gates on that family, whether this process can open it, the row's other
requirements), and the words are the device's own.  ``verdicts`` gives every backend of a recipe its
verdict; policies (selector/engine/choose.py) only choose among them.
"""

from __future__ import annotations

from selector import requires
from selector.catalog import Catalog, Recipe, Row
from selector.engine.devices import Machine, Unit, family_token, matches_family
from selector.engine.records import Judgement, Miss, RowResult, Verdict
from selector.engine.state import state_for
from selector.engine.words import (absent, describe_families, family_reason, fill, os_reason, reasons,
                                   unlisted_note)
from selector.kinds import GPU_TYPES, TYPE_WORDS

SYSTEM_NOTE = "the build on PATH, which runs where that build runs; `pick-backend verify` shows where"


def judge(m: Machine, catalog: Catalog, recipe: Recipe, row: Row, u: Unit, fams, channel: str,
          access: str) -> Judgement:
    """One device against one entry of a row (its kind's ``fams``, empty for any)."""
    backend = row.backend
    fam = u.judged_family(access)
    shown = fam if fams else u.family  # the family the Device is named by

    def said(template: str, **more) -> str:
        return fill(template, {**u.values, "backend": backend, "families": describe_families(fams),
                               "families_or": " or ".join(fams), "judged": fam, **more})

    if u.refused:
        return Judgement(said(u.refused), shown, family_token(fam, fams) if fams else None, Miss.REFUSED)
    if access != "graphics" and u.refused_compute:
        return Judgement(said(u.refused_compute), shown, None, Miss.REFUSED)
    # an exclusion is a hardware fact (CDNA has no Vulkan driver), so it holds under every policy: under
    # --policy lemonade the order is Lemonade's, and the device named is still the one the build runs on
    for ex in catalog.exclusions_for(backend, u.kind):
        if matches_family(u.family, ex.families):
            return Judgement(f"{ex.reason} ({u.name}, {u.family})", shown, None, Miss.EXCLUDED)
    token = None
    if fams:
        if fam is None:
            return Judgement(said(u.unknown), shown, None, Miss.UNKNOWN_FAMILY)
        token = family_token(fam, fams)
        if token is None:
            own = family_reason(row, fam, u.name) if u.own_words else ""
            why = own or said(u.mismatch)
            if fam != u.family:
                why += f" ({u.override} makes {u.family} run as {fam})"
            # the kind's own words for a family miss may be said once for several GPUs; the row's never are
            return Judgement(why, shown, None, Miss.FAMILY, merges=u.merges and not row.extra.get("family_reason"))
    for gate in catalog.gates_for(recipe.name, backend).get(fam, ()):
        if m.os not in gate.os or channel not in gate.channels:
            return Judgement(gate.reason, shown, token, Miss.GATE)
        if any(u.facts.get(need) is False for need in gate.needs):  # unknown passes (Windows has no KFD)
            return Judgement(gate.reason, shown, token, Miss.GATE)
    closed = u.closed[access]
    if closed:
        return Judgement(said(closed), shown, token, Miss.CLOSED)
    why = requires.check(m, row, u.record)
    if why:
        return Judgement(why, shown, token, Miss.REQUIRES)
    note = None
    if fams and fam != u.family:
        note = f"judged as {fam} through {u.override} (hardware: {u.family})"
    return Judgement(None, shown, token, note=note)


def match_units(m: Machine, catalog: Catalog, recipe: Recipe, row: Row, kind: str, fams, channel: str,
                access: str):
    """(satisfying devices best first, devices passed over with why, reasons in words, notes)"""
    found, passed, notes = [], [], []
    mergeable: list = []  # the devices passed over whose family misses may be said in one sentence
    judged: dict = {}  # alike devices (a node of eight MI300X) are judged once
    for key, units in m.runs(kind, access):
        j = judged.get(key)
        if j is None:
            j = judged[key] = judge(m, catalog, recipe, row, units[0], fams, channel, access)
        devs = m.devices(key, units, j.family, j.token)
        if not j.fits:
            passed.extend((dev, j.why) for dev in devs)
            if j.merges:
                mergeable.extend(devs)
            continue
        if j.note and j.note not in notes:
            notes.append(j.note)
        found.extend(devs)
    kinds_missed = sum(1 for j in judged.values() if j.merges)
    return found, passed, reasons(passed, mergeable if kinds_missed > 1 else [], row, fams), notes


def absent_reason(m: Machine, row: Row, dtype: str, fams, access: str = "compute") -> str:
    """Why an entry of a kind the machine lacks does not fit.  A row that takes *any* device of a kind
    (an API build such as Vulkan) but not the machine's own accelerator says so precisely; a Vulkan
    build judges the machine's other GPUs itself (each says why it does not run there)."""
    if dtype in m.none:
        return m.none[dtype]
    if not fams and access != "graphics":
        listed = {t for t, _ in row.devices}
        others = [t for t in m.present_types() if t not in listed and t != "amd_npu"]
        if others:
            kinds = [TYPE_WORDS[t] for t, _ in row.devices if t != "cpu"]
            found = ", ".join(_kind_example(m, t) for t in others)
            return f"this {row.backend} build is listed for {' and '.join(k + 's' for k in kinds)} only (found {found})"
    return absent(dtype, fams)


def _kind_example(m: Machine, t: str) -> str:
    name = m.visible[t][0].name
    return f"{TYPE_WORDS[t]}: {name}" if name else TYPE_WORDS[t]


def match_entry(m: Machine, catalog: Catalog, recipe: Recipe, row: Row, dtype: str, fams, channel: str,
                access: str):
    """(satisfying devices best first, devices passed over with why, reasons in words, notes)"""
    if dtype == "cpu":
        if matches_family(m.arch, fams) or requires.emulation_note(m, fams):
            return [m.cpu_device()], [], [], []
        return [], [], [f"Requires a {' or '.join(fams)} CPU (found {m.arch})"], []
    if not m.units(dtype, access):
        return [], [], [absent_reason(m, row, dtype, fams, access)], []
    return match_units(m, catalog, recipe, row, dtype, fams, channel, access)


def _check_requires(m: Machine, row: Row) -> str:
    """Row conditions that do not depend on the device (container runtime, host-wide gates)."""
    if row.format == "container" and not (m.executables.get("docker") or m.executables.get("podman")):
        return "needs docker or podman"
    return ""


def row_access(catalog: Catalog, row: Row) -> str:
    """'graphics' when the backend opens a GPU through its render node alone (Vulkan), else 'compute'
    (ROCm needs /dev/kfd too, CUDA the NVIDIA nodes).  Catalog data: ``graphics_backends``."""
    return "graphics" if row.backend in catalog.extra.get("graphics_backends", ("vulkan",)) else "compute"


def evaluate_row(m: Machine, catalog: Catalog, recipe: Recipe, row: Row, channel: str) -> RowResult:
    if m.os not in row.os:
        return RowResult([], os_reason(row.os), [])
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
    entries = row.entries  # accelerators before the CPU
    unlisted: list[str] = []
    if access == "graphics":  # a Vulkan build runs on any GPU with a Vulkan driver, listed or not
        listed = {t for t, _ in row.devices}
        unlisted = [t for t in GPU_TYPES if t not in listed and m.every.get(t)]
        if unlisted:
            cut = next((i for i, e in enumerate(entries) if e[0] == "cpu"), len(entries))
            entries = [*entries[:cut], *((t, []) for t in unlisted), *entries[cut:]]
    why_not: list[str] = []
    passed_all: list = []
    acc_found: list = []  # satisfying devices of every accelerator kind of the row
    acc_notes: list[str] = []
    acc_types = 0  # how many kinds contributed: one needs no sort (it costs, on a node of 64 GPUs)
    for dtype, fams in entries:
        # a speed guard: with a fit found, a kind this machine lacks, or the CPU, adds nothing (judging
        # it changes no verdict)
        if acc_found and (dtype == "cpu" or not m.units(dtype, access)):  # pragma: no mutate
            continue
        found, passed, why, notes = match_entry(m, catalog, recipe, row, dtype, fams, channel, access)
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
            return _row_found(m, row, found, notes, passed_all, why_not)
        for w in why:
            if w and w not in why_not:
                why_not.append(w)
    if acc_found:
        # the best of every kind (Vulkan rows take several): discrete first, then memory; the sort is
        # stable, so within one kind the kind's own order (lower index first) stays, and one kind is
        # already in that order (so sorting it would change nothing: a speed guard, not a rule)
        if acc_types > 1:  # pragma: no mutate
            acc_found.sort(key=lambda d: (d.unit.integrated, -d.unit.usable_memory()))
        if acc_found[0].type in unlisted:
            acc_notes.append(unlisted_note(catalog, row, acc_found[0]))
        return _row_found(m, row, acc_found, acc_notes, passed_all, [])
    return RowResult([], "; ".join(why_not), [], passed_all)


def _row_found(m: Machine, row: Row, found, notes, passed_all, why_not) -> RowResult:
    """The row fits on ``found``; ``why_not`` (why no accelerator entry fit) when that is the CPU."""
    notes = list(notes)
    if row.note:
        notes.append(row.note)
    present = m.present_types()
    for dt, text in row.extra.get("device_notes", {}).items():
        if dt == "cpu" or dt in present:
            notes.append(text)
    cpu_because = []
    if found[0].type == "cpu" and why_not:
        cpu_because = list(why_not)
        notes.append(f"runs on the CPU: {'; '.join(why_not)}")
    return RowResult(found, "", notes, passed_all, cpu_because)


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
        shown = row.shown
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
            oses = recipe.oses_of(v.name)
            if m.os not in oses:
                v.reason = os_reason(oses)
        elif v.name == "system" and SYSTEM_NOTE not in v.notes:
            # the device named is where a build of this tool's choosing would run; the system build is the
            # user's, and where it runs is its own (verify asks it)
            v.notes = [SYSTEM_NOTE, *v.notes]
        v.state = state_for(recipe, v.name, channel, v.supported, installed, pins)
    return out
