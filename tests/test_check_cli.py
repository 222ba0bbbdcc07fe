"""`pick-backend plan RECIPE --model M --check` against the real llama.cpp (CPU, ../shared/llama.cpp),
run as this machine's `system` backend, and against builds on PATH that hang, crash, say nothing
or allocate other figures than the plan's (docs/check.md)."""

from __future__ import annotations

import os
import re
import sys
import textwrap
import time

import jsonschema
import pytest

import engine_gguf
import real_engine as E
from conftest import run_cli
from test_json_contract import schema

MiB = 1 << 20


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("check-cli-models")
    return {k: engine_gguf.write(str(d / f"{k}.gguf"), k) for k in
            ("llama-spm-q8_0", "gemma3-swa-q8_0", "qwen2-tied-q8_0", "qwen3moe-q8_0", "llama-wide-q8_0",
             "qwen3moe-q4_0")}


def _path(d) -> str:
    return f"{d}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.fixture(scope="module")
def real_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("real-bin")
    for name in ("llama-server", "llama-fit-params"):
        os.symlink(E.exe(name), d / name)
    return _path(d)


def plan(path, cache, model, *args):
    return run_cli("plan", "llamacpp", "--backend", "system", "--model", model, "--cache-dir", str(cache), *args,
                   env={"PATH": path})


CASES = [("llama-spm-q8_0", 4096, 1, "f16"), ("gemma3-swa-q8_0", 8192, 2, "f16"), ("qwen2-tied-q8_0", 4096, 1, "q8_0"),
         ("qwen3moe-q8_0", 2048, 3, "q8_0")]


@E.needs_engine
@pytest.mark.parametrize("way", ["fit-params", "server"])
@pytest.mark.parametrize("key,ctx,slots,cache", CASES, ids=[c[0] for c in CASES])
def test_the_engine_confirms_the_plan_both_ways(models, real_path, tmp_path, key, ctx, slots, cache, way):
    r = plan(real_path, tmp_path, models[key], "--ctx-size", str(ctx), "--parallel", str(slots), "--cache-type-k",
             cache, "--cache-type-v", cache, "--check", way, "--json")
    assert r.rc == 0, (r.out[-3000:], r.err[-2000:])
    jsonschema.validate(r.json(), schema("plan"))  # docs/json.md 'plan', with its check
    c = r.json()["check"]
    assert c["outcome"] == "confirmed" and c["decided_by"] == way
    rows = {(x["device"], x["term"]): x for x in c["asked"][-1]["rows"]}
    want = {"model", "kv", "compute"} | ({"output"} if way == "server" else set())
    assert {t for (_d, t), x in rows.items() if x["engine_bytes"] is not None} == want
    assert all(x["within"] for x in rows.values())


@E.needs_engine
def test_the_text_sets_the_plan_beside_the_engine_and_a_later_plan_uses_what_was_measured(models, real_path, tmp_path):
    m = models["qwen3moe-q4_0"]  # experts the CPU repacks: the model buffer is the mapped file and the copy
    r = plan(real_path, tmp_path, m, "--ctx-size", "4096", "--check", "server")
    assert r.rc == 0, r.err
    assert "a llama-server start with the plan's line" in r.out and "confirmed:" in r.out
    for term in ("model", "KV cache", "compute", "output"):
        assert f"Host    {term}" in r.out
    before = plan(real_path, tmp_path / "other-cache", m, "--ctx-size", "4096", "--json").json()
    after = plan(real_path, tmp_path, m, "--ctx-size", "4096", "--json").json()
    assert "measured" not in before["fit"] and after["fit"]["measured"]["way"] == "server"
    log, rc = E.start_server([E.exe("llama-server"), *after["args"]])
    got = E.buffers(log)
    engine_total = sum(got["model"].values()) + sum(got["kv"]) + got["compute"]["CPU"] + got["output"]["CPU"]
    assert abs(after["fit"]["cpu"]["total"] - engine_total) <= 0.01 * engine_total
    assert after["fit"]["cpu"]["compute"] == got["compute"]["CPU"]
    text = plan(real_path, tmp_path, m, "--ctx-size", "4096").out
    assert "compute: measured here on" in text and "llama-server start" in text
    # another context is another placement: nothing measured for it
    assert "measured" not in plan(real_path, tmp_path, m, "--ctx-size", "8192", "--json").json()["fit"]


def stand_in(d, body: str) -> str:
    """A llama-server (and no llama-fit-params) on a PATH of its own, running ``body``; PIDS notes PIDs."""
    d.mkdir(exist_ok=True)
    exe = d / "llama-server"
    exe.write_text(f"#!{sys.executable}\nimport os, signal, subprocess, sys, time\nPIDS = {str(d / 'pids')!r}\n"
                   f"REAL = {E.exe('llama-server')!r}\n" + textwrap.dedent(body))
    exe.chmod(0o755)
    return _path(d)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


@E.needs_engine
def test_a_build_that_hangs_is_no_answer_and_leaves_nothing_running(models, tmp_path):
    path = stand_in(tmp_path / "bin", """
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open(PIDS, "w").write(f"{os.getpid()} {child.pid}")
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        time.sleep(600)
    """)
    t0 = time.monotonic()
    r = plan(path, tmp_path, models["llama-spm-q8_0"], "--ctx-size", "2048", "--check", "--check-timeout", "2")
    assert r.rc == 4 and "no answer within 2 s" in r.out and time.monotonic() - t0 < 60
    pids = [int(x) for x in (tmp_path / "bin" / "pids").read_text().split()]
    assert len(pids) == 2 and not any(_alive(p) for p in pids)


@E.needs_engine
@pytest.mark.parametrize("body,words", [
    ("print('ggml_cuda_init: failed', flush=True); os.abort()\n", "ended before it answered"),
    ("sys.exit(0)\n", "ended before it answered"),
])
def test_a_build_that_crashes_or_says_nothing_is_no_answer(models, tmp_path, body, words):
    r = plan(stand_in(tmp_path / "bin", body), tmp_path, models["llama-spm-q8_0"], "--ctx-size", "2048", "--check",
             "--json")
    assert r.rc == 4, r.err
    jsonschema.validate(r.json(), schema("plan"))
    c = r.json()["check"]
    assert c["outcome"] == "no-answer" and c["asked"][-1]["failure"] == "crashed"
    r = plan(stand_in(tmp_path / "bin", body), tmp_path, models["llama-spm-q8_0"], "--ctx-size", "2048", "--check")
    assert r.rc == 4 and words in r.out and "Traceback" not in r.out + r.err


@E.needs_engine
def test_a_build_that_allocates_other_figures_contradicts_the_plan(models, tmp_path):
    """The real server, its compute buffer printed three times as large and 64 MiB more: exit 3, the term named."""
    path = stand_in(tmp_path / "bin", """
        import re
        p = subprocess.Popen([REAL, *sys.argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        signal.signal(signal.SIGINT, lambda *a: p.send_signal(signal.SIGINT))
        for line in p.stdout:
            m = re.search(r"compute buffer size =\\s*([\\d.]+) MiB", line)
            if m:
                line = line.replace(m[1], f"{float(m[1]) * 3 + 64:.2f}")
            print(line, end="", flush=True)
        sys.exit(p.wait())
    """)
    r = plan(path, tmp_path, models["llama-spm-q8_0"], "--ctx-size", "4096", "--check", "--json")
    assert r.rc == 3, (r.err, r.out[-1500:])
    assert r.json()["check"]["outcome"] == "contradicted" and r.json()["check"]["decided_by"] == "server"
    rows = [x for x in r.json()["check"]["asked"][-1]["rows"] if not x["within"]]
    assert [(x["device"], x["term"]) for x in rows] == [("Host", "compute")]
    assert rows[0]["engine_bytes"] > 3 * rows[0]["plan_bytes"] + 60 * MiB
    r = plan(path, tmp_path / "fresh", models["llama-spm-q8_0"], "--ctx-size", "4096", "--check")
    assert r.rc == 3 and "contradicted: the engine differs from the plan in Host compute" in r.out
    # what the engine allocated is kept: the plan after it counts that, and the same check confirms it
    r = plan(path, tmp_path, models["llama-spm-q8_0"], "--ctx-size", "4096", "--check", "--json")
    assert r.rc == 0 and r.json()["fit"]["measured"]["way"] == "server"


def test_check_is_refused_where_it_cannot_ask_this_machine(models, tmp_path):
    m = models["llama-spm-q8_0"]
    r = run_cli("--root", "fixtures/machines/linux-ubuntu24.04-rtx4090", "plan", "llamacpp", "--model", m, "--check")
    assert r.rc == 2 and "--root" in r.err
    r = run_cli("plan", "llamacpp", "--model", m, "--gpu", "RTX 4090", "--check")
    assert r.rc == 2 and "--gpu" in r.err
    r = run_cli("plan", "llamacpp", "--model", "https://example.invalid/m.gguf", "--check", "--cache-dir", str(tmp_path))
    assert r.rc in (2, 5)
    r = run_cli("plan", "llamacpp", "--backend", "cpu", "--model", m, "--check", "--cache-dir", str(tmp_path), "--json",
                env={"PATH": "/nonexistent"})
    assert r.rc == 4 and r.json()["check"]["failure"] == "not-installed"


# ------------------------------------------------------------------------------------------------
# what a hostile hour found (each pinned)


@E.needs_engine
def test_a_server_that_stops_before_its_buffers_is_no_answer_and_nothing_is_kept(models, tmp_path):
    path = stand_in(tmp_path / "bin", """
        print("load_tensors:   CPU_Mapped model buffer size =     4.75 MiB")
        print("main: server is listening on http://127.0.0.1:8080", flush=True)
    """)
    m = models["llama-spm-q8_0"]
    r = plan(path, tmp_path, m, "--ctx-size", "4096", "--check", "--json")
    assert r.rc == 4 and r.json()["check"]["asked"][-1]["failure"] == "no-buffers" and not r.json()["check"]["kept"]
    assert "measured" not in plan(path, tmp_path, m, "--ctx-size", "4096", "--json").json()["fit"]


@E.needs_engine
def test_a_projection_is_not_kept_as_a_measurement(models, real_path, tmp_path):
    m = models["llama-spm-q8_0"]
    r = plan(real_path, tmp_path, m, "--ctx-size", "4096", "--check", "fit-params")
    assert r.rc == 0 and "kept: nothing (a projection" in r.out
    assert "measured" not in plan(real_path, tmp_path, m, "--ctx-size", "4096", "--json").json()["fit"]


@E.needs_engine
def test_a_plan_that_does_not_fit_says_the_check_was_not_run(models, real_path, tmp_path):
    args = ("--ctx-size", "32768", "--parallel", "4", "--ram", "256M", "--check")
    r = run_cli("plan", "llamacpp", "--backend", "system", "--model", models["llama-spm-q8_0"], "--cache-dir",
                str(tmp_path), *args, "--json", env={"PATH": real_path})
    assert r.rc == 2 and "--ram" in r.err  # a described machine is not this one: refused first
    # 256 slots of 32768 cells of 8 KiB each: 64 GiB of KV cache, more than this machine has
    r = plan(real_path, tmp_path, models["llama-wide-q8_0"], "--ctx-size", "32768", "--parallel", "256", "--check",
             "--json")
    assert r.json()["fit"]["status"] == "no"
    assert r.rc == 3 and r.json()["check"] == {"outcome": "not-run", "decided_by": None, "asked": [],
                                               "failure": "does-not-fit"}
    r = plan(real_path, tmp_path, models["llama-wide-q8_0"], "--ctx-size", "32768", "--parallel", "256", "--check")
    assert r.rc == 3 and "check: not run: the plan does not fit" in r.out


def test_a_timeout_that_is_not_a_number_is_a_usage_error(models, tmp_path):
    r = run_cli("plan", "llamacpp", "--model", models["llama-spm-q8_0"], "--check", "--check-timeout", "nan",
                "--cache-dir", str(tmp_path))
    assert r.rc == 2 and "Traceback" not in r.err


@E.needs_engine
def test_a_record_that_cannot_be_written_is_said_and_the_verdict_stands(models, real_path, tmp_path):
    (tmp_path / "pick-backend").mkdir()
    (tmp_path / "pick-backend" / "check").write_text("a file where the directory goes")
    r = plan(real_path, tmp_path, models["llama-spm-q8_0"], "--ctx-size", "4096", "--check", "server", "--json")
    assert r.rc == 0 and r.json()["check"]["outcome"] == "confirmed" and not r.json()["check"]["kept"]
    assert any("was not kept" in w for w in r.json()["warnings"])


@E.needs_engine
@pytest.mark.parametrize("value", ["true", "99999999999999999999999", "-5", '"12"'])
def test_a_damaged_record_is_not_used(models, real_path, tmp_path, value):
    m = models["llama-spm-q8_0"]
    assert plan(real_path, tmp_path, m, "--ctx-size", "4096", "--check", "server").rc == 0
    (rec,) = (tmp_path / "pick-backend" / "check").iterdir()
    rec.write_text(re.sub(r'("Host": )\d+', lambda g: g[1] + value, rec.read_text(), count=1))
    r = plan(real_path, tmp_path, m, "--ctx-size", "4096", "--json")
    assert r.rc == 0 and "measured" not in r.json()["fit"]


def test_check_is_refused_before_the_machine_is_looked_at(models, tmp_path):
    r = run_cli("--root", "fixtures/machines/linux-ubuntu24.04-h200-device-capture", "plan", "llamacpp", "--backend",
                "system", "--model", models["llama-spm-q8_0"], "--check", "--cache-dir", str(tmp_path))
    assert r.rc == 2 and "--root" in r.err


@E.needs_engine
def test_a_fit_params_that_hangs_is_named_and_a_server_start_decides(models, tmp_path):
    d = tmp_path / "bin"
    path = stand_in(d, "os.execv(REAL, [REAL, *sys.argv[1:]])\n")
    fp = d / "llama-fit-params"
    fp.write_text(f"#!{sys.executable}\nimport time\nprint('loading 1 2 3', flush=True)\ntime.sleep(300)\n")
    fp.chmod(0o755)
    r = plan(path, tmp_path, models["llama-spm-q8_0"], "--ctx-size", "4096", "--check", "--check-timeout", "3")
    assert r.rc == 0, r.out
    assert "llama-fit-params gave no answer within 3 s" in r.out and "a llama-server start" in r.out
