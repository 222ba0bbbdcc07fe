"""Asking a build what it allocates (selector/serve.py): the real llama.cpp both ways, and builds that
hang, crash, print nothing or print other figures than the plan's.

The stand-in builds are small Python programs named llama-server and llama-fit-params; each writes its
PID (and a child's) to a file, so the tests can see that nothing is left running.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time

import pytest

import engine_gguf
import real_engine as E
from selector import serve
from selector.models import check, engine_report

MiB = 1 << 20


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is not running
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def stand_in(tmp_path, name: str, body: str) -> str:
    """An executable ``name`` in tmp_path running ``body`` (Python; ``PIDS`` is a file to note PIDs in)."""
    exe = tmp_path / name
    pids = tmp_path / f"{name}.pids"
    exe.write_text(f"#!{sys.executable}\nimport os, signal, subprocess, sys, time\nPIDS = {str(pids)!r}\n"
                   + textwrap.dedent(body))
    exe.chmod(0o755)
    return str(exe)


def pids(tmp_path, name: str) -> list[int]:
    f = tmp_path / f"{name}.pids"
    return [int(x) for x in f.read_text().split()] if f.exists() else []


HANG = """
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(PIDS, "w").write(f"{os.getpid()} {child.pid}")
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a build that ignores being asked to stop
print("loading...", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("way", ["server", "fit-params"])
def test_a_build_that_hangs_is_stopped_with_whatever_it_started(tmp_path, way):
    exe = stand_in(tmp_path, f"llama-{way}", HANG)
    t0 = time.monotonic()
    a = (serve.ask_server if way == "server" else serve.ask_fit_params)(exe, ["-m", "x.gguf"], dict(os.environ), 2.0)
    assert a.report is None and a.failure == serve.TIMED_OUT
    assert time.monotonic() - t0 < 30
    time.sleep(0.2)
    assert pids(tmp_path, f"llama-{way}") and not any(_alive(p) for p in pids(tmp_path, f"llama-{way}"))


@pytest.mark.parametrize("way", ["server", "fit-params"])
def test_a_build_that_crashes_or_says_nothing_is_no_answer(tmp_path, way):
    ask = serve.ask_server if way == "server" else serve.ask_fit_params
    crash = stand_in(tmp_path, "crash", "print('ggml_abort: CUDA error', flush=True); os.abort()\n")
    a = ask(crash, [], dict(os.environ), 10)
    assert a.report is None and a.failure == serve.CRASHED and "CUDA error" in a.output
    silent = stand_in(tmp_path, "silent", "sys.exit(0)\n")
    a = ask(silent, [], dict(os.environ), 10)
    assert a.report is None and a.failure in (serve.NO_BUFFERS, serve.CRASHED)
    missing = str(tmp_path / "llama-nothing")
    assert ask(missing, [], dict(os.environ), 10).failure == serve.NOT_FOUND


# a server that prints the H200's buffers for the 8B at 4096 tokens, with the compute buffer it is given,
# listens, and on SIGINT prints its breakdown and exits, as llama-server does
SERVER = """
open(PIDS, "w").write(str(os.getpid()))
compute = float(os.environ.get("FAKE_COMPUTE", "112.01"))
print("llama_prepare_model_devices: using device CUDA0 (NVIDIA H200) (0000:00:06.0) - 142629 MiB free")
print("load_tensors:   CPU_Mapped model buffer size =   532.31 MiB")
print("load_tensors:        CUDA0 model buffer size =  4277.33 MiB")
print("llama_context:  CUDA_Host  output buffer size =     0.49 MiB")
print("llama_kv_cache:      CUDA0 KV buffer size =   512.00 MiB")
print(f"sched_reserve:      CUDA0 compute buffer size =   {compute:.2f} MiB")
print("sched_reserve:  CUDA_Host compute buffer size =    20.01 MiB")
print("main: server is listening on http://127.0.0.1:8080", flush=True)
stop = []
signal.signal(signal.SIGINT, lambda *a: stop.append(1))
while not stop:
    time.sleep(0.05)
print("common_memory_breakdown_print: |   - CUDA0 (H200)       | 143155 = 137657 + (4901 =  4277 +     512 +     112) +         597 |")
print("common_memory_breakdown_print: |   - Host               |                     552 =   532 +       0 +      20                |", flush=True)
"""
PLAN = {"devices": [{"weights_bytes": round(4277.33 * MiB), "kv_bytes": 512 * MiB, "compute_bytes": 112 * MiB}],
        "cpu": {"weights": round(532.31 * MiB), "compute": 20 * MiB, "output": round(0.49 * MiB)}}


def test_a_server_start_reads_every_buffer_and_what_the_driver_says_it_holds(tmp_path):
    exe = stand_in(tmp_path, "llama-server", SERVER)
    seen = []
    a = serve.ask_server(exe, [], dict(os.environ), 30, held_by=lambda pid: seen.append(pid) or
                         {"0000:00:06.0": 5490 * MiB})
    assert seen == pids(tmp_path, "llama-server") and not _alive(seen[0])
    cuda = a.report.device("CUDA0")
    assert (cuda.model, cuda.kv, cuda.compute) == (round(4277.33 * MiB), 512 * MiB, round(112.01 * MiB))
    assert a.report.device("Host").output == round(0.49 * MiB) and a.report.held == {"CUDA0": 4901 * MiB,
                                                                                      "Host": 552 * MiB}
    assert a.held == {"CUDA0": 5490 * MiB}
    verdicts, _ = serve.check(E.plan_terms(PLAN), exe, [], dict(os.environ), way="server", held_by=lambda pid: {"0000:00:06.0": 5490 * MiB},
                              reserves={0: 640 * MiB})
    assert verdicts[-1].outcome is check.Outcome.CONFIRMED
    (rt,) = verdicts[-1].runtime
    assert rt.overhead == 5490 * MiB - (cuda.total) and rt.within


def test_a_build_that_allocates_other_figures_contradicts_the_plan(tmp_path):
    exe = stand_in(tmp_path, "llama-server", SERVER)
    env = dict(os.environ, FAKE_COMPUTE="300.00")
    verdicts, asked = serve.check(E.plan_terms(PLAN), exe, [], env, way="server")
    v = verdicts[-1]
    assert v.outcome is check.Outcome.CONTRADICTED
    assert [(r.device, r.term) for r in v.off] == [("CUDA0", "compute")] and v.off[0].diff == 112 * MiB - 300 * MiB
    # a driver that says the process holds more than the plan kept for the runtime contradicts it too
    verdicts, _ = serve.check(E.plan_terms(PLAN), exe, [], dict(os.environ), way="server",
                              held_by=lambda pid: {"0000:00:06.0": 6000 * MiB}, reserves={0: 512 * MiB})
    assert verdicts[-1].outcome is check.Outcome.CONTRADICTED and not verdicts[-1].off


def test_auto_asks_fit_params_first_and_a_server_decides_where_it_differs(tmp_path):
    server = stand_in(tmp_path, "llama-server", SERVER)
    stand_in(tmp_path, "llama-fit-params", "print('CUDA0 4277 512 258'); print('Host 532 0 20')\n")
    verdicts, asked = serve.check(E.plan_terms(PLAN), server, [], dict(os.environ))
    assert [a.way for a in asked] == ["fit-params", "server"]  # the projection's compute is off: a start decides
    assert verdicts[0].outcome is check.Outcome.CONTRADICTED and verdicts[-1].outcome is check.Outcome.CONFIRMED
    stand_in(tmp_path, "llama-fit-params", "print('CUDA0 4277 512 112'); print('Host 532 0 20')\n")
    verdicts, asked = serve.check(E.plan_terms(PLAN), server, [], dict(os.environ))
    assert [a.way for a in asked] == ["fit-params"] and verdicts[-1].outcome is check.Outcome.CONFIRMED
    os.unlink(tmp_path / "llama-fit-params")  # a build without the tool: a server start
    verdicts, asked = serve.check(E.plan_terms(PLAN), server, [], dict(os.environ))
    assert [a.way for a in asked] == ["server"]


def test_fit_params_is_not_given_what_it_refuses(tmp_path):
    exe = stand_in(tmp_path, "llama-fit-params", "open(PIDS, 'w').write(' '.join(sys.argv[1:])); print('Host 1 0 1')\n")
    serve.ask_fit_params(exe, ["--parallel", "2", "--no-kv-unified", "-ngl", "3"], dict(os.environ), 10)
    assert (tmp_path / "llama-fit-params.pids").read_text() == "--parallel 2 -ngl 3 --fit-print on"


# ------------------------------------------------------------------------------------------------
# the real engine, both ways


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("check-models")
    return {k: engine_gguf.write(str(d / f"{k}.gguf"), k) for k in
            ("llama-spm-q8_0", "gemma3-swa-q8_0", "qwen2-tied-q8_0", "qwen3moe-q4_0")}


@E.needs_engine
@pytest.mark.parametrize("key,ctx,slots,cache", [("llama-spm-q8_0", 4096, 1, "f16"), ("gemma3-swa-q8_0", 8192, 2, "f16"),
                                                 ("qwen2-tied-q8_0", 4096, 4, "q8_0"), ("qwen3moe-q4_0", 4096, 1, "q8_0")])
def test_the_real_engine_confirms_the_cpu_plan_both_ways(models, tmp_path, key, ctx, slots, cache):
    from conftest import run_cli

    r = run_cli("plan", "llamacpp", "--backend", "cpu", "--model", models[key], "--ctx-size", str(ctx),
                "--parallel", str(slots), "--cache-type-k", cache, "--cache-type-v", cache,
                "--cache-dir", str(tmp_path), "--json")
    assert r.rc == 0, r.err
    p = r.json()
    server = E.exe("llama-server")
    verdicts, asked = serve.check(E.plan_terms(p["fit"]), server, p["args"], dict(os.environ), way="server")
    assert verdicts[-1].outcome is check.Outcome.CONFIRMED, [(x.term, x.plan, x.engine) for x in verdicts[-1].off]
    assert {x.term for x in verdicts[-1].rows if x.engine is not None} == {"model", "kv", "compute", "output"}
    verdicts, asked = serve.check(E.plan_terms(p["fit"]), server, p["args"], dict(os.environ), way="fit-params")
    off = {x.term for x in verdicts[-1].off}
    # the projection counts the mapped file without the repacked experts, and logits for a whole
    # micro-batch: a large vocabulary's compute differs there, and auto asks a server
    assert off <= {"compute", "model"} and ("model" not in off or key == "qwen3moe-q4_0")
    assert all(x.engine >= x.plan for x in verdicts[-1].off if x.term == "compute")
    verdicts, asked = serve.check(E.plan_terms(p["fit"]), server, p["args"], dict(os.environ))
    assert verdicts[-1].outcome is check.Outcome.CONFIRMED
    assert [a.way for a in asked] == (["fit-params"] if not off else ["fit-params", "server"])


def test_only_device_lines_of_the_projection_are_read():
    r = engine_report.from_fit_print("loading 1 2 3\nCPU 4 8 10\nCUDA0 4277 512 258\nHost 532 0 20\n")
    assert [d.device for d in r.devices] == ["CUDA0", "Host"] and r.device("Host").model == 532 * MiB


def test_a_chatty_build_is_read_in_bounded_memory(tmp_path):
    exe = stand_in(tmp_path, "llama-server", SERVER.replace(
        'print("llama_prepare_model_devices',
        'for i in range(200000): print("x" * 100)\nprint("y" * 100000)\nprint("llama_prepare_model_devices'))
    a = serve.ask_server(exe, [], dict(os.environ), 60)
    assert a.report is not None and a.report.device("CUDA0").kv == 512 * MiB
    assert len(a.output) < 500 * 4200


def test_a_device_the_plan_does_not_use_and_the_engine_does_is_a_contradiction():
    report = engine_report.from_server_log(
        "load_tensors:   CPU_Mapped model buffer size =   532.31 MiB\n"
        "load_tensors:        CUDA0 model buffer size =  4277.33 MiB\n"
        "llama_kv_cache:      CUDA0 KV buffer size =   512.00 MiB\n"
        "sched_reserve:      CUDA0 compute buffer size =   112.01 MiB\n")
    plan = (engine_report.Buffers("Host", model=round(532.31 * MiB)),)
    v = check.compare(plan, report)
    assert v.outcome is check.Outcome.CONTRADICTED
    assert {(r.device, r.term) for r in v.off} == {("CUDA0", "model"), ("CUDA0", "kv"), ("CUDA0", "compute")}
    assert all(r.plan == 0 for r in v.off)


def test_a_metal_build_s_mapped_model_is_the_gpu_s_memory():
    """On Apple silicon the model buffer is MTL0_Mapped: the GPU's (unified) memory, not the host's."""
    log = ("load_tensors:   CPU_Mapped model buffer size =   166.92 MiB\n"
           "load_tensors: MTL0_Mapped model buffer size = 17468.43 MiB\n"
           "llama_kv_cache:       MTL0 KV buffer size =  3840.00 MiB\n"
           "sched_reserve:       MTL0 compute buffer size =   300.75 MiB\n"
           "sched_reserve:        CPU compute buffer size =    12.01 MiB\n")
    r = engine_report.from_server_log(log)
    assert [d.device for d in r.devices] == ["MTL0", "Host"]
    assert r.device("MTL0").model == round(17468.43 * MiB) and r.device("Host").model == round(166.92 * MiB)
