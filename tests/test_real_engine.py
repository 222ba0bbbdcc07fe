"""Every number `plan` prints about llama.cpp, held to a real llama.cpp.

The models are complete random-weight GGUFs the tests write (tests/engine_gguf.py: llama with a
SentencePiece and a byte-level BPE vocabulary, qwen2 with tied embeddings, gemma3 with sliding
windows, a qwen3moe mixture of experts; Q8_0, F16, Q4_0, Q4_K).  For each, `pick-backend plan`
runs against the real build as this machine's `system` backend (llama-server on PATH), and the test
starts that build with exactly the plan's line and reads the buffers it prints (-lv 4): the model
buffer (and the CPU's repacked copy) to the byte as printed, KV within 1%, the compute buffer within
12%, the output buffer as printed, the total within 10%.  Each term is compared on its own, so
removing one from the arithmetic fails here.
"""

from __future__ import annotations

import json
import os

import pytest

import engine_gguf
import real_engine as E
from conftest import run_cli

pytestmark = E.needs_engine

MiB = E.MiB
PRINTED = 0.006 * MiB  # llama.cpp prints buffers as %.2f MiB


@pytest.fixture(scope="session")
def gguf(tmp_path_factory):
    d = tmp_path_factory.mktemp("engine-models")
    return {k: engine_gguf.write(str(d / f"{k}.gguf"), k) for k in engine_gguf.SHAPES}


@pytest.fixture(scope="session")
def system_path(tmp_path_factory):
    """A PATH whose llama-server (and llama-bench beside it) is the real build: the `system` backend."""
    d = tmp_path_factory.mktemp("system-bin")
    for name in ("llama-server", "llama-bench", "llama-cli"):
        os.symlink(E.exe(name), d / name)
    return f"{d}{os.pathsep}{os.environ.get('PATH', '')}"


def plan(system_path, tmp_path, model, *args):
    r = run_cli("plan", "llamacpp", "--backend", "system", "--model", model, "--cache-dir", str(tmp_path),
                "--json", *args, env={"PATH": system_path})
    assert r.rc == 0, r.err
    return r.json()


def engine(p, system_path):
    """Start the build with the plan's own line; what it allocated, as it printed it."""
    log, rc = E.start_server([p["executable"], *p["args"]], env={"PATH": system_path})
    assert rc == 0, log[-3000:]
    return E.buffers(log), log


CASES = [(k, c) for k in engine_gguf.SHAPES for c in (512, 4096, 32768)]


@pytest.mark.parametrize("key,ctx", CASES, ids=[f"{k}-{c}" for k, c in CASES])
def test_each_buffer_of_the_plan_is_what_the_engine_allocates(gguf, system_path, tmp_path, key, ctx):
    p = plan(system_path, tmp_path, gguf[key], "--ctx-size", str(ctx))
    fit = p["fit"]
    assert fit["status"] == "cpu" and fit["ctx"] == ctx
    ours = fit["cpu"]
    got, log = engine(p, system_path)
    model = got["model"]
    assert abs(ours["weights"] - model["CPU_Mapped"]) <= PRINTED, "the mapped file"
    assert abs(ours["repack"] - model.get("CPU_REPACK", 0)) <= PRINTED, "the CPU's repacked weights"
    assert abs(ours["kv"] - sum(got["kv"])) <= 0.01 * sum(got["kv"]), "the KV cache"
    assert abs(ours["compute"] - got["compute"]["CPU"]) <= 0.12 * got["compute"]["CPU"], "the compute buffer"
    assert abs(ours["output"] - got["output"]["CPU"]) <= PRINTED, "the output buffer"
    printed = sum(model.values()) + sum(got["kv"]) + got["compute"]["CPU"] + got["output"]["CPU"]
    assert abs(ours["total"] - printed) <= 0.10 * printed
    assert fit["cpu_bytes"] == ours["total"]
    # the line pins what the numbers depend on: the engine ran with one slot, the plan's batch
    assert "n_parallel is set to auto" not in log
    assert f"n_ctx                 = {fit['n_ctx']}" in log and "n_ubatch              = 512" in log


@pytest.mark.parametrize("key", ["gemma3-swa-q8_0", "qwen2-tied-q8_0", "qwen3moe-q8_0"])
def test_slots_scale_the_cache_and_the_outputs_as_the_engine_scales_them(gguf, system_path, tmp_path, key):
    one = plan(system_path, tmp_path, gguf[key], "--ctx-size", "4096")
    four = plan(system_path, tmp_path, gguf[key], "--ctx-size", "4096", "--parallel", "4")
    a = four["args"]
    assert a[a.index("--parallel") + 1] == "4" and a[a.index("--ctx-size") + 1] == "16384"
    assert "--no-kv-unified" in a  # each slot keeps its own 4096 cells, whatever a build's default is
    got, log = engine(four, system_path)
    ours = four["fit"]["cpu"]
    assert abs(ours["kv"] - sum(got["kv"])) <= 0.01 * sum(got["kv"])
    assert abs(ours["output"] - got["output"]["CPU"]) <= PRINTED
    assert all(streams == 4 for *_x, streams in got["kv_cells"])  # one stream per slot
    assert ours["kv"] == 4 * one["fit"]["cpu"]["kv"] and ours["output"] == 4 * one["fit"]["cpu"]["output"]


@pytest.mark.parametrize("key,ctx,slots", [("llama-spm-q8_0", 100, 1), ("gemma3-swa-q8_0", 200, 2),
                                           ("qwen3moe-q8_0", 257, 1)])
def test_a_context_smaller_than_a_micro_batch_shrinks_the_batch_as_the_engine_does(gguf, system_path, tmp_path,
                                                                                   key, ctx, slots):
    """llama.cpp caps its batch at the asked context (n_batch = min(n_ctx, n_batch)) before padding the
    context to 256: the compute buffer and the sliding-window cache are sized for that smaller batch."""
    p = plan(system_path, tmp_path, gguf[key], "--ctx-size", str(ctx), "--parallel", str(slots))
    got, log = engine(p, system_path)
    ours = p["fit"]["cpu"]
    assert f"n_ubatch              = {min(512, ctx * slots)}" in log
    assert abs(ours["kv"] - sum(got["kv"])) <= 0.01 * sum(got["kv"])
    assert abs(ours["compute"] - got["compute"]["CPU"]) <= 0.12 * got["compute"]["CPU"]


def test_more_slots_than_the_engine_has_is_refused(gguf, system_path, tmp_path):
    r = run_cli("plan", "llamacpp", "--backend", "system", "--model", gguf["llama-spm-q8_0"], "--parallel", "257",
                "--cache-dir", str(tmp_path), env={"PATH": system_path})
    assert r.rc == 2 and "1 to 256 slots" in r.err
    r = run_cli("models", "llamacpp", "--parallel", "99999999999999999999", "--cache-dir", str(tmp_path))
    assert r.rc == 2 and "1 to 256 slots" in r.err


def test_the_line_of_a_build_without_a_gpu_backend_gives_no_layers(gguf, system_path, tmp_path):
    p = plan(system_path, tmp_path, gguf["llama-spm-q8_0"], "--ctx-size", "2048")
    assert "-ngl" not in p["args"] and "--n-gpu-layers" not in p["args"]
    _got, log = engine(p, system_path)
    assert "no usable GPU found" not in log


def test_a_cpu_plan_leaves_the_experts_where_the_engine_keeps_them(gguf, system_path, tmp_path):
    """On a CPU build --n-cpu-moe moves nothing (an override to the CPU picks from the CPU's own list,
    repacking first), so the plan of a mixture of experts on the CPU does not write it and counts the
    experts repacked, as the engine does with or without the option."""
    p = plan(system_path, tmp_path, gguf["qwen3moe-q4_0"], "--ctx-size", "512")
    assert "--n-cpu-moe" not in p["args"] and p["fit"]["cpu"]["repack"] > 0
    got, _log = engine(p, system_path)
    log, rc = E.start_server([p["executable"], *p["args"], "--n-cpu-moe", "4"], env={"PATH": system_path})
    assert rc == 0 and E.buffers(log)["model"] == got["model"]
    assert abs(p["fit"]["cpu"]["repack"] - got["model"]["CPU_REPACK"]) <= PRINTED


def test_the_plan_table_in_the_docs_is_this_build(gguf):
    """docs/models.md names the build its table was measured on; it is the build the tests run."""
    build, commit = E.version()
    text = open(os.path.join(E.ROOT, "docs", "models.md"), encoding="utf-8").read()
    assert f"build {build}" in text and commit in text


# ------------------------------------------------------------------------------------------------
# the build installed, verified, measured and started as the product does it


@pytest.fixture(scope="session")
def release_archive(tmp_path_factory):
    """The real build packed as ggml-org packs a Linux x64 release (llama-<tag>/ with the binaries),
    under the name of the asset Lemonade pins for the cpu backend: what `install --from-file` takes
    offline.  The tag in the name is the pin (b10375); the build inside says 11312."""
    import tarfile

    d = tmp_path_factory.mktemp("release")
    path = d / "llama-b10375-bin-ubuntu-x64.tar.gz"
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name in ("llama-server", "llama-bench"):
            tar.add(E.exe(name), arcname=f"llama-b10375/{name}")
    return str(path)


@pytest.fixture(scope="session")
def installed_cache(tmp_path_factory, release_archive):
    cache = tmp_path_factory.mktemp("cache")
    r = run_cli("install", "llamacpp", "--backend", "cpu", "--cache-dir", str(cache), "--from-file", release_archive,
                "--allow-unverified", "backend", env={"PICK_BACKEND_GITHUB_API": "http://127.0.0.1:9"})
    assert r.rc == 0, r.err
    return str(cache)


def test_install_from_file_then_verify_runs_the_installed_build(installed_cache):
    st = run_cli("status", "--cache-dir", installed_cache, "--json")
    assert st.rc == 0, st.err
    assert "b10375" in st.out
    r = run_cli("verify", "llamacpp", "--backend", "cpu", "--cache-dir", installed_cache, "--json")
    assert r.rc == 0, r.err + r.out
    v = r.json()
    assert v["verdict"] == "verified" and v["path"].startswith(installed_cache)
    assert v["command"][1:] == ["--version"]  # a CPU build has no device to list: it must start
    build, commit = E.version()
    assert v["build"] == {"number": int(build), "commit": commit}
    # installed under the pinned release's name, the build says otherwise: verify shows both
    assert v["version_note"] == (f"the install record says b10375; the build itself says build {build} "
                                 f"(commit {commit})")


def test_bench_measures_the_build_on_path_and_reads_its_own_version(gguf, system_path, tmp_path):
    r = run_cli("bench", "llamacpp", "--backends", "system", "--model", gguf["llama-spm-q8_0"], "-r", "2",
                "--prompt", "64", "--gen", "16", "--cache-dir", str(tmp_path), "--json", env={"PATH": system_path})
    assert r.rc == 0, r.err
    [res] = r.json()["results"]
    build, commit = E.version()
    assert res["status"] == "ok" and res["backend"] == "system" and res["version"] == f"b{build}"
    assert set(res["tests"]) == {"pp64", "tg16"} and all(t["avg_ts"] > 0 for t in res["tests"].values())
    assert res["tests"]["tg16"]["build"]["commit"].startswith(commit)
    # --policy measured reads the record: a build measured alone, steady or noisy, is compared with nothing
    p = run_cli("llamacpp", "--policy", "measured", "--cache-dir", str(tmp_path), "--json", env={"PATH": system_path})
    assert p.rc == 0, p.err
    pick = p.json()["recipes"]["llamacpp"]
    if res["tests"]["tg16"].get("noisy"):
        assert not pick["reason"].startswith("measured:")
    else:
        # one build measured is compared with nothing: the pick falls back and says so
        assert pick["reason"].startswith("only system has a steady fresh tg measurement of llamacpp"), pick["reason"]


def test_a_measurement_of_the_build_on_path_is_stale_once_path_names_another(gguf, system_path, tmp_path):
    """The system build is whatever PATH names: a record of one file says nothing of another."""
    import shutil

    r = run_cli("bench", "llamacpp", "--backends", "system", "--model", gguf["llama-spm-q8_0"], "-r", "1",
                "--prompt", "16", "--gen", "4", "--cache-dir", str(tmp_path / "c"), "--json", env={"PATH": system_path})
    assert r.rc == 0, r.err
    st = run_cli("status", "--cache-dir", str(tmp_path / "c"), "--json", env={"PATH": system_path}).json()
    assert st["measurements"] and all(m["fresh"] for m in st["measurements"])
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(E.exe("llama-server"), other / "llama-server")  # the same bytes, another file
    path = f"{other}{os.pathsep}{system_path}"
    st = run_cli("status", "--cache-dir", str(tmp_path / "c"), "--json", env={"PATH": path}).json()
    assert {m["stale_because"] for m in st["measurements"]} == {"the build on PATH is not the one measured"}
    p = run_cli("llamacpp", "--policy", "measured", "--cache-dir", str(tmp_path / "c"), "--json", env={"PATH": path})
    assert not p.json()["recipes"]["llamacpp"]["reason"].startswith("measured:")


def test_bench_shows_an_install_record_the_build_contradicts(gguf, installed_cache):
    r = run_cli("bench", "llamacpp", "--backends", "cpu", "--model", gguf["llama-spm-q8_0"], "-r", "1",
                "--prompt", "32", "--gen", "8", "--cache-dir", installed_cache)
    assert r.rc == 0, r.err
    build, _ = E.version()
    assert f"the install record says b10375, the build itself says build {build}" in r.err
    assert f"b10375 (says b{build})" in r.out


def test_plan_exec_starts_the_build_and_it_answers(gguf, installed_cache):
    import subprocess
    import sys
    import time
    import urllib.request

    port = E.free_port()
    p = subprocess.Popen([sys.executable, "-m", "selector", "plan", "llamacpp", "--backend", "cpu", "--model",
                          gguf["llama-bpe-f16"], "--ctx-size", "1024", "--cache-dir", installed_cache, "--exec", "--",
                          "--host", "127.0.0.1", "--port", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as h:
                    if h.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline or p.poll() is not None:
                    raise AssertionError(f"the server did not come up: {p.stderr.read() if p.poll() is not None else ''}")
                time.sleep(0.2)
        req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", method="POST",
                                     data=json.dumps({"prompt": "the model", "n_predict": 4}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            out = json.load(resp)
        assert out["tokens_predicted"] == 4 and out["tokens_evaluated"] > 0
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_the_cpu_speed_bound_holds_for_the_real_build(gguf, system_path, tmp_path):
    """`plan` prints "at most ~N tokens/s" for a CPU build from this machine's memory bandwidth
    (measured once, kept in the cache); llama-bench of the same build on the same model must not beat it."""
    import subprocess

    p = plan(system_path, tmp_path, gguf["llama-wide-q8_0"], "--ctx-size", "4096")
    est = p["speed_estimate"]
    assert est and "measured here on" in est["basis"] and est["bytes_per_token"] > 100 * MiB
    again = plan(system_path, tmp_path, gguf["llama-wide-q8_0"], "--ctx-size", "4096")["speed_estimate"]
    assert again["bandwidth_gbps"] == est["bandwidth_gbps"]  # measured once: the cache answers the second plan
    out = subprocess.run([E.exe("llama-bench"), "-m", gguf["llama-wide-q8_0"], "-p", "0", "-n", "32", "-r", "3",
                          "-o", "json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    [row] = json.loads(out.stdout)
    assert 0 < row["avg_ts"] <= 1.25 * est["tokens_per_s"], (row["avg_ts"], est)


def test_bench_at_two_depths_records_both_and_measured_compares_at_the_second(gguf, system_path, installed_cache):
    """llama-bench -d against the real build: --depth 0,4096 records each test at both depths (the build's own
    JSON, n_depth), and --policy measured --depth 4096 picks by the speeds at depth 4096, saying so."""
    r = run_cli("bench", "llamacpp", "--backends", "cpu,system", "--model", gguf["llama-spm-q8_0"], "-r", "1",
                "--prompt", "16", "--gen", "4", "--depth", "0,4096", "--cache-dir", installed_cache, "--json",
                env={"PATH": system_path})
    assert r.rc == 0, r.err
    out = r.json()
    assert out["depths"] == [0, 4096]
    ok = [x for x in out["results"] if x["status"] == "ok"]
    assert {x["backend"] for x in ok} == {"cpu", "system"}
    for x in ok:
        assert set(x["tests"]) == {"pp16", "tg4", "pp16@d4096", "tg4@d4096"}
    st = run_cli("status", "--cache-dir", installed_cache, "--json", env={"PATH": system_path}).json()
    assert {m.get("depth") for m in st["measurements"] if m.get("test", "").startswith("tg4")} >= {0, 4096}
    p = run_cli("llamacpp", "--policy", "measured", "--depth", "4096", "--cache-dir", installed_cache, "--json",
                env={"PATH": system_path})
    assert p.rc == 0, p.err
    pick = p.json()["recipes"]["llamacpp"]
    steady = {x["backend"]: x["tests"]["tg4@d4096"]["avg_ts"] for x in ok if not x["tests"]["tg4@d4096"].get("noisy")}
    if steady:
        best = max(steady, key=steady.get)
        assert pick["backend"] == best, (pick["reason"], steady)
        assert pick["reason"].startswith(f"measured: {best} {steady[best]:.0f} t/s") and "(tg4 at depth 4096," in pick["reason"]
    else:
        assert not pick["reason"].startswith("measured:")
