"""models and plan: GGUF headers, llama.cpp's memory arithmetic, fit on real machines, the launch line.

The sizes llama.cpp printed (tests/data/llamacpp_logs.json, each case citing its public log) pin
the arithmetic: KV within 1%, the device total within 10%.  Model files are header-only GGUFs
written with ggml-org's gguf package (tests/gguf_models.py); HTTP is a server on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler

import jsonschema
import numpy as np
import pytest

import gguf_models as gm
from conftest import machine, profile_of
from servers import TestServer
from test_json_contract import schema
from selector.models import facts as F
from selector.models import fit, gguf_header, source
from selector.render_plan import fit_json as J

MiB = 1 << 20
GiB = 1 << 30
LOGS = {c["id"]: c for c in json.load(open(os.path.join(os.path.dirname(__file__), "data", "llamacpp_logs.json")))["cases"]}


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf")
    return {k: gm.write(str(d / f"{k}.gguf"), k) for k in gm.MODELS}


def facts_of(path):
    return F.from_headers(path, [gguf_header.read(path)])


def logged(log, fa=None):
    """The engine parameters a public log ran with.  Those builds predate ggml-org/llama.cpp#23861:
    their worst-case graph reserved logits for the whole micro-batch, not one row per slot."""
    c = log["ctx"]
    ub = c.get("n_ubatch", 512)
    return fit.Run(ctx=c["n_ctx"], ubatch=ub, batch=c.get("n_batch", 2048), type_k=c["type_k"], type_v=c["type_v"],
                   flash_attn=bool(c.get("flash_attn")) if fa is None else fa, outputs=ub)


# ------------------------------------------------------------------------------------------------
# held to llama.cpp's printed sizes

KV_CASES = [  # (log case, model, n_ubatch the log ran with)
    ("qwen3-4b-q4km-ctx8192-gtx1060", "qwen3-4b", 512),
    ("llama3.1-70b-q4_0-ctx4096-rpc", "llama3.1-70b", 512),
    ("qwen3-30b-a3b-q4km-ctx16384-2gpu-expertsCPU", "qwen3-30b-a3b", 512),
    ("gpt-oss-20b-mxfp4-ctx131072-ub2048-metal", "gpt-oss-20b", 2048),
    ("deepseek-v3-0324-ud-q2kxl-ctx16384-fa-4gpu", "deepseek-v3", 1024),
    ("gemma3-270m-ctx8192-swa", "gemma3-270m", 512),
]


@pytest.mark.parametrize("case,key,ubatch", KV_CASES)
def test_kv_cache_is_within_one_percent_of_llama_cpp(models, case, key, ubatch):
    log = LOGS[case]
    f = facts_of(models[key])
    kv = fit.kv_bytes(f, fit.Run(ctx=log["ctx"]["n_ctx"], type_k=log["ctx"]["type_k"], type_v=log["ctx"]["type_v"],
                                 ubatch=ubatch))
    printed = (log["kv"]["size_mib"] + log["kv"].get("swa_size_mib", 0)) * MiB
    assert abs(kv["total"] - printed) <= 0.01 * printed
    assert abs(kv["k"] - (log["kv"]["k_mib"] + log["kv"].get("swa_k_mib", 0)) * MiB) <= 0.01 * printed
    assert kv["cells"] == log["kv"]["cells"]
    if "swa_cells" in log["kv"]:
        assert kv["swa_cells"] == log["kv"]["swa_cells"]


def test_one_gpu_total_is_within_ten_percent_qwen3_4b(models):
    log = LOGS["qwen3-4b-q4km-ctx8192-gtx1060"]
    f = facts_of(models["qwen3-4b"])
    need = fit.on_gpu(f, f["n_layer"] + 1, logged(log))
    printed = (log["model_buffer_mib"]["CUDA0"] + log["kv"]["size_mib"] + log["compute_buffer_mib"]["CUDA0"]) * MiB
    assert abs(need["total"] - printed) <= 0.10 * printed
    # the weights are exact: the tied output layer is loaded a second time, token_embd stays on the CPU
    assert abs(need["weights"] - log["model_buffer_mib"]["CUDA0"] * MiB) <= 0.01 * printed
    assert abs(f["input_bytes"] - log["model_buffer_mib"]["CPU_Mapped"] * MiB) <= MiB


@pytest.mark.parametrize("case,key,ubatch,fa,device,within", [
    ("qwen3-4b-q4km-ctx8192-gtx1060", "qwen3-4b", 512, False, "CUDA0", 0.02),
    ("qwen3-30b-a3b-q4km-ctx16384-2gpu-expertsCPU", "qwen3-30b-a3b", 512, False, "CUDA0", 0.05),
    ("gpt-oss-20b-mxfp4-ctx131072-ub2048-metal", "gpt-oss-20b", 2048, True, "Metal", 0.06),
])
def test_the_compute_buffer_estimate_is_near_llama_cpps(models, case, key, ubatch, fa, device, within):
    log = LOGS[case]
    f = facts_of(models[key])
    ours = fit.compute_bytes(f, replace(logged(log, fa), ubatch=ubatch, outputs=ubatch))
    printed = log["compute_buffer_mib"][device] * MiB
    assert abs(ours - printed) <= within * printed


def test_an_unknown_cache_type_names_the_known_ones():
    with pytest.raises(fit.FitError) as e:
        fit.cache_bytes("q3_k")
    assert "q8_0" in str(e.value) and "f16" in str(e.value) and "note" not in str(e.value)


def test_metal_total_is_within_ten_percent_gpt_oss(models):
    log = LOGS["gpt-oss-20b-mxfp4-ctx131072-ub2048-metal"]
    f = facts_of(models["gpt-oss-20b"])
    ctx = log["ctx"]["n_ctx"]
    run = logged(log, fa=True)
    weights = fit.on_gpu(f, 25, run)["weights"]
    kv = fit.kv_bytes(f, run)["total"]
    compute = fit.compute_bytes(f, run)
    printed = (log["model_buffer_mib"]["Metal_Mapped"] + log["kv"]["size_mib"] + log["kv"]["swa_size_mib"]
               + log["compute_buffer_mib"]["Metal"]) * MiB
    assert abs(weights + kv + compute - printed) <= 0.10 * printed


def test_split_total_is_within_ten_percent_llama_70b(models):
    log = LOGS["llama3.1-70b-q4_0-ctx4096-rpc"]
    f = facts_of(models["llama3.1-70b"])
    gpus = [{"name": f"RPC{i}", "budget": 20 * GiB + fit.reserve("cuda")} for i in range(2)]
    res = J(fit.plan(f, gpus, "cuda", logged(log)))
    assert res["status"] == "split" and res["n_ctx"] == log["ctx"]["n_ctx"]  # llama_context: n_ctx = 4096
    printed = sum(v for k, v in log["model_buffer_mib"].items() if k.startswith("RPC")) * MiB \
        + log["kv"]["size_mib"] * MiB + sum(v for k, v in log["compute_buffer_mib"].items() if k.startswith("RPC")) * MiB
    ours = sum(d["needs_bytes"] for d in res["devices"])
    assert abs(ours - printed) <= 0.10 * printed
    # the CPU side: token_embd mapped, the masks and looked-up embeddings in its compute buffer, the logits
    cpu = res["cpu"]
    assert abs(cpu["weights"] - log["model_buffer_mib"]["CPU_Mapped"] * MiB) <= MiB
    assert abs(cpu["compute"] - log["compute_buffer_mib"]["CPU"] * MiB) <= 0.15 * log["compute_buffer_mib"]["CPU"] * MiB
    assert abs(cpu["output"] - log["output_buffer_mib"]["CPU"] * MiB) <= 0.01 * MiB


# ------------------------------------------------------------------------------------------------
# the header reader


def test_header_facts_of_a_moe_and_a_sliding_window_model(models):
    moe = facts_of(models["qwen3-30b-a3b"])
    assert (moe["arch"], moe["n_layer"], moe["n_expert"], moe["n_expert_used"]) == ("qwen3moe", 48, 128, 8)
    assert moe["n_head_kv"] == [4] * 48 and moe["head_k"] == 128
    gemma = facts_of(models["gemma3-12b"])
    # gemma3: five sliding-window layers of every six (llama.cpp set_swa_pattern(6))
    assert gemma["swa"][:6] == [True] * 5 + [False] and sum(gemma["swa"]) == 40 and gemma["n_swa"] == 1024
    assert gemma["tied_embeddings"] and gemma["file_type"] == "Q4_K_M"


def test_split_parts_add_up_to_the_whole(tmp_path, models):
    parts = [gm.write(str(tmp_path / f"m-{i:05d}-of-00003.gguf"), "qwen3-4b", split=(i, 3)) for i in (1, 2, 3)]
    m = source.resolve(parts[0])
    assert m.files == [os.path.abspath(p) for p in parts]
    f = F.from_headers(m.label, [gguf_header.read(p) for p in m.files])
    whole = facts_of(models["qwen3-4b"])
    assert f["weights_bytes"] == whole["weights_bytes"] and f["layer_bytes"] == whole["layer_bytes"]


@pytest.mark.parametrize("content,says", [
    (b"PK\x03\x04 a zip, not a model", "not a GGUF file"),
    (b"GGUF\x03\x00\x00\x00\x05", "ends inside its GGUF header"),
    (b"GGUF\x09\x00\x00\x00" + b"\0" * 16, "GGUF version 9"),
])
def test_a_file_that_is_not_a_whole_gguf_header_is_named(tmp_path, content, says):
    p = tmp_path / "bad.gguf"
    p.write_bytes(content)
    with pytest.raises(gguf_header.ModelError, match=says):
        gguf_header.read(str(p))


def test_a_truncated_real_header_is_refused(tmp_path, models):
    with open(models["qwen3-4b"], "rb") as f:
        data = f.read(gguf_header.read(models["qwen3-4b"])["header_bytes"])
    p = tmp_path / "cut.gguf"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(gguf_header.ModelError, match="ends inside"):
        gguf_header.read(str(p))


def test_a_file_cut_short_after_its_header_is_refused(cli, tmp_path):
    """A download stopped in the weights: the header reads, but llama.cpp refuses the file ('tensor data is
    not within the file bounds'); the tensors' own offsets say how long it must be."""
    import engine_gguf

    whole = engine_gguf.write(str(tmp_path / "whole.gguf"), "llama-spm-q8_0")
    cut = tmp_path / "cut.gguf"
    with open(whole, "rb") as f:
        cut.write_bytes(f.read(2_000_000))
    r = cli("plan", "llamacpp", "--backend", "cpu", "--model", str(cut), "--cache-dir", str(tmp_path))
    assert r.rc == 5 and f"{cut}: the file is 2000000 bytes but its tensors end at byte {os.path.getsize(whole)}" in r.err
    assert cli("plan", "llamacpp", "--backend", "cpu", "--model", whole, "--cache-dir", str(tmp_path)).rc == 0


class Server:
    """Serves files on 127.0.0.1, honouring Range unless told not to; counts the bytes it sent."""

    def __init__(self, files: dict, ranges=True):
        self.files, self.ranges, self.sent, self.requests = files, ranges, 0, []
        server = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                body = server.files.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                if callable(body):
                    body = body()
                start, end = 0, len(body) - 1
                rng = self.headers.get("Range")
                if server.ranges and rng and rng.startswith("bytes="):
                    a, _, b = rng[6:].partition("-")
                    start, end = int(a), min(int(b) if b else end, len(body) - 1)
                    if start >= len(body):
                        self.send_response(416)
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(end - start + 1))
                self.end_headers()
                try:
                    for i in range(start, end + 1, 1 << 16):
                        chunk = body[i:min(i + (1 << 16), end + 1)]
                        self.wfile.write(chunk)
                        server.sent += len(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = TestServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


WEIGHTS = 64 * MiB  # stands for the gigabytes of weights behind the header: never to be sent


@pytest.mark.parametrize("ranges", [True, False], ids=["range", "no-range"])
def test_a_url_is_read_without_its_weights(models, ranges):
    body = gm.header(models["qwen3-4b"]) + bytes(WEIGHTS)
    s = Server({"/m.gguf": body}, ranges=ranges)
    try:
        h = gguf_header.read(s.url + "/m.gguf")
    finally:
        s.close()
    assert h["kv"]["general.architecture"] == "qwen3"
    assert s.sent < 8 * MiB  # the header and one block after it, not the weights
    if ranges:
        assert all(r and r.startswith("bytes=") for _, r in s.requests)


def test_a_missing_url_says_404(models):
    s = Server({})
    try:
        with pytest.raises(gguf_header.ModelError, match=r"not found \(HTTP 404\)"):
            gguf_header.read(s.url + "/nothing.gguf")
    finally:
        s.close()


def hf_repo(models, key="qwen3-4b", repo="org/Qwen3-4B-GGUF", name="Qwen3-4B-Q4_K_M.gguf"):
    body = gm.header(models[key]) + bytes(MiB)
    listing = json.dumps([{"path": name, "size": len(body)}, {"path": "mmproj-F16.gguf", "size": 10},
                          {"path": "README.md", "size": 1}]).encode()
    return {f"/api/models/{repo}/tree/main?recursive=true": listing, f"/{repo}/resolve/main/{name}": body}


def test_a_checkpoint_with_a_quant_resolves_through_the_repo_listing(models):
    s = Server(hf_repo(models))
    try:
        m = source.resolve("org/Qwen3-4B-GGUF:Q4_K_M", env={"HF_ENDPOINT": s.url})
    finally:
        s.close()
    assert m.files == [f"{s.url}/org/Qwen3-4B-GGUF/resolve/main/Qwen3-4B-Q4_K_M.gguf"]


def test_a_repo_the_hub_does_not_have_names_the_hub_s_variable():
    """A 404 from the model hub points at HF_ENDPOINT (the mirror it asked), not at the GitHub API's."""
    s = Server({})
    try:
        with pytest.raises(gguf_header.ModelError, match=r"not found \(HTTP 404.*\(HF_ENDPOINT\)"):
            source.resolve("org/Nothing-GGUF:Q4_K_M", env={"HF_ENDPOINT": s.url})
    finally:
        s.close()


def test_a_quant_the_repo_lacks_is_named():
    with pytest.raises(gguf_header.ModelError, match="no GGUF matching 'Q8_0'"):
        source._pick_variant(["a-Q4_K_M.gguf", "mmproj-Q8_0.gguf"], "Q8_0", "org/a:Q8_0")


def test_split_parts_in_a_repo_are_taken_together():
    files = [f"UD-Q4_K_XL/m-UD-Q4_K_XL-0000{i}-of-00002.gguf" for i in (1, 2)] + ["m-Q8_0.gguf"]
    assert source._pick_variant(files, "UD-Q4_K_XL", "o/m:UD-Q4_K_XL") == files[:2]


# ------------------------------------------------------------------------------------------------
# fit on the machines of the issue


def decision_on(name, recipe="llamacpp"):
    from selector import catalog, engine

    prof = profile_of(name)
    d = engine.decide(prof, catalog.load("lemonade"), recipe)
    return prof, d, d.verdict(d.backend)


def kv_per_token(f):
    """KV bytes per context token, written out from the hparams (f16 K and V)."""
    return sum(h * (f["head_k"] + f["head_v"]) * 2 for h in f["n_head_kv"])


def test_strix_halo_counts_gtt_and_fits_the_whole_trained_context(models):
    from selector.models import planner

    prof, d, v = decision_on("linux-ubuntu24.04-strix-halo")
    f = facts_of(models["qwen3-30b-a3b"])
    res = J(planner.fit_model(prof, d, v, f))
    # 0.5 GiB of VRAM could not hold 17 GiB: the GTT (63.2 GiB) is what makes it fit
    assert res["status"] == "fits" and res["ctx"] == 40960
    assert res["devices"][0]["memory"] == "VRAM + GTT"


def test_rtx_4090_fits_the_largest_context_its_free_memory_allows(models):
    from selector.models import planner

    prof, d, v = decision_on("linux-ubuntu24.04-rtx4090")
    f = facts_of(models["qwen3-30b-a3b"])
    res = J(planner.fit_model(prof, d, v, f))
    gpu = prof.nvidia_gpus[0]
    budget = (gpu.memory_free_bytes or gpu.memory_bytes) - fit.reserve("cuda")
    fixed = sum(f["layer_bytes"]) + f["output_bytes"]

    def need(ctx):
        return fixed + fit._pad(ctx, 256) * kv_per_token(f) + fit.compute_bytes(f, fit.Run(ctx=ctx))

    assert res["status"] == "fits" and res["devices"][0]["memory"] == "VRAM"
    assert need(res["ctx"]) <= budget
    assert res["ctx"] == res["trained_ctx"] or need(res["ctx"] + 256) > budget


def test_a_70b_on_one_4090_offloads_what_fits_and_says_what_would(models):
    from selector.models import planner

    prof, d, v = decision_on("linux-ubuntu24.04-rtx4090")
    f = facts_of(models["llama3.1-70b"])
    res = J(planner.fit_model(prof, d, v, f, ctx=8192))
    assert res["status"] == "partial"
    k = res["ngl"]
    budget = prof.nvidia_gpus[0].memory_bytes - fit.reserve("cuda")
    layer = f["layer_bytes"][-1] + 8192 * kv_per_token(f) // f["n_layer"]
    # -ngl K: the output layer first, then K - 1 repeating layers from the last (ggml-org/llama.cpp#18148)
    top = range(f["n_layer"] + 1 - k, f["n_layer"])
    assert (k - 1) * layer + f["output_bytes"] + fit.compute_bytes(f, fit.Run(ctx=8192), layers=top) <= budget
    more = range(f["n_layer"] - k, f["n_layer"])
    assert k * layer + f["output_bytes"] + fit.compute_bytes(f, fit.Run(ctx=8192), layers=more) > budget
    kinds = {s["kind"] for s in res["suggest"]}
    assert "quant" in kinds


def test_deepseek_splits_over_eight_mi300x_or_fits_one(models):
    from selector.models import planner

    prof, d, v = decision_on("linux-ubuntu22.04-8x-mi300x")
    f = facts_of(models["deepseek-v3"])
    res = J(planner.fit_model(prof, d, v, f, ctx=16384))
    # 205 GiB of weights: more than one MI300X (192 GB), so split over the GPUs the ROCm build serves
    assert res["status"] == "split" and len(res["devices"]) == 8
    assert abs(sum(res["tensor_split"]) - 1) < 0.05


@pytest.mark.parametrize("name,where", [
    ("linux-dgxos7-dgx-spark-gb10", "unified"),
    ("macos14-m3max", "working set"),
    ("linux-ubuntu24.04-r9700", "VRAM"),
])
def test_unified_and_working_set_memory_are_named(models, name, where):
    from selector.models import planner

    prof, d, v = decision_on(name)
    res = J(planner.fit_model(prof, d, v, facts_of(models["gemma3-12b"]), ctx=8192))
    assert res["status"] == "fits" and res["devices"][0]["memory"] == where


def test_ctx_past_training_is_refused(models):
    with pytest.raises(fit.FitError, match="trained for"):
        fit.plan(facts_of(models["qwen3-4b"]), [{"name": "g", "budget": 64 * GiB}], "cuda", ctx=65536)


# ------------------------------------------------------------------------------------------------
# the commands


def test_plan_prints_the_launch_line_and_lemonades_flags(cli, models, tmp_path):
    s = Server(hf_repo(models, repo="unsloth/Qwen3-4B-GGUF", name="Qwen3-4B-Q4_0.gguf"))
    try:
        r = cli("plan", "llamacpp", "--model", "Qwen3-4B-GGUF", "--root", machine("linux-ubuntu24.04-strix-halo"),
                "--cache-dir", str(tmp_path), "--json", env={"HF_ENDPOINT": s.url})
    finally:
        s.close()
    assert r.rc == 0, r.err
    p = r.json()
    jsonschema.validate(p, schema("plan"))
    assert p["fit"]["status"] == "fits" and p["fit"]["ngl"] == 37
    dev = p["fit"]["devices"][0]
    assert dev["needs_bytes"] == dev["weights_bytes"] + dev["kv_bytes"] + dev["compute_bytes"]
    a = p["args"]
    assert a[:2] == ["-hf", "unsloth/Qwen3-4B-GGUF:Q4_0"]
    assert a[a.index("--ctx-size") + 1] == str(p["fit"]["ctx"]) and "--flash-attn" in a
    assert p["install"] == "pick-backend install llamacpp" and not p["installed"]
    # Lemonade gives -ngl and the context itself; the rest of what the memory depends on goes through its
    # pass-through option, as the llama-server line pins it
    assert p["lemonade"] == (f"lemonade run Qwen3-4B-GGUF --llamacpp {p['backend']} --ctx-size {p['fit']['ctx']} "
                             "--llamacpp-args '--parallel 1 --batch-size 2048 --ubatch-size 512 --flash-attn on "
                             "--cache-type-k f16 --cache-type-v f16'")
    # the header is cached: models now knows the context without the network
    r = cli("models", "llamacpp", "--root", machine("linux-ubuntu24.04-strix-halo"), "--cache-dir", str(tmp_path),
            "--json", env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    jsonschema.validate(r.json(), schema("models"))
    row = next(m for m in r.json()["models"] if m["name"] == "Qwen3-4B-GGUF")
    assert row["basis"] == "header" and row["ctx"] == p["fit"]["ctx"]


def test_plan_pins_the_gpu_of_a_mixed_machine(cli, models, tmp_path):
    r = cli("plan", "llamacpp", "--model", models["qwen3-4b"], "--backend", "rocm",
            "--root", machine("linux-ubuntu24.04-radeonvii-w7500-rx6600"), "--cache-dir", str(tmp_path), "--json")
    assert r.rc == 0, r.err
    assert r.json()["env"].get("HIP_VISIBLE_DEVICES")


def test_models_lists_the_recipes_models_largest_first(cli):
    r = cli("models", "llamacpp", "--root", machine("linux-ubuntu24.04-rtx4090"), "--json")
    assert r.rc == 0, r.err
    rows = r.json()["models"]
    lemonade = [n for n, m in source.catalog()["models"].items() if m["recipe"] == "llamacpp"]
    assert sorted(x["name"] for x in rows) == sorted(lemonade)
    sizes = [x["size_bytes"] for x in rows]
    assert sizes == sorted(sizes, reverse=True)
    # 24 GiB of VRAM: the 0.38 GB Qwen3-0.6B fits; the 63 GB gpt-oss-120b (58.5 GiB) only with part of
    # it in the 62.6 GiB of system memory; with 32 GiB of it, not at all
    by = {x["name"]: x for x in rows}
    assert by["Qwen3-0.6B-GGUF"]["status"] == "fits"
    gpt = by["gpt-oss-120b-GGUF"]
    assert (gpt["status"], gpt["fits"], gpt["where"]) == ("partial", True, "VRAM + system memory")
    small = cli("models", "llamacpp", "--gpu", "RTX 4090", "--ram", "32G", "--json", "--cache-dir", "/nonexistent")
    assert small.rc == 0, small.err
    assert {x["name"]: x for x in small.json()["models"]}["gpt-oss-120b-GGUF"]["status"] == "no"
    fits = cli("models", "llamacpp", "--gpu", "RTX 4090", "--ram", "32G", "--json", "--fits",
               "--cache-dir", "/nonexistent").json()
    assert all(x["fits"] for x in fits["models"]) and len(fits["models"]) < len(rows)


@pytest.mark.parametrize("spec,code,says", [
    ("/nonexistent/model.gguf", 5, "no such file"),
    ("Whisper-Tiny", 2, "whispercpp model"),
    ("not-a-model", 5, "not a Lemonade model"),
])
def test_plan_bad_models_get_a_message_and_an_exit_code(cli, spec, code, says):
    r = cli("plan", "llamacpp", "--model", spec, "--root", machine("linux-ubuntu24.04-rtx4090"))
    assert r.rc == code and says in r.err and "Traceback" not in r.err


def test_plan_ctx_past_training_exits_2(cli, models):
    r = cli("plan", "llamacpp", "--model", models["qwen3-4b"], "--ctx-size", "100000",
            "--root", machine("linux-ubuntu24.04-rtx4090"))
    assert r.rc == 2 and "trained for (40960)" in r.err


def test_plan_exec_runs_the_installed_build_with_the_line_and_extra_args(cli, models, tmp_path):
    """This machine's installed cpu build (a script that writes what it was given) runs the plan's line,
    the arguments after --, and none of the shell's LLAMA_ARG_* options, which would change what it
    allocates."""
    d = tmp_path / "bin" / "llamacpp" / "cpu"
    d.mkdir(parents=True)
    (d / "version.txt").write_text("b9999\n")
    out = tmp_path / "argv.txt"
    exe = d / "llama-server"
    exe.write_text(f"#!/bin/sh\necho \"$@\" > {out}\necho \"SWA=$LLAMA_ARG_SWA_FULL\" >> {out}\n")
    exe.chmod(0o755)
    (d / "install.json").write_text(json.dumps({"binary": "llama-server"}))
    plan = cli("plan", "llamacpp", "--backend", "cpu", "--model", models["qwen3-4b"], "--ctx-size", "4096",
               "--cache-dir", str(tmp_path), "--json", env={"LLAMA_ARG_SWA_FULL": "1"})
    assert plan.rc == 0, plan.err
    assert any("LLAMA_ARG_SWA_FULL=1" in w for w in plan.json()["warnings"])
    r = cli("plan", "llamacpp", "--backend", "cpu", "--model", models["qwen3-4b"], "--ctx-size", "4096",
            "--cache-dir", str(tmp_path), "--exec", "--", "--port", "8080", env={"LLAMA_ARG_SWA_FULL": "1"})
    assert r.rc == 0, r.err
    argv, swa = out.read_text().splitlines()
    assert argv == " ".join(plan.json()["args"] + ["--port", "8080"])
    assert swa == "SWA="


def test_plan_exec_for_a_replayed_machine_is_refused(cli, models, tmp_path):
    """--root plans another machine; running this machine's build with that plan would allocate other
    numbers (another CPU's repacking, another GPU)."""
    r = cli("plan", "llamacpp", "--model", models["qwen3-4b"], "--root", machine("linux-ubuntu24.04-rtx4090"),
            "--cache-dir", str(tmp_path), "--exec", "--", "--port", "8080")
    assert r.rc == 2 and "--exec runs a build on this machine, and --root plans for another one" in r.err
    j = cli("plan", "llamacpp", "--model", models["qwen3-4b"], "--exec", "--json")
    assert j.rc == 2 and "there is no JSON to print after it" in j.err


def test_plan_exec_without_a_build_exits_4(cli, models, tmp_path):
    r = cli("plan", "llamacpp", "--backend", "cpu", "--model", models["qwen3-4b"], "--ctx-size", "4096",
            "--cache-dir", str(tmp_path), "--exec")
    assert r.rc == 4 and "pick-backend install llamacpp" in r.err


def test_the_model_list_is_its_source():
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
    import sync_catalog

    root = os.path.join(os.path.dirname(__file__), "..")
    rebuilt, _ = sync_catalog.regenerate("lemonade-models",
                                         os.path.join(root, "catalogs-src", "lemonade-models", "server_models.json"))
    assert rebuilt == source.catalog()


@pytest.mark.parametrize("name,gpt_oss_120b", [
    ("linux-ubuntu24.04-strix-halo", "fits"),     # 63.2 GiB of GTT takes its 62.8 GB
    ("linux-ubuntu24.04-r9700", "partial"),        # 32 GB of VRAM, the rest in its 126 GiB of system memory
    ("linux-ubuntu24.04-rtx4090", "partial"),      # 24 GB, the rest in its 62.6 GiB
    ("macos14-m3max", "no"),                       # 64 GB: Metal's working set is ~48 GiB, and it is that memory
    ("linux-ubuntu22.04-8x-mi300x", "split"),      # the ROCm build spreads it over its 8 GPUs, as `plan` does
    ("linux-dgxos7-dgx-spark-gb10", "fits"),       # 128 GB unified
])
def test_models_on_the_machines_of_the_issue(cli, name, gpt_oss_120b):
    r = cli("models", "llamacpp", "--root", machine(name), "--json")
    assert r.rc == 0, r.err
    by = {x["name"]: x for x in r.json()["models"]}
    assert by["Qwen3-0.6B-GGUF"]["fits"]
    assert by["gpt-oss-120b-GGUF"]["status"] == gpt_oss_120b
    if name == "linux-ubuntu24.04-strix-halo":
        assert by["gpt-oss-120b-GGUF"]["where"] == "VRAM + GTT"


def test_the_device_number_verify_read_goes_into_the_plan(cli, models, tmp_path):
    """After `verify` read the build's listing (a real RADV line, tests/test_verify.py), plan and
    the Lemonade line name the device as the build numbers it; a new build forgets the number."""
    from test_verify import R, fake_build, script

    fake_build(tmp_path, "vulkan", script(R.RADV_STRIX_OUT, R.RADV_STRIX_ERR))
    strix = machine("linux-ubuntu24.04-strix-halo")
    assert cli("verify", "llamacpp", "--root", strix, "--cache-dir", str(tmp_path)).rc == 0
    p = cli("plan", "llamacpp", "--model", models["qwen3-4b"], "--root", strix, "--cache-dir", str(tmp_path), "--json").json()
    a = p["args"]
    assert a[a.index("--device") + 1] == "Vulkan0" and p["device_ids_known"]
    assert p["installed"] and p["executable"].endswith("llama-server")
    (tmp_path / "bin" / "llamacpp" / "vulkan" / "version.txt").write_text("b0001\n")
    p = cli("plan", "llamacpp", "--model", models["qwen3-4b"], "--root", strix, "--cache-dir", str(tmp_path), "--json").json()
    assert "--device" not in p["args"] and not p["device_ids_known"]


# ------------------------------------------------------------------------------------------------
# the answers that are not "it fits"


def gpu(budget_gib):
    return [{"name": "g", "budget": int(budget_gib * GiB) + fit.reserve("cuda")}]


def test_what_would_fit_instead_is_true(models):
    f = facts_of(models["qwen3-4b"])
    full = fit.on_gpu(f, 37, fit.Run(ctx=40960))["total"]
    kv = fit.kv_bytes(f, fit.Run(ctx=40960))["total"]
    q8 = fit.kv_bytes(f, fit.Run(ctx=40960, type_k="q8_0", type_v="q8_0"))["total"]
    room = full - (kv - q8) // 2  # short of f16's need, but a q8_0 cache would fit
    res = J(fit.plan(f, [{"name": "g", "budget": room + fit.reserve("cuda")}], "cuda", ctx=40960))
    assert res["status"] == "partial"
    by = {s["kind"]: s for s in res["suggest"]}
    assert by["cache_type"]["flags"] == ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"]
    assert by["cache_type"]["says"].startswith(f"a q8_0 KV cache saves {(kv - q8) / GiB:.1f} GiB")
    assert J(fit.plan(f, [{"name": "g", "budget": room + fit.reserve("cuda")}], "cuda",
                    fit.Run(ctx=40960, type_k="q8_0", type_v="q8_0")))["status"] == "fits"
    smaller = int(by["ctx_size"]["flags"][1])
    assert fit.on_gpu(f, 37, fit.Run(ctx=smaller))["total"] <= room < fit.on_gpu(f, 37, fit.Run(ctx=smaller + 256))["total"]
    quant = by["quant"]["max_weights_bytes"]
    assert quant == f["weights_bytes"] - (full - room)
    more = by["memory"]["more_bytes"]  # the shortfall itself: that much more VRAM and it fits whole
    assert more == full - room and by["memory"]["says"].endswith("GiB more VRAM holds it whole as it is")
    assert J(fit.plan(f, [{"name": "g", "budget": room + more + fit.reserve("cuda")}], "cuda",
                    fit.Run(ctx=40960)))["status"] == "fits"


def test_nothing_fits_says_so_and_exits_3(cli, models):
    r = cli("plan", "llamacpp", "--model", models["deepseek-v3"], "--root", machine("linux-ubuntu24.04-strix-halo"), "--json")
    assert r.rc == 3
    p = r.json()["fit"]
    assert p["status"] == "no" and p["ngl"] == 0
    assert p["devices"][0]["needs_bytes"] > p["devices"][0]["budget_bytes"]
    kinds = {s["kind"] for s in p["suggest"]}
    assert "quant" in kinds and "cache_type" not in kinds  # 140 GiB short: a q8_0 cache saves MiB


def test_a_cpu_build_fits_in_system_memory_up_to_its_limit(models):
    f = facts_of(models["qwen3-4b"])
    roomy = J(fit.plan(f, [], "cpu", cpu_budget=64 * GiB))
    assert roomy["status"] == "cpu" and roomy["ctx"] == 40960
    budget = 4 * GiB
    tight = J(fit.plan(f, [], "cpu", cpu_budget=budget + fit.reserve("cpu")))

    def need(c):
        return fit.on_cpu(f, 0, fit.Run(ctx=c), ("x86_64", ()))["total"]

    assert tight["status"] == "cpu" and need(tight["ctx"]) <= budget < need(tight["ctx"] + 256)
    none = J(fit.plan(f, [], "cpu", cpu_budget=1 * GiB + fit.reserve("cpu")))
    assert none["status"] == "no" and none["suggest"]


def test_a_split_gives_each_gpu_the_layers_llama_cpp_gives_it(models):
    """llama.cpp puts layer il on the first device whose split point is above il / 81 (80 layers and
    the output layer): 41 layers on the first of two equal GPUs, 39 and the output layer on the second.
    The Llama 3.1 70B log over two equal RPC servers printed exactly that difference: the second
    buffer 96.14 MiB smaller (an output layer less two layers)."""
    log = LOGS["llama3.1-70b-q4_0-ctx4096-rpc"]
    f = facts_of(models["llama3.1-70b"])
    res = J(fit.plan(f, gpu(20) * 2, "cuda", fit.Run(ctx=4096, flash_attn=False)))
    a, b = res["devices"]
    assert res["tensor_split"] == [0.5, 0.5]
    assert fit.layer_devices(80, 81, [0.5, 0.5]) == [0] * 41 + [1] * 40
    assert b["weights_bytes"] - a["weights_bytes"] == f["output_bytes"] - 2 * f["layer_bytes"][0]
    first, second = (v for k, v in log["model_buffer_mib"].items() if k.startswith("RPC"))
    assert abs((b["weights_bytes"] - a["weights_bytes"]) / MiB - (second - first)) <= 0.01 * first
    # a partial offload spreads its layers the same way: -ngl 40 of 81 over two GPUs, 20 each
    assert fit.layer_devices(80, 40, [0.5, 0.5]) == [None] * 41 + [0] * 20 + [1] * 20


def test_a_recurrent_model_without_attention_has_no_kv_cache(models):
    f = dict(facts_of(models["qwen3-4b"]), recurrent=True)
    f["n_head_kv"] = [0] * f["n_layer"]
    none = fit.kv_bytes(f, fit.Run(ctx=8192))
    assert none == {"k": 0, "v": 0, "total": 0, "swa": 0, "cells": 0, "swa_cells": 0, "streams": 1}
    hybrid = dict(f, n_head_kv=[8 if il % 4 == 3 else 0 for il in range(f["n_layer"])])
    assert fit.kv_bytes(hybrid, fit.Run(ctx=8192))["total"] == 9 * 8192 * 8 * 256 * 2


def test_a_tied_model_maps_its_embeddings_once_on_the_cpu_and_copies_them_to_a_gpu(models):
    """A model with tied embeddings: with no layer offloaded the output layer stays on the CPU, where it
    is token_embd read through the same mapping; -ngl K offloads the output layer first, as a copy
    (TENSOR_DUPLICATED), and K - 1 repeating layers."""
    f = facts_of(models["qwen3-4b"])
    assert f["tied_embeddings"]
    run = fit.Run(ctx=4096)
    none = fit.on_cpu(f, 0, run)
    assert none["weights"] == f["input_bytes"] + sum(f["layer_bytes"]) + f["output_bytes"] - f["input_bytes"]
    assert f["output_bytes"] - f["input_bytes"] < f["input_bytes"]  # output_norm alone beside the shared table
    cpu, gpu = fit.on_cpu(f, 20, run), fit.on_gpu(f, 20, run)
    assert cpu["weights"] == f["input_bytes"] + sum(f["layer_bytes"][:f["n_layer"] + 1 - 20])
    assert gpu["weights"] == sum(f["layer_bytes"][f["n_layer"] + 1 - 20:]) + f["output_bytes"]


def test_a_gpu_with_no_room_past_its_reserve_is_not_split_onto(models):
    f = facts_of(models["llama3.1-70b"])
    tiny = {"name": "tiny", "budget": fit.reserve("cuda") // 2}
    res = J(fit.plan(f, gpu(20) + [tiny], "cuda", fit.Run(ctx=4096)))
    assert res["status"] == "partial" and [d["name"] for d in res["devices"]] == ["g"] and res["n_ctx"] == 4096
    assert res["tensor_split"] == [1.0, 0.0]  # the line gives it no layer, so llama.cpp puts none there


def test_a_plan_that_does_not_fit_names_the_cells_it_counted(models):
    f = facts_of(models["llama3.1-70b"])
    res = J(fit.plan(f, [{"name": "g", "budget": fit.reserve("cuda") + 1}], "cuda", fit.Run(ctx=1000), cpu_budget=GiB))
    assert res["status"] == "no" and res["ctx"] == 1000 and res["n_ctx"] == 1024


# ------------------------------------------------------------------------------------------------
# the header reader on what real files hold


@pytest.fixture(scope="session")
def vocab_model(tmp_path_factory):
    """Qwen3-4B's shape with its whole vocabulary in the header (151,936 strings): past the first
    range, as real headers are."""
    return gm.write(str(tmp_path_factory.mktemp("vocab") / "q.gguf"), "qwen3-4b", vocab_list=True)


def test_a_vocabulary_is_counted_not_kept_and_the_file_is_measured(vocab_model):
    h = gguf_header.read(vocab_model)
    assert h["kv"]["tokenizer.ggml.tokens"] == {"length": 151936}
    size = os.path.getsize(vocab_model)
    assert h["size"] == size == h["data_end"] and gguf_header.FIRST_RANGE < h["header_bytes"] < size
    assert h["tensors"]["blk.0.attn_q.weight"]["type"] == "Q4_K" and h["tensors"]["output_norm.weight"]["type"] == "F32"
    f = F.from_headers(vocab_model, [h])
    assert f["n_vocab"] == 151936


def test_a_header_past_the_first_range_takes_more_ranges(vocab_model):
    body = gm.header(vocab_model)
    s = Server({"/q.gguf": body + bytes(WEIGHTS)})
    try:
        h = gguf_header.read(s.url + "/q.gguf")
    finally:
        s.close()
    assert h["kv"]["tokenizer.ggml.tokens"] == {"length": 151936}
    assert h["size"] == len(body) + WEIGHTS  # from Content-Range's total
    starts = [int(r[6:].split("-")[0]) for _, r in s.requests]
    assert starts[0] == 0 and len(starts) >= 2 and starts == sorted(starts)


def test_long_number_arrays_are_skipped_and_version_2_is_read(tmp_path):
    import gguf

    p = str(tmp_path / "a.gguf")
    w = gguf.GGUFWriter(p, "llama")
    w.add_block_count(1)
    w.add_array("tokenizer.ggml.scores", [0.5] * 5000)
    w.add_array("tokenizer.ggml.token_type", [1] * 10)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    gm.fill(p)
    h = gguf_header.read(p)
    assert h["kv"]["tokenizer.ggml.scores"] == {"length": 5000} and h["kv"]["tokenizer.ggml.token_type"] == [1] * 10
    data = bytearray(open(p, "rb").read())
    data[4:8] = (2).to_bytes(4, "little")  # version 2 has the same little-endian layout
    open(p, "wb").write(bytes(data))
    assert gguf_header.read(p)["version"] == 2


@pytest.mark.parametrize("status,says", [(401, "HF_TOKEN"), (403, "HF_TOKEN"), (500, "HTTP 500")])
def test_refusals_from_the_server_are_named(status, says):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    httpd = TestServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with pytest.raises(gguf_header.ModelError, match=says):
            gguf_header.read(f"http://127.0.0.1:{httpd.server_address[1]}/m.gguf")
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_remote_header_cut_short_is_named(models):
    body = gm.header(models["qwen3-4b"])
    s = Server({"/m.gguf": body[: len(body) // 2]})
    try:
        with pytest.raises(gguf_header.ModelError, match="ends inside its GGUF header"):
            gguf_header.read(s.url + "/m.gguf")
    finally:
        s.close()


def raw_header(kvs: bytes, n_kv: int, n_tensors: int = 0) -> bytes:
    import struct

    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + kvs


def kv_string(key: bytes, value: bytes) -> bytes:
    import struct

    return struct.pack("<Q", len(key)) + key + struct.pack("<I", 8) + struct.pack("<Q", len(value)) + value


@pytest.mark.parametrize("data,says", [
    (lambda: raw_header(b"", 1 << 21), "claims 0 tensors and 2097152 keys"),
    (lambda: raw_header(b"", 1, 1 << 21), "claims 2097152 tensors"),
    (lambda: raw_header(__import__("struct").pack("<Q", 1 << 25) + b"k", 1), "a string of 33554432 bytes"),
])
def test_absurd_counts_are_refused_before_reading_on(tmp_path, data, says):
    p = tmp_path / "x.gguf"
    p.write_bytes(data())
    with pytest.raises(gguf_header.ModelError, match=says):
        gguf_header.read(str(p))


def test_odd_but_legal_values_are_read(tmp_path):
    import struct

    big = struct.pack("<Q", 9) + b"general.x" + struct.pack("<I", 10) + struct.pack("<Q", 1 << 40)
    arr = struct.pack("<Q", 5) + b"arr.n" + struct.pack("<IIQ", 9, 4, gguf_header.KEEP_ARRAY) \
        + struct.pack(f"<{gguf_header.KEEP_ARRAY}I", *range(gguf_header.KEEP_ARRAY))
    p = tmp_path / "x.gguf"
    p.write_bytes(raw_header(kv_string(b"general.name", b"caf\xe9") + big + arr, 3))
    kv = gguf_header.read(str(p))["kv"]
    assert kv["general.name"] == "caf\ufffd"  # not UTF-8: replaced, not a crash
    assert kv["general.x"] == 1 << 40
    assert kv["arr.n"] == list(range(gguf_header.KEEP_ARRAY))  # at the limit: kept


# ------------------------------------------------------------------------------------------------
# from a hostile audit


def test_cached_facts_follow_the_file_not_its_name(cli, models, tmp_path):
    m = tmp_path / "m.gguf"
    rtx = ("--root", machine("linux-ubuntu24.04-rtx4090"), "--cache-dir", str(tmp_path / "c"), "--json")
    gm.copy(models["qwen3-4b"], str(m))
    assert cli("plan", "llamacpp", "--model", str(m), *rtx).json()["model"]["n_layer"] == 36
    gm.copy(models["llama3.1-70b"], str(m))  # replaced under the same name
    assert cli("plan", "llamacpp", "--model", str(m), *rtx).json()["model"]["n_layer"] == 80
    m.unlink()
    r = cli("plan", "llamacpp", "--model", str(m), *rtx)
    assert r.rc == 5 and "no such file" in r.err


def test_a_fifo_as_the_model_is_refused_not_waited_on(cli, tmp_path):
    fifo = tmp_path / "f.gguf"
    os.mkfifo(fifo)
    r = cli("plan", "llamacpp", "--model", str(fifo), "--root", machine("linux-ubuntu24.04-rtx4090"))
    assert r.rc == 5 and "not a regular file" in r.err


@pytest.mark.parametrize("change,says", [
    ({"block_count": 40}, "block_count is 40, but the tensors are of 36 layers"),
    ({"ctx_train": "4096"}, "context_length is '4096'"),
    ({"n_head": 0}, "head_count is 0"),
])
def test_header_values_that_cannot_be_true_are_named(cli, tmp_path, change, says):
    p = str(tmp_path / "odd.gguf")
    key = dict(change)
    if "block_count" in key:  # tensors of 36 layers, a block count of 40
        import gguf

        w = gguf.GGUFWriter(p, "qwen3")
        w.add_block_count(key["block_count"])
        w.add_head_count(32)
        for il in range(36):
            w.add_tensor_info(f"blk.{il}.attn_norm.weight", [4], np.dtype(np.float32), 16)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        w.close()
        gm.fill(p)
    else:
        gm.write(p, "qwen3-4b", **key)
    r = cli("plan", "llamacpp", "--model", p, "--root", machine("linux-ubuntu24.04-rtx4090"))
    assert r.rc == 5 and says in r.err and "Traceback" not in r.err


def test_an_integrated_gpu_is_left_out_when_a_discrete_one_is_there(models):
    from selector.models import planner

    prof, d, v = decision_on("linux-ubuntu24.04-7950x-rx7900xtx")
    res = J(planner.fit_model(prof, d, v, facts_of(models["llama3.1-70b"]), ctx=4096))
    # llama.cpp's default devices: the Raphael iGPU only if there were no discrete GPU
    assert res["status"] == "partial" and [x["name"] for x in res["devices"]] == ["AMD Radeon RX 7900 XTX/XT/GRE"]


def test_a_checkpoint_naming_its_file_is_read_from_the_hub_cache(cli, models, tmp_path):
    """Lemonade names some checkpoints by file (OpenBMB/MiniCPM5-1B-GGUF:MiniCPM5-1B-Q4_K_M.gguf): once
    downloaded, that file is read where huggingface_hub keeps it, with no network."""
    snap = tmp_path / "hub" / "models--OpenBMB--MiniCPM5-1B-GGUF" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    gm.copy(models["qwen3-4b"], str(snap / "MiniCPM5-1B-Q4_K_M.gguf"))
    r = cli("plan", "llamacpp", "--model", "MiniCPM5-1B-GGUF", "--root", machine("linux-ubuntu24.04-rtx4090"),
            "--cache-dir", str(tmp_path / "c"), "--json",
            env={"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert r.rc == 0, r.err
    assert r.json()["args"][:2] == ["-m", str(snap / "MiniCPM5-1B-Q4_K_M.gguf")]


def test_a_lemonade_model_already_downloaded_needs_no_network(cli, models, tmp_path):
    snap = tmp_path / "hub" / "models--unsloth--Qwen3-8B-GGUF" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    gm.copy(models["qwen3-4b"], str(snap / "Qwen3-8B-Q4_1.gguf"))
    (snap / "Qwen3-8B-Q8_0.gguf").write_bytes(b"GGUF")
    r = cli("plan", "llamacpp", "--model", "Qwen3-8B-GGUF", "--root", machine("linux-ubuntu24.04-rtx4090"),
            "--cache-dir", str(tmp_path / "c"), "--json",
            env={"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert r.rc == 0, r.err
    assert r.json()["args"][:2] == ["-m", str(snap / "Qwen3-8B-Q4_1.gguf")]


# ------------------------------------------------------------------------------------------------
# a mixture of experts that does not fit whole: its experts in system memory (--n-cpu-moe)


def test_experts_on_the_cpu_leave_the_gpu_what_the_engine_printed(models):
    """The Qwen3-30B-A3B log kept every expert tensor in CPU_Mapped (-ot exps=CPU) and the rest on two
    GPUs: the GPU side is exact; the CPU side within 5% (the experts' quantization types are derived)."""
    log = LOGS["qwen3-30b-a3b-q4km-ctx16384-2gpu-expertsCPU"]
    f = facts_of(models["qwen3-30b-a3b"])
    run = logged(log)
    gpu = fit.on_gpu(f, f["n_layer"] + 1, run, cpu_moe=f["n_layer"])["weights"]
    printed = (log["model_buffer_mib"]["CUDA0"] + log["model_buffer_mib"]["CUDA1"]) * MiB
    assert abs(gpu - printed) <= 0.01 * MiB
    cpu = fit.on_cpu(f, f["n_layer"] + 1, run, cpu_moe=f["n_layer"])["weights"]
    assert abs(cpu - log["model_buffer_mib"]["CPU_Mapped"] * MiB) <= 0.05 * cpu


def test_a_moe_too_big_for_the_gpu_keeps_the_fewest_experts_in_system_memory(cli, models, tmp_path):
    r = cli("plan", "llamacpp", "--model", models["qwen3-30b-a3b"], "--ctx-size", "16384",
            "--root", machine("linux-debian12-gtx1080"), "--cache-dir", str(tmp_path), "--json")
    assert r.rc == 0, r.err
    p = r.json()
    res, a = p["fit"], p["args"]
    n = res["n_cpu_moe"]
    assert res["status"] == "experts" and a[a.index("-ngl") + 1] == "49" and a[a.index("--n-cpu-moe") + 1] == str(n)
    dev = res["devices"][0]
    assert dev["needs_bytes"] <= dev["budget_bytes"]
    f = facts_of(models["qwen3-30b-a3b"])
    budget = dev["budget_bytes"]
    run = fit.Run(ctx=16384, flash_attn=res["flash_attn"])
    assert fit.on_gpu(f, 49, run, cpu_moe=n - 1)["total"] > budget  # one layer fewer would not fit
    # the experts in system memory, and what the other way (-ngl K) would read from it per token
    assert res["cpu"]["weights"] == f["input_bytes"] + sum(f["expert_bytes"][:n])
    assert res["instead_of"]["status"] == "partial" and res["instead_of"]["cpu_read_bytes"] > res["cpu_read_bytes"]
    assert res["cpu_read_bytes"] == sum(e * 8 // 128 for e in f["expert_bytes"][:n])
    assert p["lemonade"] is None or "--n-cpu-moe" in p["lemonade"]


@pytest.mark.parametrize("key,vram_gib", [("gpt-oss-20b", 8), ("deepseek-v3", 16), ("qwen3-30b-a3b", 12)])
def test_experts_in_system_memory_are_the_tensors_the_engine_moves(models, key, vram_gib):
    """--n-cpu-moe N overrides the tensors matching blk.<i>.ffn_(up|down|gate)_exps for i < N to the
    CPU (common/arg.cpp LLM_FFN_EXPS_REGEX); with mmap they stay in CPU_Mapped beside token_embd.
    The bytes are counted here from the file's own tensor table, not from the planner's facts:
    gpt-oss with its sliding-window layers, DeepSeek's MLA with three dense layers first."""
    import re

    import gguf

    path = models[key]
    f = facts_of(path)
    run = fit.Run(ctx=8192)
    res = J(fit.plan(f, [{"name": "g", "budget": vram_gib * GiB + fit.reserve("cuda")}], "cuda", run))
    assert res["status"] == "experts" and res["ngl"] == f["n_layer"] + 1
    n = res["n_cpu_moe"]
    sizes = {t.name: int(t.n_bytes) for t in gguf.GGUFReader(path).tensors}
    exps = re.compile(r"^blk\.(\d+)\.ffn_(up|down|gate)_exps")
    moved = sum(b for name, b in sizes.items() if (m := exps.match(name)) and int(m.group(1)) < n)
    assert moved > 0
    assert res["cpu"]["weights"] == sizes["token_embd.weight"] + moved
    dev = res["devices"][0]
    assert dev["weights_bytes"] == sum(sizes.values()) - sizes["token_embd.weight"] - moved + \
        (sizes["token_embd.weight"] if "output.weight" not in sizes else 0)  # a tied output is a copy
    assert dev["kv_bytes"] == fit.kv_bytes(f, run)["total"] and dev["kv_swa_bytes"] == fit.kv_bytes(f, run)["swa"]
    if key == "gpt-oss-20b":
        assert 0 < dev["kv_swa_bytes"] < dev["kv_bytes"]  # half its layers keep a window of 128, not the context
    # one layer fewer would not fit, so no more is kept in system memory than must be
    assert fit.on_gpu(f, f["n_layer"] + 1, run, cpu_moe=n - 1)["total"] > vram_gib * GiB or \
        not any(exps.match(name) and int(exps.match(name).group(1)) == n - 1 for name in sizes)


def test_the_bandwidths_decide_between_layers_and_experts_in_system_memory(models):
    f = facts_of(models["qwen3-30b-a3b"])
    gpus = [{"name": "g", "budget": 12 * GiB + fit.reserve("cuda")}]
    run = fit.Run(ctx=8192)
    usual = J(fit.plan(f, gpus, "cuda", run, bandwidth=(1000, 60)))
    assert usual["status"] == "experts" and usual["instead_of"]["status"] == "partial"
    # a system memory faster than the GPU (made up) reverses it: reading more from it is then quicker
    odd = J(fit.plan(f, gpus, "cuda", run, bandwidth=(100, 2000)))
    assert odd["status"] == "partial" and odd["instead_of"]["status"] == "experts"
    blind = J(fit.plan(f, gpus, "cuda", run))  # no bandwidth known: the one reading less from system memory
    assert blind["status"] == "experts"


def test_the_bound_of_a_partial_offload_is_above_a_published_run_and_near_it(models, tmp_path):
    """llmfit's RTX 2080 run of Qwen3-14B Q4_K_M with -ngl 32 (9 of 40 layers in system memory, an
    i9-10900X): the bound `plan` computes for that line is above what was measured,
    and within a factor of two of it (docs/models.md gives the ratio)."""
    from selector.models import speed

    run = json.load(open(os.path.join(os.path.dirname(__file__), "data", "llama_bench_published.json")))
    pub = run["partial_offload"][0]
    f = facts_of(gm.write(str(tmp_path / "q14.gguf"), "qwen3-14b"))
    gpu_bw = next(r["gbps"] for r in speed.table()["nvidia"] if r["match"] == "RTX 2080")
    cpu_bw = next(r["gbps"] for r in speed.table()["cpu"] if r["match"] == "i9-10900X")
    # -ngl 32: the output layer and the last 31 layers on the GPU (a build after ggml-org/llama.cpp#18148;
    # the run does not name its build: before it, the last 32 layers and the output on the CPU)
    on_gpu = sum(fit.layer_active(f, il) for il in range(fit.gpu_start(f["n_layer"], pub["ngl"]), f["n_layer"])) \
        + f["output_bytes"]
    on_cpu = fit.active_bytes(f) - on_gpu
    bound = 1 / (on_gpu / (gpu_bw * 1e9) + on_cpu / (cpu_bw * 1e9))
    assert pub["tokens_per_s"] <= bound <= 2 * pub["tokens_per_s"], bound


# ------------------------------------------------------------------------------------------------
# the line and the budget follow the runtime the build runs on


def _plan_json(cli, tmp_path, fixture, model, *extra):
    r = cli("plan", "llamacpp", "--model", model, "--root", machine(fixture), "--cache-dir", str(tmp_path), "--json",
            *extra)
    assert r.rc == 0, r.err
    return r.json()


def test_a_partial_plan_gives_the_engine_the_layers_it_counted(cli, models, tmp_path):
    from selector.models import planner

    p = _plan_json(cli, tmp_path, "linux-ubuntu24.04-7950x-rx7900xtx", models["llama3.1-70b"], "--backend", "rocm",
                   "--ctx-size", "4096")
    res, a = p["fit"], p["args"]
    assert res["status"] == "partial" and a[a.index("-ngl") + 1] == str(res["ngl"])
    f = facts_of(models["llama3.1-70b"])
    run = fit.Run(ctx=4096, flash_attn=res["flash_attn"])
    budget = res["devices"][0]["budget_bytes"]
    assert fit.on_gpu(f, res["ngl"], run)["total"] <= budget < fit.on_gpu(f, res["ngl"] + 1, run)["total"]
    # Lemonade gives llama-server -ngl 99 and keeps the flag to itself: it cannot run this line
    kept = f["n_layer"] + 1 - res["ngl"]
    same = fit.plan(f, [{"name": "g", "budget": budget + fit.reserve("rocm")}], "rocm", run)
    assert same.ngl == res["ngl"]
    assert planner.lemonade_note(same) == (f"not through Lemonade: it gives llama-server -ngl 99 and reserves the "
                                          f"flag, so it cannot keep {kept} layers on the CPU as this plan does")


def test_a_model_deeper_than_lemonades_layers_is_said_to_spill_there(models, tmp_path):
    from selector.models import planner

    f = facts_of(gm.write(str(tmp_path / "deep.gguf"), "qwen3-4b", n_layer=120))
    res = fit.plan(f, [{"name": "g", "budget": 80 * GiB}], "cuda", fit.Run(ctx=4096))
    assert res.status == "fits" and res.ngl == 121
    assert planner.lemonade_note(res) == ("not through Lemonade: it gives llama-server -ngl 99, which leaves 22 of "
                                          "this model's 121 layers on the CPU")
    assert planner.lemonade_note(replace(res, layout=replace(res.layout, ngl=99))) is None


def test_each_runtime_keeps_its_own_reserve_out_of_the_budget(cli, models, tmp_path):
    """The budget is the device's memory less what its runtime keeps (llamacpp-fit.json "reserve":
    ROCm and CUDA 512 MiB, Vulkan and Metal 256 MiB): the same RX 7900 XTX has 256 MiB more room for
    a Vulkan build than for a ROCm one, and an M3 Max its working set less Metal's."""
    from probes import memory

    budget = {}
    for backend in ("vulkan", "rocm"):
        p = _plan_json(cli, tmp_path, "linux-ubuntu24.04-7950x-rx7900xtx", models["llama3.1-70b"], "--backend", backend,
                       "--ctx-size", "4096")
        assert p["runtime"] == backend
        budget[backend] = p["fit"]["devices"][0]["budget_bytes"]
    assert budget["vulkan"] - budget["rocm"] == fit.reserve("rocm") - fit.reserve("vulkan") == 256 * MiB
    p = _plan_json(cli, tmp_path, "macos14-m3max", models["qwen3-4b"], "--ctx-size", "4096")
    assert p["runtime"] == "metal"
    assert p["fit"]["devices"][0]["budget_bytes"] == \
        memory.metal(profile_of(machine("macos14-m3max"))).usable - fit.reserve("metal")


def test_sizes_are_printed_in_the_units_llama_cpp_prints_buffers_in():
    from selector.models import planner

    assert planner.size(3 * GiB // 2) == "1.5 GiB" and planner.size(GiB) == "1.0 GiB"
    assert planner.size(512 * MiB) == "512.00 MiB" and planner.size(None) == "-"
    assert planner.gib(40 * GiB) == "40.0 GiB" and planner.gib(None) == "-"


def test_a_build_the_fit_table_does_not_name_runs_on_its_devices_runtime(cli, models, tmp_path):
    # LocalAI's llama-cpp images: cuda12 on an RTX 4090 is CUDA; intel on an Arc A770 is SYCL, not Vulkan
    for fixture, backend, runtime in (("linux-ubuntu24.04-rtx4090", "cuda12", "cuda"),
                                      ("linux-ubuntu24.04-arc-a770", "intel", "sycl")):
        r = cli("--catalog", "localai", "plan", "llama-cpp", "--model", models["qwen3-4b"], "--root", machine(fixture),
                "--backend", backend, "--cache-dir", str(tmp_path), "--json")
        if fixture.endswith("arc-a770"):  # the Arc's memory is not probed yet: no plan can say what fits
            assert r.rc == 3 and "memory of Intel Arc A770" in r.json()["error"], r.err
            from selector.kinds import runtime as runtime_of

            assert runtime_of(backend, "intel_gpu") == runtime
            continue
        assert r.rc == 0, r.err
        assert (r.json()["backend"], r.json()["runtime"]) == (backend, runtime)


# ------------------------------------------------------------------------------------------------
# what does not fit whole over several GPUs: the layers (or experts) left in system memory, and the
# rest spread over every GPU the build serves, as -ngl K with --tensor-split gives them to llama.cpp


def test_a_partial_offload_spreads_its_layers_over_every_gpu(models):
    f = facts_of(models["llama3.1-70b"])
    run = fit.Run(ctx=4096)
    two = [{"name": n, "budget": 12 * GiB + fit.reserve("cuda")} for n in ("a", "b")]
    res = J(fit.plan(f, two, "cuda", run))
    k = res["ngl"]
    assert res["status"] == "partial" and res["tensor_split"] == [0.5, 0.5]
    assert [d["name"] for d in res["devices"]] == ["a", "b"]
    assert all(d["needs_bytes"] <= d["budget_bytes"] for d in res["devices"])
    # held to llama.cpp's rule: the output layer and the last K - 1 layers, half the offloaded ones each
    where = fit.layer_devices(f["n_layer"], k, [0.5, 0.5])
    a = sum(f["layer_bytes"][il] for il in range(f["n_layer"]) if where[il] == 0)
    b = sum(f["layer_bytes"][il] for il in range(f["n_layer"]) if where[il] == 1) + f["output_bytes"]
    assert [d["weights_bytes"] for d in res["devices"]] == [a, b]
    assert where.count(None) == f["n_layer"] + 1 - k and where[-1] == 1
    # one layer more would not fit; one GPU alone holds fewer
    assert fit._split(f, two, "cuda", run)(4096, k + 1) is None
    alone = J(fit.plan(f, two[:1], "cuda", run))
    assert alone["status"] == "partial" and alone["ngl"] < k
    assert res["cpu"]["weights"] < alone["cpu"]["weights"]  # less left in system memory
    assert res["cpu_read_bytes"] < alone["cpu_read_bytes"]


def test_experts_in_system_memory_leave_the_rest_spread_over_every_gpu(models):
    f = facts_of(models["qwen3-30b-a3b"])
    run = fit.Run(ctx=8192)
    two = [{"name": n, "budget": 6 * GiB + fit.reserve("cuda")} for n in ("a", "b")]
    res = J(fit.plan(f, two, "cuda", run, bandwidth=(900, 60)))
    assert res["tensor_split"] == [0.5, 0.5] and len(res["devices"]) == 2
    experts = res if res["status"] == "experts" else res["instead_of"]
    assert experts["status"] == "experts"
    n = experts["n_cpu_moe"]
    assert fit._split(f, two, "cuda", run)(8192, 49, n) is not None
    assert fit._split(f, two, "cuda", run)(8192, 49, n - 1) is None  # the fewest that fits
    alone = J(fit.plan(f, two[:1], "cuda", run, bandwidth=(900, 60)))
    assert alone["status"] == "experts" and n < alone["n_cpu_moe"]
    # the same model on two GPUs as the line gives it: attention, norms and the router of every layer
    # spread over both, the experts of the first N layers in system memory
    got = fit._split(f, two, "cuda", run)(8192, 49, n)[1]
    where = fit.layer_devices(f["n_layer"], 49, [0.5, 0.5])
    assert [g["weights"] for g in got] == [
        sum(f["layer_bytes"][il] - (f["expert_bytes"][il] if il < n else 0) for il in range(f["n_layer"]) if where[il] == i)
        + (f["output_bytes"] if where[-1] == i else 0) for i in (0, 1)]
