"""A machine described in words: ``--gpu "RTX 4090" --gpu "RTX 4090" --vram 24G --ram 64G``.

For a card you are about to buy, or a node of a fleet you plan: the GPUs named replace the ones
the probe found (this machine's, a capture's or a saved profile's), each made from the same tables
the probe uses when a driver cannot answer (NVIDIA's compute capability by name, AMD's gfx target
by name, Intel's Arc names) and its memory from the bandwidth table (or ``--vram``).  Everything
else (the OS, the CPU, the system memory unless ``--ram``) is the base machine's.  The result is a
Profile like any other, with a warning that says it was described, not probed.
"""

from __future__ import annotations

import difflib
import re

from probes.profile import PCI, AmdGpu, IntelGpu, NvidiaGpu, Profile

UNITS = {"": 1 << 30, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class DescribeError(Exception):
    """A name or size that does not describe hardware: said in words (a usage error)."""


MIN_SIZE, MAX_SIZE = 256 << 20, 64 << 40  # below a quarter GiB or past 64 TiB it is a typo, not a machine


def parse_size(text: str, what: str) -> int:
    """``24G``, ``24GB``, ``24Gi``, ``24 GiB``, ``24576M``, ``24`` (GiB), ``25769803776B`` (bytes): bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(?:ib|i|b)?|(b))?\s*", text.lower())
    size = int(float(m[1]) * UNITS[m[2] or m[3] or ""]) if m else 0
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise DescribeError(f"{what} {text!r}: a size such as 24G, 24GB, 24576M or 25769803776B (bytes), "
                            "from 256M to 64T")
    return size


def _bandwidth_rows() -> list[tuple[str, dict]]:
    from selector.bandwidth import VENDOR, table

    vendors = {v: k for k, v in VENDOR.items()}
    return [(vendors[v], row) for v in ("nvidia", "amd", "intel") for row in table().get(v, [])]


def _known_names() -> list[str]:
    return [row["match"] for _t, row in _bandwidth_rows()]


VENDOR_WORDS = ("nvidia", "geforce", "amd", "radeon", "intel", "arc(tm)", "arc")


def _key(name: str) -> str:
    """A name without its maker's words, case, spaces and dashes: 'GeForce RTX 4090' and 'rtx4090' alike."""
    words = [w for w in re.split(r"[\s\-_]+", name.lower()) if w and w not in VENDOR_WORDS]
    return "".join(words)


def lookup(name: str) -> tuple[str, dict]:
    """(device type, bandwidth row) of a GPU named as its maker sells it ('RTX 4090', 'GeForce RTX
    4090', 'rtx4090', 'Radeon RX 7900 XTX', 'Arc B580'): the whole name, words of the maker aside; a
    name with more to it ('RTX 4090 Ti', 'A100 80GB') is another card, not this one."""
    wanted = _key(name)
    for dtype, row in _bandwidth_rows():
        if wanted and _key(row["match"]) == wanted:
            return dtype, row
    from selector.bandwidth import table

    if any(_key(r["match"]) == wanted for r in table().get("apple", [])):
        raise DescribeError(f"--gpu {name!r}: an Apple chip's GPU shares its memory; describe a Mac by its "
                            "capture (pick-backend --root DIR) instead")
    names = _known_names()
    near = [names[[_key(n) for n in names].index(k)] for k in
            difflib.get_close_matches(wanted, [_key(n) for n in names], n=4, cutoff=0.5)]
    raise DescribeError(f"--gpu {name!r}: no GPU of that name in the tables"
                        + (f"; near: {', '.join(near)}" if near else "")
                        + " (selector/catalogs/bandwidth.json lists the names known)")


def _amd_gfx(row: dict, name: str) -> str:
    if row.get("gfx"):
        return row["gfx"]
    from probes.tables import load

    for dev in load("amd_pci")["devices"]:
        if row["match"].lower() in dev["name"].lower():
            return dev["gfx"]
    raise DescribeError(f"--gpu {name!r}: its gfx target is not in the tables")


def _add_gpu(p: Profile, i: int, name: str, vram_bytes: int | None, drivers: set) -> str:
    """The GPU named ``name`` added to ``p`` (its Vulkan driver to ``drivers``); the name it is known by."""
    dtype, row = lookup(name)
    from selector.bandwidth import shares_memory

    if shares_memory(dtype, row):
        raise DescribeError(f"--gpu {name!r}: {row['match']} shares the machine's memory; describe "
                            "that machine by its capture (pick-backend --root DIR) instead")
    if row.get("memory_gb") is None and vram_bytes is None:
        raise DescribeError(f"--gpu {name!r}: the tables do not say how much memory a {row['match']} has; "
                            "add --vram SIZE")
    memory = vram_bytes or int(row["memory_gb"] * (1 << 30))  # a card's "24 GB" is 24 GiB of chips
    label = row["match"]
    if dtype == "nvidia_gpu":
        from probes.tables import nvidia_cc_from_name

        cc = nvidia_cc_from_name(label) or nvidia_cc_from_name(name)
        if cc is None:
            raise DescribeError(f"--gpu {name!r}: the compute capability of a {label} is not in the tables")
        p.nvidia_gpus.append(NvidiaGpu(
            index=len(p.nvidia_gpus), name=label if label.startswith("NVIDIA") else f"NVIDIA {label}", sm=f"sm_{cc[0]}{cc[1]}", compute_capability=list(cc),
            memory_bytes=memory, driver_version=None, cuda_driver_version=None, source="described",
            uuid=f"GPU-described-{i}", cuda_index=len(p.nvidia_gpus), vulkan_driver="nvidia_icd"))
        drivers.add("nvidia_icd")
    elif dtype == "amd_gpu":
        gfx = _amd_gfx(row, name)
        p.amd_gpus.append(AmdGpu(
            index=len(p.amd_gpus), name=f"AMD {label}", pci=PCI(vendor="0x1002", device="", bus_id=None),
            gfx=gfx, gfx_effective=gfx, vram_bytes=memory, source="described", driver="amdgpu",
            hip_index=len(p.amd_gpus), vulkan_driver="radeon_icd"))
        drivers.add("radeon_icd")
    else:
        p.intel_gpus.append(IntelGpu(name=f"Intel Arc {label}", arc=True, index=len(p.intel_gpus),
                                     vulkan_driver="intel_icd"))
        drivers.add("intel_icd")
    return label


def _resize(p: Profile, vram_bytes: int) -> None:
    """--vram alone: every discrete GPU of the machine given that memory."""
    discrete = [g for g in p.amd_gpus if not g.integrated] + [g for g in p.nvidia_gpus if not g.unified]
    if not discrete:
        raise DescribeError("--vram gives the memory of discrete GPUs, and this machine has none "
                            "(name one with --gpu)")
    from selector.bandwidth import row_for

    for g in discrete:
        amd = hasattr(g, "vram_bytes")
        # the card is what its probed memory says it is ("RX 7900 XTX/XT/GRE" with 24 GiB: the XTX): named
        # so before its memory changes, lest the new size make it another card of the name
        row = row_for("amd_gpu", g.name, g.vram_bytes, exact=True) if amd and "/" in (g.name or "") else None
        if row is not None:
            g.name = f"AMD {row['match']}"
        if amd:
            g.vram_bytes, g.vram_used_bytes = vram_bytes, None
        else:
            g.memory_bytes, g.memory_free_bytes = vram_bytes, None


def describe(base: Profile, gpus: list[str], vram: str | None = None, ram: str | None = None) -> Profile:
    """``base`` with its GPUs replaced by the named ones (when any are named) and its system memory
    by ``ram``.  Integrated GPUs and SoCs that share system memory are refused: their memory is the
    machine's, which a name does not say."""
    p = Profile.from_dict(base.to_dict())
    if gpus and (p.os.name == "macos" or p.metal.available):
        # llama.cpp on a Mac runs on Metal (or its CPU): a card named beside it would be judged on a Mac,
        # where no CUDA, ROCm or Vulkan build of the catalogs runs it
        raise DescribeError(f"--gpu {gpus[0]!r}: this machine is a Mac, whose builds run on Metal or the CPU; describe "
                            "a Linux or Windows machine instead (run it there, or give --root DIR of one)")
    vram_bytes = parse_size(vram, "--vram") if vram is not None else None
    if ram is not None and not gpus and (any(g.integrated for g in p.amd_gpus) or any(g.unified for g in p.nvidia_gpus)
                                         or p.metal.available):
        raise DescribeError("--ram: this machine's GPU shares system memory, which a size alone does not "
                            "describe; describe another machine by its capture (pick-backend --root DIR)")
    if ram is not None:
        p.cpu.memory_bytes = parse_size(ram, "--ram")
    made = []
    if gpus:
        p.amd_gpus, p.nvidia_gpus, p.intel_gpus = [], [], []
        # what the probe said of the GPUs it found is not said of the ones described
        p.warnings = [w for w in p.warnings if w.probe not in ("amd_gpu", "nvidia", "intel_gpu", "vulkan")]
        drivers = set(p.vulkan.gpu_drivers)
        for i, name in enumerate(gpus):
            made.append(_add_gpu(p, i, name, vram_bytes, drivers))
        p.vulkan.loader = True
        p.vulkan.gpu_drivers = sorted(drivers)
    elif vram_bytes is not None:
        _resize(p, vram_bytes)
    words = []
    if made:
        words.append(" + ".join(f"{made.count(n)}x {n}" if made.count(n) > 1 else n for n in dict.fromkeys(made))
                     + ("" if vram_bytes else " (memory from the tables)"))
    if vram_bytes:
        n = len(made) if made else len(p.amd_gpus) + len(p.nvidia_gpus)
        words.append(f"{vram_bytes / (1 << 30):.1f} GiB of VRAM" + (" each" if n > 1 else ""))
    if ram:
        words.append(f"{p.cpu.memory_bytes / (1 << 30):.1f} GiB of system memory")
    if words:
        p.warn("described", f"a described machine, not a probed one: {', '.join(words)}; drivers are assumed "
                            "new enough and every device usable")
    return p
