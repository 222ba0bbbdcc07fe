"""Saved Profiles (``probe --json`` output): read one, or evaluate many in one process (fleets)."""

from __future__ import annotations

import json
import os
import sys

from probes.host import InputError, read_json
from probes.profile import Profile, ProfileError


def parse_profile(data, where: str) -> Profile:
    try:
        return Profile.from_dict(data, where)
    except ProfileError as e:
        raise InputError(where, f"field '{e.field or '<top>'}' " + str(e).split(f"'{e.field or '<top>'}' ", 1)[-1]) from None


def read_profile(path: str) -> Profile:
    data = read_json(path, "profile file not found")
    return parse_profile(data, path)


def iter_profiles(source: str):
    """(name, Profile | InputError) for a directory of *.json, a JSON-lines file, or '-' (stdin)."""
    if os.path.isdir(source):
        for name in sorted(os.listdir(source)):
            if name.endswith(".json"):
                path = os.path.join(source, name)
                try:
                    yield name[:-5], read_profile(path)
                except InputError as e:
                    yield name[:-5], e
        return
    stream = sys.stdin if source == "-" else open(source, encoding="utf-8")
    try:
        for lineno, line in enumerate(stream, 1):
            line = line.strip()
            if not line:
                continue
            where = f"{source}:{lineno}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as e:
                yield where, InputError(where, f"not valid JSON: {e.msg}")
                continue
            name = data.pop("name", None) if isinstance(data, dict) and "schema_version" in data else None
            try:
                yield (name or where), parse_profile(data, where)
            except InputError as e:
                yield (name or where), e
    finally:
        if stream is not sys.stdin:
            stream.close()


def pick_batch(o, recipes, all_, backend) -> int:
    """Evaluate many profiles; one JSON line per profile on stdout.  Exit 5 if any input was bad,
    else 3 if any profile had no backend for a requested recipe, else 0."""
    from selector import engine
    from selector.render import pick_json

    cat = o.catalog()
    names = o.recipe_names(recipes, all_ or not recipes)
    s, warnings = o.settings(names, backend)
    pins = o.pins()
    out = sys.stdout
    worst = 0
    for name, prof in iter_profiles(o.profile_path):
        if isinstance(prof, InputError):
            out.write(json.dumps({"name": name, "error": str(prof)}) + "\n")
            worst = 5
            continue
        m = engine.Machine(prof)
        ds = [engine.decide(prof, cat, n, {}, s, pins, machine=m) for n in names]
        doc = pick_json(prof, cat, s, ds, warnings)
        doc["name"] = name
        out.write(json.dumps(doc, separators=(",", ":")) + "\n")
        if worst == 0 and recipes and not all(d.ok for d in ds):
            worst = 3
    return worst
