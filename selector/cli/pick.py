"""``pick-backend pick RECIPE...`` (and ``pick-backend RECIPE...``): the pick, and why."""

from __future__ import annotations

import os
import sys

import click

from selector.cli.core import describe_options, EXIT_UNSUPPORTED, EXIT_USAGE, Fail, Opts, common, complete_backend, complete_recipe, decide_all


@click.command("pick")
@click.argument("recipes", nargs=-1, shell_complete=complete_recipe)
@common
@describe_options
@click.option("--all", "all_", is_flag=True, help="Every recipe of the catalog.")
@click.option("--allow-missing", is_flag=True,
              help="Exit 0 even when a recipe has no supported backend (an inventory, with --all).")
@click.option("--backend", default=None, shell_complete=complete_backend,
              help="Pin the backend (anything but 'auto' is chosen even if unsupported).")
@click.option("--json", "as_json", is_flag=True, help="Print the Pick JSON.")
@click.pass_context
def pick_cmd(ctx, recipes, all_, allow_missing, backend, as_json, **kwargs):
    """Pick the backend for RECIPE(s) and say why every other one was passed over.

    Exit 0 when every recipe asked for (with --all: every recipe of the catalog) has a supported
    backend, 3 when one has none (with --allow-missing: 0 anyway).
    """
    from selector import render

    o = Opts(ctx, kwargs)
    if recipes and all_:  # which one was meant cannot be told: saying so beats answering for every recipe
        raise Fail(EXIT_USAGE, f"--all picks every recipe, and {' '.join(recipes)} names "
                               f"{'some' if len(recipes) > 1 else 'one'}: pass one or the other "
                               f"(pick-backend {' '.join(recipes)}, or pick-backend --all)")
    if o.profile_path:
        from selector import profiles

        if profiles.is_batch(o.profile_path):  # many profiles: one JSON line each
            text, one = None, None
            if not os.path.isdir(o.profile_path):
                text = profiles.read_text(o.profile_path)
                if not as_json and sum(1 for _ in profiles.documents(text, o.profile_path)) == 1:
                    one = profiles.profile_from_text(text, o.profile_path)  # one: shown as for a file
            if one is None:
                if o.described:  # one description, many machines: which it is of cannot be told
                    raise Fail(EXIT_USAGE, "--gpu, --vram and --ram describe one machine, and "
                                           f"{o.profile_path} holds many profiles: pick one profile, or "
                                           "describe the machine without them")
                sys.exit(profiles.pick_batch(o, recipes, all_, backend, allow_missing, text, as_json))
            o.use_profile(o.described_as(one))
    if not recipes and not all_:
        raise Fail(EXIT_USAGE, "name a recipe (e.g. pick-backend llamacpp) or pass --all; "
                               "`pick-backend recipes` lists them")
    names = o.recipe_names(recipes, all_)
    profile, cat, s, decisions, warnings = decide_all(o, names, backend)
    if o.depths is not None and s.policy != "measured":
        raise Fail(EXIT_USAGE, "--depth chooses the depth --policy measured compares at; give --policy measured too")
    if profile.amd_gpus:  # the guide is written for Radeon machines: elsewhere it has nothing to add
        from selector.guide import add_advice

        add_advice(profile, decisions)  # the guide's warnings; its file is opened only when one can bite
    own = None
    if "capability" in cat.extra:  # the engine picks a build by itself too (LocalAI): say what it would take
        from selector.capability import advise

        own = advise(profile, cat, decisions)
    if as_json:
        render.emit_json(render.pick_json(profile, cat, s, decisions, warnings, own))
    else:
        render.picks_human(profile, cat, decisions, render.console(), s, warnings, own)
    if not allow_missing and not all(d.ok for d in decisions):
        sys.exit(EXIT_UNSUPPORTED)
