"""Header-only GGUF files of real model shapes, written with ggml-org's gguf package.

Each MODEL gives the hyperparameters llama.cpp printed for the model in tests/data/llamacpp_logs.json
(print_info lines, cited there); the tensor list is the architecture's (llama.cpp's
src/llama-arch.cpp tensor names) with the shapes those hyperparameters give.  Derived, not printed:
the feed-forward widths marked "n_ff (config.json)" and the per-tensor quantization types, which
follow llama.cpp's Q4_K_M recipe (src/llama-quant.cpp llama_tensor_get_type: Q6_K for attn_v and
ffn_down in the first and last eighth of the layers and every third one between, Q6_K for the
output layer, Q4_K for the rest).  The header is followed by a sparse hole as long as the weights:
a file of the real size that costs no disk, and zeros to a reader that wants the weights.
"""

from __future__ import annotations

import os

import gguf
import numpy as np

Q = gguf.GGMLQuantizationType

MODELS = {
    # Qwen3-4B Q4_K_M: print_info in the GTX 1060 log; n_ff 9728 from Qwen/Qwen3-4B config.json
    "qwen3-4b": dict(arch="qwen3", n_layer=36, n_embd=2560, n_head=32, n_head_kv=8, head=128, n_ff=9728,
                     n_vocab=151936, ctx_train=40960, tied=True, qk_norm=True, embd_type=Q.Q6_K),
    # Llama 3.1 70B Q4_0: print_info in the RPC log; n_ff 28672 from meta-llama config.json
    "llama3.1-70b": dict(arch="llama", n_layer=80, n_embd=8192, n_head=64, n_head_kv=8, head=128, n_ff=28672,
                         n_vocab=128256, ctx_train=131072, tied=False, all_type=Q.Q4_0, embd_type=Q.Q4_0,
                         out_type=Q.Q6_K),
    # Qwen3-30B-A3B Q4_K_M: print_info in ik_llama.cpp#514; n_ff_exp 768 from Qwen config.json
    "qwen3-30b-a3b": dict(arch="qwen3moe", n_layer=48, n_embd=2048, n_head=32, n_head_kv=4, head=128, n_ff=0,
                          n_ff_exp=768, n_expert=128, n_expert_used=8, n_vocab=151936, ctx_train=40960,
                          tied=False, qk_norm=True),
    # gpt-oss-20b MXFP4: print_info in the Apple M5 log (n_ff_exp 2880, 32 experts, 4 used, n_swa 128)
    "gpt-oss-20b": dict(arch="gpt-oss", n_layer=24, n_embd=2880, n_head=64, n_head_kv=8, head=64, n_ff=0,
                        n_ff_exp=2880, n_expert=32, n_expert_used=4, n_vocab=201088, ctx_train=131072,
                        tied=False, swa=128, exp_type=Q.MXFP4, all_type=Q.Q8_0, embd_type=Q.Q8_0,
                        out_type=Q.Q8_0),
    # DeepSeek-V3-0324 (MLA): print_info in ik_llama.cpp PR #394; one KV head of 576 (512 + 64) and
    # 512 as the converter writes MLA; experts, widths (n_ff 18432, n_ff_exp 2048) from config.json
    "deepseek-v3": dict(arch="deepseek2", n_layer=61, n_embd=7168, n_head=128, n_head_kv=1, head=576, head_v=512,
                        n_ff=18432, n_ff_exp=2048, n_expert=256, n_expert_used=8, n_vocab=129280,
                        ctx_train=163840, tied=False, kv_lora_rank=512, all_type=Q.Q2_K, embd_type=Q.Q4_K,
                        out_type=Q.Q6_K, mla=True),
    # Gemma 3 270M: the geometry unsloth/unsloth#7530 measured llama-server's KV cache on (cited in
    # tests/data/llamacpp_logs.json); n_embd 640, n_ff 2048, vocab 262144 from google/gemma-3-270m config.json
    "gemma3-270m": dict(arch="gemma3", n_layer=18, n_embd=640, n_head=4, n_head_kv=1, head=256, n_ff=2048,
                        n_vocab=262144, ctx_train=32768, tied=True, swa=512, qk_norm=True, embd_type=Q.Q8_0,
                        all_type=Q.Q8_0),
    # Qwen3-14B Q4_K_M: shapes from Qwen/Qwen3-14B config.json (40 layers, hidden 5120, intermediate 17408,
    # 40/8 heads of 128, vocab 151936, untied); no log pinned: derived, for the speed of a partial offload
    "qwen3-14b": dict(arch="qwen3", n_layer=40, n_embd=5120, n_head=40, n_head_kv=8, head=128, n_ff=17408,
                      n_vocab=151936, ctx_train=40960, tied=False, qk_norm=True, embd_type=Q.Q4_K),
    # Gemma 3 12B: shapes from google/gemma-3-12b-it config.json (no llama.cpp log pinned: derived)
    "gemma3-12b": dict(arch="gemma3", n_layer=48, n_embd=3840, n_head=16, n_head_kv=8, head=256, n_ff=15360,
                       n_vocab=262208, ctx_train=131072, tied=True, swa=1024, qk_norm=True, embd_type=Q.Q6_K),
}


def _more_bits(il: int, n: int) -> bool:
    return il < n // 8 or il >= 7 * n // 8 or (il - n // 8) % 3 == 2


def tensors(m: dict) -> list[tuple[str, list[int], int]]:
    """(name, shape as ggml orders it, ggml type) for every tensor of the model."""
    n, e, hk = m["n_layer"], m["n_embd"], m["head"]
    hv = m.get("head_v", hk)
    base = m.get("all_type", Q.Q4_K)
    out = [("token_embd.weight", [e, m["n_vocab"]], m.get("embd_type", base)),
           ("output_norm.weight", [e], Q.F32)]
    if not m["tied"]:
        out.append(("output.weight", [e, m["n_vocab"]], m.get("out_type", Q.Q6_K)))
    if m.get("ple"):  # Gemma 3n's per-layer embeddings (llama.cpp's per_layer_token_embd): ple wide per layer
        out.append(("per_layer_token_embd.weight", [m["n_layer"] * m["ple"], m["n_vocab"]], Q.Q8_0))
    for il in range(n):
        big = Q.Q6_K if base == Q.Q4_K and _more_bits(il, n) else base
        p = f"blk.{il}."
        out += [(p + "attn_norm.weight", [e], Q.F32)]
        if m.get("mla"):
            out += [(p + "attn_q_a.weight", [e, 1536], base), (p + "attn_q_b.weight", [1536, m["n_head"] * 192], base),
                    (p + "attn_kv_a_mqa.weight", [e, m["kv_lora_rank"] + 64], base),
                    (p + "attn_k_b.weight", [128, m["kv_lora_rank"], m["n_head"]], base),
                    (p + "attn_v_b.weight", [m["kv_lora_rank"], 128, m["n_head"]], base),
                    (p + "attn_output.weight", [m["n_head"] * 128, e], base)]
        else:
            out += [(p + "attn_q.weight", [e, m["n_head"] * hk], base),
                    (p + "attn_k.weight", [e, m["n_head_kv"] * hk], base),
                    (p + "attn_v.weight", [e, m["n_head_kv"] * hv], big),
                    (p + "attn_output.weight", [m["n_head"] * hv, e], base)]
        if m.get("qk_norm"):
            out += [(p + "attn_q_norm.weight", [hk], Q.F32), (p + "attn_k_norm.weight", [hk], Q.F32)]
        out += [(p + "ffn_norm.weight", [e], Q.F32)]
        dense = m["n_ff"] and (not m.get("n_expert") or (m.get("mla") and il < 3))
        if dense:
            out += [(p + "ffn_gate.weight", [e, m["n_ff"]], base), (p + "ffn_up.weight", [e, m["n_ff"]], base),
                    (p + "ffn_down.weight", [m["n_ff"], e], big)]
        else:
            x, f, t = m["n_expert"], m["n_ff_exp"], m.get("exp_type", base)
            out += [(p + "ffn_gate_inp.weight", [e, x], Q.F32),
                    (p + "ffn_gate_exps.weight", [e, f, x], t), (p + "ffn_up_exps.weight", [e, f, x], t),
                    (p + "ffn_down_exps.weight", [f, e, x], Q.Q6_K if t == Q.Q4_K and _more_bits(il, n) else t)]
    return out


def write(path: str, key: str, split: tuple[int, int] | None = None, **extra) -> str:
    """Write the header of MODELS[key] to ``path``; ``split=(i, n)`` writes part i of n (each part
    holds every n-th tensor, as gguf-split distributes them).  The tensor data is a sparse hole as
    long as the tensors: a complete file to a reader that checks sizes, no disk used; ``cut=True``
    leaves the header alone, a download cut short."""
    m = {**MODELS[key], **{k: v for k, v in extra.items() if k != "cut"}}
    arch = m["arch"]
    w = gguf.GGUFWriter(path, arch)
    w.add_name(key)
    w.add_block_count(m["n_layer"])
    w.add_embedding_length(m["n_embd"])
    if isinstance(m["ctx_train"], int):
        w.add_context_length(m["ctx_train"])
    else:  # a malformed header, for the tests of bad input
        w.add_string(f"{arch}.context_length", str(m["ctx_train"]))
    w.add_head_count(m["n_head"])
    w.add_head_count_kv(m["n_head_kv"])
    w.add_key_length(m["head"])
    w.add_value_length(m.get("head_v", m["head"]))
    if m.get("swa"):
        w.add_sliding_window(m["swa"])
    if m.get("n_expert"):
        w.add_expert_count(m["n_expert"])
        w.add_expert_used_count(m["n_expert_used"])
    if m.get("kv_lora_rank"):
        w.add_kv_lora_rank(m["kv_lora_rank"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    w.add_token_list([f"t{i}" for i in range(m["n_vocab"])] if m.get("vocab_list") else [])
    ts = tensors(m)
    if split:
        i, n = split
        ts = ts[i - 1::n]
        w.add_uint16("split.no", i - 1)
        w.add_uint16("split.count", n)
    for name, shape, qtype in ts:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        count = int(np.prod(shape))
        # numpy order (ggml's reversed) in bytes per row: the writer turns it back into elements
        byte_shape = list(reversed(shape))
        byte_shape[-1] = shape[0] // block * size
        w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), count // block * size, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    if extra.get("cut") is None:
        fill(path)
    return path


def fill(path: str) -> str:
    """Make a GGUF whose header was written alone as long as its tensors say: a sparse hole, no disk."""
    from selector.models import gguf_header

    f = gguf_header._File(path)
    try:
        end = gguf_header._parse(f)["data_end"]
    finally:
        f.close()
    os.truncate(path, max(end, os.path.getsize(path)))
    return path


def header(path: str) -> bytes:
    """The header of a GGUF this module wrote, without the hole behind it."""
    from selector.models import gguf_header

    with open(path, "rb") as f:
        return f.read(gguf_header.read(path)["header_bytes"])


def copy(src: str, dst: str) -> str:
    """A copy of a GGUF this module wrote: its header and a hole as long (no disk, no memory)."""
    size = os.path.getsize(src)
    with open(dst, "wb") as f:
        f.write(header(src))
    os.truncate(dst, size)
    return dst
