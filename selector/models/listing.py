"""`models`: Lemonade's models of a recipe, each judged as `plan` judges it.

A model whose GGUF header was read (by `plan`, or `models --read-headers`; then cached) is planned by
the same fitter with the same inputs as `plan` (the pick's devices, system memory, its measured
bandwidth), at the same context.  One whose header was not read is planned from a guess of its facts
(facts.guess: the download as weights, the repacked copy a CPU build makes of the type its
quantization names, no KV or compute), which the row says is a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from selector.models import fit, planner, source
from selector.models.facts import fit_table, guess
from selector.models.gguf_header import ModelError

HEADER, GUESS = "header", "file size"
GIVE_UP = 3  # headers that failed, with none read, before --read-headers stops trying the rest


@dataclass(frozen=True)
class Row:
    """One model of the list: its plan (None where it cannot be planned at this context: ``refused``
    says why), whether that plan is from the header or a guess, and its speed bound."""
    name: str
    checkpoint: str
    size_bytes: int
    labels: tuple[str, ...]
    basis: str
    plan: fit.Plan | None
    trained_ctx: int | None = None
    refused: str | None = None
    unread: str | None = None  # why --read-headers could not read its header
    tokens_per_s: float | None = None
    tokens_per_s_estimate: float | None = None
    depths: tuple = ()  # the speed at an empty context and at the planned context's depth (plan's speed_estimate.depths)

    @property
    def fits(self) -> bool:
        return self.plan is not None and self.plan.fits


def gguf_recipe(recipe: str) -> bool:
    return recipe in fit_table()["gguf_recipes"]


@dataclass(frozen=True)
class Listing:
    """The rows, largest first, and how many headers were read now and found in the cache."""
    rows: list[Row]
    read_now: int
    cached: int
    not_tried: int = 0  # headers left unread after the first reads all failed (offline: no use trying more)

    @property
    def unread(self) -> list[Row]:
        return [r for r in self.rows if r.unread]


def rows(profile, d, v, cache: str, ctx: int | None, parallel: int, read_headers: bool, cpu_bw,
         session=None) -> Listing:
    """Lemonade's models of ``d.recipe``, each planned on the pick ``d`` as `plan` plans it."""
    devs = planner.targets(profile, d, v)
    out, now, cached, failed, skipped = [], 0, 0, 0, 0
    for name, entry in source.catalog()["models"].items():
        if entry["recipe"] != d.recipe:
            continue
        facts = why = None
        if gguf_recipe(d.recipe):
            give_up = read_headers and failed >= GIVE_UP and not now
            try:
                facts, fresh = _facts(cache, name, entry, read_headers and not give_up, session)
                now, cached = now + fresh, cached + (facts is not None and not fresh)
                skipped += give_up and facts is None
            except ModelError as e:
                why, failed = str(e), failed + 1
        row = _row(profile, d, v, devs, name, entry, facts, ctx, parallel, cpu_bw)
        out.append(replace(row, unread=why) if why else row)
    out.sort(key=lambda r: (-r.size_bytes, r.name))
    return Listing(out, now, cached, skipped)


def _facts(cache, name, entry, read_headers, session) -> tuple[dict | None, bool]:
    """(the facts of a model, whether its header was read now): cached, or read where allowed."""
    model = source.cached_model(cache, entry)
    if model is not None:
        facts = source.facts(model, cache, read_allowed=False)
        if facts is not None:
            return facts, False
    if not read_headers:
        return None, False
    model = source.resolve(name, session=session)
    facts = source.facts(model, cache, session=session)
    source.remember_checkpoint(cache, model)
    return facts, True


def _row(profile, d, v, devs, name, entry, facts, ctx, parallel, cpu_bw) -> Row:
    size = round(entry["size_gb"] * 1e9)
    head = dict(name=name, checkpoint=entry["checkpoint"], size_bytes=size, labels=tuple(entry["labels"]))
    basis = HEADER if facts is not None else GUESS
    try:
        p = planner.fit_model(profile, d, v, facts if facts is not None else guess(size, entry["checkpoint"]),
                              ctx if facts is not None else None, parallel=parallel, cpu_bw=cpu_bw, devs=devs,
                              offload=gguf_recipe(d.recipe))  # whisper.cpp, sd.cpp: no layers to leave behind
    except (fit.FitError, planner.UnknownMemory) as e:
        return Row(**head, basis=basis, plan=None, trained_ctx=(facts or {}).get("n_ctx_train"), refused=str(e))
    speed = likely = None
    depths: tuple = ()
    if facts is not None and p.fits:
        bw = cpu_bw() if callable(cpu_bw) and p.status in (fit.Status.CPU, fit.Status.PARTIAL, fit.Status.EXPERTS) \
            else None
        est = planner.estimate_speed(profile, p, facts, devs, bw)
        speed = est["tokens_per_s"] if est else None
        likely = est["estimate"]["tokens_per_s"] if est and est.get("estimate") else None
        depths = tuple(est.get("depths") or ()) if est else ()
    return Row(**head, basis=basis, plan=p, trained_ctx=(facts or {}).get("n_ctx_train"), tokens_per_s=speed,
               tokens_per_s_estimate=likely, depths=depths if facts is not None and p.fits else ())
