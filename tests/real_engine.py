"""A real llama.cpp for the tests: where it is, how to start it, and what it prints.

The build (llama.cpp 0c1e57098bba, build 11312, CPU, AVX2, made from PyPI's llama-cpp-python
source) is the directory PICK_BACKEND_LLAMA_CPP names, else ../shared/llama.cpp/ beside the checkout
(this project's CI), else the cache that `python tools/build_llama_cpp.py` builds into
(~/.cache/pick-backend/llama.cpp-b11312).  Tests that need it skip with the reason where it is not
there, or where this CPU cannot run it, and the run ends with one line that counts them
(tests/conftest.py).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "llama.cpp")
BUILD_COMMAND = "python tools/build_llama_cpp.py"


def _cache() -> str:
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_llama_cpp", os.path.join(ROOT, "tools", "build_llama_cpp.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.default_dest()


def _home() -> str:
    if os.environ.get("PICK_BACKEND_LLAMA_CPP"):
        return os.environ["PICK_BACKEND_LLAMA_CPP"]
    for home in (SHARED, _cache()):
        if os.access(os.path.join(home, "bin", "llama-server"), os.X_OK):
            return home
    return ""


HOME = _home()
BIN = os.path.join(HOME, "bin")
MiB = 1 << 20


def exe(name: str) -> str:
    return os.path.join(BIN, name)


def _why_not() -> str | None:
    if not HOME:
        return (f"no llama.cpp build in {os.path.normpath(SHARED)} or {_cache()} (`{BUILD_COMMAND}` builds one, "
                "or set PICK_BACKEND_LLAMA_CPP to a directory holding bin/llama-server)")
    server = exe("llama-server")
    if not os.access(server, os.X_OK):
        return f"no llama.cpp build at {BIN} (PICK_BACKEND_LLAMA_CPP names a directory without bin/llama-server)"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            if " avx2" not in f.read():
                return "this CPU has no AVX2, which the test build needs"
    except OSError:
        pass
    try:
        out = subprocess.run([server, "--version"], capture_output=True, text=True, timeout=30)
    except OSError as e:
        return f"{server} does not start: {e}"
    if out.returncode != 0:
        return f"{server} --version exited {out.returncode}: {(out.stderr or out.stdout)[-200:]}"
    return None


WHY_NOT = _why_not()
needs_engine = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")


def version() -> tuple[str, str]:
    """(build number, commit) as the build prints them: 'version: 0.5.0-dev (build 11312, commit 0c1e570)'."""
    out = subprocess.run([exe("llama-server"), "--version"], capture_output=True, text=True, timeout=30)
    m = re.search(r"build (\d+), commit (\w+)", out.stdout + out.stderr)
    return (m[1], m[2]) if m else ("", "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# the lines llama.cpp prints at -lv 4 for each buffer it allocates (src/llama-model.cpp load_tensors,
# src/llama-kv-cache.cpp, src/llama-context.cpp sched_reserve and output_reserve)
BUFFERS = {
    "model": re.compile(r"load_tensors:\s+(\S+) model buffer size =\s*([\d.]+) MiB"),
    "kv": re.compile(r"llama_kv_cache:\s+(\S+) KV buffer size =\s*([\d.]+) MiB"),
    "compute": re.compile(r"(\S+) compute buffer size =\s*([\d.]+) MiB"),
    "output": re.compile(r"(\S+)\s+output buffer size =\s*([\d.]+) MiB"),
}
CELLS = re.compile(r"llama_kv_cache: size =\s*[\d.]+ MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\)")


def buffers(log: str) -> dict:
    """{"model": {"CPU_Mapped": bytes, "CPU_REPACK": bytes}, "kv": [bytes per cache], "compute":
    {"CPU": bytes}, "output": {"CPU": bytes}, "kv_cells": [(cells, layers, seqs, streams)]} from a log."""
    out: dict = {"model": {}, "kv": [], "compute": {}, "output": {}, "kv_cells": []}
    for line in log.splitlines():
        for key, rx in BUFFERS.items():
            m = rx.search(line)
            if not m:
                continue
            n = round(float(m[2]) * MiB)
            if key == "kv":
                out["kv"].append(n)
            else:
                out[key][m[1]] = out[key].get(m[1], 0) + n
            break
        m = CELLS.search(line)
        if m:
            out["kv_cells"].append(tuple(int(x) for x in m.groups()))
    return out


def start_server(argv: list[str], env: dict | None = None, timeout: float = 120.0) -> tuple[str, int]:
    """Start llama-server (``argv`` from its path on), read what it prints until it listens or ends,
    then stop it.  Returns (the log, the exit status or 0 when it was listening)."""
    e = dict(os.environ, **(env or {}))
    p = subprocess.Popen(argv + ["-lv", "4", "--host", "127.0.0.1", "--port", str(free_port())],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e)
    lines, rc = [], None
    deadline = time.monotonic() + timeout
    try:
        for line in p.stdout:
            lines.append(line)
            if "server is listening" in line or "listening on http" in line:
                rc = 0
                break
            if time.monotonic() > deadline:
                break
    finally:
        p.kill()
        p.stdout.close()
        status = p.wait()
    return "".join(lines), (rc if rc is not None else status)


def plan_terms(fit: dict):
    """`plan --json`'s "fit" (docs/json.md) as the plan's Buffers per device, for serve.check and
    check.compare: ``terms(gpu_names, way)``."""
    from selector.models.engine_report import FIT_PARAMS, HOST, Buffers

    def terms(names, way):
        out = [Buffers(names[i] if i < len(names) else f"GPU{i}", model=d["weights_bytes"], kv=d["kv_bytes"],
                       compute=d["compute_bytes"]) for i, d in enumerate(fit.get("devices") or [])]
        c = fit.get("cpu") or {}
        repack = 0 if way == FIT_PARAMS else c.get("repack", 0)
        out.append(Buffers(HOST, model=c.get("weights", 0) + repack, kv=c.get("kv", 0), compute=c.get("compute", 0),
                           output=c.get("output", 0)))
        return tuple(out)
    return terms
