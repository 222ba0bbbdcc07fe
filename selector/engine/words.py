"""The engine's sentences: how kinds, OSes and families are said, the few sentences built from
several facts, and why a backend was chosen (``choice_reason``, from the Choice's data).  Device
words are templates the device's mapping fills in (``fill``)."""

from __future__ import annotations

from selector.engine.records import Basis, Choice, Unmeasured
from selector.kinds import TYPE_WORDS, kind

OS_WORDS = {"linux": "Linux", "windows": "Windows", "macos": "macOS"}


def fill(template: str, values: dict) -> str:
    """``template`` with ``{name}`` placeholders replaced in one pass: a value (a GPU's name read from a
    capture) is never read as a placeholder itself."""
    return template.format_map(values)


def placeholders(text: str, values: dict) -> str:
    """A data file's sentence with its ``{name}`` placeholders filled in one pass (a value is never read as
    a placeholder itself); any other brace is left as written."""
    import re

    return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), text)


def os_reason(oses) -> str:
    words = [OS_WORDS.get(o, o) for o in oses]
    if len(words) == 1:
        return f"Requires {words[0]}"
    return "Requires " + ", ".join(words[:-1]) + " or " + words[-1]


def sm_number(sm: str) -> int:
    try:
        return int(sm.split("_", 1)[1].rstrip("abf"))
    except (IndexError, ValueError):
        return 0


def describe_families(families) -> str:
    """A row's families as a reason names them: sm targets as a range, others listed."""
    fams = list(families)
    if fams and all(f.startswith("sm_") for f in fams):
        fams.sort(key=sm_number)
        return f"{fams[0]}..{fams[-1]}" if len(fams) > 2 else ", ".join(fams)
    return ", ".join(fams)


def and_(items: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def family_reason(row, family, name) -> str:
    """The row's own words for "this device kind, but not this family" (catalog ``family_reason``)."""
    text = row.extra.get("family_reason")
    return placeholders(text, {"family": family, "name": name}) if text else ""


def reasons(passed, merged: list, row, fams) -> list[str]:
    """Words for the devices passed over, each distinct reason once; the ``merged`` devices (several
    kinds of GPU whose family the row lacks, said in their kind's words) in one sentence naming them all."""
    out = []
    ids = {id(dev) for dev in merged}
    if merged:
        kinds = list(dict.fromkeys(f"{dev.family} ({dev.name})" for dev in merged))
        out.append(f"Unsupported GPUs: {', '.join(kinds)} ({row.backend} needs {describe_families(fams)})")
    for dev, why in passed:
        if id(dev) not in ids and why not in out:
            out.append(why)
    return out


def absent(dtype: str, fams) -> str:
    """Why an entry of a kind the machine has none of does not fit."""
    k = kind(dtype)
    text = k.get("absent")
    if text:
        return fill(text, {"families": " or ".join(fams) if fams else k.get("any_family", "")})
    return f"No {TYPE_WORDS.get(dtype, dtype)} found"


def unlisted_note(catalog, row, dev) -> str:
    """The words for a Vulkan build on a GPU kind its catalog row does not list."""
    listed = and_([TYPE_WORDS[t] + "s" for t, _ in row.devices])
    owner = catalog.extra.get("owner") or catalog.name
    icd = getattr(dev.gpu, "vulkan_driver", None)
    return (f"{owner}'s matrix lists this build for {listed}; it runs on this {TYPE_WORDS[dev.type]} "
            f"through its Vulkan driver" + (f" ({icd})" if icd else ""))


def vulkan_fix(vendor: str, os_name: str = "linux", what: str | None = None) -> str:
    """What installs a vendor's Vulkan driver, or ``what`` ("loader"), on this OS
    (probes/tables/vulkan_icds.json "fix")."""
    from probes.tables import load

    fixes = load("vulkan_icds")["fix"]
    return fixes.get(os_name, fixes["linux"])[what or vendor]


# ------------------------------------------------------------------------------------------------
# why a backend was chosen


def _order_words(c: Choice) -> str:
    if c.basis is Basis.SYSTEM:
        return "no accelerator backend is supported here; the build on PATH comes first, as prefer_system asks"
    if c.basis is Basis.INSTALLED:
        why = (f"already installed ({c.verdict.state}); an installed backend wins over earlier ones that are only "
               f"installable ({c.over})")
    else:
        adjective = {"accelerator": "accelerator ", "cpu": "CPU "}.get(c.among, "")
        why = f"first supported {adjective}backend in preference order"
    return f"no accelerator backend is supported here; {why}" if c.among == "cpu" else why


def _at(c: Choice) -> str:
    return f" at depth {c.depth}" if c.depth else ""


def _unmeasured_words(c: Choice, recipe: str) -> str:
    if c.unmeasured is Unmeasured.NOISY:
        return (f"the fresh {c.metric} measurements of {recipe} on this machine are noisy (their runs disagreed by "
                f"more than a tenth of their mean); measure again on a quiet machine")
    if c.unmeasured is Unmeasured.UNMEASURABLE:
        return f"pick-backend cannot measure {recipe} (no benchmark tool it reads)"
    flag = f" --depth {c.depth}" if c.depth else ""
    if c.unmeasured is Unmeasured.ALONE:
        return (f"only {c.alone} has a steady fresh {c.metric} measurement of {recipe}{_at(c)} on this machine, so "
                f"nothing is compared with it (`pick-backend bench {recipe} --model M{flag}` measures each supported "
                f"build installed)")
    return (f"no fresh {c.metric} measurement of {recipe}{_at(c)} on this machine "
            f"(`pick-backend bench {recipe} --model M{flag}` makes them)")


def measured_words(c: Choice) -> str:
    win = c.measured[0]
    speeds = " vs ".join(f"{r['backend']} {r['avg_ts']:.0f} t/s" for r in c.measured)
    test = win["test"].split("@")[0]  # tg128@d4096: the depth is said in words
    return f"measured: {speeds} ({test}{_at(c)}, {win['model'].get('label', win['model']['key'])}, {win['at'][:10]})"


def choice_reason(c: Choice, recipe: str) -> str:
    """Why ``c`` was chosen, in one sentence made from its basis."""
    if c.basis is Basis.PINNED:
        v = c.verdict
        return f"pinned by {c.source}" + ("" if v.supported else f", but not supported here: {v.reason}")
    if c.basis is Basis.MEASURED:
        return measured_words(c)
    if c.unmeasured is None:
        return _order_words(c)
    why = _unmeasured_words(c, recipe)
    if c.basis is Basis.PUBLISHED:
        from selector import evidence

        rows, where = c.published
        return f"{why}; {evidence.words(rows, where)}"
    if c.uncompared:
        why += f"; no published {c.metric} comparison of {' and '.join(c.uncompared)}{_at(c)} on this GPU or its family"
    return f"{why}; accelerator-first instead: {_order_words(c.fallback)}" if c.fallback.verdict is not None else why


def losers_words(chosen: str, lost: list[str], owner: str, recipe: str) -> str:
    """How to choose a backend the catalog's order put after the chosen one."""
    if not lost:
        return ""
    flags = " or ".join(f"--backend {n}" for n in lost)
    return (f"; {chosen} comes before {and_(lost)} in {owner}'s order for {recipe}; {flags} chooses "
            f"{'it' if len(lost) == 1 else 'one'}")
