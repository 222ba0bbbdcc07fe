"""Complete GGUF models with random weights, small enough to write in a second, that a real
llama.cpp loads and runs.

tests/gguf_models.py writes headers with holes for weights (real models' shapes, for the arithmetic against public
logs); the models here carry every tensor, a working tokenizer and a chat template, so the test
suite can start llama-server, llama-bench and llama-cli on them and read what the engine itself
allocates.  The text they generate is noise; the buffers the engine prints for them are real.

Tensor names and the hyperparameter keys each architecture needs are llama.cpp's
(src/llama-arch.cpp names, src/models/<arch>.cpp create_tensor calls, at 0c1e57098bba).  Weights are
quantized with ggml-org's gguf package (Q8_0, Q4_0, F16); the package cannot quantize to Q4_K, so
those blocks are written directly (ggml-common.h block_q4_K: f16 d and dmin, 12 bytes of 6-bit
scales and mins, 128 bytes of 4-bit values, 144 bytes per 256 weights) with small valid scales.
"""

from __future__ import annotations

import os

import gguf
import numpy as np

QT = gguf.GGMLQuantizationType

# Each shape is a real family scaled down.  Widths are multiples of 256 (a Q4_K block) and row
# counts of 8 (the CPU's repack interleave), so every quantization applies to every layer weight.
SHAPES = {
    "llama-spm-q8_0": dict(arch="llama", layers=4, embd=256, heads=4, kv_heads=2, ff=768, vocab=3000,
                           tok="spm", wtype="Q8_0"),
    "llama-bpe-f16": dict(arch="llama", layers=4, embd=256, heads=4, kv_heads=1, ff=512, vocab=3000,
                          tok="bpe", wtype="F16"),
    "llama-spm-q4_0": dict(arch="llama", layers=4, embd=256, heads=4, kv_heads=2, ff=768, vocab=3000,
                           tok="spm", wtype="Q4_0"),
    "llama-spm-q4_k": dict(arch="llama", layers=4, embd=256, heads=4, kv_heads=2, ff=768, vocab=3000,
                           tok="spm", wtype="Q4_K"),
    # tied embeddings (no output.weight: llama.cpp loads token_embd twice), q/k/v biases, a large
    # vocabulary so the output buffer and the logits count
    "qwen2-tied-q8_0": dict(arch="qwen2", layers=4, embd=256, heads=4, kv_heads=2, ff=768, vocab=40000,
                            tok="bpe", wtype="Q8_0", tied=True, bias=True),
    # tied Q4_0 embeddings: the output layer is token_embd again, a matrix the CPU repacks (the lookup
    # table itself is not)
    "qwen2-tied-q4_0": dict(arch="qwen2", layers=4, embd=256, heads=4, kv_heads=2, ff=768, vocab=8000,
                            tok="bpe", wtype="Q4_0", embd_type="Q4_0", tied=True, bias=True),
    # five sliding-window layers of every six (llama.cpp's set_swa_pattern(6) for gemma3), heads
    # wider than n_embd / n_head
    "gemma3-swa-q8_0": dict(arch="gemma3", layers=6, embd=256, heads=2, kv_heads=1, head_dim=256, ff=768,
                            vocab=3000, tok="spm", wtype="Q8_0", tied=True, swa=256),
    # larger than a CPU's caches (130 MiB), so generating a token is bound by memory bandwidth as on a real
    # model: the one the speed estimate is held to
    "llama-wide-q8_0": dict(arch="llama", layers=8, embd=1024, heads=8, kv_heads=2, ff=4096, vocab=3000,
                            tok="spm", wtype="Q8_0"),
    # a mixture of experts: 8 experts of width 256, 2 routed per token
    "qwen3moe-q8_0": dict(arch="qwen3moe", layers=4, embd=256, heads=4, kv_heads=2, head_dim=64, ff=0,
                          vocab=3000, tok="bpe", wtype="Q8_0", experts=8, experts_used=2, ff_exp=256),
    # the same in Q4_0: the CPU repacks the experts too, unless --n-cpu-moe puts them in the plain CPU buffer
    "qwen3moe-q4_0": dict(arch="qwen3moe", layers=4, embd=256, heads=4, kv_heads=2, head_dim=64, ff=0,
                          vocab=3000, tok="bpe", wtype="Q4_0", experts=8, experts_used=2, ff_exp=256),
}

# Real models' widths (their GGUF headers' values), for the capture on a GPU machine
# (tools/device_capture.py): a few GiB each, written with tiled weights so they take seconds.  The
# mixture of experts keeps 12 of Qwen3-30B-A3B's 48 layers; every other width is the model's own.
REAL_SHAPES = {
    # Llama 3.1 8B: 32 layers, n_embd 4096, 32/8 heads, n_ff 14336, vocabulary 128256
    "llama3-8b-q4_0": dict(arch="llama", layers=32, embd=4096, heads=32, kv_heads=8, ff=14336, vocab=128256,
                           tok="bpe", wtype="Q4_0", ctx_train=131072),
    # Gemma 3 4B: 34 layers (5 of 6 sliding, window 1024), n_embd 2560, 8/4 heads of 256, n_ff 10240,
    # vocabulary 262144, tied embeddings
    "gemma3-4b-q8_0": dict(arch="gemma3", layers=34, embd=2560, heads=8, kv_heads=4, head_dim=256, ff=10240,
                           vocab=262144, tok="spm", wtype="Q8_0", tied=True, swa=1024, ctx_train=131072),
    # Qwen3-30B-A3B's widths, 12 of its 48 layers: n_embd 2048, 32/4 heads of 128, 128 experts of 768, 8 used
    "qwen3moe-30b-a3b-12l-q4_0": dict(arch="qwen3moe", layers=12, embd=2048, heads=32, kv_heads=4, head_dim=128,
                                      ff=0, vocab=151936, tok="bpe", wtype="Q4_0", experts=128, experts_used=8,
                                      ff_exp=768, ctx_train=262144),
    # Qwen2.5 3B: 36 layers, n_embd 2048, 16/2 heads, n_ff 11008, q/k/v biases, tied, vocabulary 151936
    "qwen2.5-3b-tied-q8_0": dict(arch="qwen2", layers=36, embd=2048, heads=16, kv_heads=2, ff=11008,
                                 vocab=151936, tok="bpe", wtype="Q8_0", tied=True, bias=True, ctx_train=32768),
}

CHATML = ("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}")


def _words(n: int, space: str) -> list[str]:
    """``n`` distinct pieces built from letters, each one word-start and one inner form."""
    out, letters = [], "etaoinshrdlucmfwypvbgkjqxz"
    i = 0
    while len(out) < n:
        k, s = i, ""
        while True:
            s += letters[k % 26]
            k //= 26
            if not k:
                break
        out.append(space + s)
        if len(out) < n:
            out.append(s)
        i += 1
    return out


def _gpt2_bytes() -> list[str]:
    """The 256 printable stand-ins of GPT-2's byte-level BPE, in byte order."""
    keep = [*range(33, 127), *range(161, 173), *range(174, 256)]
    extra = iter(range(256, 512))
    return [chr(b) if b in keep else chr(next(extra)) for b in range(256)]


def _spm(w: gguf.GGUFWriter, vocab: int) -> None:
    special = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    tokens = special + [f"<0x{b:02X}>" for b in range(256)]
    tokens += _words(vocab - len(tokens), "\u2581")
    types = [2, 3, 3, 3, 3] + [6] * 256 + [1] * (vocab - 261)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 261 + [-float(i) for i in range(vocab - 261)])
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(4)


def _bpe(w: gguf.GGUFWriter, vocab: int) -> None:
    base = _gpt2_bytes()
    space = base[ord(" ")]
    known, merged, merges = set(base), [], []
    for piece in _words(4 * vocab, space):
        if len(merged) + 256 + 3 >= vocab:
            break
        if len(piece) > 1 and piece not in known and piece[:-1] in known:
            merges.append(f"{piece[:-1]} {piece[-1]}")
            merged.append(piece)
            known.add(piece)
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = base + merged + special
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([1] * (len(tokens) - 3) + [3] * 3)
    w.add_token_merges(merges)
    w.add_bos_token_id(len(tokens) - 3)
    w.add_eos_token_id(len(tokens) - 1)


def _q4_k(rng, rows: int, cols: int) -> np.ndarray:
    blocks = rng.integers(0, 256, size=(rows, cols // 256, 144), dtype=np.uint8)
    blocks[..., 0:2] = np.frombuffer(np.float16(1e-3).tobytes(), np.uint8)
    blocks[..., 2:4] = np.frombuffer(np.float16(1e-4).tobytes(), np.uint8)
    return blocks.reshape(rows, cols // 256 * 144)


def _weight(w, rng, name: str, shape: tuple, wtype: str, tile: bool = False) -> None:
    """A matrix (or a stack of them: experts) of ``shape`` = (..., rows, cols), numpy order.  With
    ``tile`` the rows repeat a random slab of 64 (the bytes and so the memory are the same; writing
    GiB takes seconds instead of minutes)."""
    rows = int(np.prod(shape[:-1]))
    if isinstance(w, _Holes):
        if wtype in ("F32", "F16"):
            w.add_tensor(name, _Shape(shape, np.float32 if wtype == "F32" else np.float16))
        else:
            block, size = gguf.GGML_QUANT_SIZES[QT[wtype]]
            w.add_tensor(name, _Shape((*shape[:-1], shape[-1] // block * size), np.uint8), raw_dtype=QT[wtype])
        return
    if tile and rows > 64 and wtype != "F32":
        slab = _Slab()
        _weight(slab, rng, name, (64, shape[-1]), wtype)
        data = np.tile(slab.data, (-(-rows // 64), 1))[:rows]
        w.add_tensor(name, data.reshape(*shape[:-1], -1) if slab.raw is not None else data.reshape(shape),
                     raw_dtype=slab.raw)
        return
    a = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    if wtype == "F32":
        w.add_tensor(name, a)
    elif wtype == "F16":
        w.add_tensor(name, a.astype(np.float16))
    elif wtype == "Q4_K":
        rows = int(np.prod(shape[:-1]))
        w.add_tensor(name, _q4_k(rng, rows, shape[-1]).reshape(*shape[:-1], -1), raw_dtype=QT.Q4_K)
    else:
        q = QT[wtype]
        w.add_tensor(name, gguf.quants.quantize(a, q), raw_dtype=q)


class _Holes(gguf.GGUFWriter):
    """A writer of the header alone: each tensor is its name, shape and type, its bytes a sparse hole
    (tests/gguf_models.py fill), so a real model's widths cost no disk and no time."""
    def add_tensor(self, name, tensor, raw_shape=None, raw_dtype=None, tensor_endianess=None):
        self.add_tensor_info(name, tensor.shape, tensor.dtype, tensor.nbytes, raw_dtype=raw_dtype)


class _Shape:
    """An array's shape, dtype and size, without the array (for _Holes)."""
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize


class _Slab:
    """Stands in for a GGUFWriter to catch one tensor's bytes."""
    def add_tensor(self, name, data, raw_dtype=None):
        self.data, self.raw = data, raw_dtype


def _ones(w, name: str, n: int) -> None:
    w.add_tensor(name, np.ones(n, dtype=np.float32))


def write(path: str, key: str, seed: int = 7, tile: bool = False, holes: bool = False) -> str:
    """Write the model ``key`` of SHAPES (or REAL_SHAPES) to ``path`` (once: an existing file is kept)
    and return the path.  ``holes``: the header alone, its tensors a sparse hole of their size (a
    model `plan` reads as the real file, which no engine can run)."""
    if os.path.exists(path):
        return path
    s = SHAPES.get(key) or REAL_SHAPES[key]
    rng = np.random.default_rng(seed)
    arch, n, e = s["arch"], s["layers"], s["embd"]
    hd = s.get("head_dim", e // s["heads"])
    q, kv = s["heads"] * hd, s["kv_heads"] * hd
    t = s["wtype"]
    # embeddings and output in Q8_0, as llama-quantize keeps them, unless the shape says otherwise
    big = s.get("embd_type") or ("Q8_0" if t in ("Q4_0", "Q4_K") else t)
    part = path + ".part"
    w = (_Holes if holes else gguf.GGUFWriter)(part, arch)
    w.add_name(key)
    w.add_description("random weights for pick-backend's tests; not a trained model")
    w.add_file_type({"F16": 1, "Q8_0": 7, "Q4_0": 2, "Q4_K": 15}[t])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(s.get("ctx_train", 32768))
    w.add_embedding_length(e)
    w.add_block_count(n)
    w.add_feed_forward_length(s["ff"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    if s.get("swa"):
        w.add_sliding_window(s["swa"])
    if s.get("experts"):
        w.add_expert_count(s["experts"])
        w.add_expert_used_count(s["experts_used"])
        w.add_expert_feed_forward_length(s["ff_exp"])
    (_spm if s["tok"] == "spm" else _bpe)(w, s["vocab"])
    w.add_chat_template(CHATML)
    vocab = s["vocab"]
    _weight(w, rng, "token_embd.weight", (vocab, e), big, tile)
    for il in range(n):
        b = f"blk.{il}."
        _ones(w, b + "attn_norm.weight", e)
        _weight(w, rng, b + "attn_q.weight", (q, e), t, tile)
        _weight(w, rng, b + "attn_k.weight", (kv, e), t, tile)
        _weight(w, rng, b + "attn_v.weight", (kv, e), t, tile)
        if s.get("bias"):
            for name, m in (("q", q), ("k", kv), ("v", kv)):
                w.add_tensor(b + f"attn_{name}.bias", rng.standard_normal(m, dtype=np.float32) * np.float32(0.02))
        _weight(w, rng, b + "attn_output.weight", (e, q), t, tile)
        if arch in ("gemma3", "qwen3moe"):
            _ones(w, b + "attn_q_norm.weight", hd)
            _ones(w, b + "attn_k_norm.weight", hd)
        if arch == "gemma3":
            _ones(w, b + "post_attention_norm.weight", e)
            _ones(w, b + "post_ffw_norm.weight", e)
        _ones(w, b + "ffn_norm.weight", e)
        if s.get("experts"):
            x, f = s["experts"], s["ff_exp"]
            _weight(w, rng, b + "ffn_gate_inp.weight", (x, e), "F32", tile)
            _weight(w, rng, b + "ffn_gate_exps.weight", (x, f, e), t, tile)
            _weight(w, rng, b + "ffn_up_exps.weight", (x, f, e), t, tile)
            _weight(w, rng, b + "ffn_down_exps.weight", (x, e, f), t, tile)
        else:
            _weight(w, rng, b + "ffn_gate.weight", (s["ff"], e), t, tile)
            _weight(w, rng, b + "ffn_up.weight", (s["ff"], e), t, tile)
            _weight(w, rng, b + "ffn_down.weight", (e, s["ff"]), t, tile)
    _ones(w, "output_norm.weight", e)
    if not s.get("tied"):
        _weight(w, rng, "output.weight", (vocab, e), big, tile)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    if holes:
        import gguf_models

        w.write_ti_data_to_file()
        w.close()
        gguf_models.fill(part)
    else:
        w.write_tensors_to_file()
        w.close()
    os.replace(part, path)
    return path
