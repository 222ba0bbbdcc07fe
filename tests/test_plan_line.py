"""The typed plan: the launch line it gives for every status, `models` and `plan` as one judgement,
and the findings of issue 39's hour that live in the plan's path.

Expected values come from llama.cpp's own rules (common/arg.cpp and src/llama-model.cpp, cited in
selector/models/fit.py): -ngl counts the output layer, --n-cpu-moe N keeps the experts of the first N
layers, --no-kv-unified gives each slot its own cache stream, CUDA orders its devices fastest first
unless CUDA_DEVICE_ORDER=PCI_BUS_ID; llama-server's default batch sizes are 2048 and 512.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

import gguf_models as gm
from conftest import machine, profile_of
from selector import store
from selector.models import fit, listing, planner, planning, source
from selector.render_plan import fit_json, headline

GiB = 1 << 30


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf")
    return {k: gm.write(str(d / f"{k}.gguf"), k) for k in gm.MODELS}


def facts_of(path):
    return source.facts(source.Model(path, [path]), None)


def arg(a, flag):
    return a[a.index(flag) + 1] if flag in a else None


def line(p, ids=None, env=None):
    return planner.launch(p, ["-m", "x.gguf"], env or {})


def gpu(gib, name="g", **k):
    return {"name": name, "budget": gib * GiB + fit.reserve("cuda"), **k}


# ------------------------------------------------------------------------------------------------
# the line of each status


def test_the_line_pins_every_parameter_the_memory_depends_on(models):
    f = facts_of(models["qwen3-4b"])
    p = fit.plan(f, [gpu(64)], "cuda", fit.Run(ctx=4096))
    a, env = line(p)
    assert p.status == "fits"
    assert arg(a, "-ngl") == str(f["n_layer"] + 1)  # every repeating layer and the output layer
    assert arg(a, "--ctx-size") == "4096" and arg(a, "--parallel") == "1" and "--no-kv-unified" not in a
    assert arg(a, "--batch-size") == "2048" and arg(a, "--ubatch-size") == "512"
    assert arg(a, "--flash-attn") == "on" and arg(a, "--cache-type-k") == "f16" and arg(a, "--cache-type-v") == "f16"
    assert "--n-cpu-moe" not in a and "--tensor-split" not in a and "--device" not in a and env == {}


def test_slots_each_get_their_own_cache_on_the_line(models):
    f = facts_of(models["qwen3-4b"])
    p = fit.plan(f, [gpu(64)], "cuda", fit.Run(ctx=4096, parallel=2))
    a, _env = line(p)
    assert arg(a, "--ctx-size") == "8192" and arg(a, "--parallel") == "2" and "--no-kv-unified" in a
    assert p.n_ctx == 8192  # two streams of 4096 cells


def test_a_partial_plan_gives_the_layers_it_counted(models):
    f = facts_of(models["llama3.1-70b"])
    p = fit.plan(f, [gpu(20)], "cuda", fit.Run(ctx=4096))
    a, _env = line(p)
    assert p.status == "partial" and 0 < p.ngl < f["n_layer"] + 1 and arg(a, "-ngl") == str(p.ngl)
    assert fit.on_gpu(f, p.ngl, p.run)["total"] <= 20 * GiB < fit.on_gpu(f, p.ngl + 1, p.run)["total"]


def test_experts_in_system_memory_are_on_the_line(models):
    f = facts_of(models["qwen3-30b-a3b"])
    p = fit.plan(f, [gpu(12)], "cuda", fit.Run(ctx=8192))
    a, _env = line(p)
    assert p.status == "experts" and arg(a, "-ngl") == str(f["n_layer"] + 1) and arg(a, "--n-cpu-moe") == str(p.n_cpu_moe)
    assert p.instead_of is not None and p.instead_of.status == "partial"  # the other way, as a value


def test_a_cpu_build_gives_no_layers_and_a_plan_that_does_not_fit_none(models):
    f = facts_of(models["qwen3-4b"])
    p = fit.plan(f, [], "cpu", fit.Run(ctx=4096), cpu_budget=64 * GiB, cpu=("x86_64", ("avx2",)))
    a, _env = line(p)
    assert p.status == "cpu" and "-ngl" not in a and not p.gpu_layers
    no = fit.plan(f, [gpu(1)], "cuda", fit.Run(ctx=4096), cpu_budget=GiB)
    assert no.status == "no" and arg(line(no)[0], "-ngl") == "0"  # judged by: nothing on the GPU


@pytest.mark.parametrize("runtime,order", [("cuda", "PCI_BUS_ID"), ("rocm", None), ("vulkan", None)])
def test_a_split_gives_its_shares_and_cuda_its_device_order(models, runtime, order):
    f = facts_of(models["llama3.1-70b"])
    two = [{"name": n, "budget": 24 * GiB + fit.reserve(runtime), "id": i} for n, i in (("a", "D0"), ("b", "D1"))]
    p = fit.plan(f, two, runtime, fit.Run(ctx=4096))
    a, env = line(p)
    assert p.status == "split" and arg(a, "--split-mode") == "layer" and arg(a, "--tensor-split") == "0.5,0.5"
    assert arg(a, "--device") == "D0,D1"
    assert env.get("CUDA_DEVICE_ORDER") == order
    assert planner.launch(p, [], {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})[1]["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"


# ------------------------------------------------------------------------------------------------
# `models` and `plan`: one judgement


def _seed(cache, entry, path):
    """The cache as `plan` leaves it after reading a header: the checkpoint resolved to this file."""
    store.write(store.path(cache, "models", "checkpoint:" + entry["checkpoint"]), {"files": [path]})
    source.facts(source.Model(path, [path]), cache)


FIXTURES = ["linux-ubuntu24.04-rtx4090", "linux-debian12-gtx1080", "linux-ubuntu24.04-7950x-rx7900xtx-rtx4090",
            "linux-ubuntu22.04-8x-mi300x", "linux-ubuntu24.04-strix-halo", "macos14-m3max",
            "linux-debian12-x86_64-cpu-only", "linux-raspberrypi-pi5-arm64", "windows11-rx7900xtx"]


@pytest.mark.parametrize("fixture", FIXTURES)
def test_models_and_plan_give_the_same_status_context_and_placement(models, tmp_path, fixture):
    from selector import catalog, engine

    prof = profile_of(fixture)
    d = engine.decide(prof, catalog.load("lemonade"), "llamacpp")
    if d.backend is None or not d.ok:
        pytest.skip("no backend runs here")
    v = d.verdict(d.backend)
    cache = str(tmp_path)
    names = [n for n, e in source.catalog()["models"].items() if e["recipe"] == "llamacpp"]
    given = dict(zip(names, models.values()))
    for name, path in given.items():
        _seed(cache, source.catalog()["models"][name], path)
    bw = (30.0, "a test's bandwidth")
    got = listing.rows(prof, d, v, cache, None, 1, False, lambda: bw)
    rows = {r.name: r for r in got.rows}
    for name, path in given.items():
        row = rows[name]
        assert row.basis == "header"
        p = planning.plan_model(prof, d, v, source.Model(path, [path]), cache, {}, None, "f16", "f16", 1,
                                lambda: bw).plan
        q = row.plan
        assert (q.status, q.ctx, q.ngl, q.n_cpu_moe, q.tensor_split) == (p.status, p.ctx, p.ngl, p.n_cpu_moe,
                                                                         p.tensor_split), name


def test_a_guess_counts_the_copy_a_cpu_build_repacks(cli, tmp_path):
    """Qwen3-30B-A3B's Q4_K_M download (18.6 GB) in 24 GiB on an AVX2 CPU build: the weights alone fit,
    but the CPU copies its Q4_K matrices again (CPU_REPACK), so no plan holds it; a guess says so."""
    r = cli("models", "llamacpp", "--root", machine("linux-debian12-x86_64-cpu-only"), "--ram", "24G",
            "--cache-dir", str(tmp_path), "--json")
    assert r.rc == 0, r.err
    row = {m["name"]: m for m in r.json()["models"]}["Qwen3-Coder-30B-A3B-Instruct-GGUF"]
    assert row["basis"] == "file size" and row["status"] == "no" and not row["fits"]


def test_a_row_past_the_trained_context_does_not_fit_and_says_why(cli, models, tmp_path):
    entry = source.catalog()["models"]["Qwen3-0.6B-GGUF"]
    _seed(str(tmp_path), entry, models["qwen3-4b"])
    r = cli("models", "llamacpp", "--gpu", "RTX 4090", "--ctx-size", "65536", "--cache-dir", str(tmp_path), "--json")
    assert r.rc == 0, r.err
    row = {m["name"]: m for m in r.json()["models"]}["Qwen3-0.6B-GGUF"]
    assert row["basis"] == "header" and not row["fits"] and row["status"] == "no" and "trained for" in row["note"]
    p = cli("plan", "llamacpp", "--model", models["qwen3-4b"], "--gpu", "RTX 4090", "--ctx-size", "65536",
            "--cache-dir", str(tmp_path))
    assert p.rc == 2 and "trained for" in p.err


def test_sizes_are_the_bytes_lemonade_gives(cli, tmp_path):
    r = cli("models", "llamacpp", "--root", machine("linux-ubuntu24.04-rtx4090"), "--cache-dir", str(tmp_path), "--json")
    sizes = {m["name"]: m["size_bytes"] for m in r.json()["models"]}
    from decimal import Decimal

    for name, e in source.catalog()["models"].items():
        if e["recipe"] == "llamacpp":
            assert sizes[name] == int(Decimal(str(e["size_gb"])) * 10 ** 9)  # 8.54 GB is 8540000000 bytes


# ------------------------------------------------------------------------------------------------
# the hour's findings


def test_a_url_that_does_not_parse_is_a_usage_error(cli, tmp_path):
    r = cli("plan", "llamacpp", "--model", "http://[::1/x.gguf", "--cache-dir", str(tmp_path))
    assert r.rc == 2 and "is not a URL" in r.err and "internal error" not in r.err


@pytest.mark.parametrize("recipe", ["whispercpp", "sd-cpp", "kokoro"])
def test_a_chat_models_gguf_is_not_a_model_of_another_engine(cli, models, tmp_path, recipe):
    r = cli("plan", recipe, "--model", models["qwen3-4b"], "--cache-dir", str(tmp_path))
    assert r.rc == 2 and "GGUF language model (qwen3, 36 layers)" in r.err, (r.rc, r.err)


def test_whisper_takes_a_ggml_bin(cli, tmp_path):
    good = tmp_path / "ggml-tiny.bin"
    good.write_bytes(b"lmgg" + bytes(64))
    r = cli("plan", "whispercpp", "--model", str(good), "--cache-dir", str(tmp_path), "--json")
    assert r.rc in (0, 3), r.err
    other = tmp_path / "notes.bin"
    other.write_bytes(b"hello" * 20)
    assert cli("plan", "whispercpp", "--model", str(other), "--cache-dir", str(tmp_path)).rc == 2


@pytest.mark.parametrize("size,ok", [("512B", False), ("17179869184B", True), ("100M", False), ("16G", True)])
def test_a_b_suffix_is_bytes_and_a_size_below_the_least_is_refused(cli, size, ok):
    r = cli("llamacpp", "--ram", size, "--json")
    assert (r.rc == 0) == ok and (ok or r.rc == 2), (r.rc, r.err)


@pytest.mark.parametrize("command", ["plan", "models"])
def test_a_context_of_0_is_refused_by_both(cli, models, tmp_path, command):
    extra = ["--model", models["qwen3-4b"]] if command == "plan" else []
    r = cli(command, "llamacpp", *extra, "--ctx-size", "0", "--cache-dir", str(tmp_path))
    assert r.rc == 2 and "positive number of tokens" in r.err


def test_a_context_under_256_says_the_cells_the_engine_allocates(cli, models, tmp_path):
    r = cli("plan", "llamacpp", "--model", models["qwen3-4b"], "--root", machine("linux-ubuntu24.04-rtx4090"),
            "--ctx-size", "100", "--cache-dir", str(tmp_path))
    assert r.rc == 0 and "context 100" in r.out and "allocates 256 cells" in r.out


def test_a_plan_that_does_not_fit_has_no_command_and_says_its_budgets(cli, models, tmp_path):
    r = cli("plan", "llamacpp", "--model", models["deepseek-v3"], "--root", machine("linux-ubuntu24.04-rtx4090"),
            "--cache-dir", str(tmp_path), "--json")
    assert r.rc == 3
    p = r.json()
    assert p["command"] is None and p["args"] == [] and p["fit"]["status"] == "no"
    kinds = [(s["kind"], s["says"]) for s in p["fit"]["suggest"]]
    # a GPU plan can need RAM: what -ngl K or --n-cpu-moe N would need there, not the whole model
    assert any(k == "memory" and "more system memory runs it with part of it there" in s for k, s in kinds)
    t = cli("plan", "llamacpp", "--model", models["deepseek-v3"], "--root", machine("linux-ubuntu24.04-rtx4090"),
            "--cache-dir", str(tmp_path))
    assert "or in system memory alone" in t.out and "usable" in t.out.split("or in system memory alone")[1]
    assert "run:" not in t.out


def test_a_cpu_plan_that_does_not_fit_says_what_memory_it_had(cli, models, tmp_path):
    r = cli("plan", "llamacpp", "--model", models["qwen3-30b-a3b"], "--root", machine("linux-debian12-x86_64-cpu-only"),
            "--cache-dir", str(tmp_path))
    assert r.rc == 3 and "usable" in r.out and "does not fit" in r.out


def test_a_smaller_quantization_counts_its_own_repacked_copy(models):
    """On an AVX2 CPU the Q4_0 matrices are copied again: a smaller Q4_0 of weights w needs w and its copy
    in the same proportion, so the suggestion is the largest w whose plan fits."""
    f = facts_of(models["llama3.1-70b"])
    cpu = ("x86_64", ("avx2",))
    budget = 30 * GiB
    p = fit.plan(f, [], "cpu", fit.Run(ctx=4096), cpu_budget=budget + fit.reserve("cpu"), cpu=cpu)
    assert p.status == "no"
    q = next(s for s in p.suggest if s.kind == "quant")
    h = p.host
    rest = h.total - h.weights - h.repack
    assert h.repack > 0
    w = q.bytes
    assert w + w * h.repack // h.weights + rest <= budget < (w + GiB // 8) * (h.weights + h.repack) // h.weights + rest


def test_one_layer_of_experts_is_said_as_one(models):
    f = facts_of(models["qwen3-30b-a3b"])
    p = fit.plan(f, [gpu(12)], "cuda", fit.Run(ctx=8192))
    one = replace(p, layout=replace(p.layout, n_cpu_moe=1))
    assert "the experts of the first layer in" in headline(one) and "first 1 layers" not in headline(one)


def test_read_headers_offline_says_how_many_on_stderr(cli, tmp_path):
    r = cli("models", "llamacpp", "--root", machine("linux-ubuntu24.04-rtx4090"), "--read-headers",
            "--cache-dir", str(tmp_path), env={"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_CACHE": str(tmp_path)})
    assert r.rc == 0, r.err
    assert "0 GGUF headers read now" in r.err and "not tried after the first 3 failed" in r.err
    said = [x for x in r.err.splitlines() if x.startswith("pick-backend: ") and "GGUF headers" not in x]
    assert len(said) == 3 and all("the connection was refused" in x for x in said), said  # one cause, one wording
    lines = r.out.splitlines()
    table_names = {x.split()[0] for x in lines[2:] if x.strip()}
    assert not any(":" in x.split()[0] for x in lines[2:] if x.strip()), "an error line in the table's output"
    assert table_names


def test_a_backend_that_does_not_run_says_which_do(cli, models, tmp_path):
    r = cli("plan", "llamacpp", "--model", models["qwen3-4b"], "--gpu", "RTX 4090", "--backend", "rocm",
            "--cache-dir", str(tmp_path))
    assert r.rc == 3 and "rocm does not run here" in r.err and "--backend cuda" in r.err


def test_another_backend_that_fits_more_is_named(cli, models, tmp_path):
    """An RTX 4090 and an RX 7900 XTX: CUDA serves one of them, Vulkan both; a 70B that CUDA runs with
    part of it in system memory fits whole over both through Vulkan."""
    r = cli("plan", "llamacpp", "--model", models["llama3.1-70b"], "--backend", "cuda",
            "--root", machine("linux-ubuntu24.04-7950x-rx7900xtx-rtx4090"), "--cache-dir", str(tmp_path), "--json")
    assert r.rc == 0, r.err
    p = r.json()
    assert p["fit"]["status"] == "partial"
    assert p["better_backend"]["backend"] == "vulkan" and p["better_backend"]["status"] == "split"


def test_exec_without_an_install_names_the_server_on_path(cli, models, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "llama-server"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    r = cli("plan", "llamacpp", "--model", models["qwen3-4b"], "--backend", "cpu", "--exec",
            "--cache-dir", str(tmp_path / "cache"), env={"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
    assert r.rc == 4 and str(fake) in r.err and "--prefer-system" in r.err


def test_the_plan_json_is_the_typed_plan(models):
    f = facts_of(models["qwen3-30b-a3b"])
    p = fit.plan(f, [gpu(12)], "cuda", fit.Run(ctx=8192))
    j = fit_json(p)
    assert j["status"] == p.status.value and j["n_cpu_moe"] == p.n_cpu_moe and j["cpu_bytes"] == p.host.total
    assert j["instead_of"]["status"] == p.instead_of.status.value
    assert j["devices"][0]["needs_bytes"] == p.devices[0].total


def test_a_cpu_build_is_not_better_than_part_on_the_gpu(cli, models, tmp_path):
    r = cli("plan", "llamacpp", "--model", models["qwen3-30b-a3b"], "--root", machine("linux-ubuntu24.04-rtx4090"),
            "--parallel", "2", "--ctx-size", "40960", "--cache-dir", str(tmp_path), "--json")
    assert r.rc == 0 and r.json()["fit"]["status"] == "experts" and r.json()["better_backend"] is None


def test_a_narrow_terminal_wraps_the_plan_under_its_own_lines(models, tmp_path):
    from conftest import run_tty

    r = run_tty("plan", "llamacpp", "--model", models["qwen3-30b-a3b"], "--root", machine("linux-debian12-gtx1080"),
                "--ctx-size", "16384", "--cache-dir", str(tmp_path), columns=60)
    lines = r.out.splitlines()
    head = lines[:lines.index("run:")] if "run:" in lines else lines
    assert all(len(x) <= 60 for x in head), [x for x in head if len(x) > 60]
    i = next(i for i, x in enumerate(head) if x.startswith("  rather than"))
    assert head[i + 1].startswith("    ")  # its continuation, under it


@pytest.mark.parametrize("gpus,each", [(["RTX 4090"], False), (["RTX 4090", "RTX 4090"], True)])
def test_described_memory_is_each_only_for_several_gpus(cli, gpus, each):
    r = cli("llamacpp", *[x for g in gpus for x in ("--gpu", g)], "--vram", "8G")
    assert r.rc == 0, r.err
    said = r.out + r.err
    assert "8.0 GiB of VRAM" in said and ("8.0 GiB of VRAM each" in said) == each
