"""``decide``: one recipe on one machine under the user's settings: every backend's verdict, the
choice among them, and how to run it."""

from __future__ import annotations

from selector.catalog import Catalog
from selector.engine.choose import choose, losers, published, system_preferred
from selector.engine.devices import Machine
from selector.engine.match import verdicts
from selector.engine.records import Basis, Choice, Decision, Settings
from selector.engine.run_env import override_notes, run_env_for
from selector.engine.state import recipe_channel
from selector.engine.words import choice_reason, fill, losers_words
from selector.kinds import TYPE_WORDS


_DEFAULT = Settings()  # the engine only reads its settings


def _pinned(vs, settings: Settings, recipe_name: str) -> Choice | None:
    pinned = settings.backends.get(recipe_name)
    if not pinned or pinned == "auto":
        return None
    v = next((x for x in vs if x.name == pinned), None)
    if v is None:
        raise KeyError(pinned)
    return Choice(v, Basis.PINNED, source=settings.backend_sources.get(recipe_name, "--backend"))


def _lemonade_note(vs, recipe, settings: Settings, c: Choice) -> str:
    """What --policy lemonade would pick instead, and what chose ours; "" when the same."""
    other = choose(vs, recipe, settings, "lemonade").verdict
    chosen = c.verdict
    if chosen is None or other is None or other.name == chosen.name:
        return ""
    if other.name == "system" and not system_preferred(recipe, settings):
        # --prefer-system only allows the system build: accelerator-first still puts a GPU build before it,
        # so the flag is named only where it would choose system
        allowed = Settings(settings.channel, True, settings.policy,
                           prefer_system_by_recipe={**settings.prefer_system_by_recipe, recipe.name: True})
        with_flag = choose(vs, recipe, allowed).verdict
        flags = "--prefer-system or --backend system" if with_flag is not None and \
            with_flag.name == "system" else "--backend system"
        return (f"--policy lemonade would pick system (Lemonade prefers a llama-server on PATH for "
                f"{recipe.name}); prefer_system is off outside --policy lemonade: {flags} chooses it")
    # what chose instead: the measurement, or accelerator-first (also measured's fallback)
    ours = {Basis.MEASURED: "the measurement prefers",
            Basis.PUBLISHED: "the published comparison prefers"}.get(c.basis, "accelerator-first prefers")
    return (f"--policy lemonade would pick {other.name} (Lemonade takes the first supported "
            f"row; {ours} {chosen.name} on the {TYPE_WORDS[chosen.device.type]})")


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
    c = _pinned(vs, settings, recipe_name)
    if c is None:
        c = choose(vs, recipe, settings, os_name=m.os)
        if settings.policy != "lemonade":  # pragma: no mutate (under lemonade the same choice: no note)
            # the verdicts are the same under every policy (an exclusion is a hardware fact): only the
            # choice among them is Lemonade's
            note = _lemonade_note(vs, recipe, settings, c)
            if note:
                notes.append(note)
    chosen, why, is_pinned = c.verdict, choice_reason(c, recipe_name), c.basis is Basis.PINNED
    if chosen is not None and not is_pinned and not c.by_speed:
        # the catalog's order chose: say how to choose another (a speed that chose says why itself)
        why += losers_words(chosen.name, losers(vs, chosen), catalog.extra.get("owner") or catalog.name, recipe_name)
    if chosen is None:
        no_fit = catalog.extra.get("no_fit_reason") or "no backend of {recipe} is supported on this machine"
        return Decision(recipe_name, None, None, None, fill(no_fit, {"recipe": recipe_name}), None, vs,
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
