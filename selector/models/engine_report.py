"""What a llama.cpp build says it allocates, read from what it prints.

Two ways of asking (issue: `plan --check`):
- ``llama-fit-params ARGS --fit-print on`` prints llama.cpp's own projection, one line per device on
  standard output: ``CUDA0 4277 512 258`` (model, context, compute in whole MiB; common/fit.cpp
  ``common_fit_print``), without loading the weights.  It prints no output buffer.
- ``llama-server ARGS -lv 4`` prints each buffer as it allocates it (src/llama-model.cpp load_tensors,
  src/llama-kv-cache.cpp, src/llama-context.cpp sched_reserve and output_reserve), in MiB with two
  decimals, and when it stops ``common_memory_breakdown_print`` (per device: total, free, self =
  model + context + compute, unaccounted).

Buffers are named by their buffer type: ``CUDA0``, ``ROCm0``, ``Vulkan0``, ``MTL0`` are a GPU's;
``CPU``, ``CPU_Mapped``, ``CPU_REPACK`` and a backend's pinned host memory (``CUDA_Host``,
``Vulkan_Host``) are system memory, here called ``Host`` as llama.cpp's own breakdown calls it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

MiB = 1 << 20
HOST = "Host"
TERMS = ("model", "kv", "compute", "output")
FIT_PARAMS, SERVER = "fit-params", "server"


@dataclass(frozen=True)
class Buffers:
    """One device's memory as the engine counts it, in bytes."""
    device: str
    model: int = 0
    kv: int = 0
    compute: int = 0
    output: int = 0

    def term(self, name: str) -> int:
        return getattr(self, name)

    @property
    def total(self) -> int:
        return self.model + self.kv + self.compute + self.output


@dataclass(frozen=True)
class Report:
    """What one way of asking the engine said: its buffers per device (GPUs in the engine's order,
    then the host), and for a server start what each device held when it stopped."""
    way: str
    devices: tuple[Buffers, ...]
    held: dict = field(default_factory=dict)  # device -> bytes (the breakdown's 'self') at the stop
    build: str | None = None

    def device(self, name: str) -> Buffers | None:
        return next((d for d in self.devices if d.device == name), None)

    @property
    def gpus(self) -> tuple[Buffers, ...]:
        return tuple(d for d in self.devices if d.device != HOST)


def device_of(owner: str) -> str:
    """The device a buffer type's memory is on: a GPU's own name, or the host's."""
    if owner.startswith("CPU") or owner.endswith("_Host"):
        return HOST
    return owner[: -len("_Mapped")] if owner.endswith("_Mapped") else owner


# a device as common_fit_print names it: the host, or a backend's device (CUDA0, ROCm1, Vulkan0, MTL0)
_FIT_LINE = re.compile(r"^(Host|[A-Z][A-Za-z]*\d+) (\d+) (\d+) (\d+)\s*$")


def from_fit_print(stdout: str) -> Report | None:
    """llama-fit-params' projection, or None where it printed no device line."""
    devs = []
    for line in stdout.splitlines():
        m = _FIT_LINE.match(line.strip())
        if m:
            model, ctx, compute = (int(x) * MiB for x in m.groups()[1:])
            devs.append(Buffers(device_of(m[1]), model=model, kv=ctx, compute=compute))
    return Report(FIT_PARAMS, _host_last(devs)) if devs else None


_BUFFER = {
    "model": re.compile(r"load_tensors:\s+(\S+) model buffer size =\s*([\d.]+) MiB"),
    "kv": re.compile(r"llama_kv_cache:\s+(\S+) KV buffer size =\s*([\d.]+) MiB"),
    "compute": re.compile(r"(\S+) compute buffer size =\s*([\d.]+) MiB"),
    "output": re.compile(r"(\S+)\s+output buffer size =\s*([\d.]+) MiB"),
}
# |   - CUDA0 (H200)       | 143155 = 137657 + (4901 =  4277 +     512 +     112) +         597 |
# |   - Host               |                     552 =   532 +       0 +      20                |
_BREAKDOWN = re.compile(r"\|\s+-\s+(\S+)[^|]*\|[^|(]*?(?:\(\s*)?(\d+)\s+=\s+(\d+)\s+\+\s+(\d+)\s+\+\s+(\d+)")
_BUILD = re.compile(r"build[ :=]+(\d+)")


def from_server_log(log: str) -> Report | None:
    """The buffers a llama-server start allocated, or None where it did not print its model, KV and
    compute buffers (a start cut short says nothing about them; recurrent models aside, every
    llama.cpp model has a KV cache).  The compute
    buffer is the last one reserved per device (a later reservation replaces an earlier one);
    model and KV buffers add up (a sliding-window model has two caches)."""
    sums: dict[str, dict[str, int]] = {}
    order: list[str] = []
    held: dict[str, int] = {}
    printed: set[str] = set()
    for line in log.splitlines():
        for term, rx in _BUFFER.items():
            m = rx.search(line)
            if m:
                printed.add(term)
                dev = device_of(m[1])
                if dev not in sums:
                    sums[dev] = dict.fromkeys(TERMS, 0)
                    order.append(dev)
                n = round(float(m[2]) * MiB)
                sums[dev][term] = n if term == "compute" and dev != HOST else sums[dev][term] + n
                break
        m = _BREAKDOWN.search(line)
        if m:
            held[device_of(m[1])] = int(m[2]) * MiB
    if not {"model", "kv", "compute"} <= printed:  # stopped before it had allocated them all: no answer
        return None
    devs = [Buffers(d, **sums[d]) for d in order]
    b = _BUILD.search(log)
    return Report(SERVER, _host_last(devs), held=held, build=b[1] if b else None)


def _host_last(devs: list[Buffers]) -> tuple[Buffers, ...]:
    """GPUs in the order the engine named them, the host last (one entry each)."""
    merged: dict[str, Buffers] = {}
    for d in devs:
        old = merged.get(d.device)
        merged[d.device] = d if old is None else replace(
            old, **{t: old.term(t) + d.term(t) for t in TERMS})
    return tuple(sorted(merged.values(), key=lambda d: d.device == HOST))
