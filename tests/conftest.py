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
