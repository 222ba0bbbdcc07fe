"""bench and --policy measured: fake llama-bench builds that print real llama-bench JSON.

The JSON each fake prints is a real `llama-bench -o json` result (tests/data/llama_bench_published.json,
"json_sample", with its source) with the speeds of the case put in; the machine is the replayed
Ryzen 7950X + RX 7900 XTX, where rocm and vulkan both run llamacpp.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import jsonschema
import pytest

import gguf_models as gm
from test_json_contract import schema
from conftest import machine

ROOT = machine("linux-ubuntu24.04-7950x-rx7900xtx")
SAMPLE = json.load(open(os.path.join(os.path.dirname(__file__), "data", "llama_bench_published.json")))["json_sample"]

FAKE = textwrap.dedent('''\
    #!{python}
    import json, os, sys, time
    args = sys.argv[1:]
    def opt(name, default):
        return args[args.index(name) + 1] if name in args else default
    mode = {mode!r}
    if mode == "crash":
        print("ggml_cuda_init: failed to initialize ROCm: invalid device function", file=sys.stderr)
        os.abort()
    if mode == "hang":
        import subprocess
        subprocess.Popen([sys.executable, "-c", "import time; open({child!r}, 'w').write(str(__import__('os').getpid())); time.sleep(600)"])
        time.sleep(600)
    if mode == "garbage":
        print("| model | size | params | backend | ngl | test | t/s |")
        sys.exit(0)
    if mode == "object":
        print(json.dumps({{"avg_ts": 1.0}}))
        sys.exit(0)
    sample = json.load(open({sample!r}))
    out = []
    tests = [(n_p, n_g, d, ts if not d else {at}.get(d, ts)) for d in map(int, opt("-d", "0").split(","))
             for n_p, n_g, ts in ((int(opt("-p", 512)), 0, {pp}), (0, int(opt("-n", 128)), {tg}))]
    for n_p, n_g, depth, ts in tests:
        if (n_p or n_g) == 0:
            continue
        row = dict(sample[0])
        row.update(n_depth=depth)
        spread = ts / 100
        if mode == "noisy" or (mode == "noisy-once" and not os.path.exists({child!r} + ".ran")):
            spread = ts / 2  # a busy machine: runs of 5, 25 and 234 t/s
        row.update(n_prompt=n_p, n_gen=n_g, avg_ts=ts, stddev_ts=spread, samples_ts=[ts] * int(opt("-r", 5)),
                   model_filename=opt("-m", ""), build_number={build})
        if mode == "cpu":
            row.update(backends="CPU", gpu_info="", n_gpu_layers=0)
        if mode == "nan":
            row.update(avg_ts=float("nan"))
        out.append(row)
    if mode == "noisy-once":
        open({child!r} + ".ran", "w").close()
    print("[2026-12-01 10:00:00] ggml_vulkan: Found 1 Vulkan devices:")
    print(json.dumps(out, indent=2))
''')


def gone(pid: int) -> bool:
    """Ended: no such process, or a zombie waiting for a parent that does not reap (PID 1 in a container)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def terminate_when_started(args, child, env=None):
    """Run ``pick-backend ARGS``, SIGTERM it once the build's own child wrote its pid to ``child``,
    and return (exit status, that pid) once it ended."""
    p = subprocess.Popen([sys.executable, "-m", "selector", *args], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(200):
        if child.exists() and child.read_text():
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    p.wait(30)
    time.sleep(0.5)
    return p.returncode, int(child.read_text())


def install(cache, dirname, mode="ok", pp=1000.0, tg=100.0, build=7000, version="b7000", child="", at=None):
    d = cache / "bin" / "llamacpp" / dirname
    d.mkdir(parents=True, exist_ok=True)
    (d / "version.txt").write_text(version + "\n")
    (d / "install.json").write_text(json.dumps({"binary": "llama-server"}))
    server = d / "llama-server"
    server.write_text("#!/bin/sh\nexit 0\n")
    server.chmod(0o755)
    sample = cache / "sample.json"
    sample.write_text(json.dumps(SAMPLE))
    b = d / "llama-bench"
    b.write_text(FAKE.format(python=sys.executable, mode=mode, sample=str(sample), pp=pp, tg=tg, build=build,
                             child=child, at=at or {}))
    b.chmod(0o755)
    return d


@pytest.fixture
def model(tmp_path):
    return gm.write(str(tmp_path / "Qwen3-4B-Q4_K_M.gguf"), "qwen3-4b")


def bench(cli, cache, model, *extra):
    return cli("bench", "llamacpp", "--model", model, "--root", ROOT, "--cache-dir", str(cache), "-r", "2", *extra)


def pick(cli, cache, *extra):
    return cli("pick", "llamacpp", "--root", ROOT, "--cache-dir", str(cache), "--json", *extra).json()["recipes"]["llamacpp"]


def test_the_sample_is_real_llama_bench_json():
    row = SAMPLE[0]
    for k in ("build_commit", "build_number", "model_filename", "n_prompt", "n_gen", "avg_ts", "stddev_ts", "backends"):
        assert k in row


def test_two_backends_measured_and_the_faster_one_wins(cli, tmp_path, model):
    install(tmp_path, "rocm-stable", pp=2900.0, tg=140.0)
    install(tmp_path, "vulkan", pp=2400.0, tg=172.0)
    r = bench(cli, tmp_path, model, "--json")
    assert r.rc == 0, r.err
    out = r.json()
    jsonschema.validate(out, schema("bench"))
    assert out["winner"] == "vulkan" and out["metric"] == "tg128"
    speeds = {x["backend"]: x["tests"]["tg128"]["avg_ts"] for x in out["results"]}
    assert speeds == {"rocm": 140.0, "vulkan": 172.0}
    before = pick(cli, tmp_path)
    assert before["backend"] == "vulkan"  # Lemonade's order, not a measurement
    whole = cli("pick", "llamacpp", "--root", ROOT, "--cache-dir", str(tmp_path), "--json", "--policy", "measured").json()
    jsonschema.validate(whole, schema("pick"))
    tg = pick(cli, tmp_path, "--policy", "measured")
    assert tg["backend"] == "vulkan" and tg["reason"].startswith("measured: vulkan 172 t/s vs rocm 140 t/s (tg128,")
    pp = pick(cli, tmp_path, "--policy", "measured", "--metric", "pp")
    assert pp["backend"] == "rocm" and "rocm 2900 t/s vs vulkan 2400 t/s (pp512" in pp["reason"]


def test_without_results_measured_falls_back_and_says_so(cli, tmp_path):
    # nothing measured here: generation was published for this card (ggml-org/llama.cpp#20934), prompt
    # processing too (Orion-zhen/llama-bench-dashboard, b7951: gpt-oss 20B, Vulkan pp512 3594, ROCm 1847)
    d = pick(cli, tmp_path, "--policy", "measured")
    assert d["backend"] == "vulkan"
    assert d["reason"].startswith("no fresh tg measurement of llamacpp") and "published on RX 7900 XTX" in d["reason"]
    d = pick(cli, tmp_path, "--policy", "measured", "--metric", "pp")
    assert d["backend"] == "vulkan" and d["reason"].startswith("no fresh pp measurement of llamacpp")
    assert "published on RX 7900 XTX: vulkan pp512 3594 vs rocm 1847" in d["reason"]


def test_a_build_upgrade_makes_the_record_stale(cli, tmp_path, model):
    install(tmp_path, "rocm-stable", tg=200.0)
    install(tmp_path, "vulkan", tg=100.0)
    assert bench(cli, tmp_path, model).rc == 0
    assert pick(cli, tmp_path, "--policy", "measured")["backend"] == "rocm"
    (tmp_path / "bin" / "llamacpp" / "rocm-stable" / "version.txt").write_text("b7100\n")
    d = pick(cli, tmp_path, "--policy", "measured")
    # vulkan alone is fresh: a speed compared with nothing chooses nothing; the published comparison does
    assert d["backend"] == "vulkan" and d["reason"].startswith("only vulkan has a steady fresh tg measurement of llamacpp")
    assert "published on RX 7900 XTX" in d["reason"]
    st = cli("status", "--root", ROOT, "--cache-dir", str(tmp_path), "--json").json()
    stale = [m for m in st["measurements"] if m["dir"] == "rocm-stable"]
    assert stale and all(not m["fresh"] and "now b7100" in m["stale_because"] for m in stale)


@pytest.mark.parametrize("mode,says", [
    ("crash", "crashed (killed by signal 6)"),
    ("garbage", "unreadable output: no JSON array"),
    ("cpu", "saw no GPU"),
    ("nan", "avg_ts is nan, not a speed"),
    ("object", "one object, not llama-bench's list"),
])
def test_a_failed_build_is_recorded_with_evidence_and_never_wins(cli, tmp_path, model, mode, says):
    install(tmp_path, "rocm-stable", mode=mode, tg=999.0)
    install(tmp_path, "vulkan", tg=50.0)
    r = bench(cli, tmp_path, model, "--json")
    assert r.rc == 0, r.err
    rocm = next(x for x in r.json()["results"] if x["backend"] == "rocm")
    assert rocm["status"] == "failed" and says in rocm["why"]
    if mode == "crash":
        assert any("invalid device function" in e for e in rocm["evidence"])
    assert pick(cli, tmp_path, "--policy", "measured")["backend"] == "vulkan"


def test_a_hang_ends_at_the_timeout_with_its_whole_process_group(cli, tmp_path, model):
    child = tmp_path / "child.pid"
    install(tmp_path, "rocm-stable", mode="hang", child=str(child))
    started = time.monotonic()
    r = bench(cli, tmp_path, model, "--backends", "rocm", "--timeout", "3", "--json")
    assert time.monotonic() - started < 30
    assert r.rc == 3 and "hung" in r.json()["results"][0]["why"]
    time.sleep(0.5)
    assert gone(int(child.read_text()))  # the benchmark's own child is gone too


def test_sigterm_ends_the_group_and_writes_nothing(tmp_path, model):
    child = tmp_path / "child.pid"
    install(tmp_path, "rocm-stable", mode="hang", child=str(child))
    rc, pid = terminate_when_started(["bench", "llamacpp", "--model", model, "--root", ROOT, "--cache-dir",
                                      str(tmp_path), "--backends", "rocm"], child, {**os.environ, "COLUMNS": "200"})
    assert rc == 130 and gone(pid)
    assert not (tmp_path / "pick-backend" / "bench").exists() or not os.listdir(tmp_path / "pick-backend" / "bench")


def test_no_installed_backend_exits_3(cli, tmp_path, model):
    r = bench(cli, tmp_path, model)
    assert r.rc == 3 and "--install" in r.err


def test_a_missing_model_exits_5(cli, tmp_path):
    install(tmp_path, "vulkan")
    r = bench(cli, tmp_path, str(tmp_path / "absent.gguf"))
    assert r.rc == 5 and "absent.gguf" in r.err and "Traceback" not in r.err


def test_a_recipe_without_a_bench_tool_says_so(cli, tmp_path, model):
    r = cli("bench", "whispercpp", "--model", model, "--root", ROOT, "--cache-dir", str(tmp_path))
    assert r.rc == 3 and "whisper-bench" in r.err


def test_metric_without_measured_is_a_usage_error(cli, tmp_path):
    r = cli("pick", "llamacpp", "--root", ROOT, "--metric", "pp")
    assert r.rc == 2 and "--policy measured" in r.err


def test_a_corrupted_record_is_named_and_never_used(cli, tmp_path, model):
    install(tmp_path, "rocm-stable", tg=200.0)
    install(tmp_path, "vulkan", tg=100.0)
    assert bench(cli, tmp_path, model).rc == 0
    recs = sorted((tmp_path / "pick-backend" / "bench").iterdir())
    for p in recs:
        r = json.loads(p.read_text())
        if r["backend"] == "rocm" and r["test"] == "tg128":
            r["avg_ts"] = "999"
            p.write_text(json.dumps(r))
    st = cli("status", "--root", ROOT, "--cache-dir", str(tmp_path))
    assert st.rc == 0 and "not a readable bench record" in st.err
    d = cli("pick", "llamacpp", "--root", ROOT, "--cache-dir", str(tmp_path), "--json", "--policy", "measured").json()
    assert d["recipes"]["llamacpp"]["backend"] == "vulkan" and any("not a readable bench record" in w["message"] for w in d["warnings"])


def test_a_cache_that_cannot_keep_results_still_shows_them(cli, tmp_path, model):
    install(tmp_path, "vulkan", tg=100.0)
    (tmp_path / "pick-backend").mkdir()
    (tmp_path / "pick-backend" / "bench").write_text("a file where the records' directory belongs")
    r = bench(cli, tmp_path, model)
    assert r.rc == 0 and "cannot be kept" in r.err and "100.0" in r.out


def _measured(records, channel="stable", metric="tg"):
    """The measured pick for llamacpp on the RX 7900 XTX capture, from these records."""
    from conftest import profile_of
    from selector import catalog, engine

    prof = profile_of("linux-ubuntu24.04-7950x-rx7900xtx")
    m = engine.Machine(prof)
    gpu = engine.device_key(engine.decide(prof, catalog.load("lemonade"), "llamacpp", machine=m).device)
    for r in records:
        r.setdefault("device", {"key": gpu})
        r.setdefault("recipe", "llamacpp")
    s = engine.Settings(channel=channel, policy="measured", metric=metric, measurements={"llamacpp": records})
    installed = {"llamacpp": {"vulkan": "b1", "rocm-stable": "b1", "rocm-nightly": "b1"}}
    return engine.decide(prof, catalog.load("lemonade"), "llamacpp", installed, s, machine=m)


def rec(backend, dirname, model, test, ts, at):
    return {"backend": backend, "dir": dirname, "model": {"key": model, "label": model}, "test": test,
            "avg_ts": ts, "at": at}


def test_the_measured_pick_reads_the_channels_own_build_the_latest_run_and_the_model_measured_most():
    # rocm-nightly was fastest, but the pick installs rocm-stable: nightly's speed says nothing of it
    d = _measured([rec("rocm", "rocm-nightly", "q4", "tg128", 300.0, "2026-12-01T10:00"),
                   rec("rocm", "rocm-stable", "q4", "tg128", 90.0, "2026-12-01T10:00"),
                   rec("vulkan", "vulkan", "q4", "tg128", 120.0, "2026-12-01T10:00")])
    assert d.backend == "vulkan" and d.reason.startswith("measured: vulkan 120 t/s vs rocm 90 t/s")
    d = _measured([rec("rocm", "rocm-nightly", "q4", "tg128", 300.0, "2026-12-01T10:00"),
                   rec("vulkan", "vulkan", "q4", "tg128", 120.0, "2026-12-01T10:00")], channel="nightly")
    assert d.backend == "rocm"
    # accelerator-first would pick vulkan here too: the note names what chose rocm, the measurement
    assert d.notes == ["--policy lemonade would pick vulkan (Lemonade takes the first supported row; the "
                       "measurement prefers rocm on the AMD GPU)"]
    # two generation tests of one build (tg128 yesterday, tg256 today): today's run is the one compared
    d = _measured([rec("vulkan", "vulkan", "q4", "tg128", 200.0, "2026-11-30T10:00"),
                   rec("vulkan", "vulkan", "q4", "tg256", 100.0, "2026-12-01T10:00"),
                   rec("rocm", "rocm-stable", "q4", "tg128", 150.0, "2026-12-01T10:00")])
    assert d.backend == "rocm" and "vulkan 100 t/s" in d.reason and d.reason.endswith("2026-12-01)")
    # the model measured on more backends decides; between two measured on as many, the latest
    two = [rec("vulkan", "vulkan", "big", "tg128", 50.0, "2026-11-01T00:00"),
           rec("rocm", "rocm-stable", "big", "tg128", 60.0, "2026-11-01T00:00")]
    assert _measured(two + [rec("vulkan", "vulkan", "small", "tg128", 400.0, "2026-12-01T00:00")]).backend == "rocm"
    later = [rec("vulkan", "vulkan", "new", "tg128", 90.0, "2026-12-01T00:00"),
             rec("rocm", "rocm-stable", "new", "tg128", 80.0, "2026-12-01T00:00")]
    d = _measured(two + later)
    assert d.backend == "vulkan" and ", new, 2026-12-01)" in d.reason


def test_one_backend_measured_is_compared_with_nothing_and_falls_back_saying_so():
    # issue 39 finding 14: rocm's prompt speed alone is no comparison; accelerator-first chooses, and says why
    for metric, test in (("pp", "pp512"), ("tg", "tg128")):
        d = _measured([rec("rocm", "rocm-stable", "q4", test, 4000.0, "2026-12-01T10:00")], metric=metric)
        assert d.backend == "vulkan", (metric, d.reason)
        assert d.reason.startswith(f"only rocm has a steady fresh {metric} measurement of llamacpp on this machine, so "
                                   "nothing is compared with it"), d.reason
        assert "accelerator-first instead: first supported accelerator backend" in d.reason
        assert not any("measurement prefers" in n for n in d.notes)
    # two models, one build each: still nothing compared on one model
    d = _measured([rec("rocm", "rocm-stable", "a", "tg128", 90.0, "2026-12-01T10:00"),
                   rec("vulkan", "vulkan", "b", "tg128", 50.0, "2026-12-01T10:00")])
    assert d.reason.startswith("only ") and "measured:" not in d.reason


def test_a_result_measured_on_the_cpu_is_fresh_and_used(cli, tmp_path, model):
    # a Raspberry Pi 5: every build runs on the CPU (Vulkan too); its results are keyed by the CPU
    # and must not read as "the device is no longer here"
    pi = machine("linux-raspberrypi-pi5-arm64")
    install(tmp_path, "vulkan", tg=9.0)
    install(tmp_path, "cpu", tg=11.0)
    r = cli("bench", "llamacpp", "--model", model, "--root", pi, "--cache-dir", str(tmp_path), "-r", "2", "--json")
    assert r.rc == 0, r.err
    st = cli("status", "--root", pi, "--cache-dir", str(tmp_path), "--json").json()
    assert st["measurements"] and all(m["fresh"] for m in st["measurements"]), st["measurements"]
    d = cli("pick", "llamacpp", "--root", pi, "--cache-dir", str(tmp_path), "--policy", "measured",
            "--json").json()["recipes"]["llamacpp"]
    assert d["backend"] == "cpu" and d["reason"].startswith("measured: cpu 11 t/s vs vulkan 9 t/s")


def test_a_noisy_result_is_measured_again_then_kept_but_never_chosen(cli, tmp_path, model):
    """ggml-org's runs on a busy machine: tg128 88.1 ± 126.4 would have won; a spread over a tenth of
    the mean is measured once more, and when it stays so the result is marked and never picks."""
    install(tmp_path, "vulkan", mode="noisy", tg=200.0)
    install(tmp_path, "rocm-stable", tg=100.0, version="b10470", build=10470)
    r = bench(cli, tmp_path, model, "--json")
    assert r.rc == 0, r.err
    assert "bench vulkan: the runs of pp512, tg128 varied by more than 10% of their mean" in r.err
    out = r.json()
    by = {x["backend"]: x for x in out["results"]}
    assert by["vulkan"]["tests"]["tg128"]["noisy"] and not by["rocm"]["tests"]["tg128"].get("noisy")
    assert out["winner"] == "rocm"
    p = pick(cli, tmp_path, "--policy", "measured")  # rocm's steady result is compared with nothing
    assert p["reason"].startswith("only rocm has a steady fresh tg measurement") and "measured:" not in p["reason"]
    human = bench(cli, tmp_path, model)
    assert "200.0 ± 100.0 noisy" in human.out and "never chosen by --policy measured" in human.out
    status = cli("status", "--root", ROOT, "--cache-dir", str(tmp_path))
    assert "noisy: never chosen" in next(x for x in status.out.splitlines() if " vulkan " in x and "tg128" in x)


def test_only_noisy_results_pick_nothing_and_say_so(cli, tmp_path, model):
    install(tmp_path, "vulkan", mode="noisy", tg=200.0)
    assert bench(cli, tmp_path, model, "--backends", "vulkan").rc == 0
    p = pick(cli, tmp_path, "--policy", "measured")
    assert p["reason"].startswith("the fresh tg measurements of llamacpp on this machine are noisy")
    assert "published on RX 7900 XTX" in p["reason"]  # then what was published for this card
    p = pick(cli, tmp_path, "--policy", "measured", "--metric", "pp")  # then what was published for both
    assert "published on RX 7900 XTX: vulkan pp512 3594 vs rocm 1847" in p["reason"]


def test_a_result_steady_the_second_time_is_the_one_kept(cli, tmp_path, model):
    install(tmp_path, "vulkan", mode="noisy-once", tg=200.0, child=str(tmp_path / "vulkan-bench"))
    install(tmp_path, "rocm-stable", tg=100.0, version="b10470", build=10470)
    r = bench(cli, tmp_path, model, "--json")
    assert r.rc == 0, r.err
    by = {x["backend"]: x for x in r.json()["results"]}
    assert "measuring again" in r.err and not by["vulkan"]["tests"]["tg128"].get("noisy")
    assert by["vulkan"]["tests"]["tg128"]["stddev_ts"] == 2.0 and r.json()["winner"] == "vulkan"


def test_a_build_that_says_another_version_than_its_record_is_named(cli, tmp_path, model):
    install(tmp_path, "vulkan", tg=200.0, version="b10375", build=11312)
    r = bench(cli, tmp_path, model, "--backends", "vulkan")
    assert r.rc == 0, r.err
    assert "the install record says b10375, the build itself says build 11312" in r.err
    assert "b10375 (says b11312)" in r.out


def test_bench_at_depths_keys_results_by_depth_and_measured_compares_at_the_depth_asked(cli, tmp_path, model):
    """Vulkan leads at an empty context, ROCm at depth 4096 (the swap ggml-org/llama.cpp#19255 reports on an
    RX 7900 XTX): --depth 0,4096 passes -d to llama-bench and records both; --policy measured --depth 4096
    picks by the second, and says the depth."""
    install(tmp_path, "rocm-stable", pp=2900.0, tg=140.0, at={4096: 97.0})
    install(tmp_path, "vulkan", pp=2400.0, tg=172.0, at={4096: 42.0})
    r = bench(cli, tmp_path, model, "--depth", "0,4096", "--json")
    assert r.rc == 0, r.err
    out = r.json()
    jsonschema.validate(out, schema("bench"))
    assert out["depths"] == [0, 4096] and out["metric"] == "tg128" and out["winner"] == "vulkan"
    speeds = {(x["backend"], t): v["avg_ts"] for x in out["results"] for t, v in x["tests"].items() if t.startswith("tg")}
    assert speeds == {("rocm", "tg128"): 140.0, ("rocm", "tg128@d4096"): 97.0,
                      ("vulkan", "tg128"): 172.0, ("vulkan", "tg128@d4096"): 42.0}
    assert pick(cli, tmp_path, "--policy", "measured")["backend"] == "vulkan"
    deep = pick(cli, tmp_path, "--policy", "measured", "--depth", "4096")
    assert deep["backend"] == "rocm"
    assert deep["reason"].startswith("measured: rocm 97 t/s vs vulkan 42 t/s (tg128 at depth 4096,")
    # a depth nothing was measured at: no measurement there, the bench line that would make one
    none = pick(cli, tmp_path, "--policy", "measured", "--depth", "8192")
    assert "no fresh tg measurement of llamacpp at depth 8192" in none["reason"] and "--depth 8192" in none["reason"]
    text = bench(cli, tmp_path, model, "--depth", "4096")
    assert "tg128@d4096 t/s" in text.out and "--policy measured --depth 4096` picks it" in text.out


@pytest.mark.parametrize("args,says", [(("--depth", "-1"), "whole number"), (("--depth", "x"), "whole number"),
                                       (("--policy", "measured", "--depth", "0,4096"), "at one depth"),
                                       (("--depth", "4096"), "give --policy measured too")])
def test_a_bad_depth_is_a_usage_error(cli, tmp_path, args, says):
    r = cli("pick", "llamacpp", "--root", ROOT, "--cache-dir", str(tmp_path), *args)
    assert r.rc == 2 and says in r.err, r.err


def test_without_results_at_the_depth_the_published_comparison_is_of_that_depth_too(cli, tmp_path):
    """The catalog's RX 7900 XTX comparisons of Vulkan and ROCm: at depth 4096 the one run at that depth
    (Orion-zhen/llama-bench-dashboard, gpt-oss 20B: Vulkan 195, ROCm 155) comes first; at 16384 none was
    published, and the fallback says so rather than passing off another depth's."""
    d0 = pick(cli, tmp_path, "--policy", "measured")
    assert "published on RX 7900 XTX" in d0["reason"]
    at = pick(cli, tmp_path, "--policy", "measured", "--depth", "4096")
    assert "published on RX 7900 XTX: vulkan tg128 @ d4096 195 vs rocm 155, vulkan tg128 209 vs rocm 168" in at["reason"]
    deep = pick(cli, tmp_path, "--policy", "measured", "--depth", "16384")
    assert "published on" not in deep["reason"]
    assert "no published tg comparison of vulkan and rocm at depth 16384" in deep["reason"]
