import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MACHINES = os.path.join(ROOT, "fixtures", "machines")


def machine_names():
    if not os.path.isdir(MACHINES):
        return []
    return sorted(d for d in os.listdir(MACHINES) if os.path.isfile(os.path.join(MACHINES, d, "capture.json")))


def machine(name):
    return os.path.join(MACHINES, name)


def expected(name):
    with open(os.path.join(MACHINES, name, "expected.json"), encoding="utf-8") as f:
        return json.load(f)


def profile_of(name):
    from probes import probe
    from probes.host import CaptureHost

    return probe(CaptureHost(machine(name)))


class Result:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def json(self):
        return json.loads(self.out)


def run_cli(*args, env=None, input=None):
    """Run the real console entry point in a subprocess, as a user or script would."""
    e = dict(os.environ)
    e.pop("PICK_BACKEND_ROOT", None)
    e.pop("PICK_BACKEND_CONFIG", None)
    e.pop("PICK_BACKEND_CHANNEL", None)
    e["COLUMNS"] = "200"
    if env:
        e.update(env)
    proc = subprocess.run([sys.executable, "-m", "selector", *args], capture_output=True, text=True, env=e,
                          input=input, timeout=60)
    return Result(proc)


@pytest.fixture
def cli():
    return run_cli


ANSI = __import__("re").compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_tty(*args, columns=80, env=None):
    """Run the CLI on a pseudo-terminal ``columns`` wide, as a person at a terminal does; the
    output comes back as plain text (colours stripped, CRLF as LF) in a Result."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:
        os.environ["COLUMNS"] = str(columns)
        for k in ("PICK_BACKEND_ROOT", "PICK_BACKEND_CONFIG", "PICK_BACKEND_CHANNEL"):
            os.environ.pop(k, None)
        os.environ.update(env or {})
        os.execvp(sys.executable, [sys.executable, "-m", "selector", *args])
    out = b""
    while True:
        try:
            block = os.read(fd, 65536)
        except OSError:
            break
        if not block:
            break
        out += block
    _, status = os.waitpid(pid, 0)
    r = Result.__new__(Result)
    r.rc = os.waitstatus_to_exitcode(status)
    r.out = ANSI.sub("", out.decode("utf-8", "replace").replace("\r\n", "\n"))
    r.err = ""
    return r


def pytest_terminal_summary(terminalreporter):
    """One line at the end of every run that skipped tests of the real llama.cpp: how many, why, and
    the command that makes them run (the reason shows otherwise only with -rs)."""
    import sys as _sys

    engine = _sys.modules.get("real_engine")
    why = getattr(engine, "WHY_NOT", None)
    if not why:
        return
    n = sum(1 for r in terminalreporter.stats.get("skipped", [])
            if isinstance(r.longrepr, tuple) and len(r.longrepr) == 3 and r.longrepr[2] == f"Skipped: {why}")
    if n:
        terminalreporter.write_line(f"{n} real-engine test{'s' if n != 1 else ''} skipped: {why}")
