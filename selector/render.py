"""Output: JSON for scripts (plain dicts, the documented contract in docs/json.md) and rich
renderings for a person.  rich is imported only by the human renderers."""

from __future__ import annotations

import json
import sys

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


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False, emoji=False)


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
    return f"{dev.family} {dev.name}" if dev.family and dev.name else (dev.name or dev.family or dev.type)


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


def os_line(profile) -> str:
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
    return " · ".join(bits)


def render_warnings(con, warnings) -> None:
    for w in warnings:
        con.print(f"[yellow]![/yellow] {w}", markup=True, highlight=False)


def probe_human(profile, con) -> None:
    from rich.table import Table

    con.print(f"[bold]{os_line(profile)}[/bold]")
    cpu = profile.cpu
    con.print(f"CPU: {cpu.brand or cpu.arch}" + (f", {cpu.cores} threads" if cpu.cores else "")
              + (f", {gib(cpu.memory_bytes)} memory" if cpu.memory_bytes else ""))
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("#", "device", "target", "kind", "memory", "driver", "notes"):
        t.add_column(col)
    rows = 0
    for g in profile.amd_gpus:
        target = g.gfx or "?"
        if g.gfx_effective and g.gfx_effective != g.gfx:
            target += f" → {g.gfx_effective}"
        notes = [g.source]
        if not g.visible:
            notes.append("hidden")
        t.add_row(f"amd{g.index}", g.name, target, "integrated" if g.integrated else "discrete",
                  gib(g.vram_bytes), g.driver or "-", ", ".join(notes))
        rows += 1
    for g in profile.nvidia_gpus:
        notes = [g.source] + ([] if g.visible else ["hidden"])
        t.add_row(f"nv{g.index}", g.name, g.sm or "sm unknown", "discrete", gib(g.memory_bytes),
                  g.driver_version or "none", ", ".join(notes))
        rows += 1
    for g in getattr(profile, "intel_gpus", []):
        t.add_row("intel", g.name, "arc" if g.arc else "-", "", "-", "-", "")
        rows += 1
    for i, n in enumerate(profile.npus):
        t.add_row(f"npu{i}", n.name or f"AMD NPU {n.codename}", n.generation, n.codename, "-",
                  ("amdxdna" if profile.os.name == "linux" else "installed") if n.driver_bound
                  else "[red]not bound[/red]", n.device_node or "-")
        rows += 1
    if profile.metal.available:
        t.add_row("metal", profile.metal.chip or "Apple GPU", "metal", "integrated", gib(cpu.memory_bytes), "-", "")
        rows += 1
    if rows:
        con.print(t)
    else:
        con.print("[dim]No GPU or NPU found.[/dim]")
    vk = profile.vulkan
    con.print(f"Vulkan: loader {'yes' if vk.loader else 'no'}; GPU drivers: {', '.join(vk.gpu_drivers) or 'none'}")
    if profile.executables:
        con.print("On PATH: " + ", ".join(f"{k} ({v})" for k, v in profile.executables.items()))
    render_warnings(con, [f"{w.probe}: {w.message}" for w in profile.warnings])


def picks_human(profile, catalog, decisions, con, settings=None, extra_warnings=(), own=None) -> None:
    from rich.table import Table
    from rich.text import Text

    con.print(f"[dim]{os_line(profile)} · {catalog.name}"
              + (f" · {settings.channel} · {settings.policy}" if settings else "") + "[/dim]")
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
            head.append(f" on {_device_words(d.device)}")
            head.append(f"  [{d.state}]", style=STATE_STYLE.get(d.state or "", ""))
        elif d.backend:
            head.append(f"→ {d.backend} (pinned, unsupported here)", style="bold red")
        else:
            head.append("→ no supported backend", style="bold red")
        con.print(head)
        con.print(f"  [dim]{d.reason}[/dim]")
        if d.run_args and d.ok:
            con.print(f"  Lemonade: [bold]{d.run_args}[/bold]")
        if d.run_env and d.ok:
            con.print(Text.assemble("  run with: ", (" ".join(f"{k}={v}" for k, v in d.run_env.items()), "bold"),
                                    (f"  ({_env_words(d)})", "dim")))
        chosen = d.verdict(d.backend) if d.backend and d.ok else None
        if chosen is not None and chosen.extra.get("install") and not own:  # catalog display fields
            con.print(Text.assemble("  install: ", (chosen.extra["install"], "bold")))
        if chosen is not None and chosen.extra.get("env") and not own:  # with `own`, said once for all recipes
            con.print(Text.assemble("  same choice forced by: ",
                                    (" ".join(f"{k}={v}" for k, v in chosen.extra["env"].items()), "bold")))
        if own and d.recipe in own["recipes"]:
            own_choice_recipe(con, own["engine"], own["recipes"][d.recipe])
        t = Table(show_header=False, box=None, pad_edge=False, padding=(0, 1))
        t.add_column(width=2)
        t.add_column()
        t.add_column()
        t.add_column()
        for v in d.backends:
            mark = "✓" if v.supported else "✗"
            if v.supported:
                detail = _device_words(v.device)
                if len(v.devices) > 1:
                    detail += f" (+{len(v.devices) - 1} more: {', '.join(_short(x) for x in v.devices[1:])})"
                if v.notes:
                    detail += f" · {'; '.join(v.notes)}"
                style = "bold" if v.name == d.backend else ""
                t.add_row(Text(mark, style="green"), Text(v.name, style=style),
                          Text(v.state, style=STATE_STYLE.get(v.state, "")), Text(detail))
            else:
                t.add_row(Text(mark, style="dim"), Text(v.name, style="dim"), Text(v.state, style="dim"),
                          Text(v.reason, style="dim"))
        con.print(t)
        for n in d.notes:
            con.print(f"  [cyan]i[/cyan] {n}")
        render_warnings(con, d.warnings)
    for n in (own or {}).get("notes", []):
        con.print()
        con.print(f"[cyan]i[/cyan] {n}")
    # "no NVIDIA driver" matters on a machine with an NVIDIA card; elsewhere `probe` still says it
    shown = [w for w in profile.warnings
             if not (w.probe == "nvidia" and not profile.nvidia_gpus and w.message.startswith("No NVIDIA driver"))]
    if shown or extra_warnings:
        con.print()
        render_warnings(con, [f"{w.probe}: {w.message}" for w in shown] + list(extra_warnings))


def _requirement_words(key, value) -> str:
    if key == "cuda" and isinstance(value, dict):  # a CUDA build: toolkit, SASS and PTX targets
        parts = [", ".join(value.get("sass", []))] + [f"PTX {', '.join(value['ptx'])}" if value.get("ptx") else ""]
        return f"CUDA {value.get('toolkit')} ({'; '.join(p for p in parts if p)})"
    return f"{key} {'/'.join(value) if isinstance(value, list) else value}"


def matrix_human(catalog, recipes, con, verdicts=None) -> None:
    from rich.table import Table

    t = Table(title=f"{catalog.title}", header_style="bold")
    for col in ("recipe", "backend", "tier", "format", "OS", "devices"):
        t.add_column(col)
    if verdicts is not None:
        t.add_column("here")
    for rname in recipes:
        r = catalog.recipes[rname]
        for row in r.rows:
            devs = "; ".join(f"{dt} ({', '.join(f)})" if f else dt for dt, f in row.devices)
            if row.requires:  # arch, driver / glibc / macOS minimums, boards
                devs += " · " + ", ".join(_requirement_words(k, v) for k, v in row.requires.items())
            cells = [rname, row.backend, row.tier, row.format, ", ".join(row.os), devs]
            if verdicts is not None:
                v = verdicts.get((rname, row.backend))
                cells.append("[green]✓[/green]" if v and v.supported else f"[dim]✗ {v.reason if v else ''}[/dim]")
            t.add_row(*cells)
    con.print(t)
