"""Asking a llama.cpp build what it allocates for a plan's line (`plan --check`).

Two ways: ``llama-fit-params ARGS --fit-print on`` (llama.cpp's projection; no weights are loaded),
or a short start of ``llama-server ARGS -lv 4`` on 127.0.0.1 that is stopped with SIGINT once it
listens, so it prints what it held (``common_memory_breakdown_print``).  Each runs with no standard
input, in its own process group, under a time limit, and is stopped by its PID; whatever it started
goes with it.  The reading of what they print is selector/models/engine_report.py's.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field

from selector.models import engine_report
from selector.verify import _kill, run

# why a way of asking gave no answer (data; the words are the renderer's)
NOT_FOUND, NOT_EXECUTABLE, TIMED_OUT, CRASHED, NO_BUFFERS = (
    "not-found", "not-executable", "timed-out", "crashed", "no-buffers")
STOP_GRACE = 15.0  # seconds a stopped server gets to print its breakdown and exit
_LISTENING = re.compile(r"listening on http|server is listening")
_USING = re.compile(r"using device (\S+) \(.*?\) \(([0-9a-fA-F:.]+)\)")


@dataclass(frozen=True)
class Asked:
    """One way of asking: the report, or why there is none; the tail of what it printed."""
    way: str
    report: engine_report.Report | None
    failure: str | None = None
    detail: str | None = None
    output: str = ""
    held: dict = field(default_factory=dict)  # engine device name -> bytes the driver says the process holds


def fit_params_of(server: str) -> str | None:
    """The build's llama-fit-params beside its llama-server, where the build has one."""
    d, name = os.path.split(server)
    exe = os.path.join(d, name.replace("llama-server", "llama-fit-params"))
    return exe if exe != server and os.access(exe, os.X_OK) else None


def ask_fit_params(exe: str, args: list[str], env: dict, timeout: float) -> Asked:
    """llama-fit-params with the plan's arguments (it refuses the server's --no-kv-unified: each slot's
    own stream is what --parallel gives it there)."""
    keep = [a for a in args if a != "--no-kv-unified"]
    r = run([exe, *keep, "--fit-print", "on"], env, timeout)
    out = r["stdout"] + r["stderr"]
    failure = _failure(r)
    if failure:
        return Asked(engine_report.FIT_PARAMS, None, failure[0], failure[1], out)
    report = engine_report.from_fit_print(r["stdout"])
    if report is None:
        return Asked(engine_report.FIT_PARAMS, None, NO_BUFFERS, None, out)
    return Asked(engine_report.FIT_PARAMS, report, output=out)


def _failure(r: dict) -> tuple[str, str | None] | None:
    if r["start_error"]:
        return (NOT_FOUND if r["missing"] else NOT_EXECUTABLE), r["start_error"]
    if r["timed_out"]:
        return TIMED_OUT, None
    if r["status"]:
        return CRASHED, str(r["status"])
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask_server(exe: str, args: list[str], env: dict, timeout: float, held_by=None) -> Asked:
    """Start llama-server with the plan's line until it listens (or ends, or ``timeout`` passes),
    ask ``held_by(pid)`` what the driver says it holds, stop it with SIGINT and read what it printed."""
    argv = [exe, *args, "-lv", "4", "--host", "127.0.0.1", "--port", str(free_port())]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
    except OSError as e:
        code = NOT_FOUND if isinstance(e, FileNotFoundError) else NOT_EXECUTABLE
        return Asked(engine_report.SERVER, None, code, f"{exe}: {e.strerror or e}")
    lines = _Kept()
    reader = threading.Thread(target=lambda: [lines.append(x) for x in _lines(proc)], daemon=True)
    reader.start()
    try:
        listened = _wait_listening(proc, lines, timeout)
        held = _held(held_by, proc.pid, "".join(lines)) if listened else {}
        _stop(proc)
    except BaseException:
        _kill(proc)
        raise
    reader.join(5)
    log = "".join(lines)
    if not listened:
        failure = (TIMED_OUT, None) if proc.returncode in (None, -signal.SIGKILL) else (CRASHED, str(proc.returncode))
        return Asked(engine_report.SERVER, None, *failure, output=log)
    report = engine_report.from_server_log(log)
    if report is None:
        return Asked(engine_report.SERVER, None, NO_BUFFERS, None, log)
    return Asked(engine_report.SERVER, report, output=log, held=held)


class _Kept(list):
    """What a server printed, bounded: every line that names a buffer, a device or the listening
    socket, and the last TAIL lines (a build may print without end)."""
    TAIL = 400
    _KEEP = re.compile(r"buffer size|memory_breakdown|using device|listening|build[ :=]+\d")

    def __init__(self):
        super().__init__()
        self.kept = 0
        self.listening = threading.Event()

    def append(self, line: str) -> None:
        if len(line) > 4096:
            line = line[:4096] + "\n"
        if _LISTENING.search(line):
            self.listening.set()
        if _Kept._KEEP.search(line):
            super().insert(self.kept, line)
            self.kept += 1
        else:
            super().append(line)
            if len(self) - self.kept > self.TAIL:
                del self[self.kept]


def _lines(proc):
    for raw in proc.stdout:
        yield raw.decode("utf-8", "replace")


def _wait_listening(proc, lines: "_Kept", timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lines.listening.wait(0.05):
            return True
        if proc.poll() is not None:
            return lines.listening.wait(0.2)  # the reader's last lines
    _kill(proc)
    proc.wait()
    return False


def _stop(proc) -> None:
    """SIGINT (the server prints its memory breakdown and exits), then the whole group if it lingers."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGINT)
            proc.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            pass
    _kill(proc)
    proc.wait()


def _held(held_by, pid: int, log: str) -> dict:
    """{engine device name: bytes} from the driver's per-process figures (keyed by PCI bus id), for the
    devices the server said it used."""
    if held_by is None:
        return {}
    by_bus = held_by(pid) or {}
    out = {}
    for name, bus in _USING.findall(log):
        n = by_bus.get(_bus(bus))
        if n is not None:
            out[name] = n
    return out


def _bus(bus_id: str) -> str:
    """A PCI address in one form: domain:bus:device.function, lower case, a 4-digit domain."""
    parts = bus_id.lower().split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-4:].rjust(4, "0")
    return ":".join(parts)


# ------------------------------------------------------------------------------------------------
# the check: ask, compare, and let a server start decide where the projection differs

AUTO = "auto"


def check(plan_terms, server: str, args: list[str], env: dict, *, way: str = AUTO, timeout: float = 120.0,
          held_by=None, reserves: dict | None = None) -> tuple[list, list[Asked]]:
    """Ask the build the plan names and compare.  ``plan_terms(gpu_names, way)``: the plan's Buffers
    per device in the engine's names (check.plan_buffers).  ``way``: fit-params, server, or auto
    (fit-params where the build has it; a server start where it has not, or where fit-params' figures
    differ from the plan's).  Returns (the verdicts in the order asked, the last deciding; what was
    asked)."""
    from selector.models import check as judge

    verdicts, asked = [], []
    fp = fit_params_of(server)
    ways = {engine_report.FIT_PARAMS: [engine_report.FIT_PARAMS], engine_report.SERVER: [engine_report.SERVER],
            AUTO: [engine_report.FIT_PARAMS, engine_report.SERVER] if fp else [engine_report.SERVER]}[way]
    for w in ways:
        if w == engine_report.FIT_PARAMS:
            a = ask_fit_params(fp or server.replace("llama-server", "llama-fit-params"), args, env, timeout)
        else:
            a = ask_server(server, args, env, timeout, held_by)
        asked.append(a)
        if a.report is None:
            verdicts.append(judge.Verdict(w, judge.Outcome.NO_ANSWER, failure=a.failure, detail=a.detail))
        else:
            gpus = [d.device for d in a.report.gpus]
            verdicts.append(judge.compare(plan_terms(gpus, w), a.report, a.held,
                                          {g: (reserves or {}).get(i, 0) for i, g in enumerate(gpus)}))
        if verdicts[-1].outcome is judge.Outcome.CONFIRMED:
            break
    return verdicts, asked
