"""The support matrix: ``check RECIPE BACKEND`` (the installer's gate), ``matrix`` and ``recipes``.

Imported only when run (LAZY in selector/cli/app.py).
"""

from __future__ import annotations

import os
import sys

import click

from selector.cli.core import DECIDE, EXIT_INSTALL, EXIT_OK, EXIT_UNSUPPORTED, EXIT_USAGE, Fail, Opts, complete_backend, complete_recipe, decide_all, options  # noqa: E501

RECIPES_SCHEMA_VERSION = 1


@click.command("check")
@click.argument("recipe", shell_complete=complete_recipe)
@click.argument("backend", shell_complete=complete_backend)
@options(*DECIDE)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
@click.pass_context
def check_cmd(ctx, recipe, backend, as_json, **kwargs):
    """Installer gate: exit 0 when BACKEND of RECIPE is supported here, 3 when not."""
    from selector import render

    o = Opts(ctx, kwargs)
    (name,) = o.recipe_names([recipe])
    backend = o.backend_name(name, backend)
    profile, cat, s, (d,), warnings = decide_all(o, [name])
    v = d.verdict(backend)
    from selector import engine

    run_env = engine.run_env_for(engine.Machine(profile), v)[0] if v.supported else {}
    if as_json:
        render.emit_json({
            "schema_version": render.PICK_SCHEMA_VERSION,
            "catalog": cat.name,
            "host": render.host_summary(profile),
            "recipe": name,
            "backend": backend,
            "supported": v.supported,
            "state": v.state,
            "reason": v.reason,
            "device": v.device.to_dict() if v.device else None,
            "devices": [x.to_dict() for x in v.devices],
            "passed_over": [{"device": x.to_dict(), "reason": r} for x, r in v.passed_over],
            "run_env": run_env,
            "notes": v.notes,
            "pick": d.backend,
        })
    elif v.supported:
        env = "".join(f"; run with {k}={val}" for k, val in run_env.items())
        click.echo(f"{name} {backend}: supported on {render._device_words(v.device)} ({v.state}){env}")
    else:
        click.echo(f"{name} {backend}: unsupported: {v.reason}", err=True)
    sys.exit(EXIT_OK if v.supported else EXIT_UNSUPPORTED)


@click.command("matrix")
@click.argument("recipe", required=False, shell_complete=complete_recipe)
@options(*DECIDE)
@click.option("--here", is_flag=True, help="Add this machine's verdict for every recipe x backend.")
@click.option("--json", "as_json", is_flag=True, help="Print the catalog (and verdicts) as JSON.")
@click.pass_context
def matrix_cmd(ctx, recipe, here, as_json, **kwargs):
    """Show the support matrix of the catalog."""
    from selector import render

    o = Opts(ctx, kwargs)
    cat = o.catalog()
    names = o.recipe_names([recipe] if recipe else [])
    verdicts = None
    if here:
        _, _, _, decisions, _ = decide_all(o, names)
        verdicts = {(d.recipe, v.name): v for d in decisions for v in d.backends}
    if as_json:
        out = {"schema_version": 1, "catalog": cat.name, "title": cat.title, "source": cat.source, "recipes": {}}
        for n in names:
            r = cat.recipes[n]
            rows = []
            for row in r.rows:
                item = {"backend": row.backend, "tier": row.tier, "format": row.format, "os": list(row.os),
                        "devices": {t: list(f) for t, f in row.devices}}
                if verdicts is not None:
                    v = verdicts[(n, row.backend)]
                    item["here"] = {"supported": v.supported, "state": v.state, "reason": v.reason}
                rows.append(item)
            out["recipes"][n] = {"display_name": r.display_name, "rows": rows}
        render.emit_json(out)
    else:
        render.matrix_human(cat, names, render.console(), verdicts)


@click.command("recipes")
@options("catalog")
@click.option("--json", "as_json", is_flag=True, help="Print the recipes and their backends as JSON.")
@click.pass_context
def recipes_cmd(ctx, as_json, **kwargs):
    """List the recipes of the catalog."""
    from selector import render

    o = Opts(ctx, kwargs)
    cat = o.catalog()
    if as_json:
        render.emit_json({"schema_version": RECIPES_SCHEMA_VERSION, "catalog": cat.name,
                          "recipes": {n: {"display_name": r.display_name, "backends": list(r.backends)}
                                      for n, r in cat.recipes.items()}})
        return
    width = max(len(n) for n in cat.recipes)
    for n, r in cat.recipes.items():
        click.echo(f"{n.ljust(width)}  {r.display_name}  [{', '.join(r.backends)}]")
