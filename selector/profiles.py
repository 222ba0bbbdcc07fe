"""Saved Profiles (``probe --json`` output): read one, or evaluate many in one process (fleets)."""

from __future__ import annotations

import json
import os
import sys

from probes.inputs import InputError, read_json
from probes.profile import Profile, ProfileError

# What a saved Profile must hold (the `required` lists of docs/json.md's profile schema, which
# tests/test_first_hour.py keeps equal to these): a document missing one is exit 5 naming it.
REQUIRED = {
    "": ("schema_version", "os", "cpu", "amd_gpus", "nvidia_gpus", "npus", "metal", "vulkan", "executables",
         "warnings"),
    "os": ("name", "version", "distro", "wsl", "container"),
    "cpu": ("arch", "brand", "cores", "flags"),
    "amd_gpus[]": ("index", "name", "pci", "gfx", "gfx_effective", "integrated", "vram_bytes", "visible", "source"),
    "nvidia_gpus[]": ("index", "name", "sm", "compute_capability", "memory_bytes", "driver_version",
                      "cuda_driver_version", "visible", "source"),
    "npus[]": ("vendor", "pci", "generation", "codename", "driver_bound", "device_node"),
    "metal": ("available", "chip"),
    "vulkan": ("loader", "gpu_drivers"),
}


def _require(data, where: str) -> None:
    if not isinstance(data, dict):
        return  # Profile.from_dict says what is wrong with it
    if data.get("schema_version") != 1:
        return
    for path, fields in REQUIRED.items():
        if path == "":
            items = [("", data)]
        elif path.endswith("[]"):
            key = path[:-2]
            value = data.get(key)
            items = [(f"{key}[{i}].", v) for i, v in enumerate(value)] if isinstance(value, list) else []
        else:
            value = data.get(path)
            items = [(f"{path}.", value)] if isinstance(value, dict) else []
        for prefix, obj in items:
            if not isinstance(obj, dict):
                continue
            for f in fields:
                if f not in obj:
                    raise InputError(where, f"field '{prefix}{f}' is missing (a Profile is `pick-backend probe --json` output)")


def parse_profile(data, where: str) -> Profile:
    try:
        profile = Profile.from_dict(data, where)  # wrong types first, then what is missing
    except ProfileError as e:
        raise InputError(where, f"field '{e.field or '<top>'}' " + str(e).split(f"'{e.field or '<top>'}' ", 1)[-1]) from None
    _require(data, where)
    return profile


def read_stdin() -> str:
    try:
        tty = sys.stdin.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:  # nothing piped in: say so instead of waiting for the keyboard
        raise InputError("-", "--profile - reads a Profile from standard input: pipe one in "
                              "(pick-backend probe --json | pick-backend --profile - llamacpp)")
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode("utf-8")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError("-", f"standard input is not UTF-8 (byte {e.start})") from None


def documents(text: str, source: str):
    """(where, data | InputError) for each JSON document in ``text``: pretty-printed documents one
    after another (`probe --json` output) or JSON Lines.  After a broken document, reading goes on
    at the next line."""
    dec = json.JSONDecoder()
    pos, n = 0, len(text)
    line, counted = 1, 0  # the line number of pos, counted incrementally (fleets are long)
    while True:
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        if pos >= n:
            return
        line += text.count("\n", counted, pos)
        counted = pos
        where = f"{source}:{line}"
        try:
            data, pos = dec.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError) as e:
            yield where, InputError(where, f"not valid JSON: {getattr(e, 'msg', 'nested too deeply')}")
            nxt = text.find("\n", max(getattr(e, "pos", pos), pos))
            if nxt < 0:
                return
            pos = nxt + 1
            continue
        yield where, data


def read_text(source: str) -> str:
    if source == "-":
        text = read_stdin()
    else:
        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            raise InputError(source, "profile file not found") from None
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(source, f"cannot read: {e}") from None
    if not text.strip():
        raise InputError(source, "is empty: no profile in it (expected `pick-backend probe --json` output)")
    return text


def read_profile(path: str) -> Profile:
    """One saved Profile from a file or '-' (stdin): a pretty document or a single JSON line."""
    if path != "-" and not path.endswith(".jsonl"):
        data = read_json(path, "profile file not found")
        if data is None or data == {} or data == []:
            raise InputError(path, "is empty: no profile in it (expected `pick-backend probe --json` output)")
        return parse_profile(data, path)
    return profile_from_text(read_text(path), path)


def profile_from_text(text: str, path: str) -> Profile:
    docs = list(documents(text, path))
    if len(docs) != 1:
        raise InputError(path, f"holds {len(docs)} profiles; this command judges one (`pick --json` evaluates many)")
    where, data = docs[0]
    if isinstance(data, InputError):
        raise data
    if isinstance(data, dict) and "schema_version" in data:
        data = {k: v for k, v in data.items() if k != "name"}
    return parse_profile(data, where)


def iter_profiles(source: str, text: str | None = None):
    """(name, Profile | InputError) for a directory of *.json, a JSON-lines (or concatenated
    pretty JSON) file, or '-' (stdin)."""
    if os.path.isdir(source):
        if os.path.isfile(os.path.join(source, "capture.json")):  # a capture, not a folder of profiles
            raise InputError(source, f"is a capture directory (it has capture.json), not saved profiles: replay it "
                                     f"with --root {source}")
        names = sorted(n for n in os.listdir(source) if n.endswith(".json"))
        if not names:
            raise InputError(source, "holds no *.json profile")
        for name in names:
            path = os.path.join(source, name)
            try:
                yield name[:-5], read_profile(path)
            except InputError as e:
                yield name[:-5], e
        return
    for where, data in documents(read_text(source) if text is None else text, source):
        if isinstance(data, InputError):
            yield where, data
            continue
        name = data.pop("name", None) if isinstance(data, dict) and "schema_version" in data else None
        try:
            yield (name or where), parse_profile(data, where)
        except InputError as e:
            yield (name or where), e


def is_batch(path: str | None) -> bool:
    return bool(path) and (os.path.isdir(path) or path.endswith(".jsonl") or path == "-")


def pick_batch(o, recipes, all_, backend, allow_missing=False, text=None, as_json=True) -> int:
    """Evaluate many profiles; one JSON line per profile on stdout (without ``as_json``: one plain
    line per profile and recipe, ``NAME  RECIPE  BACKEND  DEVICE``, for a person or grep).  Exit 5 if any input was bad,
    else 3 if any profile had no backend for a requested recipe (with --all: for any recipe, unless
    --allow-missing), else 0."""
    from selector import engine
    from selector.render import pick_json
    from selector.settings import for_recipe

    cat = o.catalog()
    names = o.recipe_names(recipes, all_ or not recipes)
    s, warnings = o.settings(names, backend)
    pins = o.pins()
    out = sys.stdout
    worst = 0
    for name, prof in iter_profiles(o.profile_path, text):
        if isinstance(prof, InputError):
            out.write((json.dumps({"name": name, "error": str(prof)}) if as_json else f"{name}  error: {prof}") + "\n")
            worst = 5
            continue
        m = engine.Machine(prof)
        ds = [engine.decide(prof, cat, n, {}, for_recipe(s, cat, n), pins, machine=m) for n in names]
        if prof.amd_gpus:  # the guide's warnings, as the single-profile pick adds them
            from selector.guide import add_advice

            add_advice(prof, ds)
        own = None
        if "capability" in cat.extra:  # LocalAI's own choice, as the single-profile pick shows it
            from selector.capability import advise

            own = advise(prof, cat, ds)
        if as_json:
            doc = pick_json(prof, cat, s, ds, warnings, own)
            doc["name"] = name
            out.write(json.dumps(doc, separators=(",", ":")) + "\n")
        else:
            for d in ds:
                where = (d.device.name or d.device.type) if d.device is not None else "-"
                out.write(f"{name}  {d.recipe}  {d.backend if d.ok else 'none'}  "
                          f"{where if d.ok else d.reason}\n")
        if worst == 0 and (recipes or all_) and not allow_missing and not all(d.ok for d in ds):
            worst = 3
    return worst
