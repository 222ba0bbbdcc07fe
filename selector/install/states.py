"""What is installed: read ``<cache>/bin/<recipe>/<backend>/version.txt``.  The engine turns this
into states by comparing with the pins; this module is the only one that reads the cache."""

from __future__ import annotations

import os


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


def installed(cache: str, recipes=None) -> dict[str, dict[str, str | None]]:
    """{recipe: {backend_dir: version or None}} for every backend directory in the cache.
    A directory without a readable version.txt maps to None (update_required)."""
    out: dict[str, dict[str, str | None]] = {}
    base = os.path.join(cache, "bin")
    try:
        recipe_dirs = os.listdir(base)
    except OSError:
        return out
    for r in recipe_dirs:
        if recipes is not None and r not in recipes:
            continue
        try:
            backends = os.listdir(os.path.join(base, r))
        except OSError:
            continue
        for b in backends:
            d = os.path.join(base, r, b)
            if b.startswith(".") or b.endswith((".staging", ".old", ".lock", ".partial")) or not os.path.isdir(d):
                continue
            try:
                with open(os.path.join(d, "version.txt"), encoding="utf-8") as f:
                    version = f.readline().strip() or None
            except OSError:
                version = None
            out.setdefault(r, {})[b] = version
    return out
