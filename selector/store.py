"""pick-backend's own records in the cache: ``<cache>/pick-backend/<kind>/<name>.json``.

Model header facts (``models``), the device listing a verify run read (``devices``), benchmark
results (``bench``).  Each record is written whole or not at all (a temporary file beside it, then
a rename), so an interrupted command leaves the previous record; one that cannot be read is
treated as absent and said so by the caller, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

DIR = "pick-backend"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def path(cache: str, kind: str, key: str) -> str:
    """A record's file: a readable prefix of the key, then a digest of all of it (no two keys share one)."""
    stem = _SAFE.sub("_", key)[-60:].strip("._") or "record"
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return os.path.join(cache, DIR, kind, f"{stem}-{digest}.json")


def read(file: str) -> dict | None:
    from probes.inputs import open_regular

    try:
        with open_regular(file) as f:
            data = json.loads(f.read())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def write(file: str, data: dict) -> None:
    os.makedirs(os.path.dirname(file), exist_ok=True)
    tmp = f"{file}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, file)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def records(cache: str, kind: str) -> list[tuple[str, dict]]:
    base = os.path.join(cache, DIR, kind)
    try:
        names = sorted(n for n in os.listdir(base) if n.endswith(".json"))
    except OSError:
        return []
    out = []
    for n in names:
        d = read(os.path.join(base, n))
        if d is not None:
            out.append((os.path.join(base, n), d))
    return out
