"""The engine's sentences: how kinds, OSes and families are said, and the few sentences built from
several facts.  Device words are templates the device's mapping fills in (``fill``)."""

from __future__ import annotations

from selector.kinds import TYPE_WORDS, kind

OS_WORDS = {"linux": "Linux", "windows": "Windows", "macos": "macOS"}


def fill(template: str, values: dict) -> str:
    """``template`` with ``{name}`` placeholders replaced in one pass: a value (a GPU's name read from a
    capture) is never read as a placeholder itself."""
    return template.format_map(values)


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
    return text.replace("{family}", str(family)).replace("{name}", str(name)) if text else ""


def reasons(passed, merge: bool, row, fams) -> list[str]:
    """Words for the devices passed over, each distinct reason once; with ``merge`` (several kinds of
    GPU miss the row's families, and the row has no words of its own), one sentence names them all."""
    out = []
    merged = merge and not row.extra.get("family_reason")
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
