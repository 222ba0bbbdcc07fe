"""Choosing among the verdicts: the policy (accelerator-first, Lemonade's order, measured speed).
The verdicts are the same under every policy; only the choice among them changes."""

from __future__ import annotations

from selector.catalog import Recipe
from selector.engine.records import INSTALLED_STATES, Basis, Choice, Device, Settings, Unmeasured, Verdict
from selector.engine.state import install_dir_name, recipe_channel
from selector.kinds import ACCELERATORS, runtime


def _first_with_installed_wins(cands: list[Verdict], among: str = "any") -> Choice:
    if not cands:
        return Choice(None, Basis.NONE, among)
    first = cands[0]
    if first.state not in INSTALLED_STATES:
        for v in cands[1:]:
            if v.state in INSTALLED_STATES:
                return Choice(v, Basis.INSTALLED, among, over=first.name)
    return Choice(first, Basis.ORDER, among)


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


def _fastest(cands: list[Verdict], recipe: Recipe, settings: Settings) -> Choice:
    """--policy measured: the supported backend whose fresh result on its device is fastest, over the
    model measured on the most backends (then the latest).  A Choice without a verdict, saying why,
    when nothing can decide: no result, noisy ones only, or one backend measured with nothing to
    compare it with."""
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
            return Choice(None, Basis.NONE, metric=prefix, unmeasured=Unmeasured.NOISY, depth=settings.depth)
        if settings.measurable is not None and recipe.name not in settings.measurable:
            return Choice(None, Basis.NONE, metric=prefix, unmeasured=Unmeasured.UNMEASURABLE, depth=settings.depth)
        return Choice(None, Basis.NONE, metric=prefix, unmeasured=Unmeasured.NOTHING, depth=settings.depth)
    model = max(by_model, key=lambda m: (len(by_model[m]), max(r["at"] for r in by_model[m].values())))
    if len(by_model[model]) < 2:  # one build measured: a speed compared with nothing chooses nothing
        return Choice(None, Basis.NONE, metric=prefix, unmeasured=Unmeasured.ALONE, alone=next(iter(by_model[model])),
                      depth=settings.depth)
    results = sorted(by_model[model].values(), key=lambda r: -r["avg_ts"])
    chosen = next(v for v in cands if v.name == results[0]["backend"])
    return Choice(chosen, Basis.MEASURED, measured=results, metric=prefix, depth=settings.depth)


def _measured(vs: list[Verdict], recipe: Recipe, settings: Settings, os_name: str | None) -> Choice:
    """--policy measured: this machine's measurement, else what others published for this GPU (or its
    family) where they compared the builds that run on it, else accelerator-first (saying why)."""
    c = _fastest([v for v in vs if v.supported], recipe, settings)  # a measured system build competes too
    if c.verdict is not None:
        return c
    fallback = choose(vs, recipe, settings, "accelerator-first")
    c.fallback, c.verdict, c.basis, c.among = fallback, fallback.verdict, fallback.basis, fallback.among
    if fallback.verdict is not None and settings.published is not None:
        rows, where = published(vs, fallback.verdict, settings.published, settings.metric, os_name, settings.depth)
        if rows:
            c.verdict = next(v for v in same_device(vs, fallback.verdict).values() if _runtime(v) == rows[0].backend)
            c.basis, c.published = Basis.PUBLISHED, (rows, where)
            return c
        builds = same_device(vs, fallback.verdict)
        if len(builds) > 1:
            c.uncompared = tuple(builds)
    return c


def choose(vs: list[Verdict], recipe: Recipe, settings: Settings, policy: str | None = None,
           os_name: str | None = None) -> Choice:
    """The pick among the verdicts under ``policy`` (default: the settings'), with its basis; ``os_name``:
    the machine's, which published results must share."""
    policy = policy or settings.policy
    prefer_system = system_preferred(recipe, settings, policy)
    cands = [v for v in vs if v.supported and (v.name != "system" or prefer_system)]
    if policy == "lemonade":
        return _first_with_installed_wins(cands)
    if policy == "measured":
        return _measured(vs, recipe, settings, os_name)
    acc = [v for v in cands if v.device is not None and v.device.type in ACCELERATORS]
    if acc:
        return _first_with_installed_wins(acc, "accelerator")
    c = _first_with_installed_wins(cands, "cpu")
    if c.verdict is not None and c.verdict.name == "system":
        c.basis = Basis.SYSTEM
    return c


def losers(vs: list[Verdict], chosen: Verdict) -> list[str]:
    """The later installable accelerator backends the catalog's order put after the chosen one (each
    could be chosen by --backend)."""
    after = vs[next(i for i, v in enumerate(vs) if v is chosen) + 1:]  # accelerator-first chose an accelerator whenever one is supported
    return [v.name for v in after if v.supported and v.state == "installable" and v.device is not None
            and v.device.type in ACCELERATORS and v.name != "system"]


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
