"""Output: JSON for scripts (plain dicts, the documented contract in docs/json.md) and rich
renderings for a person.  rich is imported only by the human renderers."""

from __future__ import annotations

import json
import sys

from probes.profile import NO_NVIDIA_DRIVER
from selector.term import console, wrap_parts  # noqa: F401 (console: the renderer's, re-exported)

PICK_SCHEMA_VERSION = 1


def dumps(obj) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False)


def emit_json(obj) -> None:
    sys.stdout.write(dumps(obj) + "\n")


def gib(n) -> str:
    if not n:
        return "-"
    return f"{n / (1 << 30):.1f} GiB"


def host_summary(profile) -> dict:
    d = profile.os.distro
    return {
        "os": profile.os.name,
        "arch": profile.cpu.arch,
        "distro": f"{d.id} {d.version}".strip() or None,
    }


def pick_json(profile, catalog, settings, decisions, extra_warnings=(), own=None) -> dict:
    warnings = [{"probe": w.probe, "message": w.message} for w in profile.warnings]
    warnings += [{"source": "settings", "message": m} for m in extra_warnings]
    for d in decisions:
        warnings += [{"recipe": d.recipe, "message": m} for m in d.warnings]
    out = {
        "schema_version": PICK_SCHEMA_VERSION,
        "catalog": catalog.name,
        "host": host_summary(profile),
        "settings": settings.to_dict(),
        "recipes": {d.recipe: d.to_dict() for d in decisions},
        "warnings": warnings,
    }
    if own:  # what the engine would install by itself (selector/capability.py), under the catalog's name
        out[catalog.name] = {**own["capability"], "engine": own["engine"], "notes": own["notes"]}
        for r, x in own["recipes"].items():
            out["recipes"][r][catalog.name] = x
    return out


# -- the engine's own choice (a catalog with a ``capability`` section: LocalAI) ------------------


def own_choice_head(con, catalog, own) -> None:
    c = own["capability"]
    how = {"env": "forced", "run_file": "forced", "detected": "detected"}.get(c["source"], c["source"])
    con.print(f"{own['engine']} by itself would use capability [bold]{c['capability']}[/bold] ({how}: {c['why']})")
    if c.get("hint"):
        con.print(f"  [cyan]i[/cyan] {c['hint']}")


def own_choice_recipe(con, engine, x) -> None:
    from rich.text import Text

    if x["installs"] and x["same_as_pick"]:
        con.print(Text.assemble(f"  {engine} installs the same image by itself: ", (x["commands"][0], "bold")))
        return
    if x["commands"]:
        lead = f"  differs from {engine}'s own choice; install the pick with: " if x["same_as_pick"] is False else "  install: "
        con.print(Text.assemble(lead, (x["commands"][0], "bold")))
    if x["note"]:
        con.print(f"  [cyan]i[/cyan] {x['note']}")


# ------------------------------------------------------------------------------------------------
# rich


def _device_words(dev) -> str:
    if dev is None:
        return "-"
    from selector.engine import TYPE_WORDS

    kind = TYPE_WORDS.get(dev.type, dev.type)
    name = f" {dev.name}" if dev.name else ""
    if dev.type == "cpu":
        return f"CPU ({dev.family}){name and ':' + name}"
    fam = f" ({dev.family})" if dev.family else ""
    return f"{kind}{fam}{name and ':' + name}"


def _short(dev) -> str:
    if dev.family and dev.name and dev.family.lower() not in dev.name.lower():
        return f"{dev.family} {dev.name}"  # "gfx1100 AMD Radeon RX 7900 XTX", not "intel Intel UHD Graphics"
    return dev.name or dev.family or dev.type


def _env_words(d) -> str:
    """Which devices the run environment keeps, in words."""
    return "keeps " + ", ".join(_short(x) for x in d.run_devices)


STATE_STYLE = {
    "installed": "green",
    "installable": "cyan",
    "update_required": "yellow",
    "update_available": "yellow",
    "unsupported": "dim",
}


def os_parts(profile) -> list[str]:
    o = profile.os
    bits = [o.name]
    if o.distro.id:
        bits.append(f"{o.distro.id} {o.distro.version}".strip())
    if o.version:
        bits.append(o.version)
    bits.append(profile.cpu.arch)
    if o.wsl:
        bits.append("WSL")
    if o.container:
        bits.append("container")
    return bits


def os_line(profile) -> str:
    return " · ".join(os_parts(profile))


def render_warnings(con, warnings) -> None:
    for w in warnings:
        con.print(f"[yellow]![/yellow] {w}", markup=True, highlight=False)


def probe_human(profile, con) -> None:
    from rich.table import Table
    from rich.text import Text

    from probes import memory

    con.print(wrap_parts(os_parts(profile), con.width), style="bold")
    cpu = profile.cpu
    con.print(f"CPU: {cpu.brand or cpu.arch}" + (f", {cpu.cores} threads" if cpu.cores else "")
              + (f", {gib(cpu.memory_bytes)} memory" if cpu.memory_bytes else ""))
    if getattr(cpu, "features", None):
        con.print(f"CPU features: {' '.join(cpu.features)}", markup=False)
    for key, value in (getattr(cpu, "detailed", None) or {}).items():  # probe --detailed: py-cpuinfo
        con.print(f"  {key}: {value}", markup=False)
    cols = ("#", "device", "target", "kind", "memory", "driver", "notes")
    rows: list[tuple] = []
    for g in profile.amd_gpus:
        target = g.gfx or "?"
        if g.gfx_effective and g.gfx_effective != g.gfx:
            target += f" → {g.gfx_effective}"
        notes = [g.source]
        if not g.visible:
            notes.append("hidden")
        rows.append((f"amd{g.index}", g.name, target, "integrated" if g.integrated else "discrete",
                     memory.of(profile, g).describe(), g.driver or "-", ", ".join(notes)))
    for g in profile.nvidia_gpus:
        notes = [g.source] + ([] if g.visible else ["hidden"])
        rows.append((f"nv{g.index}", g.name, g.sm or "sm unknown", "integrated" if g.unified else "discrete",
                     memory.nvidia(g).describe(), g.driver_version or "none", ", ".join(notes)))
    for g in getattr(profile, "intel_gpus", []):
        rows.append(("intel", g.name, "arc" if g.arc else "-", "", "-", "-", ""))
    for i, n in enumerate(profile.npus):
        rows.append((f"npu{i}", n.name or f"AMD NPU {n.codename}", n.generation, n.codename, "-",
                     ("amdxdna" if profile.os.name == "linux" else "installed") if n.driver_bound else "not bound",
                     n.device_node or "-"))
    if profile.metal.available:
        rows.append(("metal", profile.metal.chip or "Apple GPU", "metal", "integrated",
                     memory.metal(profile).describe(), "-", ""))
    if not rows:
        con.print("[dim]No GPU or NPU found.[/dim]")
    elif sum(max(len(r[i]) for r in rows + [cols]) for i in range(len(cols))) + 2 * (len(cols) - 1) <= con.width:
        t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for col in cols:
            t.add_column(col, no_wrap=True)
        for r in rows:
            t.add_row(*(Text(c, style="red" if c == "not bound" else "") for c in r))
        con.print(t)
    else:  # too narrow for columns: one block per device, every value whole
        for r in rows:
            con.print(Text.assemble((f"{r[0]}  ", "bold"), r[1]))
            for name, value in zip(cols[2:], r[2:]):
                if value and value != "-":
                    con.print(Text.assemble(f"  {name}: ", (value, "red" if value == "not bound" else "")))
    vk = profile.vulkan
    con.print(f"Vulkan: loader {'yes' if vk.loader else 'no'}; GPU drivers: {', '.join(vk.gpu_drivers) or 'none'}")
    if profile.executables:
        con.print("On PATH: " + ", ".join(f"{k} ({v})" for k, v in profile.executables.items()))
    render_warnings(con, [f"{w.probe}: {w.message}" for w in profile.warnings])


def picks_human(profile, catalog, decisions, con, settings=None, extra_warnings=(), own=None) -> None:
    from rich.table import Table
    from rich.text import Text

    con.print(wrap_parts(os_parts(profile) + [catalog.name] + ([settings.channel, settings.policy] if settings else []),
                         con.width), style="dim", markup=False)
    if own:
        own_choice_head(con, catalog, own)
    for d in decisions:
        recipe = catalog.recipes[d.recipe]
        con.print()
        head = Text()
        head.append(f"{d.recipe}", style="bold")
        head.append(f" ({recipe.display_name})  ", style="dim")
        if d.backend and d.ok:
            head.append("→ ", style="bold")
            head.append(d.backend, style="bold green")
            head.append(f" on {_device_words(d.device)}" if d.backend != "system" else f": {SYSTEM_WORDS}")
            head.append(f"  [{d.state}]", style=STATE_STYLE.get(d.state or "", ""))
        elif d.backend:
            head.append(f"→ {d.backend} (pinned, unsupported here)", style="bold red")
        else:
            head.append("→ no supported backend", style="bold red")
        con.print(head)
        con.print(f"  [dim]{d.reason}[/dim]")
        if d.evidence_words and "published on" not in d.reason:  # --policy measured chose by it: said once
            con.print(Text(f"  {d.evidence_words}", style="dim"))
        if d.run_args and d.ok:
            con.print(f"  Lemonade: [bold]{d.run_args}[/bold]")
        if d.run_env and d.ok:
            con.print(Text.assemble("  run with: ", (" ".join(f"{k}={v}" for k, v in d.run_env.items()), "bold")))
            con.print(Text(f"  ({_env_words(d)})", style="dim"))
        chosen = d.verdict(d.backend) if d.backend and d.ok else None
        if chosen is not None and chosen.extra.get("install") and not own:  # catalog display fields
            con.print(Text.assemble("  install: ", (chosen.extra["install"], "bold")))
        if chosen is not None and chosen.extra.get("env") and not own:  # with `own`, said once for all recipes
            con.print(Text.assemble("  same choice forced by: ",
                                    (" ".join(f"{k}={v}" for k, v in chosen.extra["env"].items()), "bold")))
        if own and d.recipe in own["recipes"]:
            own_choice_recipe(con, own["engine"], own["recipes"][d.recipe])
        if not con.is_terminal and con.width >= UNBOUNDED:  # a pipe: one line per backend, nothing wraps
            _verdict_lines(con, d)
        elif not _verdict_rows(con, d, Text):  # a terminal too narrow for the columns: rich's table
            con.print(_verdict_table(d, Table, Text))
        for n in d.notes:
            con.print(f"  [cyan]i[/cyan] {n}")
        render_warnings(con, d.warnings)
    for n in (own or {}).get("notes", []):
        con.print()
        con.print(f"[cyan]i[/cyan] {n}")
    # "no NVIDIA driver" matters on a machine with an NVIDIA card; elsewhere `probe` still says it
    shown = [w for w in profile.warnings if not (w.code == NO_NVIDIA_DRIVER and not profile.nvidia_gpus)]
    if shown or extra_warnings:
        con.print()
        render_warnings(con, [f"{w.probe}: {w.message}" for w in shown] + list(extra_warnings))


UNBOUNDED = 100_000  # the width term.console gives a pipe
from selector.engine import SYSTEM_NOTE as SYSTEM_WORDS  # noqa: E402 - the words are the engine's note


def _verdict_cells(d) -> list[tuple[str, str, str, str, bool]]:
    """(mark, name, state, detail, supported) of each backend, in the catalog's order."""
    out = []
    for v in d.backends:
        if v.supported and v.name == "system":  # a build this tool did not choose: where it runs is its own
            out.append(("✓", v.name, v.state, " · ".join(v.notes) or SYSTEM_WORDS, True))
            continue
        if v.supported:
            detail = _device_words(v.device)
            if len(v.devices) > 1:
                detail += f" (+{len(v.devices) - 1} more: {', '.join(_short(x) for x in v.devices[1:])})"
            if v.notes:
                detail += f" · {'; '.join(v.notes)}"
            out.append(("✓", v.name, v.state, detail, True))
        else:
            out.append(("✗", v.name, v.state, v.reason, False))
    return out


def _verdict_lines(con, d) -> None:
    """The verdict table as a pipe shows it (what rich's grid prints at an unbounded width: columns
    padded to their widest cell, two spaces between), without laying out a table."""
    cells = _verdict_cells(d)
    wn = max((len(c[1]) for c in cells), default=0)
    ws = max((len(c[2]) for c in cells), default=0)
    out = con.file
    for mark, name, state, detail, _ in cells:
        out.write(f"{mark:<2}  {name:<{wn}}  {state:<{ws}}  {detail}".rstrip() + "\n")


def _verdict_rows(con, d, Text) -> bool:
    """The verdict grid on a terminal: name and state columns padded to their widest cell, the
    detail wrapped (by rich) under its own column.  What rich's table prints, laid out without
    measuring a table (most of the time `pick` spends drawing).  False when the terminal leaves the
    detail column under 20 cells: then the table lays it out."""
    cells = _verdict_cells(d)
    wn = max((len(c[1]) for c in cells), default=0)
    ws = max((len(c[2]) for c in cells), default=0)
    indent = 2 + 2 + wn + 2 + ws + 2
    width = con.width - indent
    if width < 20:
        return False
    pad = " " * indent
    for mark, name, state, detail, ok in cells:
        dim = "" if ok else "dim"
        lines = Text(detail, style=dim).wrap(con, width)
        first = lines[0] if len(lines) else Text("")
        con.print(Text.assemble((mark.ljust(2), "green" if ok else "dim"), "  ",
                                (name.ljust(wn), ("bold" if name == d.backend else "") if ok else "dim"), "  ",
                                (state.ljust(ws), STATE_STYLE.get(state, "") if ok else "dim"), "  ", first),
                  no_wrap=True, crop=False)
        for line in list(lines)[1:]:
            con.print(Text.assemble(pad, line), no_wrap=True, crop=False)
    return True


def _verdict_table(d, Table, Text):
    t = Table(show_header=False, box=None, pad_edge=False, padding=(0, 1))
    t.add_column(width=2)
    t.add_column()
    t.add_column()
    t.add_column()
    for mark, name, state, detail, ok in _verdict_cells(d):
        if ok:
            t.add_row(Text(mark, style="green"), Text(name, style="bold" if name == d.backend else ""),
                      Text(state, style=STATE_STYLE.get(state, "")), Text(detail))
        else:
            t.add_row(Text(mark, style="dim"), Text(name, style="dim"), Text(state, style="dim"),
                      Text(detail, style="dim"))
    return t


def _requirement_words(key, value) -> str:
    if key == "cuda" and isinstance(value, dict):  # a CUDA build: toolkit, SASS and PTX targets
        sass = sorted(value.get("sass", []), key=family_key)
        ptx = sorted(value.get("ptx", []), key=family_key)
        parts = [", ".join(sass)] + [f"PTX {', '.join(ptx)}" if ptx else ""]
        return f"CUDA {value.get('toolkit')} ({'; '.join(p for p in parts if p)})"
    return f"{key} {'/'.join(value) if isinstance(value, list) else value}"


def family_key(family: str):
    """sm_75 before sm_100 (numbers as numbers); other families keep the catalog's order."""
    import re

    m = re.fullmatch(r"sm_(\d+)([a-z]?)", family)
    return (0, int(m.group(1)), m.group(2)) if m else (1, 0, "")


def matrix_rows(catalog, recipe, verdicts=None) -> list[list[str]]:
    rows = []
    for row in catalog.recipes[recipe].rows:
        devs = "; ".join(f"{dt} ({', '.join(sorted(f, key=family_key))})" if f else dt for dt, f in row.devices)
        if row.requires:  # arch, driver / glibc / macOS minimums, boards
            devs += " · " + ", ".join(_requirement_words(k, v) for k, v in row.requires.items())
        cells = [row.backend, row.tier, row.format, ", ".join(row.os), devs]
        if verdicts is not None:
            v = verdicts.get((recipe, row.backend))
            cells.append("✓" if v and v.supported else f"✗ {v.reason if v else ''}")
        rows.append(cells)
    return rows


def matrix_human(catalog, recipes, con, verdicts=None) -> None:
    """One block per recipe (its rows in preference order), laid out for the console's width: a
    column is never narrower than its longest word, so words wrap whole and are never cut."""
    from rich.table import Table
    from rich.text import Text

    con.print(catalog.title, style="bold", markup=False)
    cols = ["backend", "tier", "format", "OS", "devices"] + (["here"] if verdicts is not None else [])
    for rname in recipes:
        rows = matrix_rows(catalog, rname, verdicts)
        con.print()
        con.print(Text.assemble((rname, "bold"), (f" ({catalog.recipes[rname].display_name})", "dim")))
        t = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 1))
        for i, col in enumerate(cols):
            longest = max([len(col)] + [len(w) for cells in rows for w in cells[i].split()])
            t.add_column(col, min_width=min(longest, 24))
        for row, cells in zip(catalog.recipes[rname].rows, rows):  # matrix_rows: one per catalog row, in order
            v = verdicts.get((rname, row.backend)) if verdicts is not None else None
            supported = verdicts is None or (v is not None and v.supported)
            t.add_row(*(Text(c, style=("green" if supported and i == len(cells) - 1 and verdicts is not None
                                       else "" if supported else "dim")) for i, c in enumerate(cells)))
        con.print(t)


def status_human(cache, rows, runtimes, con) -> None:
    """`status`: the cache once, then one row per backend (each lives at <cache>/bin/<recipe>/<dir>),
    the device checks when they ran, then the runtimes and who needs them.  Every cell is plain text
    (a version or directory name is never read as markup) and no column is narrower than its longest
    name, so names are never cut in two."""
    from rich.table import Table
    from rich.text import Text

    def table(cols, cells, styles=None):
        widths = [max([len(col)] + [len(c[i]) for c in cells]) for i, col in enumerate(cols)]
        if sum(widths) + 2 * (len(cols) - 1) > con.width:  # too narrow for columns: one line per row, words wrap
            out = Text()
            for n, c in enumerate(cells):
                out.append_text(Text("  ".join(x for x in c if x) + ("\n" if n < len(cells) - 1 else "")))
            return out
        t = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 1))
        for i, col in enumerate(cols):
            longest = max([len(col)] + [len(c[i]) for c in cells])
            t.add_column(col, min_width=min(longest, 24) if i < len(cols) - 1 else None)
        for n, c in enumerate(cells):
            t.add_row(*(Text(x, style=(styles[n][i] if styles else "")) for i, x in enumerate(c)))
        return t

    con.print(Text.assemble(("cache ", "bold"), cache))
    if rows:
        cells = [[r["recipe"], r["dir"], r["version"] or "?", r["pinned"] or "-", r["state"]] for r in rows]
        styles = [[""] * 4 + ["green" if r["state"] == "installed" else "yellow"] for r in rows]
        con.print(table(("recipe", "backend", "version", "pinned", "state"), cells, styles))
        checked = [r for r in rows if r.get("device_check") is not None]
        if checked:
            from selector.verify import WORDS

            con.print()
            for r in checked:
                rep = r["device_check"]
                con.print(Text.assemble((f"{r['recipe']} {r['dir']}", "bold"),
                                        f" device check: {WORDS[rep['verdict']]}: {rep['message']}"))
    if runtimes:
        con.print()
        cells = [[rt["dir"], rt["version"] or "?",
                  (", ".join(rt["used_by"]) or "-")  # Lemonade's own installs name no runtime
                  + ("" if rt["complete"] else " (incomplete: install the backend again)")] for rt in runtimes]
        con.print(table(("runtime", "version", "used by"), cells))
