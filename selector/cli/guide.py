"""``pick-backend guide``: which engine (llama.cpp, Ollama, vLLM, ...), not only which build.

Shows a guide file (selector/guide.py) matched to this machine, with the build that ``pick-backend``
picks next to the engines the guide maps to a catalog recipe.  Registered lazily in selector.cli.LAZY.
"""

from __future__ import annotations

import click

from selector.cli.core import EXIT_USAGE, Fail, Opts, common, decide_all, did_you_mean

GUIDE_SCHEMA_VERSION = 1


def _pick(o: Opts, g, engine_id: str, profile):
    """The Decision for the catalog recipe the guide maps this engine to (None when unmapped)."""
    from selector import guide as guide_mod

    recipe = g.recipes.get(engine_id)
    if not recipe or recipe not in o.catalog().recipes:
        return None
    _, cat, _, (d,), _ = decide_all(o, [recipe])
    guide_mod.add_advice(profile, [d], g)
    return d


def _pick_dict(catalog_name: str, d) -> dict | None:
    if d is None:
        return None
    full = d.to_dict()
    out = {"catalog": catalog_name, "recipe": d.recipe}
    out.update({k: full[k] for k in ("backend", "device", "state", "reason", "run_args", "pinned", "warnings")})
    return out


@click.command("guide")
@common
@click.option("--json", "as_json", is_flag=True, help="Print the guide, matched to this machine, as JSON.")
@click.option("--engine", "engine_id", default=None, help="Show one engine with its run snippet: its name as the guide shows it (e.g. llama.cpp).")
@click.option("--guide", "guide_path", default=None, help="Another guide file (default: the built-in AMD guide).")
@click.pass_context
def guide_cmd(ctx, as_json, engine_id, guide_path, **kwargs):
    """Which engine to run (llama.cpp, Ollama, vLLM, ...), from a community guide matched to this machine."""
    from selector import guide as guide_mod
    from selector import render

    g = guide_mod.load(guide_path)
    if engine_id is not None and g.engine(engine_id) is None:
        raise Fail(EXIT_USAGE, did_you_mean(engine_id, [e.name for e in g.engines], "engine"))
    o = Opts(ctx, kwargs)
    profile = o.profile()
    m = guide_mod.match(g, profile)
    if engine_id is not None:
        engines = [g.engine(engine_id)]
    elif m.applies:
        engines = g.ordered()
    else:
        engines = [g.default]  # advice written for other hardware stays out
    picks = {e.id: _pick(o, g, e.id, profile) for e in engines}
    cat_name = o.catalog().name if any(picks.values()) else None

    if as_json:
        warnings = [{"probe": w.probe, "message": w.message} for w in profile.warnings]
        entries = []
        for e in engines:
            item = e.to_dict()
            item["pick"] = _pick_dict(cat_name, picks[e.id])
            entries.append(item)
        render.emit_json({
            "schema_version": GUIDE_SCHEMA_VERSION,
            "guide": {"name": g.name, "title": g.title, "source": g.source,
                      "applies_to": {"device_types": list(g.applies_to.device_types), "os": list(g.applies_to.os),
                                     "words": g.applies_to.words, "measured_on": g.applies_to.measured_on}},
            "host": render.host_summary(profile),
            "applies": m.applies,
            "reason": m.reason,
            "measured_here": m.measured_here,
            "default": g.default_id,
            "notes": list(g.notes) if m.applies else [],
            "engines": entries,
            "warnings": warnings,
        })
        return
    _human(g, m, profile, engines, picks, render.console(), show_run=engine_id is not None)


def _human(g, m, profile, engines, picks, con, show_run: bool) -> None:
    from rich.text import Text

    from selector import render

    as_of = g.source.get("as_of")
    con.print(Text(g.title, style="bold"), Text(f"  {g.href}" + (f" · as of {as_of}" if as_of else ""), style="dim"))
    con.print(Text(render.os_line(profile), style="dim"))
    measured = g.applies_to.measured_on
    if m.applies:
        con.print(Text(f"Applies here: {m.reason}."))
        if measured:
            where = measured.get("gpu", "") + (f" ({measured['gfx']})" if measured.get("gfx") else "")
            engine = g.engine(measured.get("engine", "")) if measured.get("engine") else None
            how = " on ".join(x for x in (engine.name if engine else measured.get("engine"), measured.get("backend")) if x)
            same = "the same GPU target as this machine" if m.measured_here else "not this machine's GPU target"
            con.print(Text(f"Figures measured on {where}" + (f" with {how}" if how else "") + f" ({same}).",
                           style="dim"))
        if g.notes and not show_run:
            con.print()
            for n in g.notes:
                con.print(Text("• ") + Text(n))
    else:
        con.print(Text(f"Not for this machine: {m.reason}.", style="yellow"))
        con.print(Text(f"Showing only its default engine ({g.default_name}); its other verdicts and measured "
                       "figures are advice for other hardware.", style="dim"))
    for e in engines:
        con.print()
        head = Text()
        head.append(f"{e.verdict:<9}", style="bold green" if e.default else "bold")
        head.append(e.name, style="bold")
        head.append(f"  {e.short}")
        if e.used_on_our_rig:
            head.append("  [used on the guide's rig]", style="cyan")
        con.print(head)
        d = picks.get(e.id)
        if d is not None:
            line = Text("  pick-backend here: ", style="bold")
            if d.backend and d.ok:
                line.append(f"{d.recipe} → ")
                line.append(d.backend, style="bold green")
                line.append(f" on {render._device_words(d.device)} [{d.state}]")
            else:
                line.append(f"{d.recipe} → no supported backend ({d.reason})", style="red")
            con.print(line)
            if d.backend and d.ok and d.run_args:  # a flag and its value, never broken apart: a line of its own
                con.print(Text(f"  Lemonade: {d.run_args}", style="dim"), soft_wrap=True)
            for w in d.warnings:
                con.print(Text("  ! ", style="yellow") + Text(w))
        if m.applies or show_run:
            for label, text in (("well", e.well), ("badly", e.badly), ("when", e.when)):
                con.print(Text(f"  {label + ':':<7}", style="dim") + Text(text))
        if e.href:  # an address is copied whole: never broken across lines
            con.print(Text(f"  {e.href}", style="dim"), soft_wrap=True)
        if show_run:
            con.print()
            con.print(Text(e.run.rstrip("\n")), soft_wrap=True)
    if not show_run:
        con.print()
        import shlex

        con.print(Text(f"Start commands: pick-backend guide --engine NAME (a name above, e.g. --engine "
                       f"{shlex.quote(engines[0].name)})", style="dim"), soft_wrap=True)
