"""Small parsers shared by the probes (kernel text formats)."""

from __future__ import annotations


def parse_hex(text: str | None) -> str | None:
    """A sysfs hex attribute ("0x744c\\n") -> "0x744c"; None when absent or not hex."""
    if text is None:
        return None
    s = text.strip().lower()
    if not s.startswith("0x"):
        return None
    try:
        int(s, 16)
    except ValueError:
        return None
    return s


def parse_int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text.strip().split()[0])
    except (ValueError, IndexError):
        return None
    return value if value >= 0 else None  # sizes, ids and versions: a negative one is garbage


def parse_kv(text: str | None) -> dict[str, str]:
    """KFD ``properties``: one "name value" pair per line."""
    out: dict[str, str] = {}
    if not text:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = parts[1]
    return out


def meminfo_total(text: str | None) -> int | None:
    """/proc/meminfo MemTotal in bytes."""
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            try:
                kb = int(parts[1])
            except (ValueError, IndexError):
                return None
            return kb * 1024 if kb >= 0 else None
    return None


def parse_visible(spec: str | None, count: int, uuids: list[str | None] | None = None,
                  ) -> tuple[list[int] | None, str | None]:
    """(the devices selected, in the runtime's numbering; what is wrong with the list, or None).

    CUDA and ROCm read the list up to its first entry that names no device and ignore the rest
    (CUDA C Programming Guide, "CUDA Environment Variables"; ROCm docs, "GPU isolation
    techniques").  An empty value selects no device in both.  The problem names the entry: not
    an index or UUID, an index past the last device, a repeated device, or a UUID that matches
    no GPU (or more than one)."""
    if spec is None:
        return None, None
    out: list[int] = []
    if not spec.strip():
        return out, None
    for token in spec.split(","):
        token = token.strip()
        if not token:
            return out, "an empty entry ends the list"
        if token.lstrip("-").isdecimal():
            i = int(token)
            if i < 0:
                return out, f"entry {token} is negative: it ends the list"
            if i >= count:
                return out, (f"index {i} is past the last device (there {'is' if count == 1 else 'are'} "
                             f"{count})")
            if i in out:
                return out, f"index {i} is repeated"
            out.append(i)
            continue
        if not token.upper().startswith(("GPU-", "MIG-")):
            return out, f"entry {token!r} is neither an index nor a GPU UUID"
        t = token.lower()
        hit = [i for i, u in enumerate(uuids or []) if u and u.lower().startswith(t)]
        if len(hit) != 1:
            return out, (f"UUID {token} matches no GPU" if not hit else f"UUID {token} matches {len(hit)} GPUs")
        if hit[0] in out:
            return out, f"{token} is repeated"
        out.append(hit[0])
    return out, None


def warn_visible(profile, probe: str, var: str, spec: str | None, problem: str | None, kept: int) -> None:
    """The warning for a device list that is not valid as a whole, naming the variable and value."""
    if problem:
        profile.warn(probe, f"{var}={spec!r}: {problem}; the runtime keeps "
                            + (f"the {kept} device{'s' if kept != 1 else ''} before it" if kept else "no device"))


def parse_override(value: str) -> str | None:
    """HSA_OVERRIDE_GFX_VERSION "10.3.0" or "gfx1030" -> "gfx1030"."""
    v = value.strip().lower()
    if v.startswith("gfx") and len(v) > 3 and v[3:].isalnum():
        return v
    parts = v.split(".")
    if len(parts) == 3 and all(p.isdecimal() for p in parts):
        major, minor, step = (int(p) for p in parts)
        if minor < 16 and step < 16:
            return "gfx%d%x%x" % (major, minor, step)
    return None
