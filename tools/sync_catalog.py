#!/usr/bin/env python3
"""Regenerate a bundled catalog from its upstream source, and say what changed.

    python tools/sync_catalog.py lemonade REFERENCE.md            # the change, as rows; exit 0 when none
    python tools/sync_catalog.py lemonade REFERENCE.md --write    # ... and write selector/catalogs/lemonade.json
    python tools/sync_catalog.py localai index.yaml [--write]     # LocalAI's backend/index.yaml
    python tools/sync_catalog.py lemonade-models server_models.json [--write]  # Lemonade's model list

REFERENCE.md is Lemonade's generated backend reference (docs/dev/backends-reference.md in
lemonade-sdk/lemonade, made by docs/tools/gen_backend_boilerplate.py).  It carries the recipes and
their display names, the backends with tier, format, OS and device families (the support matrix),
and each recipe's options; those parts of lemonade.json are regenerated from it.  Every other fact
(arch gates, the gfx950 and CWSR gates, ROCm channels, row conditions, sources) stays in the
hand-kept overlay, catalogs-src/lemonade/overlay.json, each fact with its source: a row of the
overlay is matched to a matrix row by recipe, backend and OS.

LocalAI's backend/index.yaml gives each meta entry's capability map (capability -> image) and the
image names: the ``capabilities`` of each recipe that has a meta entry, and the ``install`` command
of each row, through the capability its ``env`` forces, are regenerated from it, and every image a
row installs must be an entry of the index.  The rest (devices, CUDA architecture lists from the
Makefiles, glibc gates, sources) is catalogs-src/localai/overlay.json.

The committed copies of the sources the catalogs were made from are in catalogs-src/ (Lemonade's
backends-reference.md, LocalAI's index.yaml at the commit the catalog names);
tests/test_catalog_sync.py rebuilds each catalog from its copy and overlay and compares, so an edit
in one without the other fails.

Exit codes: 0 no change (or written), 1 changes found (without --write), 5 an unreadable or
malformed source or overlay (the message names the file and the line or field).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CATALOGS = os.path.join(ROOT, "selector", "catalogs")
SOURCES = os.path.join(ROOT, "catalogs-src")


class SourceError(Exception):
    exit_code = 5


# ------------------------------------------------------------------------------------------------
# Lemonade's backend reference (markdown tables)


def _cells(line: str) -> list[str]:
    """A table row's cells; ``\\|`` is a pipe inside a cell."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def _table(lines: list[str], start: int, path: str) -> tuple[list[str], list[tuple[int, list[str]]], int]:
    """(header, [(line number, cells)], index after the table) of the markdown table at ``start``."""
    i = start
    while i < len(lines) and not lines[i].startswith("|"):
        i += 1
    if i + 1 >= len(lines) or not re.match(r"^\|[-| :]+\|$", lines[i + 1].strip()):
        raise SourceError(f"{path}:{i + 1}: expected a markdown table")
    header = _cells(lines[i])
    rows = []
    i += 2
    while i < len(lines) and lines[i].startswith("|"):
        cells = _cells(lines[i])
        if len(cells) != len(header):
            raise SourceError(f"{path}:{i + 1}: {len(cells)} cells, the table has {len(header)} columns")
        rows.append((i + 1, cells))
        i += 1
    return header, rows, i


def _section(lines: list[str], title: str, path: str) -> int:
    for i, line in enumerate(lines):
        if line.strip() == title:
            return i + 1
    raise SourceError(f"{path}: no '{title}' section")


def _name(cell: str, path: str, line: int) -> str:
    m = re.fullmatch(r"`([^`]+)`", cell)
    if not m:
        raise SourceError(f"{path}:{line}: expected a `name`, found {cell!r}")
    return m.group(1)


def _yes(cell: str, path: str, line: int) -> bool:
    if cell not in ("yes", "no"):
        raise SourceError(f"{path}:{line}: expected yes or no, found {cell!r}")
    return cell == "yes"


def _devices(cell: str, path: str, line: int) -> dict[str, list[str]]:
    """"amd_gpu; cpu (x86_64); nvidia_gpu (sm_89, sm_90)" -> {"amd_gpu": [], "cpu": ["x86_64"], ...}."""
    out: dict[str, list[str]] = {}
    for part in cell.split(";"):
        m = re.fullmatch(r"\s*([a-z_]+)\s*(?:\(([^)]*)\))?\s*", part)
        if not m:
            raise SourceError(f"{path}:{line}: device families {part.strip()!r} are not 'type' or 'type (a, b)'")
        fams = [f.strip() for f in (m.group(2) or "").split(",") if f.strip()]
        out[m.group(1)] = fams
    return out


def _default(cell: str):
    if cell == '""':
        return ""
    for kind in (int, float):
        try:
            return kind(cell)
        except ValueError:
            pass
    if cell in ("true", "false"):
        return cell == "true"
    return cell.strip('"')


def parse_lemonade(path: str) -> dict:
    """The parts of lemonade.json the reference carries: {recipe: {display_name, selectable_backend,
    uses_ctx_size, options, rows: [{backend, tier, format, os, devices}]}} in the reference's order."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SourceError(f"{path}: cannot read: {e}") from None
    recipes: dict[str, dict] = {}
    header, rows, _ = _table(lines, _section(lines, "## Backends", path), path)
    for line, (recipe, name, selectable, ctx, _backends) in rows:
        recipes[_name(recipe, path, line)] = {"display_name": name, "selectable_backend": _yes(selectable, path, line),
                                              "uses_ctx_size": _yes(ctx, path, line), "options": [], "rows": []}
    header, rows, _ = _table(lines, _section(lines, "## Support matrix", path), path)
    for line, (recipe, backend, tier, fmt, oses, devices) in rows:
        r = _name(recipe, path, line)
        if r not in recipes:
            raise SourceError(f"{path}:{line}: recipe {r} is not in the Backends table")
        recipes[r]["rows"].append({"backend": backend, "tier": tier, "format": fmt,
                                   "os": [o.strip() for o in oses.split(",")],
                                   "devices": _devices(devices, path, line)})
    i = _section(lines, "## Recipe options", path)
    while i < len(lines):
        m = re.match(r"^#### `([^`]+)`", lines[i])
        if lines[i].startswith("## "):
            break
        if not m:
            i += 1
            continue
        r = m.group(1)
        if r not in recipes:
            raise SourceError(f"{path}:{i + 1}: options for unknown recipe {r}")
        header, rows, i = _table(lines, i + 1, path)
        for line, (opt, flag, typ, default, desc) in rows:
            o = {"name": _name(opt, path, line),
                 "flag": None if flag in ("—", "-", "") else _name(flag, path, line),
                 "type": typ, "default": _default(default), "description": desc}
            recipes[r]["options"].append(o)
    return recipes


# ------------------------------------------------------------------------------------------------
# merge with the overlay, and the change as rows


def row_key(recipe: str, row: dict) -> str:
    return f"{recipe}/{row['backend']}/{','.join(row['os'])}"


def build(generated: dict, overlay: dict, overlay_path: str, strict: bool = True) -> tuple[dict, list[str]]:
    """(the whole catalog, overlay facts left without a row or recipe).  The catalog: the overlay's
    top level, each recipe from the source with the overlay's recipe facts, each row with the
    overlay's row facts (matched by recipe/backend/os).  ``strict``: a fact left over is an error."""
    out = {k: v for k, v in overlay.items() if not k.startswith("_") and k not in ("recipe_facts", "row_facts")}
    rfacts, wfacts = overlay.get("recipe_facts", {}), overlay.get("row_facts", {})
    used = set()
    recipes = {}
    for name, rec in generated.items():
        r = {k: rec[k] for k in ("display_name", "selectable_backend", "uses_ctx_size")}
        facts = rfacts.get(name, {})
        r.update({k: v for k, v in facts.items() if k not in ("prefer_system_default", "prefer_system_default_source")})
        r["options"] = rec["options"]
        rows = []
        for row in rec["rows"]:
            key = row_key(name, row)
            extra = wfacts.get(key, {})
            if key in wfacts:
                used.add(key)
            rows.append({**row, **extra})
        r["rows"] = rows
        r.update({k: v for k, v in facts.items() if k in ("prefer_system_default", "prefer_system_default_source")})
        recipes[name] = r
    stale = sorted(set(wfacts) - used)
    unknown = sorted(set(rfacts) - set(generated))
    if strict and stale:
        raise SourceError(f"{overlay_path}: row_facts for rows the source does not have: {', '.join(stale)}")
    if strict and unknown:
        raise SourceError(f"{overlay_path}: recipe_facts for recipes the source does not have: {', '.join(unknown)}")
    # the top level keeps the catalog's own order: recipes after device_types
    ordered = {}
    for k, v in out.items():
        ordered[k] = v
        if k == "device_types":
            ordered["recipes"] = recipes
    ordered.setdefault("recipes", recipes)
    name = os.path.relpath(overlay_path, ROOT)
    left = [f"! {name}: row_facts {k} have no row in the source any more" for k in stale]
    left += [f"! {name}: recipe_facts {k} name no recipe of the source" for k in unknown]
    return ordered, left


def _matrix_rows(catalog: dict) -> dict[str, dict]:
    """recipe/backend/os -> the row's matrix facts (what the source carries), for the change report."""
    out = {}
    for name, rec in catalog.get("recipes", {}).items():
        for row in rec.get("rows", []):
            out[row_key(name, row)] = {k: row.get(k) for k in ("tier", "format", "devices")}
    return out


def changes(old: dict, new: dict) -> list[str]:
    """The change as lines: rows added, removed and changed, then recipe-level changes."""
    a, b = _matrix_rows(old), _matrix_rows(new)
    out = [f"+ {k}: {_words(b[k])}" for k in b if k not in a]
    out += [f"- {k}: {_words(a[k])}" for k in a if k not in b]
    for k in a:
        if k in b and a[k] != b[k]:
            diff = "; ".join(f"{f} {_show(a[k][f])} -> {_show(b[k][f])}" for f in a[k] if a[k][f] != b[k][f])
            out.append(f"~ {k}: {diff}")
    for name in dict.fromkeys([*old.get("recipes", {}), *new.get("recipes", {})]):
        o, n = old.get("recipes", {}).get(name), new.get("recipes", {}).get(name)
        if o is None or n is None:
            out.append(f"{'+' if o is None else '-'} recipe {name}")
            continue
        for f in ("display_name", "selectable_backend", "uses_ctx_size", "options"):
            if o.get(f) != n.get(f):
                out.append(f"~ recipe {name}: {f} changed")
        ok, nk = [row_key(name, r) for r in o.get("rows", [])], [row_key(name, r) for r in n.get("rows", [])]
        if ok != nk and sorted(ok) == sorted(nk):  # the order is the preference: a change of it matters
            out.append(f"~ recipe {name}: row order changed: {', '.join(nk)}")
    if any(old.get(k) != new.get(k) for k in set(old) | set(new) if k != "recipes"):
        out.append("~ the catalog's top level changed (overlay)")
    if not out and old != new:
        out.append("~ row facts changed (overlay)")
    return out


def _show(v) -> str:
    return json.dumps(v, separators=(",", ":")) if not isinstance(v, str) else v


def _words(row: dict) -> str:
    devices = "; ".join(t + (f" ({', '.join(f)})" if f else "") for t, f in row["devices"].items())
    return f"{row['tier']} {row['format']}, {devices}"


def dump(catalog: dict) -> str:
    return json.dumps(catalog, indent=2, ensure_ascii=False) + "\n"


# ------------------------------------------------------------------------------------------------
# LocalAI's backend/index.yaml

FORCE = "LOCALAI_FORCE_META_BACKEND_CAPABILITY"
INSTALL = "local-ai backends install "


def parse_localai(path: str) -> dict:
    """{"metas": {name: capability map}, "images": {image name: line of its first entry}} from the
    index: a meta entry has a capability map and no image (uri); an image entry has a uri.  An image
    listed twice (metal-whisper at 82c191af) counts by its first entry, as LocalAI's gallery does."""
    try:
        import yaml
    except ImportError:
        raise SourceError("the LocalAI sync reads YAML: pip install PyYAML (it is in the test extras)") from None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        nodes = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise SourceError(f"{path}: cannot read: {e}") from None
    if not isinstance(data, list):
        raise SourceError(f"{path}: the index must be a YAML list of entries")
    metas, images = {}, {}
    for node, entry in zip(nodes.value, data):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise SourceError(f"{path}:{node.start_mark.line + 1}: an entry without a name")
        if "uri" in entry:
            images.setdefault(entry["name"], node.start_mark.line + 2)  # the line of its name:
        elif isinstance(entry.get("capabilities"), dict):
            metas[entry["name"]] = {k: v for k, v in entry["capabilities"].items()}
    return {"metas": metas, "images": images}


def build_localai(generated: dict, overlay: dict, overlay_path: str, strict: bool = True) -> tuple[dict, list[str]]:
    """The catalog: the overlay with each meta recipe's capability map, and each row's install
    command through the capability its env forces.  Left over: a row whose capability the map no
    longer has, an image the index does not list."""
    import copy

    out = copy.deepcopy({k: v for k, v in overlay.items() if not k.startswith("_")})
    left = []
    for name, rec in out.get("recipes", {}).items():
        caps = generated["metas"].get(name)
        if caps is not None:
            items = list(rec.items())
            at = next((i + 1 for i, (k, _) in enumerate(items) if k == "index"), 1)
            items[at:at] = [("capabilities", caps)]
            rec.clear()
            rec.update(items)
        for row in rec.get("rows", []):
            key = (row.get("env") or {}).get(FORCE)
            if "install" not in row and caps is not None and key is not None:
                if key not in caps:
                    left.append(f"! {row_key(name, row)}: the capability {key} is gone from {name}'s map")
                    continue
                items = list(row.items())
                at = next((i for i, (k, _) in enumerate(items) if k == "env"), len(items))
                items[at:at] = [("install", INSTALL + caps[key])]
                row.clear()
                row.update(items)
            image = row.get("install", "")[len(INSTALL):] if row.get("install", "").startswith(INSTALL) else None
            if image and caps is not None and image not in generated["images"]:
                left.append(f"! {row_key(name, row)}: the index has no image {image}")
    if strict and left:
        raise SourceError(f"{os.path.relpath(overlay_path, ROOT)}: " + "; ".join(x[2:] for x in left))
    return out, left


def localai_changes(old: dict, new: dict) -> list[str]:
    """Capability maps and install commands, row by row."""
    out = []
    for name, rec in new.get("recipes", {}).items():
        before = old.get("recipes", {}).get(name, {})
        a, b = before.get("capabilities") or {}, rec.get("capabilities") or {}
        out += [f"+ {name} capability {k}: {b[k]}" for k in b if k not in a]
        out += [f"- {name} capability {k}: {a[k]}" for k in a if k not in b]
        out += [f"~ {name} capability {k}: {a[k]} -> {b[k]}" for k in a if k in b and a[k] != b[k]]
        rows_a = {row_key(name, r): r for r in before.get("rows", [])}
        for r in rec.get("rows", []):
            k = row_key(name, r)
            was = rows_a.get(k, {}).get("install")
            if was != r.get("install"):
                out.append(f"~ {k}: install {was} -> {r.get('install')}")
    if not out and old != new:
        out.append("~ facts changed (overlay)")
    return out


# ------------------------------------------------------------------------------------------------

def parse_models(path: str) -> dict:
    """Lemonade's server_models.json: name -> {checkpoint, recipe, size, labels, ...}."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise SourceError(f"{path}: {e}") from None
    if not isinstance(data, dict):
        raise SourceError(f"{path}: not an object of models")
    out = {}
    for name, m in data.items():
        if not isinstance(m, dict) or not isinstance(m.get("recipe"), str):
            raise SourceError(f"{path}: model {name!r} has no recipe")
        main = m.get("checkpoint")
        if main is None and isinstance(m.get("checkpoints"), dict):
            main = m["checkpoints"].get("main")
        size = m.get("size")
        if not isinstance(main, str) or not isinstance(size, (int, float)):
            raise SourceError(f"{path}: model {name!r} needs a checkpoint and a size")
        row = {"recipe": m["recipe"], "checkpoint": main, "size_gb": size,
               "labels": [x for x in m.get("labels", []) if isinstance(x, str)]}
        if isinstance(m.get("mmproj"), str):
            row["mmproj"] = m["mmproj"]
        if m.get("suggested"):
            row["suggested"] = True
        out[name] = row
    return out


def build_models(generated: dict, overlay: dict, overlay_path: str, strict: bool = True) -> tuple[dict, list[str]]:
    return {**{k: overlay[k] for k in ("title", "source", "size_unit") if k in overlay}, "models": generated}, []


def models_changes(old: dict, new: dict) -> list[str]:
    a, b = old.get("models", {}), new.get("models", {})
    return ([f"+ {n} ({b[n]['recipe']})" for n in b if n not in a] + [f"- {n}" for n in a if n not in b]
            + [f"~ {n}" for n in b if n in a and a[n] != b[n]])


PARSERS = {"lemonade": (parse_lemonade, build, changes), "localai": (parse_localai, build_localai, localai_changes),
           "lemonade-models": (parse_models, build_models, models_changes)}


def regenerate(name: str, source: str, strict: bool = True) -> tuple[dict, list[str]]:
    overlay_path = os.path.join(SOURCES, name, "overlay.json")
    try:
        with open(overlay_path, encoding="utf-8") as f:
            overlay = json.load(f)
    except (OSError, ValueError) as e:
        raise SourceError(f"{overlay_path}: {e}") from None
    parse, merge, _ = PARSERS[name]
    return merge(parse(source), overlay, overlay_path, strict)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("catalog", choices=sorted(PARSERS))
    ap.add_argument("source", help="the upstream file (Lemonade: docs/dev/backends-reference.md; LocalAI: "
                                   "backend/index.yaml)")
    ap.add_argument("--write", action="store_true", help="write the regenerated catalog")
    args = ap.parse_args(argv)
    path = os.path.join(CATALOGS, f"{args.catalog}.json")
    try:
        new, left = regenerate(args.catalog, args.source, strict=args.write)
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    except SourceError as e:
        print(f"sync_catalog: {e}", file=sys.stderr)
        return e.exit_code
    lines = PARSERS[args.catalog][2](old, new) + left
    for line in lines:
        print(line)
    if args.write:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(dump(new))
        os.replace(path + ".tmp", path)
        print(f"wrote {os.path.relpath(path)}" + ("" if lines else " (no change)"))
        return 0
    if not lines:
        print(f"{args.catalog}: no change")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
