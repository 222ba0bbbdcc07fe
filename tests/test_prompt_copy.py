"""A prompt's copies to the GPU where part of a model is in system memory (selector/models/prompt_copy.py),
held to llama.cpp b11312 with CUDA on this repository's H200 (tests/data/device/h200-cuda-b11312): what
llama-server kept in system memory, and how long llama-bench's prompts took with it there; and the
weighing of -ngl K against --n-cpu-moe N by a turn at the planned depth, prompt included."""

import json
import os
import re
import statistics

import pytest
from click.testing import CliRunner

import engine_gguf
import gguf_models as gm
from conftest import machine
from selector.models import facts as model_facts
from selector.models import fit, gguf_header, planner, prompt_copy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H200 = os.path.join(ROOT, "tests", "data", "device", "h200-cuda-b11312")
MIB = 1 << 20


def _facts(tmp_path, key):
    """The facts of a model the capture ran, at its real widths (a header and holes: the tensors' sizes
    are the file's)."""
    path = engine_gguf.write(str(tmp_path / f"{key}.gguf"), key, holes=True)
    head = gguf_header.read(path)
    return model_facts.from_headers(path, [head]), head


def _tensor_bytes(head, name):
    return head["tensors"][name]["bytes"]


def _bench(name):
    text = open(os.path.join(H200, name), encoding="utf-8").read()
    return json.loads(text[:text.rindex("]") + 1])


def _mapped_mib(run):
    log = open(os.path.join(H200, "runs", run, "server.log"), encoding="utf-8").read()
    return float(re.search(r"CPU_Mapped model buffer size = +([\d.]+) MiB", log).group(1))


def test_a_prompt_batch_copies_the_layers_llama_server_kept_in_system_memory(tmp_path):
    """-ngl 23 of 33 (the plan's line for a 4 GiB GPU): llama-server mapped ten layers and the token
    embeddings in system memory (the output layer is offloaded first); a prompt batch copies the ten layers,
    not the embeddings (looked up, never multiplied)."""
    run = "10-llama3-8b-q4_0-c4096-p1-f16-vram-4G"
    facts, head = _facts(tmp_path, "llama3-8b-q4_0")
    plan = json.load(open(os.path.join(H200, "runs", run, "plan.json"), encoding="utf-8"))["fit"]
    assert (plan["status"], plan["ngl"]) == ("partial", 23)
    got = prompt_copy.prompt_copy(facts, fit.Layout(fit.Status.PARTIAL, 23), 0, fit.Run(ctx=plan["ctx"]))
    assert got.kv == 0
    assert got.weights / MIB == pytest.approx(_mapped_mib(run) - _tensor_bytes(head, "token_embd.weight") / MIB,
                                              abs=0.02)


def test_with_the_experts_in_system_memory_a_batch_copies_the_experts_it_uses(tmp_path):
    """--n-cpu-moe 7: the experts of the first seven layers, every one of them for a batch of 512 tokens each
    routed to 8 of 128 (llama.cpp copies only the experts a batch uses), none of the KV cache."""
    facts, head = _facts(tmp_path, "qwen3moe-30b-a3b-12l-q4_0")
    exps = sum(_tensor_bytes(head, f"blk.{il}.ffn_{w}_exps.weight") for il in range(7) for w in ("gate", "up", "down"))
    got = prompt_copy.prompt_copy(facts, fit.Layout(fit.Status.EXPERTS, 13, n_cpu_moe=7), 8192, fit.Run(ctx=8192))
    assert (got.weights, got.kv) == (exps, 0)


def test_the_copy_rate_is_what_the_h200_capture_copied_at(tmp_path):
    """llama-bench's pp512 at -ngl 16 and 24 of 33, depths 0 and 8192: the time beyond the whole model on the
    GPU is the copies (the layers in system memory and their KV cache at that depth), at the table's rate
    within 20% each; the rate is their median."""
    facts, _head = _facts(tmp_path, "llama3-8b-q4_0")
    rows = {(r["n_gpu_layers"], r["n_depth"]): r["avg_ts"] for r in _bench("bench-ngl.json") if r["n_prompt"]}
    rates = []
    for ngl in (16, 24):
        for depth in (0, 8192):
            c = prompt_copy.prompt_copy(facts, fit.Layout(fit.Status.PARTIAL, ngl), depth, fit.Run(ctx=16384))
            beyond = 512 / rows[(ngl, depth)] - 512 / rows[(33, depth)]
            rates.append(c.bytes / beyond / 1e9)
            assert c.seconds == pytest.approx(beyond, rel=0.20), (ngl, depth)
    assert prompt_copy.table()["gbps"] == pytest.approx(statistics.median(rates), abs=0.05)


def test_a_batch_takes_nearly_every_expert_and_a_small_one_is_not_copied(tmp_path):
    assert prompt_copy.experts_used(128, 8, 1) == pytest.approx(8 / 128)
    assert prompt_copy.experts_used(128, 8, 512) == pytest.approx(1.0)
    facts, _head = _facts(tmp_path, "qwen3moe-30b-a3b-12l-q4_0")
    lay = fit.Layout(fit.Status.EXPERTS, 13, n_cpu_moe=3)
    assert prompt_copy.prompt_copy(facts, lay, 0, fit.Run(ctx=4096)).weights == sum(facts["expert_bytes"][:3])
    # a context of 16 tokens: no micro-batch reaches the 32 tokens llama.cpp takes to the GPU
    assert prompt_copy.prompt_copy(facts, lay, 0, fit.Run(ctx=16)) is None
    assert prompt_copy.prompt_copy(facts, fit.Layout(fit.Status.FITS, 13), 0, fit.Run(ctx=4096)) is None


def _plan(model, *args):
    from selector.cli import main

    runner = CliRunner()
    with runner.isolation(env={"COLUMNS": "200"}) as (out, _err, _):
        try:
            main(["--root", machine("linux-ubuntu24.04-rtx4090"), "plan", "llamacpp", "--model", model,
                  "--backend", "cuda", "--json", *args])
        except SystemExit as e:
            assert not e.code
        return json.loads(out.getvalue())


def _turn(row):
    t = prompt_copy.table()
    return t["turn"]["generated"] / row["tokens_per_s"] + row["prompt_copy_bytes"] / (t["gbps"] * 1e9)


def test_a_slow_link_to_the_gpu_weighs_the_prompt_copies(tmp_path, monkeypatch):
    """The replayed RTX 4090 given 16 GiB, Qwen3-30B-A3B-Instruct-2507 at 4096: --n-cpu-moe generates a little
    faster, but copies more per prompt batch than -ngl.  At the captured rate the generation decides; over
    a link seven times slower (an eGPU's, a riser's) the copies do, and the plan keeps -ngl's layers there."""
    model = gm.write(str(tmp_path / "Qwen3-30B-A3B-Instruct-2507-Q4_K_M.gguf"), "qwen3-30b-a3b", ctx_train=262144)
    args = ("--ctx-size", "4096", "--vram", "16G")
    p = _plan(model, *args)
    mine, other = p["speed_estimate"]["depths"][-1], p["fit"]["instead_of"]["depths"][-1]
    assert p["fit"]["status"] == "experts" and _turn(mine) < _turn(other)
    assert mine["tokens_per_s"] > other["tokens_per_s"] and mine["prompt_copy_bytes"] > other["prompt_copy_bytes"]
    table = dict(prompt_copy.table(), gbps=1.0)
    monkeypatch.setattr(prompt_copy, "table", lambda: table)
    slow = _plan(model, *args)
    assert slow["fit"]["status"] == "partial" and slow["fit"]["instead_of"]["status"] == "experts"
    assert _turn(slow["speed_estimate"]["depths"][-1]) < _turn(slow["fit"]["instead_of"]["depths"][-1])


def test_the_plan_says_what_each_layout_s_prompt_batches_copy_at_the_planned_depth(tmp_path):
    """Issue 40's RTX 4090 case: the line that says why the experts go to system memory gives both layouts'
    copies per prompt batch at depth 100000 (-ngl's layers bring their KV cache of 100000 positions)."""
    from conftest import run_cli

    model = gm.write(str(tmp_path / "Qwen3-30B-A3B-Instruct-2507-Q4_K_M.gguf"), "qwen3-30b-a3b", ctx_train=262144)
    p = _plan(model, "--ctx-size", "100000")
    mine, other = p["speed_estimate"]["depths"], p["fit"]["instead_of"]["depths"]
    assert other[1]["prompt_copy_bytes"] > other[0]["prompt_copy_bytes"]  # the KV cache at depth
    assert mine[1]["prompt_copy_bytes"] == mine[0]["prompt_copy_bytes"]  # the experts' KV is on the GPU
    text = run_cli("--root", machine("linux-ubuntu24.04-rtx4090"), "plan", "llamacpp", "--model", model,
                   "--ctx-size", "100000", "--backend", "cuda").out
    assert (f"each 512-token prompt batch at depth 100000 would copy {planner.size(other[1]['prompt_copy_bytes'])} "
            f"from system memory to the GPU against {planner.size(mine[1]['prompt_copy_bytes'])}") in text


@pytest.mark.parametrize("ubatch", [512, 2048])
@pytest.mark.parametrize("depth", [0, 16384])
@pytest.mark.parametrize("ngl", [16, 24])
def test_the_copies_follow_the_micro_batch_they_were_not_fitted_to(tmp_path, ngl, depth, ubatch):
    """A second H200 run (tests/data/device/h200-cuda-b11312-prompt): a prompt of 2048 tokens in micro-batches
    of 512 and of 2048 (a quarter as many copies), at depths 0 and 16384.  The time beyond the whole model on
    the GPU is what the table's rate, fitted to micro-batches of 512 in the first run, says within 25%."""
    facts, _head = _facts(tmp_path, "llama3-8b-q4_0")
    path = os.path.join(ROOT, "tests", "data", "device", "h200-cuda-b11312-prompt", "bench-ngl-ub.json")
    text = open(path, encoding="utf-8").read()
    rows = {(r["n_gpu_layers"], r["n_ubatch"], r["n_depth"]): r["avg_ts"] for r in json.loads(text[:text.rindex("]") + 1])}
    beyond = 2048 / rows[(ngl, ubatch, depth)] - 2048 / rows[(33, ubatch, depth)]
    run = fit.Run(ctx=32768, ubatch=ubatch)
    copy = prompt_copy.prompt_copy(facts, fit.Layout(fit.Status.PARTIAL, ngl), depth, run)
    assert 2048 // run.tokens * copy.seconds == pytest.approx(beyond, rel=0.25)
