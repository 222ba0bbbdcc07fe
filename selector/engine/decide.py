"""``decide``: one recipe on one machine under the user's settings: every backend's verdict, the
choice among them, and how to run it."""

from __future__ import annotations

from selector.catalog import Catalog
from selector.engine.choose import choose, losers, published, system_preferred
from selector.engine.devices import Machine
from selector.engine.match import verdicts
from selector.engine.records import Decision, Settings
from selector.engine.run_env import override_notes, run_env_for
from selector.engine.state import recipe_channel
from selector.kinds import TYPE_WORDS


_DEFAULT = Settings()  # the engine only reads its settings


def decide(profile, catalog: Catalog, recipe_name: str, installed: dict | None = None,
           settings: Settings | None = None, pins: dict | None = None, machine: Machine | None = None) -> Decision:
    settings = settings or _DEFAULT
    installed = installed or {}
    pins = pins or {}
    m = machine or Machine(profile)
    recipe = catalog.recipes[recipe_name]
    channel = recipe_channel(recipe, settings)
    vs = verdicts(m, catalog, recipe, installed, pins, channel)
    flag = recipe.backend_flag
    warnings: list[str] = []
    notes: list[str] = []
    pinned = settings.backends.get(recipe_name)
    if pinned and pinned != "auto":
        v = next((x for x in vs if x.name == pinned), None)
        source = settings.backend_sources.get(recipe_name, "--backend")
        if v is None:
            raise KeyError(pinned)
        if v.supported:
            reason = f"pinned by {source}"
        else:
            reason = f"pinned by {source}, but not supported here: {v.reason}"
        chosen, why, is_pinned = v, reason, True
    else:
        chosen, why = choose(vs, recipe, settings, os_name=m.os)
        is_pinned = False
        if settings.policy != "lemonade":  # pragma: no mutate (under lemonade the same choice: no note)
            # the verdicts are the same under every policy (an exclusion is a hardware fact): only the
            # choice among them is Lemonade's
            other, _ = choose(vs, recipe, settings, "lemonade")
            if chosen is not None and other is not None and other.name != chosen.name:
                if other.name == "system" and not system_preferred(recipe, settings):
                    # --prefer-system only allows the system build: accelerator-first still puts a GPU
                    # build before it, so the flag is named only where it would choose system
                    allowed = Settings(settings.channel, True, settings.policy,
                                       prefer_system_by_recipe={**settings.prefer_system_by_recipe, recipe_name: True})
                    with_flag = choose(vs, recipe, allowed)[0]
                    flags = "--prefer-system or --backend system" if with_flag is not None and \
                        with_flag.name == "system" else "--backend system"
                    notes.append(f"--policy lemonade would pick system (Lemonade prefers a llama-server on PATH for "
                                 f"{recipe_name}); prefer_system is off outside --policy lemonade: {flags} chooses it")
                else:
                    # what chose instead: the measurement, or accelerator-first (also measured's fallback)
                    ours = ("the measurement prefers" if why.startswith("measured:") else
                            "the published comparison prefers" if "published on" in why else "accelerator-first prefers")
                    notes.append(f"--policy lemonade would pick {other.name} (Lemonade takes the first supported "
                                 f"row; {ours} {chosen.name} on the {TYPE_WORDS[chosen.device.type]})")
        if chosen is not None and not why.startswith("measured:") and "published on" not in why:
            # the catalog's order chose: say how to choose another (a speed that chose says why itself)
            why += losers(vs, chosen, catalog, recipe_name)
    if chosen is None:
        no_fit = catalog.extra.get("no_fit_reason") or "no backend of {recipe} is supported on this machine"
        return Decision(recipe_name, None, None, None, no_fit.replace("{recipe}", recipe_name), None, vs,
                        False, warnings, notes, channel)
    if chosen.supported and chosen.on_cpu and chosen.name not in ("cpu", "system"):
        warnings.append(f"{chosen.name} runs on the CPU here, not on a GPU"
                        + (f" ({'; '.join(chosen.cpu_because)})" if chosen.cpu_because else ""))
    run_env, env_note, kept = run_env_for(m, chosen) if chosen.supported else ({}, "", [])
    if env_note:
        notes.append(env_note)
    notes += override_notes(m, chosen)
    run_args = f"{flag} {chosen.name}" if flag else None
    d = Decision(recipe_name, chosen.name, chosen.device, chosen.state, why, run_args, vs, is_pinned,
                 warnings, notes, channel, run_env, kept)
    if chosen.supported and settings.published is not None:
        # generation's comparison and the prompts' (each the latest of its own, so a post's prompt figures
        # are never shown for the model its generation figures chose), each the one --metric acts on
        segments = [seg for metric in ("tg", "pp") if (seg := published(vs, chosen, settings.published, metric, m.os))[0]]
        if segments:
            from selector.evidence import words_each

            d.evidence = [r for rows, _w in segments for r in rows]
            # where: the GPU model's name, else "RTX 4070 Ti (sm_89, this GPU's family)"
            d.evidence_scopes = [("gpu" if where == r.match else "family") for rows, where in segments for r in rows]
            d.evidence_words = words_each([(where, rows) for rows, where in segments])
    return d
