"""`pick-backend guide`: the amdai.net engine guide matched to the machine, and its warnings on picks.

Expected values come from the guide itself (shared reference amdai-backends.json: llama.cpp is the
default, the R9700 figures in its notes) and from Lemonade's llama.cpp support rows (vulkan matches
any AMD GPU and comes before rocm; cuda needs an NVIDIA GPU), not from the code's output.
"""

import json
import os
import re

import jsonschema
import pytest

from conftest import ROOT, machine

R9700 = machine("linux-ubuntu24.04-r9700")
RTX4090 = machine("linux-ubuntu24.04-rtx4090")
CPU_ONLY = machine("linux-debian12-x86_64-cpu-only")
VERDICT_ORDER = ["default", "ok", "try", "caution", "advanced"]
CUDA_ADVICE = "Do not let a desktop app download a CUDA llama.cpp on a Radeon."


def guide_schema():
    text = open(os.path.join(ROOT, "docs", "json.md"), encoding="utf-8").read()
    m = re.search(r"```json schema:guide\n(.*?)```", text, re.S)
    assert m, "docs/json.md has no schema:guide"
    return json.loads(m.group(1))


def guide_warnings(pick_json, recipe="llamacpp"):
    return [w for w in pick_json["recipes"][recipe]["warnings"] if w.startswith("guide amdai.net/backends:")]


# ------------------------------------------------------------------------------------------------
# the guide on a Radeon machine


def test_r9700_json_lists_every_engine_default_first_with_the_pick_and_figures(cli):
    r = cli("--root", R9700, "guide", "--json")
    assert r.rc == 0, r.err
    out = r.json()
    jsonschema.validate(out, guide_schema())
    assert out["applies"] is True
    assert out["measured_here"] is True  # the guide's figures come from this very GPU target
    assert "AMD Radeon AI PRO R9700" in out["reason"]
    engines = out["engines"]
    assert len(engines) == 11
    assert engines[0]["id"] == "llamacpp" and engines[0]["verdict"] == "default" and engines[0]["default"]
    ranks = [VERDICT_ORDER.index(e["verdict"]) for e in engines]
    assert ranks == sorted(ranks)
    assert [e["id"] for e in engines if e["verdict"] == "advanced"] == ["sglang", "vllm"]
    pick = engines[0]["pick"]
    assert pick["recipe"] == "llamacpp" and pick["backend"] == "vulkan"
    assert pick["device"]["type"] == "amd_gpu" and pick["device"]["family"] == "gfx1201"
    assert pick["run_args"] == "--llamacpp vulkan"
    assert all(e["pick"] is None for e in engines[1:])
    figures = " ".join(out["notes"])
    assert "102.39 tok/s" in figures and "1902.1 tok/s prefill" in figures


def test_r9700_human_shows_llamacpp_first_with_measured_figures_and_picked_backend(cli):
    r = cli("--root", R9700, "guide")
    assert r.rc == 0, r.err
    out = " ".join(r.out.split())  # rich wraps long lines at the terminal's width
    assert "Applies here" in out
    assert "102.39 tok/s" in out and "Q4_K_M 117.69 tok/s" in out
    assert "gfx1201" in out
    llama = out.index("llama.cpp Consumer default")
    assert llama < out.index("Ollama") < out.index("vLLM")
    assert re.search(r"pick-backend here: llamacpp → vulkan on AMD GPU \(gfx1201\)", out)
    assert "Start here. Always." in out
    assert "build-vk/bin/llama-server" not in out  # the run snippet only on request


def test_engine_option_shows_that_engines_run_snippet(cli):
    r = cli("--root", R9700, "guide", "--engine", "llamacpp")
    assert r.rc == 0, r.err
    assert "./build-vk/bin/llama-server -m ~/models/Qwen3.6-35B-A3B-UD-Q5_K_XL.gguf --host 127.0.0.1 --port 8080" in r.out
    assert "Ollama" not in r.out
    r = cli("--root", R9700, "guide", "--engine", "ollama", "--json")
    assert r.rc == 0, r.err
    (e,) = r.json()["engines"]
    assert e["id"] == "ollama" and "curl -s http://127.0.0.1:11434/api/tags" in e["run"]


def test_unknown_engine_is_a_usage_error_with_the_closest_name(cli):
    r = cli("--root", R9700, "guide", "--engine", "olama")
    assert r.rc == 2
    assert "did you mean 'Ollama'" in r.err  # the name the guide shows


def test_the_engine_is_named_as_the_guide_shows_it(cli):
    # the guide lists "llama.cpp" and says `--engine NAME`: what it shows is what it takes (any case)
    out = cli("--root", R9700, "guide").out
    hint = re.search(r"--engine NAME \(a name above, e.g. --engine (\S+)\)", out)
    assert hint and hint.group(1) == "llama.cpp" and re.search(r"(?m)^default +llama\.cpp ", out), out
    for name in ("llama.cpp", "LLAMA.CPP", "llamacpp"):
        r = cli("--root", R9700, "guide", "--engine", name)
        assert r.rc == 0 and "./build-vk/bin/llama-server" in r.out, (name, r.err)
    r = cli("--root", R9700, "guide", "--engine", "PyTorch / Transformers", "--json")
    assert r.rc == 0 and [e["id"] for e in r.json()["engines"]] == ["pytorch"], r.err


# ------------------------------------------------------------------------------------------------
# machines the guide is not written for


@pytest.mark.parametrize("root, backend, device_type", [
    (RTX4090, "cuda", "nvidia_gpu"),
    (CPU_ONLY, "vulkan", "cpu"),
])
def test_without_an_amd_gpu_only_the_default_is_shown(cli, root, backend, device_type):
    r = cli("--root", root, "guide", "--json")
    assert r.rc == 0, r.err
    out = r.json()
    jsonschema.validate(out, guide_schema())
    assert out["applies"] is False and out["measured_here"] is False
    assert "written for machines with an AMD (Radeon) GPU" in out["reason"]
    assert out["notes"] == []
    (e,) = out["engines"]
    assert e["id"] == "llamacpp"
    assert e["pick"]["backend"] == backend and e["pick"]["device"]["type"] == device_type
    human = cli("--root", root, "guide")
    assert human.rc == 0, human.err
    text = " ".join(human.out.split())
    assert "written for machines with an AMD (Radeon) GPU; this machine has none" in text
    assert f"llamacpp → {backend}" in text
    for radeon_advice in ("Ollama", "vLLM", "102.39 tok/s", "gfx1201 daily driver"):
        assert radeon_advice not in text


def test_rtx4090_reason_names_the_gpu_it_found(cli):
    r = cli("--root", RTX4090, "guide", "--json")
    assert "NVIDIA GeForce RTX 4090" in r.json()["reason"]


# ------------------------------------------------------------------------------------------------
# the guide's warnings on picks


def test_cuda_pinned_on_a_radeon_only_machine_carries_the_guides_line(cli):
    r = cli("--root", R9700, "llamacpp", "--backend", "cuda", "--json")
    assert r.rc == 3  # cuda does not run on a Radeon
    assert guide_warnings(r.json()) == [f"guide amdai.net/backends: {CUDA_ADVICE}"]
    assert any(w.get("recipe") == "llamacpp" and CUDA_ADVICE in w["message"] for w in r.json()["warnings"])
    human = cli("--root", R9700, "llamacpp", "--backend", "cuda")
    assert CUDA_ADVICE in " ".join(human.out.split())


def test_a_cpu_build_on_a_radeon_machine_carries_the_silent_cpu_line(cli):
    r = cli("--root", R9700, "llamacpp", "--backend", "cpu", "--json")
    assert r.rc == 0, r.err
    (line,) = guide_warnings(r.json())
    assert "silent CPU" in line


def test_the_default_gpu_pick_carries_no_guide_line(cli):
    r = cli("--root", R9700, "llamacpp", "--json")
    assert r.rc == 0, r.err
    assert r.json()["recipes"]["llamacpp"]["backend"] == "vulkan"
    assert guide_warnings(r.json()) == []


@pytest.mark.parametrize("root, args", [(RTX4090, ["--backend", "cpu"]), (CPU_ONLY, [])])
def test_no_guide_line_where_the_guide_does_not_apply(cli, root, args):
    r = cli("--root", root, "llamacpp", *args, "--json")
    assert r.rc == 0, r.err
    assert guide_warnings(r.json()) == []
    if root == CPU_ONLY:  # the engine's own warning stays
        assert any("runs on the CPU" in w for w in r.json()["recipes"]["llamacpp"]["warnings"])


# ------------------------------------------------------------------------------------------------
# guide files


def shipped():
    with open(os.path.join(ROOT, "selector", "catalogs", "guide-amd.json"), encoding="utf-8") as f:
        return json.load(f)


def test_shipped_guide_cites_its_source_and_says_where_it_applies():
    data = shipped()
    assert data["source"]["href"] == "https://amdai.net/backends"
    assert data["applies_to"]["device_types"] == ["amd_gpu"]
    assert data["applies_to"]["measured_on"]["gfx"] == "gfx1201"
    assert data["default_id"] == "llamacpp"


def _broken(mutate):
    data = shipped()
    mutate(data)
    return data


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["engines"][2].update(verdict="great"), "engines[2] (ktransformers).verdict"),
    (lambda d: d["engines"][0].pop("when"), "engines[0] (llamacpp).when"),
    (lambda d: d.update(schema_version="1.0"), "schema_version"),
    (lambda d: d.update(default_id="koboldcpp"), "default_id"),
    (lambda d: d["applies_to"].update(device_types=["radeon"]), "applies_to.device_types"),
    (lambda d: d["advice"].update(gpu_meter={"text": "x", "from": "y"}), "advice.gpu_meter"),
])
def test_a_malformed_guide_exits_5_naming_file_and_field(cli, tmp_path, mutate, field):
    path = tmp_path / "guide.json"
    path.write_text(json.dumps(_broken(mutate)), encoding="utf-8")
    r = cli("--root", R9700, "guide", "--guide", str(path), "--json")
    assert r.rc == 5
    assert str(path) in r.err and field in r.err
    assert "Traceback" not in r.err


def test_a_guide_that_is_not_json_exits_5(cli, tmp_path):
    path = tmp_path / "guide.json"
    path.write_text('{"schema_version": 1, "engines": [', encoding="utf-8")
    r = cli("--root", R9700, "guide", "--guide", str(path))
    assert r.rc == 5 and str(path) in r.err and "not valid JSON" in r.err


def test_another_guide_file_is_used_as_given(cli, tmp_path):
    data = shipped()
    data["applies_to"]["device_types"] = ["nvidia_gpu"]
    data["applies_to"]["words"] = "machines with an NVIDIA GPU"
    path = tmp_path / "nvidia-guide.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    r = cli("--root", RTX4090, "guide", "--guide", str(path), "--json")
    assert r.rc == 0, r.err
    assert r.json()["applies"] is True and len(r.json()["engines"]) == 11


@pytest.mark.parametrize("columns", [40, 52, 60, 66, 80])
def test_lemonades_flag_and_its_value_are_never_broken_apart(columns):
    """A reader copies `--llamacpp vulkan` from the guide; at a narrow terminal it must stay one piece."""
    from conftest import machine, run_tty

    r = run_tty("--root", machine("linux-ubuntu24.04-strix-halo"), "guide", columns=columns)
    assert r.rc == 0
    lines = [x for x in r.out.splitlines() if "--llamacpp" in x]
    assert lines and all(x.strip().endswith("--llamacpp vulkan") for x in lines), lines
    urls = [x.strip() for x in r.out.splitlines() if "https://amdai.net/backends/" in x]
    assert "https://amdai.net/backends/ktransformers" in urls  # addresses whole, too
