"""`plan --check`'s words: the plan and the engine side by side, per device and buffer, and the
documented JSON (docs/json.md 'plan', ``check``).  The verdicts are selector/models/check.py's."""

from __future__ import annotations

from selector.models.check import Outcome
from selector.models.engine_report import FIT_PARAMS, MiB

EXIT = {Outcome.CONFIRMED: 0, Outcome.CONTRADICTED: 3, Outcome.NO_ANSWER: 4}
TERM_WORDS = {"model": "model", "kv": "KV cache", "compute": "compute", "output": "output"}
WAY_WORDS = {FIT_PARAMS: "llama-fit-params --fit-print on (llama.cpp's projection; no weights loaded)",
             "server": "a llama-server start with the plan's line (-lv 4), stopped once it listened"}
FAILURE_WORDS = {
    "not-found": "the build's {exe} is not there",
    "not-executable": "{exe} cannot be executed here",
    "timed-out": "{exe} gave no answer within {timeout:g} s; it was stopped with whatever it started",
    "crashed": "{exe} ended before it answered (exit status {detail})",
    "no-buffers": "{exe} printed no buffer it allocated",
}


def exit_code(verdicts) -> int:
    return EXIT[verdicts[-1].outcome]


def _mib(n) -> str:
    return "-" if n is None else f"{n / MiB:.2f}"


def check_json(verdicts) -> dict:
    last = verdicts[-1]
    return {
        "outcome": last.outcome.value,
        "decided_by": last.way,
        "asked": [_verdict_json(v) for v in verdicts],
    }


def _verdict_json(v) -> dict:
    return {
        "way": v.way,
        "outcome": v.outcome.value,
        "build": v.build,
        "failure": v.failure,
        "rows": [{"device": r.device, "term": r.term, "plan_bytes": r.plan, "engine_bytes": r.engine,
                  "difference_bytes": r.diff, "tolerance_bytes": r.tolerance, "within": r.within} for r in v.rows],
        "runtime": [{"device": r.device, "held_bytes": r.held, "buffers_bytes": r.buffers,
                     "overhead_bytes": r.overhead, "reserve_bytes": r.reserve, "within": r.within}
                    for r in v.runtime],
    }


def failure_words(v, exe: str, timeout: float) -> str:
    name = exe.replace("llama-server", "llama-fit-params") if v.way == FIT_PARAMS else exe
    return FAILURE_WORDS.get(v.failure, "{exe} gave no answer").format(exe=name, timeout=timeout, detail=v.detail)


def kept_words(kept, last) -> str:
    if kept is True:
        return "kept: the next plan for this build, model and placement counts these compute buffers"
    if isinstance(kept, str):
        return f"! {kept}"
    if last.way == FIT_PARAMS:
        return "kept: nothing (a projection, not an allocation; --check server measures and keeps it)"
    return "kept: nothing"


def check_human(con, verdicts, exe: str, timeout: float) -> None:
    from rich.table import Table

    for v in verdicts:
        con.print(f"\n[bold]check[/bold]: {WAY_WORDS[v.way]}" + (f", build {v.build}" if v.build else ""))
        if v.outcome is Outcome.NO_ANSWER:
            con.print(f"  no answer: {failure_words(v, exe, timeout)}")
            continue
        t = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 1))
        for col, just in (("device", "left"), ("buffer", "left"), ("plan MiB", "right"), ("engine MiB", "right"),
                          ("difference", "right"), ("", "left")):
            t.add_column(col, justify=just)
        for r in v.rows:
            if not r.plan and not r.engine:
                continue
            mark = "" if r.engine is None else ("✓" if r.within else f"✗ more than {_mib(r.tolerance)} MiB")
            t.add_row(r.device, TERM_WORDS[r.term], _mib(r.plan), _mib(r.engine),
                      "" if r.diff is None else f"{r.diff / MiB:+.2f}", mark)
        for r in v.runtime:
            t.add_row(r.device, "runtime", _mib(r.reserve), _mib(r.overhead), f"{(r.reserve - r.overhead) / MiB:+.2f}",
                      "✓" if r.within else "✗ beyond the reserve")
        con.print(t)
        if v.way == FIT_PARAMS and any(r.engine is None for r in v.rows):
            con.print("  (llama-fit-params projects no output buffer)")
    con.print(_closing(verdicts))


def _closing(verdicts) -> str:
    last = verdicts[-1]
    if last.outcome is Outcome.CONFIRMED:
        return "confirmed: every buffer the engine reported is within its tolerance of the plan's"
    if last.outcome is Outcome.NO_ANSWER:
        return "no answer from the engine: the plan is neither confirmed nor contradicted"
    terms = ", ".join(f"{r.device} {TERM_WORDS[r.term]}" for r in last.off)
    runtime = [r.device for r in last.runtime if not r.within]
    said = "; ".join(x for x in (terms, ", ".join(f"{d} runtime" for d in runtime)) if x)
    return f"contradicted: the engine differs from the plan in {said}"
