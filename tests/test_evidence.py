"""Published llama-bench results: the catalog (its validation, its facts against the tables), the tool
that turns a pasted table into entries, and what the pick says with them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from probes.inputs import InputError
from selector import evidence

sys.path.insert(0, os.path.join(ROOT, "tools"))
import add_bench  # noqa: E402

PASTED = os.path.join(ROOT, "tests", "data", "llama-bench-pasted")


def pasted(name: str) -> str:
    with open(os.path.join(PASTED, name), encoding="utf-8") as f:
        return f.read()


# ------------------------------------------------------------------------------------------------
# the tool: a pasted table into entries


def test_a_pasted_table_becomes_entries_held_to_the_rows_it_came_from():
    rows, meta = add_bench.parse_table(pasted("rtx2070-vulkan-pr13324.txt"))
    es = add_bench.entries(rows, meta, "https://github.com/ggml-org/llama.cpp/pull/13324", "comment by nalf3in",
                           "2025-05-08")
    got = [(e["gpu"], e["match"], e["family"], e["backend"], e["build"], e["model"], e["size"], e["ngl"], e["fa"],
            e["test"], e["tps"], e["pair"]) for e in es]
    assert got == [
        ("NVIDIA GeForce RTX 2070", "RTX 2070", "sm_75", "vulkan", "b5298", "qwen3 4B Q4_K - Medium", "2.37 GiB", 99, 1,
         "pp512", 139.97, None),
        ("NVIDIA GeForce RTX 2070", "RTX 2070", "sm_75", "vulkan", "b5298", "qwen3 4B Q4_K - Medium", "2.37 GiB", 99, 1,
         "tg128", 35.87, None)]
    assert all(e["quote"] in pasted("rtx2070-vulkan-pr13324.txt") for e in es)
    assert [r.tps for r in evidence.parse({"results": es})] == [139.97, 35.87]


def test_rows_that_did_not_offload_or_whose_backend_is_not_llama_cpps_are_left_out_and_two_backends_pair():
    rows, meta = add_bench.parse_table(pasted("rx6800xt-opencl-vulkan-rocm-pr2059.txt"))
    es = add_bench.entries(rows, meta, "https://github.com/ggml-org/llama.cpp/pull/2059", "comment by 0cc4m",
                           "2024-01-22", gpu="AMD Radeon RX 6800 XT")
    assert [(e["backend"], e["test"], e["tps"]) for e in es] == [
        ("vulkan", "pp512", 374.44), ("vulkan", "tg128", 34.13), ("rocm", "pp512", 684.11)]  # no OpenCL, no ngl 0
    assert {e["match"] for e in es} == {"RX 6800 XT"} and {e["family"] for e in es} == {"gfx1030"}
    assert len({e["pair"] for e in es}) == 1 and es[0]["pair"]
    # the comparison is the test both ran: ROCm's prompt processing, faster first; generation was not compared
    rows = evidence.comparison(evidence.parse({"results": es}), {"vulkan", "rocm"})
    assert [(r.backend, r.test, r.tps) for r in rows] == [("rocm", "pp512", 684.11), ("vulkan", "pp512", 374.44)]
    assert evidence.comparison(evidence.parse({"results": es}), {"vulkan", "rocm"}, "tg") == []


# constructed, not published: one table of a CUDA 8B model (with and without flash attention) and a
# Vulkan 70B model: two backends, but no model run on both
TWO_MODELS = """Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes
| model                          |       size |     params | backend    | ngl | fa |            test |                  t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | -: | --------------: | -------------------: |
| llama 8B Q4_K - Medium         |   4.58 GiB |     8.03 B | CUDA       |  99 |  0 |           tg128 |        150.00 ± 0.10 |
| llama 8B Q4_K - Medium         |   4.58 GiB |     8.03 B | CUDA       |  99 |  1 |           tg128 |        155.00 ± 0.10 |
| llama 70B Q4_K - Medium        |  39.59 GiB |    70.55 B | Vulkan     |  99 |  1 |           tg128 |          9.00 ± 0.10 |
| llama 8B Q4_K - Medium         |   4.58 GiB |     8.03 B | Vulkan     |  99 |  0 |           tg128 |        140.00 ± 0.10 |

build: 141a908a (5298)
"""


def test_of_several_models_compared_that_day_the_majoritys_middle_one_is_shown_not_the_first_by_name():
    """nihmar's RX 9060 XT post (2026-09-28) ran three models on ROCm and Vulkan.  pp512: qwen35 27B IQ3_S
    vulkan 622.93 vs rocm 498.46; gemma4 12B Q4_0 rocm 1599.74 vs vulkan 1533.09; gemma4 E4B rocm 3527.5 vs
    vulkan 2557.57.  ROCm led prompts on two of three, so the prompt comparison is one where it led (the
    smaller lead of two: the 12B), and pp512, the default test, decides before pp2048.  tg128: Vulkan led
    on all three (+8.6%, +3.5%, +18.0%): the middle, the 27B.  tiry's RTX 4070 Ti (2026-01-06): CUDA led
    tg128 on 3B F16 (+3.3%), 8B Q8_0 (+1.3%), 14B Q4_K_M (+2.9%): the middle, the 14B."""
    results = evidence.load()
    pp = evidence.comparison([r for r in results if r.match == "RX 9060 XT"], {"vulkan", "rocm"}, "pp")
    assert [(r.backend, r.test, r.tps) for r in pp][:2] == [("rocm", "pp512", 1599.74), ("vulkan", "pp512", 1533.09)]
    tg = evidence.comparison([r for r in results if r.match == "RX 9060 XT"], {"vulkan", "rocm"}, "tg")
    assert [(r.backend, r.tps) for r in tg] == [("vulkan", 21.77), ("rocm", 20.04)]
    ti = evidence.comparison([r for r in results if r.match == "RTX 4070 Ti"], {"cuda", "vulkan"})
    assert [(r.backend, r.test, r.tps) for r in ti][:2] == [("cuda", "tg128", 54.12), ("vulkan", "tg128", 52.59)]
    # the same rows in any order give the same answer
    assert evidence.comparison(list(reversed(results)), {"cuda", "vulkan"}) == evidence.comparison(results, {"cuda", "vulkan"})


def _pair(pair, model, figures, date="2026-11-01"):
    """Rows of one post's pair on an RX 7900 XTX: figures {(backend, test): t/s}."""
    return [_entry(gpu="AMD Radeon RX 7900 XTX", match="RX 7900 XTX", family="gfx1100", backend=b, test=t, tps=v,
                   pair=pair, model=model, date=date) for (b, t), v in figures.items()]


def test_the_deciding_test_is_generation_then_llama_benchs_default_then_the_shortest():
    # generation before prompts, even where the post ran no tg128 and did run the default pp512
    rows = evidence.comparison(evidence.parse({"results": _pair("p", "m", {
        ("vulkan", "pp512"): 900.0, ("rocm", "pp512"): 1000.0, ("vulkan", "tg256"): 60.0, ("rocm", "tg256"): 50.0})}),
        {"vulkan", "rocm"})
    assert [(r.backend, r.test) for r in rows][:2] == [("vulkan", "tg256"), ("rocm", "tg256")]
    # tg128 before a shorter tg64; of two non-default prompt tests the shorter, by number not by name
    rows = evidence.comparison(evidence.parse({"results": _pair("p", "m", {
        ("vulkan", "tg64"): 70.0, ("rocm", "tg64"): 80.0, ("vulkan", "tg128"): 60.0, ("rocm", "tg128"): 50.0})}),
        {"vulkan", "rocm"})
    assert rows[0].test == "tg128" and rows[0].backend == "vulkan"
    rows = evidence.comparison(evidence.parse({"results": _pair("p", "m", {
        ("vulkan", "pp2048"): 700.0, ("rocm", "pp2048"): 800.0, ("vulkan", "pp256"): 600.0, ("rocm", "pp256"): 500.0})}),
        {"vulkan", "rocm"}, "pp")
    assert rows[0].test == "pp256" and rows[0].backend == "vulkan"


def test_an_exact_tie_keeps_the_catalogs_order_whatever_order_the_rows_come_in():
    rows = _pair("a", "model a", {("vulkan", "tg128"): 110.0, ("rocm", "tg128"): 100.0}) + \
        _pair("b", "model b", {("vulkan", "tg128"): 100.0, ("rocm", "tg128"): 110.0})
    for given in (rows, rows[::-1]):
        assert evidence.comparison(evidence.parse({"results": given}), ["vulkan", "rocm"])[0].backend == "vulkan"
        assert evidence.comparison(evidence.parse({"results": given}), ["rocm", "vulkan"])[0].backend == "rocm"


def test_when_each_backend_led_on_as_many_models_the_larger_lead_is_shown():
    results = evidence.parse({"results": _pair("a", "model a", {("vulkan", "tg128"): 110.0, ("rocm", "tg128"): 100.0}) +
                              _pair("b", "model b", {("vulkan", "tg128"): 100.0, ("rocm", "tg128"): 150.0})})
    assert [r.backend for r in evidence.comparison(results, {"vulkan", "rocm"})] == ["rocm", "vulkan"]


def test_a_comparison_is_of_one_model_with_one_setting_never_across_models():
    rows, meta = add_bench.parse_table(TWO_MODELS)
    es = add_bench.entries(rows, meta, "https://github.com/x/y/issues/1", "comment by a", "2026-01-01")
    pairs = {(e["model"], e["fa"], e["backend"]): e["pair"] for e in es}
    # the 8B without flash attention ran on both: a pair; the 8B with it and the 70B ran on one backend each
    assert pairs[("llama 8B Q4_K - Medium", 0, "cuda")] == pairs[("llama 8B Q4_K - Medium", 0, "vulkan")] is not None
    assert pairs[("llama 8B Q4_K - Medium", 1, "cuda")] is None and pairs[("llama 70B Q4_K - Medium", 1, "vulkan")] is None
    rows = evidence.comparison(evidence.parse({"results": es}), {"cuda", "vulkan"})
    assert [(r.backend, r.tps) for r in rows] == [("cuda", 150.0), ("vulkan", 140.0)]
    # rows a catalog filed under one pair still compare only a model against itself, one setting at a time
    same = [{**e, "pair": "one-post"} for e in es]
    rows = evidence.comparison(evidence.parse({"results": same}), {"cuda", "vulkan"})
    assert {(r.model, r.fa) for r in rows} == {("llama 8B Q4_K - Medium", 0)} and len(rows) == 2


def test_entries_round_trip_through_the_table_they_render():
    rows, meta = add_bench.parse_table(pasted("rtx2070-vulkan-pr13324.txt"))
    url, where = "https://github.com/ggml-org/llama.cpp/pull/13324", "comment by nalf3in"
    es = add_bench.entries(rows, meta, url, where, "2025-05-08")
    again = add_bench.entries(*add_bench.parse_table(add_bench.render(es)), url, where, "2025-05-08")
    strip = lambda xs: [{k: v for k, v in x.items() if k != "quote"} for x in xs]  # noqa: E731
    assert strip(again) == strip(es)


def _tool(*args, input=""):
    return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "add_bench.py"), *args], input=input,
                          capture_output=True, text=True)


SOURCE = ("--url", "https://github.com/ggml-org/llama.cpp/pull/13324", "--where", "comment by nalf3in",
          "--date", "2025-05-08")


def test_the_tool_adds_new_rows_once_to_the_rows_read(tmp_path):
    to = tmp_path / "read-added.json"
    for added in (2, 0):
        r = _tool(*SOURCE, "--write", "--to", str(to), input=pasted("rtx2070-vulkan-pr13324.txt"))
        assert r.returncode == 0, r.stderr
        assert f"added {added} of 2 rows" in r.stdout
    rows = json.loads(to.read_text())
    assert [x["tps"] for x in rows] == [139.97, 35.87]
    assert len(evidence.parse({"results": rows})) == 2  # what build.py makes of them loads


@pytest.mark.parametrize("text,code,says", [
    ("no table here\n", 5, "no llama-bench table"),
    ("| model | size | params | backend | ngl | test | t/s |\n|---|---|---|---|---|---|---|\n"
     "| llama 7B Q4_0 | 3.56 GiB | 6.74 B | Vulkan | 99 | tg128 | 50.00 ± 1.00 |\n", 2, "names no device"),
    ('["x", 1]', 5, "list of runs"),
    ('[{"n_prompt": 512}]', 5, "n_prompt, n_gen and avg_ts"),
    ('[{"n_prompt": 512, "n_gen": 0, "avg_ts": 9.5, "gpu_info": "AMD Radeon RX 7900 XTX, NVIDIA GeForce RTX 4090"}]',
     5, "several GPUs"),
])
def test_what_the_tool_cannot_file_it_refuses_in_words(text, code, says):
    r = _tool(*SOURCE, input=text)
    assert r.returncode == code and says in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_paste_of_two_machines_or_two_builds_is_refused_not_merged():
    one = pasted("rtx2070-vulkan-pr13324.txt")
    other = one.replace("NVIDIA GeForce RTX 2070", "AMD Radeon RX 7900 XTX").replace("(5298)", "(6000)")
    r = _tool(*SOURCE, input=one + "\n" + other)
    assert r.returncode == 5 and "2 devices" in r.stderr
    r = _tool(*SOURCE, input=one + "\n" + one.replace("(5298)", "(6000)").split("ggml_vulkan: 0")[0] +
              "| model | size | params | backend | ngl | test | t/s |\n|---|---|---|---|---|---|---|\n"
              "| llama 7B Q4_0 | 3.56 GiB | 6.74 B | Vulkan | 99 | tg128 | 50.00 ± 1.00 |\nbuild: 0000000 (6000)\n")
    assert r.returncode == 5 and "2 builds" in r.stderr


def test_llama_bench_json_runs_at_a_depth_keep_their_depth():
    """llama-bench -d: a run at n_depth 4096 read the KV cache of 4096 positions per token; it is kept, with its
    depth, not filed as an empty-context run (nor dropped: users run long contexts)."""
    base = {"model_type": "llama 7B Q4_0", "model_size": 3825205248, "model_n_params": 6738415616,
            "backends": "Vulkan", "n_gpu_layers": 99, "flash_attn": False, "gpu_info": "AMD Radeon RX 7900 XTX",
            "build_number": 6000}
    runs = [{**base, "n_prompt": 512, "n_gen": 0, "n_depth": 0, "avg_ts": 3000.0},
            {**base, "n_prompt": 0, "n_gen": 128, "n_depth": 0, "avg_ts": 160.0},
            {**base, "n_prompt": 512, "n_gen": 0, "n_depth": 4096, "avg_ts": 999.0}]
    r = _tool(*SOURCE, input=json.dumps(runs))
    assert r.returncode == 0, r.stderr
    got = [(e["test"], e.get("depth", 0), e["tps"], e["match"], e["build"]) for e in json.loads(r.stdout)]
    assert got == [("pp512", 0, 3000.0, "RX 7900 XTX", "b6000"), ("tg128", 0, 160.0, "RX 7900 XTX", "b6000"),
                   ("pp512", 4096, 999.0, "RX 7900 XTX", "b6000")]


def test_markdown_rows_at_a_depth_keep_their_depth_and_a_row_without_a_build_says_why():
    """The row of ggml-org/llama.cpp#19255 (RX 7900 XTX, Vulkan, build 7901) as llama-bench printed it."""
    text = ("ggml_vulkan: 0 = AMD Radeon RX 7900 XTX (RADV NAVI31) (radv) | uma: 0 |\n"
            "| model                          |       size |     params | backend    | ngl | fa |            test |                  t/s |\n"
            "| ------------------------------ | ---------: | ---------: | ---------- | --: | -: | --------------: | -------------------: |\n"
            "| deepseek2 30B.A3B IQ4_XS - 4.25 bpw |  15.15 GiB |    29.94 B | Vulkan     |  99 |  1 |           tg128 |        102.97 ± 0.08 |\n"
            "| deepseek2 30B.A3B IQ4_XS - 4.25 bpw |  15.15 GiB |    29.94 B | Vulkan     |  99 |  1 |   tg128 @ d4096 |         41.81 ± 0.01 |\n")
    r = _tool(*SOURCE, input=text)
    assert r.returncode == 0, r.stderr
    es = json.loads(r.stdout)
    assert [(e["test"], e.get("depth", 0), e["tps"]) for e in es] == [("tg128", 0, 102.97), ("tg128", 4096, 41.81)]
    assert all(e["build"] is None and e["no_build"] for e in es)  # the paste printed no build: line
    r = _tool(*SOURCE, "--no-build", "a release named by its date", input=text)
    assert {e["no_build"] for e in json.loads(r.stdout)} == {"a release named by its date"}
    # the catalog refuses a row without a build that does not say why
    from probes.host import InputError

    row = {k: v for k, v in es[0].items() if k != "no_build"}
    with pytest.raises(InputError, match="no_build"):
        evidence.parse({"results": [row]}, "x.json")


@pytest.mark.parametrize("args,code", [(("--date", "2026-13-99"), 2), (("--url", "http://x"), 2)])
def test_a_bad_date_or_url_is_a_usage_error(args, code):
    a = list(SOURCE)
    a[a.index(args[0]) + 1] = args[1]
    assert _tool(*a, input=pasted("rtx2070-vulkan-pr13324.txt")).returncode == code


def test_a_date_after_today_is_refused_it_would_outrank_every_comparison():
    a = list(SOURCE)
    a[a.index("--date") + 1] = "2099-01-01"
    r = _tool(*a, input=pasted("rtx2070-vulkan-pr13324.txt"))
    assert r.returncode == 2 and "after today" in r.stderr


def test_gpu_names_which_device_ran_and_cannot_overrule_the_paste():
    one = pasted("rtx2070-vulkan-pr13324.txt")
    r = _tool(*SOURCE, "--gpu", "RTX 4090", input=one)
    assert r.returncode == 2 and "not a device the paste names" in r.stderr
    r = _tool(*SOURCE, "--gpu", "NVIDIA GeForce RTX 2070", input=one)
    assert r.returncode == 0 and {e["match"] for e in json.loads(r.stdout)} == {"RTX 2070"}
    # of two devices a paste names, --gpu names one of them, not a third
    two = one.replace("ggml_vulkan: 0 = NVIDIA GeForce RTX 2070 (NVIDIA) |",
                      "ggml_vulkan: 0 = NVIDIA GeForce RTX 2070 (NVIDIA) |\nggml_vulkan: 1 = AMD Radeon RX 7900 XTX (RADV NAVI31) |")
    assert _tool(*SOURCE, "--gpu", "AMD Radeon RX 7900 XTX", input=two).returncode == 0
    assert _tool(*SOURCE, "--gpu", "RTX 4090", input=two).returncode == 2


def test_a_backend_that_cannot_run_on_the_gpu_named_refuses_the_paste():
    rocm_on_nvidia = pasted("rtx2070-vulkan-pr13324.txt").replace("| Vulkan     |", "| ROCm       |")
    r = _tool(*SOURCE, input=rocm_on_nvidia)
    assert r.returncode == 5 and "rocm row on the RTX 2070" in r.stderr


def test_auto_offload_is_not_every_layer_and_2023_metal_offloaded_all_with_any_ngl():
    text = pasted("rtx2070-vulkan-pr13324.txt").replace("|  99 |  1 |           tg128 |", "|  -1 |  1 |           tg128 |")
    assert [e["test"] for e in json.loads(_tool(*SOURCE, input=text).stdout)] == ["pp512"]
    metal = ("| model | size | params | backend | ngl | test | t/s |\n|---|---|---|---|---|---|---|\n"
             "| LLaMA 7B mostly Q4_0 | 3.56 GiB | 6.74 B | Metal | 1 | tg128 | 88.54 ± 0.05 |\n")
    a = ["--url", "https://github.com/ggml-org/llama.cpp/pull/2917", "--where", "ggerganov", "--gpu", "Apple M2 Ultra"]
    r = _tool(*a, "--date", "2023-09-04", input=metal)
    assert r.returncode == 0 and json.loads(r.stdout)[0]["ngl"] == 1
    assert _tool(*a, "--date", "2025-09-04", input=metal).returncode == 5  # a layer-by-layer build: one layer
    assert _tool(*a, "--date", "2022-09-04", input=metal).returncode == 2  # before llama.cpp existed


def test_rows_that_may_have_left_layers_on_the_cpu_are_left_out():
    """llama-bench's -ngl defaults to 99, every layer of any model here; a row of -ngl 20 may have run
    layers on the CPU, so it speaks for no GPU backend (nor pairs with one that offloaded)."""
    text = pasted("rtx2070-vulkan-pr13324.txt").replace("|  99 |  1 |           tg128 |", "|  20 |  1 |           tg128 |")
    r = _tool(*SOURCE, input=text)
    assert r.returncode == 0 and [e["test"] for e in json.loads(r.stdout)] == ["pp512"]
    only = "\n".join(line for line in text.splitlines() if "pp512" not in line)
    r = _tool(*SOURCE, input=only)
    assert r.returncode == 5 and "none of the 1 rows" in r.stderr and "ngl 99" in r.stderr


@pytest.mark.parametrize("change,says", [
    ({"model_size": "big"}, "model_size is a number of bytes"), ({"gpu_info": ["RTX 4090"]}, "gpu_info is text"),
    ({"backends": ["CUDA"]}, "backends is text"), ({"build_number": "6000"}, "build_number is a number"),
    ({"n_gpu_layers": True}, "n_gpu_layers is a number"), ({"model_size": 10 ** 400}, "model_size is a number of bytes"),
    ({"avg_ts": True}, "avg_ts are llama-bench's fields"), ({"n_gen": 10 ** 30}, "not a llama-bench run's figures"),
    ({"avg_ts": float("nan")}, "not a llama-bench run's figures"), ({"flash_attn": 2}, "flash_attn is true, false, 0 or 1"),
    ({"n_depth": "0"}, "n_depth is a number")])
def test_malformed_llama_bench_json_is_named_by_its_field_not_a_traceback(change, says):
    run = {"model_type": "llama 7B Q4_0", "model_size": 3825205248, "model_n_params": 6738415616, "backends": "Vulkan",
           "n_gpu_layers": 99, "gpu_info": "AMD Radeon RX 7900 XTX", "build_number": 6000, "n_prompt": 0, "n_gen": 128,
           "n_depth": 0, "avg_ts": 160.0}
    r = _tool(*SOURCE, input=json.dumps([{**run, **change}]))
    assert r.returncode == 5 and says in r.stderr and "Traceback" not in r.stderr
    r = _tool(*SOURCE, input="[" * 100000)
    assert r.returncode == 5 and "not llama-bench JSON" in r.stderr and "Traceback" not in r.stderr


def test_a_rows_file_that_is_not_a_list_is_refused_and_left_as_it_was(tmp_path):
    to = tmp_path / "x.json"
    to.write_text('{"results": []}')
    r = _tool(*SOURCE, "--write", "--to", str(to), input=pasted("rtx2070-vulkan-pr13324.txt"))
    assert r.returncode == 5 and "not a list" in r.stderr and to.read_text() == '{"results": []}'
    r = _tool(*SOURCE, "--write", "--to", str(tmp_path), input=pasted("rtx2070-vulkan-pr13324.txt"))
    assert r.returncode == 5 and "Traceback" not in r.stderr


# ------------------------------------------------------------------------------------------------
# the catalog


def _entry(**change):
    rows, meta = add_bench.parse_table(pasted("rtx2070-vulkan-pr13324.txt"))
    e = add_bench.entries(rows, meta, "https://github.com/ggml-org/llama.cpp/pull/13324", "comment", "2025-05-08")[0]
    e.update(change)
    return e


@pytest.mark.parametrize("change,says", [
    ({"backend": "opencl"}, "results[0].backend: 'opencl' is not one of"),
    ({"test": "pp512+tg128"}, "results[0].test"),
    ({"date": "May 2025"}, "results[0].date"),
    ({"url": "http://example.com"}, "results[0].url"),
    ({"tps": -3}, "results[0].tps"),
    ({"tps": True}, "results[0].tps"),
    ({"tps": 1e6}, "results[0].tps"),  # a million tokens a second is a typo, not a GPU
    ({"size": "lots"}, "results[0].size"),
    ({"fa": 2}, "results[0].fa"),
    ({"ngl": "99"}, "results[0].ngl"),
    ({"gpu": ""}, "results[0].gpu"),
    ({"match": "Nonexistent GPU"}, "results[0].match: 'Nonexistent GPU' is not a GPU of the GPU table"),
    ({"match": "EPYC 9575F"}, "results[0].match: 'EPYC 9575F' is not a GPU"),  # the table's CPU rows are not GPUs
])
def test_a_malformed_entry_is_named_with_its_field(change, says):
    with pytest.raises(InputError, match=re.escape(says)):
        evidence.parse({"results": [_entry(**change)]}, "published.json")


def test_the_catalog_loads_and_every_entry_is_what_its_tables_and_its_row_say():
    from probes.tables import nvidia_cc_from_name
    from selector.bandwidth import VENDOR, table
    from selector.described import _amd_gfx

    results = evidence.load()
    raw = json.load(open(evidence.PATH, encoding="utf-8"))["results"]
    for r, e in zip(results, raw):
        kind = next(k for k, v in VENDOR.items() if any(x["match"] == r.match for x in table().get(v, [])))
        row = next(x for x in table()[VENDOR[kind]] if x["match"] == r.match)
        family = _amd_gfx(row, r.match) if kind == "amd_gpu" else \
            "sm_%d%d" % nvidia_cc_from_name(r.match) if kind == "nvidia_gpu" else None
        assert r.family == family, (r.match, r.family, family)
        # the row says the figure, or the entry says how it was derived from the row
        assert f"{r.tps:.2f}".rstrip("0").rstrip(".") in e["quote"] or str(e["tps"]) in e["quote"] \
            or "(derived)" in (r.note or ""), e["quote"]
    for pair in {r.pair for r in results if r.pair}:
        rows = [r for r in results if r.pair == pair]
        # one post (or one repository's committed logs), one machine
        assert len({(r.url.split("/blob/")[0], r.match) for r in rows}) == 1, pair
        assert len({r.backend for r in rows}) > 1, pair


# ------------------------------------------------------------------------------------------------
# in the pick


def _pick(fixture, *args):
    from conftest import machine, run_cli

    r = run_cli("--root", machine(fixture), "llamacpp", "--json", *args)
    assert r.rc == 0, r.err
    return r.json()["recipes"]["llamacpp"]


def test_the_pick_shows_what_was_published_for_the_backends_that_run_on_its_gpu():
    """Strix Halo: Vulkan and ROCm both run on the Radeon 8060S.  kyuz0's logs of one 8060S, build 9187
    (kyuz0/amd-strix-halo-toolboxes, 2026-05-18), four models: llama 7B Q4_0 (RADV tg128 55.73, ROCm 7.2.3
    50.59: +10.2%), gpt-oss 20B (RADV tg128 79.78, pp512 1692.49; ROCm 73.05, 1786.17: +9.2%), gpt-oss 120B
    (56.61, 51.81: +9.3%) and GLM-4.7-Flash Q8_0 (41.17, 35.50: +16.0%).  Vulkan led generation on all
    four: the middle lead of the four is the 7B's.  ROCm led the prompts of the 7B and the 20B: the 20B's,
    the smaller lead, is shown.  The pick is still Lemonade's order (Vulkan first)."""
    rec = _pick("linux-ubuntu24.04-strix-halo")
    assert rec["backend"] == "vulkan"
    got = [(e["backend"], e["test"], e["tokens_per_s"], e["match"], e["build"], e["date"]) for e in rec["evidence"]]
    assert got == [("vulkan", "tg128", 55.73, "Radeon 8060S", "b9187", "2026-05-18"),
                   ("rocm", "tg128", 50.59, "Radeon 8060S", "b9187", "2026-05-18"),
                   ("rocm", "pp512", 1786.17, "Radeon 8060S", "b9187", "2026-05-18"),
                   ("vulkan", "pp512", 1692.49, "Radeon 8060S", "b9187", "2026-05-18")]
    assert all(e["source"].startswith("https://github.com/kyuz0/amd-strix-halo-toolboxes/") for e in rec["evidence"])
    # the probe names the iGPU "8060S/8050S/8040S": which model it is cannot be told, so the runs are its family's
    assert {e["scope"] for e in rec["evidence"]} == {"family"}


def test_generation_and_prompts_each_show_their_own_comparison_and_the_measured_pick_follows_it():
    """nihmar's RX 9060 XT post: Vulkan led tg128 on all three models (the middle: qwen35 27B IQ3_S, 21.77 vs
    20.04), ROCm led pp512 on two (the smaller lead: gemma4 12B Q4_0, 1599.74 vs 1533.09).  The evidence
    holds both, each of its model, and --policy measured --metric pp picks what the prompt rows say."""
    from conftest import run_cli

    r = run_cli("--gpu", "RX 9060 XT", "llamacpp", "--json")
    rec = r.json()["recipes"]["llamacpp"]
    got = [(e["backend"], e["test"], e["tokens_per_s"], e["model"]) for e in rec["evidence"]]
    assert got[:4] == [("vulkan", "tg128", 21.77, "qwen35 27B IQ3_S - 3.4375 bpw"),
                       ("rocm", "tg128", 20.04, "qwen35 27B IQ3_S - 3.4375 bpw"),
                       ("rocm", "pp512", 1599.74, "gemma4 ?B Q4_0"), ("vulkan", "pp512", 1533.09, "gemma4 ?B Q4_0")]
    text = run_cli("--gpu", "RX 9060 XT", "llamacpp").out
    assert "vulkan tg128 21.8 vs rocm 20.0 (qwen35 27B IQ3_S - 3.4375 bpw;" in text
    assert "rocm pp512 1600 vs vulkan 1533" in text.split("(qwen35")[1]
    for metric, leader in (("pp", "rocm"), ("tg", "vulkan")):
        assert _pick_gpu("RX 9060 XT", "--policy", "measured", "--metric", metric)["backend"] == leader


def test_comparisons_of_two_gpus_name_each_and_one_source_is_said_once():
    tg = evidence.parse({"results": _pair("a", "model a", {("vulkan", "tg128"): 110.0, ("rocm", "tg128"): 100.0})})
    pp = evidence.parse({"results": _pair("b", "model b", {("rocm", "pp512"): 900.0, ("vulkan", "pp512"): 800.0})})
    two = evidence.words_each([("RX 7900 XTX", tg), ("RX 7900 XT (gfx1100, this GPU's family)", pp)])
    assert two.startswith("published on RX 7900 XTX: vulkan tg128 110 vs rocm 100 (model a; ")
    assert "; on RX 7900 XT (gfx1100, this GPU's family): rocm pp512 900 vs vulkan 800 (model b; " in two
    same = evidence.words_each([("RX 7900 XTX", tg), ("RX 7900 XTX", pp)])
    assert same.count("published on") == 1 and "(model a; " in same and "), rocm pp512 900 vs vulkan 800 (model b; " in same


def _pick_gpu(gpu, *args):
    from conftest import run_cli

    r = run_cli("--gpu", gpu, "llamacpp", "--json", *args)
    assert r.rc == 0, r.err
    return r.json()["recipes"]["llamacpp"]


def test_the_rx_7900_xtx_pick_cites_the_issue_that_compared_its_backends():
    """ggml-org/llama.cpp#20934 (2026-03-24): one RX 7900 XTX, llama-bench with the same line for both
    builds, LLaMA 7B Q4_0: RADV tg128 ~167-177 t/s, ROCm ~129-144 (ranges over several builds; the
    catalog keeps their midpoints and says so).  No Vulkan prompt figure there: generation only; the prompt
    comparison is another post's of this card (Orion-zhen/llama-bench-dashboard, b7951, gpt-oss 20B)."""
    rec = _pick("linux-ubuntu24.04-7950x-rx7900xtx")
    got = [(e["scope"], e["backend"], e["test"], e["tokens_per_s"], e["source"]) for e in rec["evidence"]]
    orion = "https://github.com/Orion-zhen/llama-bench-dashboard/blob/51c4f82337cc97d0aad0006cff55d8be86c53f4e/static/results/amd-7900xtx/"
    # 24 GiB: of the XTX/XT/GRE, the XTX
    assert got == [("gpu", "vulkan", "tg128", 172.0, "https://github.com/ggml-org/llama.cpp/issues/20934"),
                   ("gpu", "rocm", "tg128", 136.5, "https://github.com/ggml-org/llama.cpp/issues/20934"),
                   ("gpu", "vulkan", "pp512", 3594.34, orion + "vulkan-radv/gpt-oss-20b-q8_0-q8_0-20260206.json"),
                   ("gpu", "rocm", "pp512", 1847.25974, orion + "rocm-7.12/gpt-oss-20b-q8_0-q8_0-20260206.json")]
    assert all("midpoint (derived)" in e["note"] for e in rec["evidence"] if e["test"] == "tg128")


def test_the_pick_says_nothing_it_has_not_read():
    # no published comparison of CUDA and Vulkan on an RTX 5090 (or sm_120) was kept: nothing is said
    assert _pick("linux-ubuntu24.04-rtx5090")["evidence"] == []
    # one backend on the device: nothing to compare
    assert _pick("linux-debian12-x86_64-cpu-only")["evidence"] == []


def test_llama_bench_results_do_not_speak_for_another_engine():
    from conftest import machine, run_cli

    r = run_cli("--root", machine("linux-ubuntu24.04-strix-halo"), "whispercpp", "--json")
    assert r.rc == 0 and r.json()["recipes"]["whispercpp"]["evidence"] == []


@pytest.mark.parametrize("metric,backend,words", [
    ("tg", "vulkan", "vulkan tg128 55.7 vs rocm 50.6"), ("pp", "rocm", "rocm pp512 1786 vs vulkan 1692")])
def test_policy_measured_without_a_measurement_here_takes_the_published_comparison(metric, backend, words):
    rec = _pick("linux-ubuntu24.04-strix-halo", "--policy", "measured", "--metric", metric)
    assert rec["backend"] == backend
    assert words in rec["reason"] and "no fresh" in rec["reason"] and "kyuz0/amd-strix-halo-toolboxes" in rec["reason"]
    # where nothing was published, it says so and falls back to accelerator-first
    rec = _pick("linux-ubuntu24.04-rtx5090", "--policy", "measured")
    assert rec["backend"] == "cuda"
    assert "no published tg comparison of cuda and vulkan on this GPU or its family" in rec["reason"]
    assert "accelerator-first instead" in rec["reason"]


def test_an_rtx_4090_hears_of_the_comparison_run_on_another_card_of_its_family_and_which():
    """tiry/tairy ran CUDA and Vulkan builds of one checkout on an RTX 4070 Ti (sm_89), the latest on
    2026-01-06 with three models; CUDA led tg128 on all three, by the middle lead on mistral3 14B Q4_K_M:
    CUDA tg128 54.12, Vulkan 52.59; pp512 3384.11 and 2764.02."""
    rec = _pick("linux-ubuntu24.04-rtx4090")
    got = {(e["backend"], e["test"]): e["tokens_per_s"] for e in rec["evidence"]}
    assert got == {("cuda", "tg128"): 54.12, ("vulkan", "tg128"): 52.59, ("cuda", "pp512"): 3384.11,
                   ("vulkan", "pp512"): 2764.02}
    assert {(e["gpu"], e["scope"], e["model"]) for e in rec["evidence"]} == {
        ("NVIDIA GeForce RTX 4070 Ti", "family", "mistral3 14B Q4_K - Medium")}
    from conftest import machine, run_cli

    out = run_cli("--root", machine("linux-ubuntu24.04-rtx4090"), "llamacpp").out
    assert "published on RTX 4070 Ti (sm_89, this GPU's family): cuda tg128 54.1 vs vulkan 52.6" in out


def test_the_catalog_is_what_its_sources_build():
    """catalogs-src/llama-bench/build.py rebuilds the catalog from the rows read and its rules: an edit
    of one without the other fails here."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "catalogs-src", "llama-bench", "build.py")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "no change" in r.stdout, r.stdout + r.stderr


def test_the_leave_one_out_table_in_the_docs_is_the_catalogs():
    import evidence_table

    text = open(os.path.join(ROOT, "docs", "models.md"), encoding="utf-8").read()
    assert evidence_table.markdown() in text
    assert evidence_table.prompt_markdown() in text


def test_sizes_and_parameters_are_read_in_llama_benchs_units():
    e = _entry(size="636.18 MiB", params="500 M")
    (r,) = evidence.parse({"results": [e]})
    assert r.size_gib == pytest.approx(636.18 / 1024) and r.params_b == pytest.approx(0.5)
    (r,) = evidence.parse({"results": [_entry(size="19.70G", params="34.66B")]})  # a table retyped by hand
    assert (r.size_gib, r.params_b) == (19.70, 34.66)


def test_a_gpu_model_nobody_published_is_spoken_for_by_its_family():
    # a Radeon 880M (gfx1150): nothing published for it, but noamsto's 890M (gfx1150) ran both builds
    where, rows = evidence.nearest(evidence.load(), "amd_gpu", "AMD Radeon 880M", "gfx1150", {"vulkan", "rocm"})
    assert where == "Radeon 890M (gfx1150, this GPU's family)" and {r.match for r in rows} == {"Radeon 890M"}
    assert evidence.nearest(evidence.load(), "amd_gpu", "AMD Radeon 880M", None, {"vulkan", "rocm"}) == ("", [])


def test_a_post_that_compared_another_test_does_not_hide_a_later_one_that_compared_this():
    # a later post that compared Vulkan and ROCm on prompts only (pp512), beside kyuz0's that compared both
    later = [_entry(gpu="Radeon 8060S", match="Radeon 8060S", family="gfx1151", backend=b, test="pp512",
                    tps=t, pair="later-pp-only", date="2026-11-30") for b, t in (("vulkan", 900.0), ("rocm", 1000.0))]
    halo = [r for r in evidence.load() if r.pair == "kyuz0-8060S-llama7bQ40-b9187"]
    results = evidence.parse({"results": later}) + halo
    rows = evidence.comparison(results, {"vulkan", "rocm"}, "tg")
    assert {r.pair for r in rows} == {"kyuz0-8060S-llama7bQ40-b9187"} and {r.test for r in rows} == {"tg128"}
    # asked for prompts, the later post is the comparison
    assert {r.pair for r in evidence.comparison(results, {"vulkan", "rocm"}, "pp")} == {"later-pp-only"}


def test_linux_drivers_do_not_speak_for_windows():
    """Every published RX 7900 XTX comparison ran on Linux (RADV, ROCm); Windows' AMD driver is another
    Vulkan: the same card under Windows 11 gets no evidence line."""
    linux = _pick("linux-ubuntu24.04-7950x-rx7900xtx")
    assert linux["evidence"] and {e["os"] for e in linux["evidence"]} == {"linux"}
    assert _pick("windows11-rx7900xtx")["evidence"] == []


def test_a_figure_derived_from_a_range_is_printed_as_approximate():
    from conftest import machine, run_cli

    r = run_cli("--root", machine("linux-ubuntu24.04-7950x-rx7900xtx"), "llamacpp", env={"COLUMNS": "300"})
    assert r.rc == 0 and "vulkan tg128 ~172 vs rocm ~137" in r.out  # 20934 gave ranges; kyuz0 gave figures
    r = run_cli("--root", machine("linux-ubuntu24.04-strix-halo"), "llamacpp", env={"COLUMNS": "300"})
    assert "vulkan tg128 55.7 vs rocm 50.6" in r.out and "~" not in r.out


def test_policy_measured_does_not_suggest_a_bench_the_recipe_has_not():
    """LocalAI's llama-cpp has no benchmark tool `bench` reads (it exits 3 for it): the measured pick
    must not send the user there, yet still takes the published comparison."""
    from conftest import machine, run_cli

    r = run_cli("--catalog", "localai", "--root", machine("linux-ubuntu24.04-7950x-rx7900xtx"), "llama-cpp",
                "--policy", "measured", "--json")
    assert r.rc == 0, r.err
    reason = r.json()["recipes"]["llama-cpp"]["reason"]
    assert "pick-backend cannot measure llama-cpp" in reason and "bench llama-cpp" not in reason
    assert "published on RX 7900 XTX" in reason
    assert run_cli("--catalog", "localai", "bench", "llama-cpp", "--model", "m.gguf").rc == 3


@pytest.mark.parametrize("change,os_name", [
    ({}, "linux"),  # RADV, ROCm and most CUDA posts: Linux unless the post says otherwise
    ({"where": "comment by a (Windows 11)"}, "windows"),
    ({"note": "command 'llama-bench -m ..\\qwen2.5-coder-3b-instruct-q4_0.gguf -p 512'"}, "windows"),
    ({"note": "Z:\\github\\llama.cpp\\build\\bin\\RelWithDebInfo>llama-bench.exe -fa 1"}, "windows"),
    ({"backend": "metal", "gpu": "Apple M2 Max", "match": "M2 Max", "family": None}, "macos"),
    ({"backend": "vulkan", "runtime": "MoltenVK on macOS", "gpu": "Apple M1 Ultra", "match": "M1 Ultra",
      "family": None}, "macos"),
    # Asahi Linux on a Mac, its Honeykrisp driver "not MoltenVK": Linux
    ({"backend": "vulkan", "runtime": "Asahi Linux, Honeykrisp Vulkan driver (not MoltenVK)", "gpu": "Apple M2 Max",
      "match": "M2 Max", "family": None}, "linux"),
    ({"where": "said nothing", "os": "windows"}, "windows"),  # the entry's own word first
    ({"where": "said nothing", "backend": "cpu", "os": "macos"}, "macos"),
])
def test_each_result_is_filed_under_the_os_it_ran_on(change, os_name):
    (r,) = evidence.parse({"results": [_entry(**change)]})
    assert r.os == os_name


def test_an_os_the_catalog_does_not_know_is_refused_and_the_tool_files_the_one_given():
    with pytest.raises(InputError, match=re.escape("results[0].os: 'win' is not one of")):
        evidence.parse({"results": [_entry(os="win")]}, "published.json")
    r = _tool(*SOURCE, "--os", "windows", input=pasted("rtx2070-vulkan-pr13324.txt"))
    assert r.returncode == 0, r.stderr
    assert {e["os"] for e in json.loads(r.stdout)} == {"windows"}


# ------------------------------------------------------------------------------------------------
# the estimate of plan, from the published runs


# what a token does not read whole: a mixture of experts, a Gemma "E4B" (per-layer embeddings looked up)
MOE_OR_PLE = r"moe|gpt-oss|A\d+B|\bE\d+B\b"


@pytest.fixture(scope="module")
def dense14b(tmp_path_factory):
    import gguf_models as gm

    return gm.write(str(tmp_path_factory.mktemp("estimate") / "Qwen3-14B-Q4_K_M.gguf"), "qwen3-14b")


def _plan(fixture, model, *args):
    from conftest import machine, run_cli

    r = run_cli("--root", machine(fixture), "plan", "llamacpp", "--model", model, "--ctx-size", "4096", "--json", *args)
    assert r.rc == 0, r.err
    return r.json()


def test_a_cards_estimate_is_the_model_fitted_to_its_pool_and_below_the_bound(dense14b):
    """The RX 7900 XTX's ROCm plan: the model of speed fitted to the ROCm runs of AMD's discrete cards (too few of
    gfx110X alone), the GPUs pooled those of the catalog's runs whose model shape is known; below the bound,
    and slower at the planned context's depth than at an empty one."""
    from selector.models import speed

    pooled = sorted({r.match for r in evidence.load() if r.backend == "rocm" and r.os == "linux" and speed.point(r)
                     and speed._group_of(r) and speed._group_of(r)[1] == "own"
                     and speed._vendor_of_group(speed._group_of(r)[0]) == "amd"})
    p = _plan("linux-ubuntu24.04-7950x-rx7900xtx", dense14b, "--backend", "rocm")["speed_estimate"]
    est = p["estimate"]
    assert sorted(est["gpus"]) == pooled and len(pooled) >= 4
    assert est["group"].startswith("AMD discrete GPUs of ") and "gfx110X" in est["group"]
    assert est["tokens_per_s"] < p["tokens_per_s"]
    [empty, full] = p["depths"]
    assert (empty["depth"], full["depth"]) == (0, 4096) and full["tokens_per_s"] < empty["tokens_per_s"]


def test_an_igpu_pool_too_small_gives_the_bound_and_why_and_a_mixture_of_experts_its_own_term(dense14b, moe_plan_model):
    # Strix Halo's 8060S reads the machine's memory: two such GPU models are published, too few to fit
    p = _plan("linux-ubuntu24.04-strix-halo", dense14b, "--backend", "rocm")["speed_estimate"]
    assert p["tokens_per_s"] and "estimate" not in p
    assert "AMD GPUs sharing the machine's memory" in p["no_estimate"]
    assert all(d["tokens_per_s"] is None and d["bound"] for d in p["depths"])
    # a mixture of experts: its layers cost more than a dense one's, a term fitted where runs of such models on
    # two GPU models or more were pooled (CUDA's gpt-oss runs on GDDR cards), and said to be missing where not
    # (the HBM cards': no two of them have published runs of one)
    p = _plan("linux-ubuntu24.04-rtx4090", moe_plan_model, "--backend", "cuda")["speed_estimate"]
    assert p["estimate"]["tokens_per_s"] < p["tokens_per_s"] and p["estimate"]["per_moe_layer_us"] > 0
    p = _plan("linux-ubuntu22.04-h100", moe_plan_model, "--backend", "cuda")["speed_estimate"]
    assert "estimate" not in p and "of a mixture of experts on Linux" in p["no_estimate"]


def test_an_hbm_card_is_fitted_with_hbm_cards_and_a_geforce_with_its_familys(dense14b):
    p = _plan("linux-ubuntu24.04-rtx4090", dense14b, "--backend", "cuda")["speed_estimate"]["estimate"]
    assert p["group"] == "sm_8X" and "RTX 4090" in p["gpus"] and "H100 PCIe" not in p["gpus"]
    h = _plan("linux-ubuntu22.04-h100", dense14b, "--backend", "cuda")["speed_estimate"]["estimate"]
    assert "HBM" in h["group"] and "H100 PCIe" in h["gpus"] and "RTX 4090" not in h["gpus"]


def test_a_prompt_rate_is_the_latest_sources_runs_on_this_gpu_scaled_by_parameters(dense14b):
    """llama-bench's params column times its pp512 rate, over this model's parameters (plan's JSON
    ``model.params``): the RX 7900 XTX's ROCm runs of dense models, those of the latest source alone."""
    from statistics import median

    runs = [r for r in evidence.load() if r.match == "RX 7900 XTX" and r.backend == "rocm" and r.test == "pp512"
            and r.size_gib and r.size_gib >= 2 and not re.search(MOE_OR_PLE, r.model, re.I)]
    latest = max(runs, key=lambda r: r.date)
    runs = [r for r in runs if r.url == latest.url]
    p = _plan("linux-ubuntu24.04-7950x-rx7900xtx", dense14b, "--backend", "rocm")
    pr = p["speed_estimate"]["prompt"]
    assert pr["test"] == "pp512" and pr["gpu"] == "RX 7900 XTX" and pr["source"] == latest.url and pr["runs"] == len(runs)
    assert pr["tokens_per_s"] == pytest.approx(median(r.tps * r.params_b * 1e9 for r in runs) / p["model"]["params"], rel=1e-3)
    # no pp512 of a dense model was published for the 7900 XTX's Vulkan build, nor of any on an H100 SXM
    assert "prompt" not in _plan("linux-ubuntu24.04-7950x-rx7900xtx", dense14b, "--backend", "vulkan")["speed_estimate"]
    assert "prompt" not in _plan("linux-ubuntu22.04-h100", dense14b, "--backend", "cuda")["speed_estimate"]


def test_the_prompt_rate_comes_from_one_source_the_latest():
    """Two posts of the same GPU and backend, a year apart: the later one's build is the rate."""
    from selector.models import speed

    old = evidence.parse({"results": [_entry(test="pp512", tps=1000.0, date="2025-01-01", url="https://github.com/a/b/issues/1",
                                             model="llama 8B Q4_0", size="4.33 GiB", params="8.03 B")]})
    new = evidence.parse({"results": [_entry(test="pp512", tps=2000.0, date="2026-01-01", url="https://github.com/a/b/issues/2",
                                             model="llama 7B Q4_0", size="3.56 GiB", params="6.74 B")]})
    # both are dense and over 2 GiB, so both count; the later post alone is used (6.74 B: its own rate)
    est = speed.prompt_estimate(old + new, old[0].backend, old[0].match, int(6.74e9))
    assert est["tokens_per_s"] == pytest.approx(2000.0) and est["runs"] == 1 and est["date"] == "2026-01-01"


def _described(model, *gpus, backend="cuda"):
    from conftest import run_cli

    args = [x for g in gpus for x in ("--gpu", g)]
    r = run_cli("plan", "llamacpp", "--model", model, "--ctx-size", "4096", "--backend", backend, "--json", *args)
    assert r.rc == 0, r.err
    return r.json()


def test_the_prompt_rate_is_the_median_of_the_latest_days_runs_when_a_page_names_no_build(dense14b):
    """tiry/tairy's RTX 4070 Ti page holds two days of CUDA runs and names no build: the later day's
    dense pp512 runs, each times its parameters over this model's, their median."""
    from statistics import median

    p = _described(dense14b, "RTX 4070 Ti")
    pr = p["speed_estimate"]["prompt"]
    runs = [r for r in evidence.load() if r.match == "RTX 4070 Ti" and r.backend == "cuda" and r.test == "pp512"
            and r.size_gib >= 2 and not re.search(MOE_OR_PLE, r.model, re.I) and r.url == pr["source"]]
    day = max(r.date for r in runs)
    runs = [r for r in runs if r.date == day]
    rates = sorted(r.tps * r.params_b * 1e9 / p["model"]["params"] for r in runs)
    assert len(runs) == 3 and pr["runs"] == 3 and pr["date"] == day < "2026-02"
    assert (pr["low"], pr["tokens_per_s"], pr["high"]) == pytest.approx((rates[0], median(rates), rates[-1]), rel=1e-3)


def test_a_broken_catalog_is_said_by_the_plan_not_taken_for_missing_runs(dense14b):
    """With llama-bench-published.json unreadable the plan keeps its memory and bound, and says why it has
    no estimate (it must not claim that fewer than four GPU models were published)."""
    from conftest import machine

    code = ("import sys, runpy; from selector import evidence; from probes.inputs import InputError\n"
            "def broken(*a, **k): raise InputError(evidence.PATH, 'is not JSON (Expecting value: line 1 column 1)')\n"
            "evidence.load = broken; sys.argv = ['pick-backend'] + sys.argv[1:]\n"
            "runpy.run_module('selector', run_name='__main__')")
    args = ["--root", machine("linux-ubuntu22.04-h100"), "plan", "llamacpp", "--model", dense14b, "--ctx-size", "4096",
            "--backend", "cuda", "--json"]
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)["speed_estimate"]
    assert p["tokens_per_s"] and "prompt" not in p and "estimate" not in p
    assert p["no_estimate"].startswith("the published runs could not be read (") and "llama-bench-published.json: is not JSON" in p["no_estimate"]


def test_windows_is_not_estimated_from_linux_runs(dense14b):
    # every published RX 7900 XTX run is Linux's (RADV, ROCm): as for the evidence line, Windows' driver is another
    p = _plan("windows11-rx7900xtx", dense14b, "--backend", "rocm")["speed_estimate"]
    assert "estimate" not in p and "prompt" not in p and "generation runs on Windows" in p["no_estimate"]


def test_a_name_several_cards_share_gets_no_prompt_rate(dense14b):
    # Strix Halo's "Radeon 8060S/8050S/8040S" names three GPUs: the 8060S's prompt runs speak for one of them
    p = _plan("linux-ubuntu24.04-strix-halo", dense14b, "--backend", "rocm")["speed_estimate"]
    assert "prompt" not in p


def test_a_generation_run_faster_than_its_file_can_be_read_is_left_out(tmp_path, monkeypatch):
    """A dense model's tg run above its GPU's bandwidth over its file (RTX 4070 Ti: 504 GB/s over 5.33 GiB
    is 88.06 t/s) reads less than its file per token: build.py drops it, naming why."""
    sys.path.insert(0, os.path.join(ROOT, "catalogs-src", "llama-bench"))
    import build

    row = {"gpu": "NVIDIA GeForce RTX 4070 Ti", "backend": "cuda", "runtime": None, "build": "b7000",
           "date": "2026-01-01", "model": "llama 8B Q5_K - Medium", "size": "5.33 GiB", "params": "8.03 B", "ngl": 99,
           "fa": None, "test": "tg128", "tps": 88.1, "url": "https://github.com/a/b/issues/1", "where": "a comment",
           "pair": None, "quote": "| llama 8B Q5_K - Medium | 5.33 GiB | 8.03 B | CUDA | 99 | tg128 | 88.10 ± 0.1 |"}
    (tmp_path / "read-added.json").write_text(json.dumps([row, {**row, "tps": 88.0}]))
    monkeypatch.setattr(build, "HERE", str(tmp_path))
    out, dropped = build.build()
    assert [e["tps"] for e in out] == [88.0]
    assert len(dropped) == 1 and "faster than its bandwidth bound" in dropped[0][2]


def test_the_catalog_keeps_no_row_that_may_have_run_layers_on_the_cpu(tmp_path, monkeypatch):
    """build.py: a row of -ngl below 99 is dropped, naming why; Metal's of 2023 ran the whole graph on the
    GPU with any -ngl above 0 (llama.cpp's README then: 'Any value larger than 0 will offload the
    computation to the GPU'), so ggml-org/llama.cpp#2917's -ngl 1 M2 Ultra rows stay."""
    sys.path.insert(0, os.path.join(ROOT, "catalogs-src", "llama-bench"))
    import build

    row = {"gpu": "NVIDIA GeForce RTX 4070 Ti", "backend": "cuda", "runtime": None, "build": "b7000",
           "date": "2026-01-01", "model": "llama 8B Q5_K - Medium", "size": "5.33 GiB", "params": "8.03 B", "ngl": 20,
           "fa": None, "test": "tg128", "tps": 40.0, "url": "https://github.com/a/b/issues/1", "where": "a comment",
           "pair": None, "quote": "| llama 8B Q5_K - Medium | 5.33 GiB | 8.03 B | CUDA | 20 | tg128 | 40.00 ± 0.1 |"}
    metal = {**row, "gpu": "Apple M2 Ultra", "backend": "metal", "ngl": 1, "date": "2023-09-04", "size": "3.56 GiB"}
    (tmp_path / "read-added.json").write_text(json.dumps([row, {**row, "ngl": 99}, metal, {**metal, "date": "2025-01-01"}]))
    monkeypatch.setattr(build, "HERE", str(tmp_path))
    out, dropped = build.build()
    assert [(e["backend"], e["ngl"], e["date"]) for e in out] == [("metal", 1, "2023-09-04"), ("cuda", 99, "2026-01-01")]
    assert [d[2].split(":")[0] for d in dropped] == ["ngl 20", "ngl 1"]
    assert any(r.ngl == 1 and r.url.endswith("/2917") for r in evidence.load())


@pytest.fixture(scope="module")
def moe_plan_model(tmp_path_factory):
    import gguf_models as gm

    return gm.write(str(tmp_path_factory.mktemp("estimate") / "Qwen3-30B-A3B-Q4_K_M.gguf"), "qwen3-30b-a3b")


@pytest.mark.parametrize("date,ok", [("2025-12-31", True), ("2024-02-29", True), ("2025-02-29", False),
                                     ("2025-11-31", False), ("2025-13-01", False)])
def test_a_date_is_a_day_of_the_calendar(date, ok):
    if ok:
        assert evidence.parse({"results": [_entry(date=date)]})[0].date == date
    else:
        with pytest.raises(InputError, match=re.escape("results[0].date")):
            evidence.parse({"results": [_entry(date=date)]}, "published.json")


@pytest.mark.parametrize("tps,said", [(9.46, "9.5"), (99.94, "99.9"), (100.0, "100"), (1545.36, "1545")])
def test_a_rate_is_said_to_a_tenth_below_a_hundred_and_whole_above(tps, said):
    es = [_entry(backend=b, tps=t, pair="p") for b, t in (("vulkan", tps), ("cuda", 1.0))]
    rows = evidence.comparison(evidence.parse({"results": es}), {"vulkan", "cuda"})
    assert f"vulkan {rows[0].test} {said} vs cuda 1.0" in evidence.words(rows, "RTX 2070")


def test_a_comparison_at_depth_says_where_the_lead_swaps():
    """One post ran Vulkan and ROCm at d0 and d4096 (the shape of ggml-org/llama.cpp#19255's table): the
    comparison is taken at an empty context, the d4096 rows follow it, and the words say that ROCm leads there."""
    def row(backend, depth, tps):
        return evidence.Result(gpu="RX 7900 XTX", match="RX 7900 XTX", family="gfx1100", backend=backend, runtime=None,
                               build="b7901", date="2026-02-01", model="deepseek2 30B.A3B IQ4_XS", size_gib=15.15,
                               params_b=29.94, ngl=99, fa=1, test="tg128", tps=tps, url="https://github.com/o/r/issues/1",
                               where="w", pair="p1", quote="q", depth=depth)

    rows = [row("vulkan", 0, 138.0), row("rocm", 0, 120.0), row("vulkan", 4096, 80.0), row("rocm", 4096, 97.0)]
    got = evidence.comparison(rows, ["vulkan", "rocm"], "tg")
    assert [(r.backend, r.depth) for r in got] == [("vulkan", 0), ("rocm", 0), ("rocm", 4096), ("vulkan", 4096)]
    assert evidence.swaps(got) == [("tg128", 4096, "rocm")]
    text = evidence.words(got, "RX 7900 XTX")
    assert "vulkan tg128 138 vs rocm 120" in text and "rocm tg128 @ d4096 97.0 vs vulkan 80.0" in text
    assert "rocm leads tg128 from d4096, vulkan at d0" in text
    # asked at depth 4096, the comparison there decides
    assert evidence.comparison(rows, ["vulkan", "rocm"], "tg", depth=4096)[0].backend == "rocm"
    # where the order holds at every depth, nothing is said of a swap
    same = [row("vulkan", 0, 138.0), row("rocm", 0, 120.0), row("vulkan", 4096, 99.0), row("rocm", 4096, 97.0)]
    assert "leads" not in evidence.words(evidence.comparison(same, ["vulkan", "rocm"], "tg"), "RX 7900 XTX")
