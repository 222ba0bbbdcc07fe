"""What is installed: read ``<cache>/bin/<recipe>/<backend>/version.txt``.  The engine turns this
into states by comparing with the pins; this module is the only one that reads the cache.

A directory counts as installed only when it is complete: the binary its ``install.json`` names is
there, and so is the runtime it records (a ROCm build's TheRock runtime).  An incomplete one reads
as version None (update_required), so ``install`` repairs it."""

from __future__ import annotations

import json
import os

# an install's work files beside it (unpack.py): never a backend or runtime of their own
WORK_SUFFIXES = (".staging", ".old", ".lock", ".partial", ".trash", ".unwrap")


def read_version(path: str) -> str | None:
    try:
        with open(os.path.join(path, "version.txt"), encoding="utf-8") as f:
            return f.readline().strip() or None
    except (OSError, ValueError):
        return None


def read_record(path: str) -> dict:
    try:
        with open(os.path.join(path, "install.json"), encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _rel_exists(root: str, rel, regular: bool = False) -> bool:
    if not isinstance(rel, str) or not rel or rel.startswith("/") or ".." in rel.split("/"):
        return False
    p = os.path.join(root, *rel.split("/"))
    return os.path.isfile(p) and not os.path.islink(p) if regular else os.path.exists(p)


def _has_binary(root: str, binary: str) -> bool:
    from selector.install.unpack import walk

    for dirpath, dirnames, filenames in walk(root):
        if binary in filenames or binary + ".exe" in filenames:
            return True
    return False


def complete(path: str, binary: str | None = None, expect: str | None = None, record: dict | None = None) -> bool:
    """The install at ``path`` has its binary (the one install.json names, else ``binary`` found
    anywhere in it), its ``expect`` path, and the runtime install.json says it needs."""
    rec = read_record(path) if record is None else record
    if rec.get("binary") is not None or (binary and rec):
        if not _rel_exists(path, rec.get("binary"), regular=True):
            return False
    elif binary and not _has_binary(path, binary):
        return False
    exp = expect or rec.get("expect")
    if exp and not _rel_exists(path, exp):
        return False
    rt = rec.get("runtime")
    if rt:
        bin_dir = os.path.dirname(os.path.dirname(path))
        rt_path = os.path.join(bin_dir, *str(rt).split("/"))
        if ".." in str(rt).split("/") or read_version(rt_path) != rec.get("runtime_version"):
            return False
        if rec.get("runtime_expect") and not _rel_exists(rt_path, rec["runtime_expect"]):
            return False
    return True


def cache_root(cache_dir: str | None = None, env=None) -> str:
    """--cache-dir, else LEMONADE_CACHE_DIR, else $XDG_CACHE_HOME/lemonade, else ~/.cache/lemonade
    (%USERPROFILE%\\.cache\\lemonade on Windows)."""
    env = os.environ if env is None else env
    if cache_dir:
        return cache_dir
    if env.get("LEMONADE_CACHE_DIR"):
        return env["LEMONADE_CACHE_DIR"]
    if env.get("XDG_CACHE_HOME"):
        return os.path.join(env["XDG_CACHE_HOME"], "lemonade")
    if os.name == "nt" and env.get("USERPROFILE"):
        return os.path.join(env["USERPROFILE"], ".cache", "lemonade")
    return os.path.join(os.path.expanduser("~"), ".cache", "lemonade")


def installed(cache: str, recipes=None, binary_of=None) -> dict[str, dict[str, str | None]]:
    """{recipe: {backend_dir: version or None}} for every backend directory in the cache.
    A directory without a readable version.txt maps to None (update_required).  A directory that
    ``install`` did not write (no install.json: Lemonade's own) is installed only when the recipe's
    binary (``binary_of(recipe)``) is somewhere in it, as Lemonade checks: version.txt alone is not
    an install."""
    out: dict[str, dict[str, str | None]] = {}
    for r, d in _dirs(os.path.join(cache, "bin")):
        if recipes is not None and r not in recipes:
            continue
        version = read_version(d)
        if os.path.exists(os.path.join(d, "install.json")):
            if version is not None and not complete(d):
                version = None  # its binary or its runtime is gone: update_required, install repairs it
        else:
            binary = binary_of(r) if binary_of is not None else None
            if binary and not _has_binary(d, binary):
                continue  # no binary: not installed (Lemonade searches the directory for it)
        out.setdefault(r, {})[os.path.basename(d)] = version
    return out


RUNTIME_GROUPS = ("therock",)  # <cache>/bin/<group>/<arch>-<version>: runtimes, not recipes


def runtimes(cache: str) -> list[dict]:
    """The runtimes in the cache (TheRock: ``<cache>/bin/therock/<arch>-<version>``): version.txt,
    whether complete (a version, and the ``expect`` path its install.json names; an install.json that
    cannot be read is not complete), and ``used_by``: the backends (``recipe/dir``) whose install.json
    records that runtime.  Lemonade's own ROCm installs record none."""
    bin_dir = os.path.join(cache, "bin")
    users: dict[str, list[str]] = {}
    for recipe, d in _dirs(bin_dir, exclude=RUNTIME_GROUPS):
        rt = read_record(d).get("runtime")
        if isinstance(rt, str):
            users.setdefault(rt, []).append(f"{recipe}/{os.path.basename(d)}")
    out = []
    for group, d in _dirs(bin_dir, only=RUNTIME_GROUPS):
        version = read_version(d)
        rec = read_record(d)
        readable = bool(rec) or not os.path.lexists(os.path.join(d, "install.json"))
        ok = version is not None and readable and (not rec.get("expect") or _rel_exists(d, rec["expect"]))
        name = f"{group}/{os.path.basename(d)}"
        out.append({"dir": name, "version": version, "complete": ok, "path": d, "used_by": users.get(name, [])})
    return out


def _dirs(bin_dir: str, only=None, exclude=()):
    """(group, path) of every install directory under ``bin_dir``, sorted; work directories left out."""
    try:
        groups = sorted(os.listdir(bin_dir))
    except OSError:
        return
    for g in groups:
        if (only is not None and g not in only) or g in exclude:
            continue
        try:
            names = sorted(os.listdir(os.path.join(bin_dir, g)))
        except OSError:
            continue
        for n in names:
            d = os.path.join(bin_dir, g, n)
            if not n.startswith(".") and not n.endswith(WORK_SUFFIXES) and os.path.isdir(d):
                yield g, d
