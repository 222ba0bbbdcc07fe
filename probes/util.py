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
        return int(text.strip().split()[0])
    except (ValueError, IndexError):
        return None


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
            return kb * 1024
    return None


def visible_indices(spec: str | None, count: int, uuids: list[str | None] | None = None) -> set[int] | None:
    """Apply a ``*_VISIBLE_DEVICES`` list to ``count`` devices.  None = variable unset (all
    visible).  Entries are indices or UUIDs (``GPU-...``, prefixes allowed); the list stops at the
    first invalid entry, as the CUDA and ROCm runtimes do."""
    order = visible_order(spec, count, uuids)
    return None if order is None else set(order)


def visible_order(spec: str | None, count: int, uuids: list[str | None] | None = None) -> list[int] | None:
    """The devices a ``*_VISIBLE_DEVICES`` list selects, in the order the runtime numbers them
    (``CUDA_VISIBLE_DEVICES=1,0``: device 1 becomes CUDA device 0).  None = variable unset."""
    if spec is None:
        return None
    out: list[int] = []
    for token in spec.split(","):
        token = token.strip()
        if not token:
            break
        if token.lstrip("-").isdecimal():
            i = int(token)
            if i < 0 or i >= count or i in out:
                break
            out.append(i)
            continue
        if uuids:
            t = token.lower()
            hit = [i for i, u in enumerate(uuids) if u and u.lower().startswith(t)]
            if len(hit) == 1 and hit[0] not in out:
                out.append(hit[0])
                continue
        break
    return out
