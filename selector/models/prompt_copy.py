"""What processing a prompt costs a layout that keeps part of a model in system memory.

llama.cpp runs a batch of 32 tokens or more on the GPU even where the weights of an operation are in system
memory: it copies them to the GPU for every micro-batch (ggml/src/ggml-backend.cpp, ggml_backend_sched: the
op offload of a weight in a host buffer; of a mixture of experts only the experts the batch routes to).
The layers -ngl keeps in system memory bring their KV cache along, which the attention reads on the GPU.
What the GPU then computes is the same for -ngl K and --n-cpu-moe N; what differs is these copies, over the
link between system memory and the GPU (catalogs/llamacpp-fit.json "prompt_copy": the rate this
repository's H200 capture copied at, tests/data/device/h200-cuda-b11312/bench-ngl.json).
"""

from __future__ import annotations

from dataclasses import dataclass

from selector.models import fit
from selector.models.facts import fit_table


@dataclass(frozen=True)
class Copy:
    """Bytes one prompt micro-batch copies to the GPU at a depth: weights, and -ngl's layers' KV cache."""
    weights: int
    kv: int
    gbps: float

    @property
    def bytes(self) -> int:
        return self.weights + self.kv

    @property
    def seconds(self) -> float:
        return self.bytes / (self.gbps * 1e9)


def table() -> dict:
    return fit_table()["prompt_copy"]


def experts_used(n_expert: int, n_used: int, tokens: int) -> float:
    """The share of a layer's experts a batch of ``tokens`` routes to, each token to ``n_used`` of
    ``n_expert`` (as if at random): 1 - (1 - k/E)^tokens, all of them for a batch of 512 and 8 of 128."""
    if not n_expert or not n_used:
        return 1.0
    return 1.0 - (1.0 - min(n_used, n_expert) / n_expert) ** tokens


def prompt_copy(facts: dict, lay: fit.Layout, depth: int, run: fit.Run) -> Copy | None:
    """What each prompt micro-batch of ``run`` copies to the GPU at ``depth`` for ``lay``: None for a
    layout with nothing in system memory that a GPU computes (all on GPUs, a CPU build), or a micro-batch
    too small for llama.cpp to take to the GPU.  Neither the token embeddings (looked up, not multiplied)
    nor the output layer (-ngl offloads it first) are copied."""
    from selector.models.speed import kv_read

    t = table()
    ub = run.tokens
    if ub < t["min_batch"] or lay.status not in (fit.Status.PARTIAL, fit.Status.EXPERTS):
        return None
    n = facts["n_layer"]
    if lay.status is fit.Status.PARTIAL:
        host = range(fit.gpu_start(n, lay.ngl))
        used = experts_used(facts["n_expert"], facts["n_expert_used"], ub)
        weights = sum(facts["layer_bytes"][il] - facts["expert_bytes"][il] * (1 - used) for il in host)
        return Copy(round(weights), kv_read(facts, host, depth, run.type_k, run.type_v), t["gbps"])
    used = experts_used(facts["n_expert"], facts["n_expert_used"], ub)
    weights = sum(facts["expert_bytes"][il] for il in range(min(lay.n_cpu_moe, n))) * used
    return Copy(round(weights), 0, t["gbps"])


def turn_seconds(gen_s: float, copy: Copy | None, run: fit.Run) -> float:
    """Seconds of a turn at one depth: llama-bench's default tests, a prompt of ``turn.prompt`` tokens
    (its micro-batches' copies; the GPU's own work on it is the same for the layouts weighed and left out)
    and ``turn.generated`` tokens generated at ``gen_s`` each."""
    turn = table()["turn"]
    batches = -(-turn["prompt"] // max(run.tokens, 1))
    return turn["generated"] * gen_s + (batches * copy.seconds if copy else 0.0)
