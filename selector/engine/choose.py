"""Choosing among the verdicts: the policy (accelerator-first, Lemonade's order, measured speed).
The verdicts are the same under every policy; only the choice among them changes."""

from __future__ import annotations

from selector.catalog import Catalog, Recipe
from selector.engine.records import INSTALLED_STATES, Device, Settings, Verdict
from selector.engine.state import install_dir_name, recipe_channel
from selector.engine.words import and_
from selector.kinds import ACCELERATORS, runtime


def _first_with_installed_wins(cands: list[Verdict]) -> tuple[Verdict | None, str]:
    if not cands:
        return None, ""
    first = cands[0]
    if first.state in INSTALLED_STATES:
        return first, "first supported backend in preference order"
    for v in cands[1:]:
        if v.state in INSTALLED_STATES:
            return v, (f"already installed ({v.state}); an installed backend wins over earlier ones "
                       f"that are only installable ({first.name})")
    return first, "first supported backend in preference order"


def system_preferred(recipe: Recipe, settings: Settings, policy: str | None = None) -> bool:
    """--prefer-system / config first; else, under --policy lemonade, Lemonade's own default for the
    recipe (catalog ``prefer_system_default``: true for llamacpp in its defaults.json)."""
    if recipe.name in settings.prefer_system_by_recipe:
        return settings.prefer_system_by_recipe[recipe.name]
    if settings.prefer_system:
        return True
    return (policy or settings.policy) == "lemonade" and bool(recipe.extra.get("prefer_system_default", False))


def device_key(dev: Device | None) -> str:
    """The same device across runs: its UUID, else its PCI address, else its kind and index; the CPU
    is "cpu" (bench.devices_of keys the machine's devices the same way)."""
    if dev is None or dev.type == "cpu":
        return "cpu"
    return dev.uuid or dev.bus_id or f"{dev.type}:{dev.index}"


def _fastest(cands: list[Verdict], recipe: Recipe, settings: Settings) -> tuple[Verdict | None, str]:
    """--policy measured: the supported backend whose fresh result on its device is fastest, over the
    model measured on the most backends (then the latest).  (None, why) when nothing can decide."""
    recs = settings.measurements.get(recipe.name, [])
    prefix = "pp" if settings.metric == "pp" else "tg"
    channel = recipe_channel(recipe, settings)
    by_model: dict[str, dict[str, dict]] = {}
    noisy = 0
    for v in cands:
        key = device_key(v.device)
        dirname = install_dir_name(recipe, v.name, channel)  # rocm-nightly's speed is not rocm-stable's
        for r in recs:
            if r["dir"] == dirname and r["device"].get("key") == key and r["test"].startswith(prefix) \
                    and "+" not in r["test"] and r.get("depth", 0) == settings.depth:
                if r.get("noisy"):  # its runs disagreed: it says more about the machine's load than the build
                    noisy += 1
                    continue
                best = by_model.setdefault(r["model"]["key"], {})
                if v.name not in best or r["at"] > best[v.name]["at"]:  # tg128 and tg256: the latest run
                    best[v.name] = r
    if not by_model:
        if noisy:
            return None, (f"the fresh {prefix} measurements of {recipe.name} on this machine are noisy (their runs "
                          f"disagreed by more than a tenth of their mean); measure again on a quiet machine")
        if settings.measurable is not None and recipe.name not in settings.measurable:
            return None, f"pick-backend cannot measure {recipe.name} (no benchmark tool it reads)"
        at = f" at depth {settings.depth}" if settings.depth else ""
        return None, (f"no fresh {prefix} measurement of {recipe.name}{at} on this machine "
                      f"(`pick-backend bench {recipe.name} --model M{f' --depth {settings.depth}' if at else ''}` makes them)")
    model = max(by_model, key=lambda m: (len(by_model[m]), max(r["at"] for r in by_model[m].values())))
    results = sorted(by_model[model].values(), key=lambda r: -r["avg_ts"])
    win = results[0]
    chosen = next(v for v in cands if v.name == win["backend"])
    words = " vs ".join(f"{r['backend']} {r['avg_ts']:.0f} t/s" for r in results)
    one = "" if len(results) > 1 else " (the only backend measured)"
    at = f" at depth {settings.depth}" if settings.depth else ""  # the context the speeds are of
    return chosen, (f"measured: {words}{one} ({win['test'].split('@')[0]}{at}, {win['model'].get('label', model)}, "
                    f"{win['at'][:10]})")


def choose(vs: list[Verdict], recipe: Recipe, settings: Settings, policy: str | None = None,
           os_name: str | None = None) -> tuple[Verdict | None, str]:
    """The pick among the verdicts under ``policy`` (default: the settings'); ``os_name``: the machine's,
    which published results must share."""
    policy = policy or settings.policy
    prefer_system = system_preferred(recipe, settings, policy)
    cands = [v for v in vs if v.supported and (v.name != "system" or prefer_system)]
    if policy == "lemonade":
        return _first_with_installed_wins(cands)
    if policy == "measured":  # a measured system build competes on its speed like the others
        v, why = _fastest([v for v in vs if v.supported], recipe, settings)
        if v is not None:
            return v, why
        fallback, fwhy = choose(vs, recipe, settings, "accelerator-first")
        if fallback is not None and settings.published is not None:
            # no measurement here: what others measured on this GPU (or its family), if they compared the
            # backends that run on it
            rows, where = published(vs, fallback, settings.published, settings.metric, os_name, settings.depth)
            if rows:
                win = next(v for v in same_device(vs, fallback).values() if _runtime(v) == rows[0].backend)
                return win, f"{why}; {_published_words(rows, where)}"
            builds = same_device(vs, fallback)
            if len(builds) > 1:
                at = f" at depth {settings.depth}" if settings.depth else ""
                why += (f"; no published {settings.metric} comparison of {' and '.join(builds)}{at} on this GPU or "
                        "its family")
        return fallback, f"{why}; accelerator-first instead: {fwhy}"
    acc = [v for v in cands if v.device is not None and v.device.type in ACCELERATORS]
    if acc:
        v, why = _first_with_installed_wins(acc)
        return v, why.replace("first supported backend", "first supported accelerator backend")
    v, why = _first_with_installed_wins(cands)
    if v is not None and v.name == "system":
        why = "no accelerator backend is supported here; the build on PATH comes first, as prefer_system asks"
    elif v is not None:
        why = "no accelerator backend is supported here; " + why.replace("first supported backend", "first supported CPU backend")
    return v, why


def losers(vs: list[Verdict], chosen: Verdict, catalog: Catalog, recipe: str) -> str:
    """Why each later installable accelerator backend lost: the catalog's order, and how to choose it."""
    after = vs[next(i for i, v in enumerate(vs) if v is chosen) + 1:]  # accelerator-first chose an accelerator whenever one is supported
    lost = [v.name for v in after if v.supported and v.state == "installable" and v.device is not None
            and v.device.type in ACCELERATORS and v.name != "system"]
    if not lost:
        return ""
    owner = catalog.extra.get("owner") or catalog.name
    order = f"{owner}'s order"  # only accelerator-first names losers: under --policy lemonade the first row wins
    names = and_(lost)
    flags = " or ".join(f"--backend {n}" for n in lost)
    return f"; {chosen.name} comes before {names} in {order} for {recipe}; {flags} chooses {'it' if len(lost) == 1 else 'one'}"


def _runtime(v: Verdict) -> str:
    return runtime(v.name, v.device.type if v.device else "cpu", v.access)


def same_device(vs: list[Verdict], chosen: Verdict) -> dict[str, Verdict]:
    """The supported builds that run on the chosen accelerator, by the llama.cpp backend each is (the
    first of each: a catalog's order)."""
    if chosen.device is None or chosen.device.type not in ACCELERATORS:
        return {}
    key = device_key(chosen.device)
    out: dict[str, Verdict] = {}
    for v in vs:
        if v.supported and v.name != "system" and v.device is not None and device_key(v.device) == key:
            out.setdefault(_runtime(v), v)
    return out


def published(vs: list[Verdict], chosen: Verdict, load, metric: str | None = None,
              os_name: str | None = None, depth: int = 0) -> tuple[list, str]:
    """What published llama-bench runs say of the builds that run on the chosen device: the nearest
    comparison (its GPU model, else its family) and where it is from.  ``load`` gives the results; it
    is called only where two or more builds run there."""
    from selector import evidence

    runtimes = same_device(vs, chosen)
    if len(runtimes) < 2:
        return [], ""
    dev = chosen.device
    where, rows = evidence.nearest(load(), dev.type, dev.name, dev.family, runtimes, metric, os_name, dev.memory_bytes,
                                   depth)
    return rows, where


def _published_words(rows, where: str) -> str:
    from selector import evidence

    return evidence.words(rows, where)
