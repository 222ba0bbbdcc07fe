"""`plan`: one model on the pick, planned once, with its line and its speed bound."""

from __future__ import annotations

import os
from dataclasses import dataclass

from selector.models import fit, planner, source
from selector.models.facts import fit_table, guess
from selector.models.gguf_header import ModelError


@dataclass(frozen=True)
class Planned:
    """The plan of a model, the facts it is of (a guess for a model sized by its file: whisper.cpp,
    sd.cpp), the arguments after the executable and the environment (``launch``; none where it does
    not fit), and the speed bound of the layout chosen and of the one not taken."""
    plan: fit.Plan
    facts: dict
    args: list[str]
    env: dict
    speed: dict | None = None
    alt_tokens_per_s: float | None = None
    speed_missing: str | None = None
    alt_depths: list | None = None  # the layout not taken: its speed at each depth the plan's is given at

    @property
    def from_header(self) -> bool:
        return not self.facts.get("guess")


def plan_model(profile, d, v, model, cache: str, ids: dict, ctx: int | None, type_k: str, type_v: str,
               parallel: int, cpu_bw, depth: int | None = None) -> Planned:
    """Plan ``model`` on the pick ``d``: from its GGUF header for llama.cpp, from its size otherwise.
    Raises ModelError (unreadable), fit.FitError (a request llama.cpp refuses), planner.UnknownMemory."""
    devs = planner.targets(profile, d, v, ids)
    if d.recipe not in fit_table()["gguf_recipes"]:
        source.check_kind(d.recipe, model, cache)
        size = round(model.entry["size_gb"] * 1e9) if model.entry else _file_size(model.files[0])
        p = planner.fit_model(profile, d, v, guess(size, model.label), devs=devs, offload=False)
        args = planner.model_arg(model, hf=False)
        return Planned(p, guess(size, model.label), args if p.fits else [], dict(d.run_env))
    facts = source.facts(model, cache)
    source.remember_checkpoint(cache, model)
    p = planner.fit_model(profile, d, v, facts, ctx, type_k, type_v, parallel=parallel, cpu_bw=cpu_bw, devs=devs)
    args, env = planner.launch(p, planner.model_arg(model), d.run_env)
    reads_system = p.status in (fit.Status.CPU, fit.Status.PARTIAL, fit.Status.EXPERTS)
    bw = (cpu_bw() if callable(cpu_bw) else cpu_bw) if reads_system else None
    speed = planner.estimate_speed(profile, p, facts, devs, bw, depth=depth) if p.fits else None
    alt = planner.estimate_speed(profile, p, facts, devs, bw, p.instead_of, depth) if speed and p.instead_of else None
    return Planned(p, facts, args if p.fits else [], env, speed, alt["tokens_per_s"] if alt else None,
                   planner.speed_missing(profile, p, devs, bw) if not speed else None,
                   alt.get("depths") if alt else None)


def _file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError as e:
        raise ModelError(f"{path}: cannot be read ({e.strerror})") from None


# all of it on GPUs, then part of it, then all of it in system memory (a CPU build), then nowhere
RANK = {fit.Status.FITS: 3, fit.Status.SPLIT: 3, fit.Status.EXPERTS: 2, fit.Status.PARTIAL: 2, fit.Status.CPU: 1,
        fit.Status.NO: 0}


def fits_more(a: fit.Plan, b: fit.Plan) -> bool:
    """Whether plan ``a`` fits more of the model than ``b``: all of it on GPUs, then part of it, then all
    of it in system memory; then the larger context (a few layers more on a GPU is not said: which of
    two partial plans is faster is a matter of the backends' speeds, not of memory)."""
    def key(p):
        return RANK[p.status], p.ctx if p.fits else 0
    return key(a) > key(b)


def better_backend(planned: Planned, d, model, cache: str, how: tuple, decide) -> tuple[str, fit.Plan] | None:
    """Where the plan keeps part of the model in system memory or does not fit: another backend of the
    pick's recipe that runs here and fits more of it, (its name, its plan), or None.  ``how``: the
    context, cache types and slots asked for; ``decide(name)``: (profile, decision, verdict, system
    memory's bandwidth) of that backend, or None."""
    if not planned.from_header or planned.plan.status in (fit.Status.FITS, fit.Status.SPLIT):
        return None
    best = None
    for name in [x.name for x in d.backends if x.supported and x.name != d.backend]:
        got = decide(name)
        try:
            p = plan_model(got[0], got[1], got[2], model, cache, {}, *how, got[3]).plan if got else None
        except (ModelError, fit.FitError, planner.UnknownMemory):
            p = None
        if p is not None and fits_more(p, best[1] if best else planned.plan):
            best = (name, p)
    return best
