"""The facts of a model that decide where it fits, from its GGUF header(s).

A plain dict (so it can be cached as JSON): architecture, size, the attention shape per layer, the
bytes of each layer's tensors, and what llama.cpp keeps off the GPU.  Keys are GGUF's
(``{arch}.block_count`` ...: gguf-py/gguf/constants.py, class Keys).
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache

_LAYER = re.compile(r"^blk\.(\d+)\.")
_EXPERTS = re.compile(r"_exps\.|_exps$")
# bumped when the facts gain a key the fit reads: cached facts of an older version are read again
VERSION = 3  # 3: lookup_bytes


class FactsError(Exception):
    pass


@lru_cache(maxsize=None)
def fit_table() -> dict:
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "catalogs", "llamacpp-fit.json"),
              encoding="utf-8") as f:
        return json.load(f)


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _per_layer(v, n: int, what: str, where: str) -> list[int]:
    if isinstance(v, list):
        if len(v) != n or not all(_count(x) for x in v):
            raise FactsError(f"{where}: {what} lists {len(v)} values for {n} layers")
        return v
    if _count(v):
        return [v] * n
    raise FactsError(f"{where}: {what} is {v!r}, not a count")


def _positive(v, what: str, where: str, default=None):
    """A positive whole number, ``default`` when absent; anything else is named."""
    if v is None:
        return default
    if not _count(v) or v == 0:
        raise FactsError(f"{where}: {what} is {v!r}, not a positive whole number")
    return v


def from_headers(where: str, headers: list[dict]) -> dict:
    """Facts of one model from the headers of its file or of all its split parts."""
    kv = headers[0]["kv"]
    arch = kv.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise FactsError(f"{where}: the GGUF has no general.architecture; not a language model file")

    def k(name, default=None):
        return kv.get(f"{arch}.{name}", default)

    tensors = {}
    for h in headers:
        tensors.update(h["tensors"])
    n_layer = _layer_count(where, arch, k, tensors)
    att = _attention(where, arch, k, n_layer)
    sizes = _sizes(tensors, n_layer)
    out = _vocab_and_output(kv, k, tensors, sizes["other"], att["n_embd"])
    n_expert = k("expert_count", 0) if _count(k("expert_count", 0)) else 0
    n_expert_used = k("expert_used_count", 0) if _count(k("expert_used_count", 0)) else 0
    ft = kv.get("general.file_type")
    return {
        "version": VERSION,
        "source": where,
        "arch": arch,
        "name": kv.get("general.name") if isinstance(kv.get("general.name"), str) else None,
        "file_type": _file_type(ft),
        "params": sizes["params"],
        "size_bytes": sum(h.get("size") or 0 for h in headers) or None,
        "weights_bytes": sum(t["bytes"] for t in tensors.values()),
        "splits": len(headers),
        "n_layer": n_layer,
        **att,
        "n_vocab": out["n_vocab"],
        "n_expert": n_expert,
        "n_expert_used": n_expert_used,
        "n_ff": [_ffn_width(tensors, il, n_expert_used, k("feed_forward_length", 0)) for il in range(n_layer)],
        "kv_lora_rank": k("attention.kv_lora_rank"),
        "recurrent": arch in fit_table()["recurrent"]["archs"],
        "layer_bytes": sizes["layer_bytes"],
        "expert_bytes": sizes["expert_bytes"],
        "input_bytes": out["input_bytes"],
        "output_bytes": out["output_bytes"],
        "lookup_bytes": out["lookup_bytes"],
        "tied_embeddings": out["tied"],
        "matmul": sizes["matmul"],
        "output_matmul": out["output_matmul"],
    }


def _layer_count(where: str, arch: str, k, tensors: dict) -> int:
    """The layer count, held to the layers the tensors are of."""
    n_layer = k("block_count")
    if not isinstance(n_layer, int) or isinstance(n_layer, bool) or not 0 < n_layer < 10000:
        raise FactsError(f"{where}: {arch}.block_count is {n_layer!r}; the layer count is needed")
    if not tensors:
        raise FactsError(f"{where}: the header lists no tensors; not a model file")
    blocks = {int(m[1]) for n in tensors if (m := _LAYER.match(n))}
    if blocks and (max(blocks) + 1 != n_layer or len(blocks) != n_layer):
        raise FactsError(f"{where}: {arch}.block_count is {n_layer}, but the tensors are of "
                         f"{len(blocks)} layers (blk.0 to blk.{max(blocks)})")
    if not blocks:
        raise FactsError(f"{where}: no layer tensors (blk.N.*); not a model llama.cpp can offload")
    return n_layer


def _attention(where: str, arch: str, k, n_layer: int) -> dict:
    """Widths, heads per layer, key and value sizes, the sliding window and which layers use it, and
    the trained context."""
    n_embd = _positive(k("embedding_length"), f"{arch}.embedding_length", where, 0)
    heads = _per_layer(k("attention.head_count", 0), n_layer, f"{arch}.attention.head_count", where)
    heads_kv = _per_layer(k("attention.head_count_kv", max(heads) if heads else 0), n_layer,
                          f"{arch}.attention.head_count_kv", where)
    top = max(heads) if heads else 0
    if not top and arch not in fit_table()["recurrent"]["archs"]:
        raise FactsError(f"{where}: {arch}.attention.head_count is 0; an attention model has heads")
    head_k = _positive(k("attention.key_length"), f"{arch}.attention.key_length", where,
                       n_embd // top if top else 0)
    head_v = _positive(k("attention.value_length"), f"{arch}.attention.value_length", where, head_k)
    if any(heads_kv) and not (head_k and head_v):
        raise FactsError(f"{where}: the key and value sizes are unknown ({arch}.attention.key_length)")
    n_swa = _positive(k("attention.sliding_window") or None, f"{arch}.attention.sliding_window", where, 0)
    ctx_train = k("context_length")
    if ctx_train is not None and (not _count(ctx_train) or ctx_train == 0):
        raise FactsError(f"{where}: {arch}.context_length is {ctx_train!r}, not a positive whole number")
    swa = [False] * n_layer
    pattern = k("attention.sliding_window_pattern")
    if isinstance(pattern, list) and len(pattern) == n_layer:
        swa = [bool(x) for x in pattern]
    elif n_swa:
        n = pattern if isinstance(pattern, int) and pattern > 0 else fit_table()["swa_pattern"].get(arch)
        if n:
            swa = [il % n < n - 1 for il in range(n_layer)]
    return {"n_embd": n_embd, "n_ctx_train": ctx_train, "n_head": heads, "n_head_kv": heads_kv,
            "head_k": head_k, "head_v": head_v, "n_swa": n_swa, "swa": swa}


def _sizes(tensors: dict, n_layer: int) -> dict:
    """Parameters, each layer's bytes (and its experts'), the matrices each layer multiplies by type,
    and the tensors outside the layers."""
    layer_bytes, expert_bytes = [0] * n_layer, [0] * n_layer
    matmul: list[dict] = [{} for _ in range(n_layer)]
    other: dict[str, int] = {}
    params = 0
    for name, t in tensors.items():
        params += t["elements"]
        m = _LAYER.match(name)
        if m and int(m[1]) < n_layer:
            layer_bytes[int(m[1])] += t["bytes"]
            if _EXPERTS.search(name):
                expert_bytes[int(m[1])] += t["bytes"]
            _add_matmul(matmul[int(m[1])], t)
        else:
            other[name] = t["bytes"]
    return {"params": params, "layer_bytes": layer_bytes, "expert_bytes": expert_bytes, "matmul": matmul,
            "other": other}


def _vocab_and_output(kv: dict, k, tensors: dict, other: dict, n_embd: int) -> dict:
    """The vocabulary, the input embeddings, the output layer (token_embd again where it is tied) and
    the matrices it multiplies."""
    embd = tensors.get("token_embd.weight")
    embd_vocab = embd["elements"] // n_embd if embd is not None and n_embd else None
    tokens = kv.get("tokenizer.ggml.tokens")
    n_vocab = (tokens["length"] if isinstance(tokens, dict) else len(tokens) if isinstance(tokens, list) else None) \
        or k("vocab_size") or embd_vocab or 0
    input_bytes = other.get("token_embd.weight", 0)
    # per-layer embeddings (Gemma 3n's per_layer_token_embd): looked up per token like token_embd, not
    # read whole; they stay in the output share of the memory fit, as before
    lookup_bytes = sum(b for n, b in other.items() if n != "token_embd.weight" and n.endswith("token_embd.weight"))
    output_bytes = sum(b for n, b in other.items() if n != "token_embd.weight")
    tied = "output.weight" not in tensors
    if tied:
        output_bytes += input_bytes  # llama.cpp loads token_embd again as the output layer
    out_t = tensors.get("output.weight") or embd
    output_matmul: dict = {}
    if out_t is not None:
        _add_matmul(output_matmul, out_t)
    return {"n_vocab": n_vocab, "input_bytes": input_bytes, "lookup_bytes": lookup_bytes,
            "output_bytes": output_bytes, "tied": tied, "output_matmul": output_matmul}


def _add_matmul(into: dict, t: dict) -> None:
    """Count a weight a matrix multiplication reads (two or three dimensions: a matrix, or a stack of
    experts) by type and by the row multiples the CPU's repacked layouts need (8 and 4 rows): what
    catalogs/llamacpp-fit.json "cpu_repack" turns into the CPU_REPACK buffer."""
    dims = t.get("dims") or []
    if len(dims) not in (2, 3):
        return
    rows = dims[1]
    b8, b4 = into.get(t["type"], (0, 0))
    into[t["type"]] = [b8 + (t["bytes"] if rows % 8 == 0 else 0), b4 + (t["bytes"] if rows % 4 == 0 else 0)]


def _ffn_width(tensors: dict, il: int, used: int, default) -> int:
    """The feed-forward width one token runs through in layer ``il``: ffn_up's rows, or for a mixture
    of experts the routed experts' rows times the experts used, plus a shared expert's."""
    def rows(name):
        t = tensors.get(f"blk.{il}.{name}.weight")
        dims = t.get("dims") if t else None
        return dims[1] if dims and len(dims) >= 2 else 0

    dense = rows("ffn_up") or rows("ffn_gate")
    routed = rows("ffn_up_exps") or rows("ffn_gate_exps")
    width = dense + routed * max(used, 1 if routed else 0) + rows("ffn_up_shexp")
    if width:
        return width
    d = default[il] if isinstance(default, list) and il < len(default) else default
    return d if _count(d) else 0


def _file_type(ft) -> str | None:
    if not isinstance(ft, int):
        return None
    from gguf import LlamaFileType

    try:
        name = LlamaFileType(ft).name
    except ValueError:
        return f"type {ft}"
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


GUESS_LAYERS = 100  # the layers a guess spreads the download over: -ngl of a guess is in hundredths of it
_QUANT = re.compile(r"(?<![A-Za-z0-9])(IQ4_NL|MXFP4|Q[2-8]_K|Q[458]_[01])", re.IGNORECASE)


def quant_type(name: str) -> str | None:
    """The matrix type a GGUF's quantization label names (Q4_K_M -> Q4_K, UD-Q4_K_XL -> Q4_K), or None."""
    m = _QUANT.search(name or "")
    return m[1].upper() if m else None


def guess(size_bytes: int, name: str = "") -> dict:
    """Facts of a model whose header was not read, from its download size alone: a guess.  The weights in
    equal layers and nothing else (no KV cache, no compute buffer: those are the header's, and none is
    counted rather than one made up); the matrices of the type its quantization label names, so a CPU
    that repacks that type counts a repacked copy of all of them (at most what it copies: a label's
    mixture keeps some tensors in other types)."""
    n = GUESS_LAYERS
    each = size_bytes // n
    q = quant_type(name)
    return {"version": VERSION, "source": name, "arch": None, "guess": True, "name": None, "file_type": q,
            "params": None, "size_bytes": size_bytes, "weights_bytes": each * n, "splits": 1,
            "n_layer": n, "n_embd": 0, "n_vocab": 0, "n_ctx_train": None, "n_head": [0] * n, "n_head_kv": [0] * n,
            "head_k": 0, "head_v": 0, "n_swa": 0, "swa": [False] * n, "n_expert": 0, "n_expert_used": 0,
            "n_ff": [0] * n, "kv_lora_rank": None, "recurrent": True, "layer_bytes": [each] * n,
            "expert_bytes": [0] * n, "input_bytes": 0, "output_bytes": 0, "lookup_bytes": 0,
            "tied_embeddings": False, "matmul": [{q: [each, each]} if q else {} for _ in range(n)],
            "output_matmul": {}}
