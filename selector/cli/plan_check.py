"""`plan --check` (the engine confirms the plan) and the measured plan after it: the command's part.

The asking is selector/serve.py's, the comparing selector/models/check.py's, the keeping
selector/models/measured.py's, the words selector/render_check.py's (docs/check.md).
"""

from __future__ import annotations

import os
from dataclasses import replace

import click

from selector.cli.core import EXIT_USAGE, Fail

WAYS = ("auto", "fit-params", "server")


def _seconds(_ctx, _param, value):
    if value != value:  # NaN passes a FloatRange
        raise click.BadParameter("not a number of seconds")
    return value


def options(f):
    f = click.option("--check-timeout", type=click.FloatRange(1, 3600), default=120.0, show_default=True,
                     callback=_seconds, help="Seconds --check gives the engine to answer before it is stopped.")(f)
    return click.option(
        "--check", "check_way", type=click.Choice(WAYS), is_flag=False, flag_value="auto", default=None,
        help="Ask the build the plan names what it allocates for the plan's line and compare, buffer by buffer "
             "(llama-fit-params where the build has it, a short llama-server start where it has not or where "
             "they differ; or say which).  Exit 0 confirmed, 3 contradicted, 4 no answer.")(f)


def refuse_flags(o, check_way, do_exec: bool) -> None:
    """Usage errors of --check's company, said before the machine is probed."""
    if check_way is None:
        return
    if do_exec:
        raise Fail(EXIT_USAGE, "--check and --exec: check the plan first, then run it")
    if o.root or o.profile_path or o.described:
        other = "--root" if o.root else "--profile" if o.profile_path else "--gpu/--vram/--ram"
        raise Fail(EXIT_USAGE, f"--check runs the build on this machine, and {other} plans for another one")


def refuse(check_way, gguf: bool, model) -> None:
    """Usage errors of --check for this recipe and model, said before anything is planned or run."""
    if check_way is None:
        return
    if not gguf:
        raise Fail(EXIT_USAGE, "--check asks llama.cpp; this recipe's engine is not llama.cpp")
    if not os.path.isfile(model.files[0]):
        raise Fail(EXIT_USAGE, f"--check needs the model file on this machine (the engine reads it, and --check "
                               f"downloads nothing): {model.files[0]} is not a file here")


def _drivers(profile, runtime: str) -> list[str]:
    """What a driver upgrade changes: NVIDIA's driver, else the OS (amdgpu, i915, Metal come with it)."""
    if runtime == "cuda":
        return sorted({g.driver_version or "" for g in profile.nvidia_gpus})
    return [f"{profile.os.name} {profile.os.version}"]


def record_key(profile, exe: str, model, plan) -> str:
    from selector import bench
    from selector.models import measured

    return measured.key(bench.identity(exe), _drivers(profile, plan.runtime), bench.model_key(model.files[0]), plan)


def with_measured(planned, cache: str, exe: str | None, profile, model, replayed: bool):
    """The plan with what a --check measured for this build, machine, model and placement, or as it was."""
    from selector.models import measured

    if exe is None or replayed or not planned.plan.fits or not os.path.isfile(model.files[0]):
        return planned, None
    rec = measured.load(cache, record_key(profile, exe, model, planned.plan))
    if rec is None:
        return planned, None
    return replace(planned, plan=measured.apply(planned.plan, rec)), rec


def over_words(plan) -> list[str]:
    from selector.models import measured

    return [f"{name}: with the compute buffers --check measured here, this plan needs more than it can give; "
            "a smaller --ctx-size fits it" for name in measured.over(plan)]


def run(con, out: dict, planned, exe: str | None, way: str, timeout: float, cache: str, profile, model,
        as_json: bool) -> int:
    """Ask the engine, keep what a server start measured, say it; the exit code (0, 3, 4)."""
    from probes import nvml
    from selector import render_check, serve, verify
    from selector.models import check, fit, measured

    p = planned.plan
    if exe is None:
        return _no_build(con, out, as_json)
    env = verify.clean_env(run_env=out["env"], lib_dirs=[os.path.dirname(exe)])
    if not as_json:
        con.print(f"\npick-backend: asking {os.path.basename(exe)}'s build what it allocates (at most "
                  f"{timeout:g} s each way)...", style="dim", highlight=False)
    projected = check.as_projected(p, planned.facts)
    verdicts, _ = serve.check(lambda names, w: check.plan_buffers(projected if w == "fit-params" else p, names, w),
                                   exe, out["args"], env, way=way,
                                   timeout=timeout, held_by=nvml.process_memory if p.runtime == "cuda" else None,
                                   reserves={i: fit.reserve(p.runtime) for i in range(len(p.devices))})
    last = verdicts[-1]
    kept = _keep(cache, record_key(profile, exe, model, p), last)
    if as_json:
        out["check"] = {**render_check.check_json(verdicts), "kept": kept is True}
        if isinstance(kept, str):
            out["warnings"].append(kept)
    else:
        render_check.check_human(con, verdicts, os.path.basename(exe), timeout)
        con.print(render_check.kept_words(kept, last), highlight=False, markup=False)
    return render_check.exit_code(verdicts)


def _keep(cache: str, k: str, last) -> bool | str:
    """Keep what a server start allocated (a projection is not a measurement): True when kept,
    False when there was nothing to keep, or why it could not be written."""
    from selector.models import check, measured

    if last.way != "server" or last.outcome is check.Outcome.NO_ANSWER:
        return False
    try:
        measured.save(cache, k, last, [r.device for r in last.rows if r.device != "Host" and r.term == "model"])
    except OSError as e:
        return f"what --check measured was not kept: {e.strerror or e} ({os.path.join(cache, 'pick-backend', 'check')})"
    return True


def not_run(con, out: dict, as_json: bool) -> None:
    """--check on a plan that does not fit: there is no line to ask about."""
    if as_json:
        out["check"] = {"outcome": "not-run", "decided_by": None, "asked": [], "failure": "does-not-fit"}
    else:
        con.print("\ncheck: not run: the plan does not fit, so there is no line to ask the engine about",
                  highlight=False, markup=False)


def _no_build(con, out: dict, as_json: bool) -> int:
    from selector.cli.core import EXIT_INSTALL

    why = "the build this plan is for is not installed: nothing to ask (pick-backend install, or --prefer-system " \
          "for a llama-server on PATH)"
    if as_json:
        out["check"] = {"outcome": "no-answer", "decided_by": None, "asked": [], "failure": "not-installed"}
    else:
        con.print(f"\ncheck: {why}", highlight=False)
    return EXIT_INSTALL
