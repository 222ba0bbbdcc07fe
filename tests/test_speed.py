"""The model of generation speed (selector/models/speed.py): bytes read per token over bandwidth plus a
per-layer cost, fitted to published llama-bench runs and this repository's own captures."""

from __future__ import annotations

import json
import os

import pytest

from conftest import ROOT
from selector import evidence
from selector.models import speed

GIB = 1 << 30


def test_kv_read_at_depth_follows_the_models_attention():
    # Qwen3-30B-A3B (config.json: 48 layers, 4 KV heads of 128): at 100k positions a token reads 9.4 GiB of
    # f16 KV cache, the "9 GiB per token" of issue 40 -- five times its active weights
    qwen = speed.arch_of("qwen3moe 30B.A3B Q4_K - Medium", 30.53)
    assert qwen.layers == 48
    assert 9.0 < qwen.kv_per_position(100000) * 100000 / GIB < 9.5
    # Gemma 3 4B: one layer in six attends to everything, the rest to a window of 1024: at 32768 the
    # windowed layers read 1024 positions each, not 32768
    gemma = speed.arch_of("gemma3 4B Q8_0", 3.88)
    full = 2 * 4 * 256 * 2
    assert gemma.kv_per_position(32768) * 32768 == full * (5 * 32768 + 29 * 1024)
    assert speed.arch_of("qwen35 27B Q4_K - Small", 27.32).kv_per_position(8192) * 8192 == 2 * 4 * 256 * 2 * 16 * 8192
    # two 7B models share llama-bench's name; their parameters tell them apart
    assert speed.arch_of("llama 7B Q4_0", 6.74).kv_heads == 32 and speed.arch_of("llama 7B Q4_0", 7.24).kv_heads == 8


def _run(gpu, size_gib, params_b, model, tps, date="2026-01-01", build="b7000", depth=0):
    return evidence.Result(gpu=gpu, match=gpu, family="sm_89", backend="cuda", runtime=None, build=build, date=date,
                           model=model, size_gib=size_gib, params_b=params_b, ngl=99, fa=1, test="tg128", tps=tps,
                           url="https://x", where="w", pair=None, quote="q", depth=depth)


def test_the_fit_separates_bandwidth_from_per_layer_cost():
    """Runs made by a known model (80% of the bandwidth, 40 us a layer) on cards of several bandwidths and two
    model sizes: the fit gets both back, and with them a size it did not see."""
    from selector.bandwidth import by_match

    slowdown, per_layer = 1.25, 40e-6
    cards = ["RTX 4090", "RTX 4080", "RTX 4070 Ti", "RTX 4060 Ti", "RTX 6000 Ada"]
    models = [("llama 8B Q4_K - Medium", 4.58, 8.03, 32), ("llama 70B Q4_K - Medium", 39.59, 70.55, 80)]
    runs = []
    for card in cards:
        gbps = by_match()[card][1]["gbps"]
        for name, gib, params, layers in models:
            runs.append(_run(card, gib, params, name, 1 / (gib * GIB / (gbps * 1e9) * slowdown + layers * per_layer)))
    fit = speed.speed_fit(runs, "cuda", "sm_89", "nvidia")
    assert abs(fit.slowdown - slowdown) < 1e-6 and abs(fit.per_layer_s - per_layer) < 1e-9
    # without the per-layer term a fraction of the bound cannot hold for both sizes: the 8B reaches less of it
    p8, p70 = (speed.point(r) for r in runs[:2])
    assert p8.read_s / p8.seconds < p70.read_s / p70.seconds


def test_a_run_without_a_build_and_an_older_run_count_for_less():
    from selector.bandwidth import by_match

    gbps = by_match()["RTX 4090"][1]["gbps"]
    good = 1 / (4.58 * GIB / (gbps * 1e9) * 1.2 + 32 * 30e-6)
    runs = [_run(c, 4.58, 8.03, "llama 8B Q4_K - Medium", good * by_match()[c][1]["gbps"] / gbps)
            for c in ("RTX 4090", "RTX 4080", "RTX 3090", "RTX 4070 Ti")]
    # the same cards measured slower by a build nobody named, and by a build of three years ago
    slow = [_run(r.match, 4.58, 8.03, "llama 8B Q4_K - Medium", r.tps / 2, build=None) for r in runs]
    old = [_run(r.match, 4.58, 8.03, "llama 8B Q4_K - Medium", r.tps / 2, date="2023-01-01") for r in runs]
    named = speed.speed_fit(runs + slow, "cuda", "sm_89", "nvidia")
    dated = speed.speed_fit(runs + old, "cuda", "sm_89", "nvidia")
    even = speed.speed_fit(runs + [_run(r.match, 4.58, 8.03, "llama 8B Q4_K - Medium", r.tps / 2) for r in runs],
                           "cuda", "sm_89", "nvidia")
    t = lambda f: f.seconds(4.58 * GIB / (gbps * 1e9), 32)  # noqa: E731
    assert t(named) < t(even) and t(dated) < t(named)


def test_the_h200_capture_holds_the_model_at_depth():
    """This repository's H200 (tests/data/device/h200-cuda-b11312): the catalog's captures are its llama-bench
    JSON, and the model fitted with them follows the 8B's fall from depth 0 to 32768 within 25%."""
    path = os.path.join(ROOT, "tests", "data", "device", "h200-cuda-b11312", "bench-llama3-8b-q4_0.json")
    text = open(path, encoding="utf-8").read()
    runs = [r for r in json.loads(text[:text.rindex("]") + 1]) if r["n_gen"]]
    captured = {(r.test, r.depth): r.tps for r in speed.captured() if r.model == "llama 8B Q4_0" and r.test[:2] == "tg"}
    assert {(f"tg{r['n_gen']}", r["n_depth"]): round(r["avg_ts"], 2) for r in runs} == captured
    allr = [r for r in list(evidence.load()) + list(speed.captured()) if r.os == "linux"]
    fit = speed.speed_fit(allr, "cuda", "sm_90", "nvidia", "hbm")
    pts = [p for r in speed.captured() if r.model == "llama 8B Q4_0" and (p := speed.point(r))]
    for p in pts:
        assert abs(p.seconds / fit.seconds(p.read_s, p.layers) - 1) < 0.25, (p.depth, 1 / p.seconds)


# --- a plan's speed at the depth users run -----------------------------------------------------------

def _cli_plan(fixture, model, *args, gpus=()):
    from conftest import machine, run_cli

    where = ["--root", machine(fixture)] if fixture else [x for g in gpus for x in ("--gpu", g)]
    r = run_cli(*where, "plan", "llamacpp", "--model", model, "--json", *args)
    assert r.rc == 0, r.err
    return r.json()


def test_a_described_h200_gets_an_estimate_for_a_dense_8b_near_what_our_h200_measured(tmp_path):
    """Llama 3.1 8B Q4_0 at its real widths (this repository's capture ran that file's shapes): the H200 in
    tests/data/device/h200-cuda-b11312 generated 333 t/s at an empty context and 206 at depth 32768 (llama.cpp
    b11312, llama-bench -ngl 99 -fa 1).  A described H200 gets an estimate within 25% of both, its basis said."""
    import gguf_models as gm

    # Llama 3.1 8B's widths (meta-llama config.json: 32 layers of 4096, 8 KV heads, n_ff 14336) in Q4_0, a header
    # and a hole as long as its tensors
    model = gm.write(str(tmp_path / "llama3-8b-q4_0.gguf"), "llama3.1-70b", n_layer=32, n_embd=4096, n_head=32,
                     n_ff=14336)
    s = _cli_plan(None, model, "--ctx-size", "32768", "--backend", "cuda", gpus=("H200",))["speed_estimate"]
    at = {d["depth"]: d for d in s["depths"]}
    assert set(at) == {0, 32768}
    assert at[0]["tokens_per_s"] == pytest.approx(333.05, rel=0.25)
    assert at[32768]["tokens_per_s"] == pytest.approx(206.41, rel=0.25)
    assert at[32768]["bound"] < at[0]["bound"] == pytest.approx(s["tokens_per_s"], rel=1e-3)
    assert "H200" in s["estimate"]["gpus"] and "HBM" in s["estimate"]["group"]
    assert "of it KV cache) per token at depth 32768" in at[32768]["basis"]


def test_the_experts_go_to_system_memory_where_the_layers_kv_would_be_read_from_there_at_depth(tmp_path):
    """Issue 40's case: the replayed RTX 4090, Qwen3-30B-A3B-Instruct-2507 Q4_K_M (trained on 262144 tokens)
    at a context of 110000.  -ngl K reads fewer weights from system memory at an empty context, but its
    layers' KV cache is there too, read for every token at depth; --n-cpu-moe keeps all KV on the GPU.
    The plan places the experts, says what -ngl would give at that depth, and `models` agrees."""
    import gguf_models as gm

    model = gm.write(str(tmp_path / "Qwen3-30B-A3B-Instruct-2507-Q4_K_M.gguf"), "qwen3-30b-a3b", ctx_train=262144)
    p = _cli_plan("linux-ubuntu24.04-rtx4090", model, "--ctx-size", "110000", "--backend", "cuda")
    f, alt = p["fit"], p["fit"]["instead_of"]
    assert f["status"] == "experts" and alt["status"] == "partial"
    assert alt["cpu_read_bytes"] < f["cpu_read_bytes"]  # by weights at an empty context, -ngl reads less there
    mine, other = p["speed_estimate"]["depths"], alt["depths"]
    assert [d["depth"] for d in mine] == [d["depth"] for d in other] == [0, 110000]
    assert other[0]["tokens_per_s"] > mine[0]["tokens_per_s"]  # the empty context favours -ngl ...
    assert mine[1]["tokens_per_s"] > other[1]["tokens_per_s"]  # ... the context the user runs does not
    from conftest import machine, run_cli

    text = run_cli("--root", machine("linux-ubuntu24.04-rtx4090"), "plan", "llamacpp", "--model", model,
                   "--ctx-size", "110000", "--backend", "cuda")
    assert f"rather than -ngl {alt['ngl']}" in text.out and "at depth 110000 (the planned context, full)" in text.out
    assert "speed at depth 110000 (the planned context, full): ~" in text.out


def test_models_and_plan_agree_on_the_placement_at_depth(tmp_path):
    """The same model from Lemonade's list, already downloaded: `models` plans its row as `plan` does."""
    import gguf_models as gm
    from conftest import machine, run_cli

    snap = tmp_path / "hub" / "models--unsloth--Qwen3-30B-A3B-Instruct-2507-GGUF" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    gm.write(str(snap / "Qwen3-30B-A3B-Instruct-2507-Q4_0.gguf"), "qwen3-30b-a3b", ctx_train=262144)
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_ENDPOINT": "http://127.0.0.1:9"}
    root = ["--root", machine("linux-ubuntu24.04-rtx4090")]
    plan = run_cli(*root, "plan", "llamacpp", "--model", "Qwen3-30B-A3B-Instruct-2507-GGUF", "--ctx-size", "110000",
                   "--backend", "cuda", "--cache-dir", str(tmp_path / "c"), "--json", env=env)
    assert plan.rc == 0, plan.err
    rows = run_cli(*root, "models", "llamacpp", "--ctx-size", "110000", "--backend", "cuda", "--cache-dir",
                   str(tmp_path / "c"), "--json", env=env)
    assert rows.rc == 0, rows.err
    row = next(r for r in rows.json()["models"] if r["name"] == "Qwen3-30B-A3B-Instruct-2507-GGUF")
    p = plan.json()
    assert row["status"] == p["fit"]["status"] == "experts"
    assert row["depths"] == p["speed_estimate"]["depths"]


@pytest.mark.parametrize("brand, gbps, words", [
    ("AMD EPYC 7543 32-Core Processor", 204.8, "8 channels of DDR4-3200 (EPYC 7003, Milan)"),
    ("AMD EPYC-Milan Processor", 204.8, "8 channels of DDR4-3200 (EPYC 7003, Milan)"),
    ("AMD EPYC 7302P 16-Core Processor", 204.8, "8 channels of DDR4-3200 (EPYC 7002, Rome)"),
    ("AMD EPYC 9354 32-Core Processor", 460.8, "12 channels of DDR5-4800 (EPYC 9004, Genoa)"),
    ("Intel(R) Xeon(R) Gold 6430", 307.2, "8 channels of DDR5-4800 (4th Gen Xeon Scalable, Sapphire Rapids)"),
    ("AMD Ryzen 5 7600 6-Core Processor", 83.2, "2 channels of DDR5-5200 (AM5, Ryzen 7000)"),
    ("AMD Ryzen 7 5700X3D 8-Core Processor", 51.2, "2 channels of DDR4-3200 (AM4, Ryzen 5000)"),
    ("13th Gen Intel(R) Core(TM) i7-13700K", 89.6, "2 channels of DDR5-5600 (13th and 14th Gen Core desktop"),
    ("AMD EPYC 7763 64-Core Processor", 204.8, "8 channels of DDR4-3200 (Milan)"),  # its own row first
])
def test_a_replayed_cpu_the_table_lacks_gets_its_platform_family_s_peak(brand, gbps, words):
    """Issue 40: a replayed CPU whose model the table lacks is given its family's platform (channels times the
    fastest memory the vendor lists for the family), said to be the family's; a model the table has keeps
    its row."""
    from types import SimpleNamespace

    got = speed.cpu_platform_bandwidth(SimpleNamespace(cpu=SimpleNamespace(brand=brand)))
    assert got[0] == gbps and words in got[1] and got[1].endswith("not measured")
    assert ("platform family's peak" in got[1]) == ("EPYC 7763" not in brand)


@pytest.mark.parametrize("brand", ["Intel(R) Xeon(R) Processor", "",
                                   "Intel(R) Core(TM) Ultra 7 155H", "Apple M2"])
def test_a_cpu_that_names_no_family_gets_no_platform_peak(brand):
    from types import SimpleNamespace

    assert speed.cpu_platform_bandwidth(SimpleNamespace(cpu=SimpleNamespace(brand=brand))) is None
