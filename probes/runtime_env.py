"""Device-selection variables, each read by one runtime only.

=============================  ==============================================================
variable                       read by
=============================  ==============================================================
``ROCR_VISIBLE_DEVICES``       ROCm's ROCr (Linux): indices or UUIDs among the KFD GPU nodes
``HIP_VISIBLE_DEVICES``        HIP: indices among what ROCr leaves
``CUDA_VISIBLE_DEVICES``       CUDA; HIP reads it too when HIP_VISIBLE_DEVICES is not set
                               (ROCm/clr rocclr/utils/flags.hpp defines both as HIP flags)
``CUDA_DEVICE_ORDER``          CUDA: ``PCI_BUS_ID``, else fastest first (CUDA's guess)
``GGML_VK_VISIBLE_DEVICES``    llama.cpp's Vulkan backend (ggml-vulkan), in Vulkan's order
``HSA_OVERRIDE_GFX_VERSION``   ROCr: every GPU of the process runs as that gfx target;
  ``_<node>``                  the same for KFD node <node> only (ROCR-Runtime libhsakmt
                               topology.c, per-node form first)
=============================  ==============================================================

Vulkan drivers (RADV, ANV, NVIDIA's) read none of the ROCm or CUDA variables, so a GPU hidden
from ROCm or CUDA still serves a Vulkan build.

An empty value: CUDA takes ``CUDA_VISIBLE_DEVICES=""`` as "no device"; ROCr and HIP read their
variables as strings whose default is empty, so an empty value is the same as unset (every device).
"""

from __future__ import annotations

from probes.util import parse_override, parse_visible, warn_visible

NAMES = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
         "GGML_VK_VISIBLE_DEVICES", "HSA_OVERRIDE_GFX_VERSION")
OVERRIDE = "HSA_OVERRIDE_GFX_VERSION"


def record(host, profile) -> None:
    """Profile.device_env: the device-selection variables this process has, as set."""
    env = host.env
    profile.device_env = {k: env[k] for k in sorted(env)
                          if k in NAMES or (k.startswith(OVERRIDE + "_") and k[len(OVERRIDE) + 1:].isdecimal())}
    order = (env.get("CUDA_DEVICE_ORDER") or "").strip()
    profile.cuda_order = "pci" if order == "PCI_BUS_ID" else "fastest"
    if order and order not in ("PCI_BUS_ID", "FASTEST_FIRST"):
        profile.warn("nvidia", f"CUDA_DEVICE_ORDER={order!r} is neither PCI_BUS_ID nor FASTEST_FIRST: "
                               "CUDA numbers devices fastest first")


# -- ROCm ----------------------------------------------------------------------------------------


def _rocm_value(env, var: str) -> str | None:
    v = env.get(var)
    return None if v is None or not v.strip() else v  # empty: the same as unset in ROCr and HIP


def rocm_visibility(host, profile, gpus: list, probe: str = "amd_gpu", rocr: bool = True) -> list[int]:
    """``visible`` of each AMD GPU after ROCR_VISIBLE_DEVICES (Linux) and HIP_VISIBLE_DEVICES (or
    CUDA_VISIBLE_DEVICES when HIP's is unset), with a warning for a list that is not valid.  Returns
    the GPUs ROCr leaves, in KFD order (HIP numbers those)."""
    env = host.env
    order = list(range(len(gpus)))
    if not gpus:
        return order
    steps = [("ROCR_VISIBLE_DEVICES", True)] if rocr else []
    hip_var = "HIP_VISIBLE_DEVICES" if _rocm_value(env, "HIP_VISIBLE_DEVICES") is not None else "CUDA_VISIBLE_DEVICES"
    steps.append((hip_var, False))
    left = order
    for var, is_rocr in steps:
        spec = _rocm_value(env, var)
        if spec is None:
            continue
        uuids = [getattr(gpus[i], "unique_id", None) for i in order]
        chosen, problem = parse_visible(spec, len(order), uuids)
        warn_visible(profile, probe, var, spec, problem, len(chosen))
        order = [order[i] for i in sorted(chosen)]
        if is_rocr:
            left = order
    for i, gpu in enumerate(gpus):
        if i not in order:
            gpu.visible = False
    if hip_var == "CUDA_VISIBLE_DEVICES" and _rocm_value(env, hip_var) is not None and gpus:
        profile.warn(probe, f"CUDA_VISIBLE_DEVICES={env[hip_var]!r} also selects AMD GPUs: HIP reads it when "
                            "HIP_VISIBLE_DEVICES is not set")
    return left


def major(gfx: str) -> str:
    """gfx1100 -> "11", gfx906 -> "9", gfx90a -> "9" (the two last characters are minor and stepping)."""
    return gfx[3:-2]


def rocm_overrides(host, profile, gpus: list) -> None:
    """gfx_effective of each AMD GPU after HSA_OVERRIDE_GFX_VERSION_<node> (that node only) or
    HSA_OVERRIDE_GFX_VERSION (every node).  An override that crosses a major version (a gfx906 run
    as a gfx1100) is refused by ROCm from 2026 (ROCm/rocm-systems#5686) and crashed earlier ones:
    the GPU keeps its hardware target, is marked ``gfx_override_refused`` and is warned about."""
    env = host.env
    bad: set[str] = set()
    for gpu in gpus:
        if gpu.gfx is None:
            continue
        var = f"{OVERRIDE}_{gpu.kfd_node}" if gpu.kfd_node is not None else None
        if var is None or var not in env:
            var = OVERRIDE if OVERRIDE in env else None
        if var is None:
            continue
        value = env[var]
        gfx = parse_override(value)
        if gfx is None:
            if var not in bad:
                bad.add(var)
                profile.warn("amd_gpu", f"{var}={value!r} is not a gfx version (major.minor.stepping); ignored")
            continue
        gpu.gfx_override = var
        if major(gfx) != major(gpu.gfx):
            gpu.gfx_override_refused = True
            gpu.gfx_effective = gpu.gfx
            node = f" (this GPU is KFD node {gpu.kfd_node})" if gpu.kfd_node is not None else ""
            profile.warn("amd_gpu", f"{var}={value} would run {gpu.name} ({gpu.gfx}) as {gfx}, across a major "
                                    f"version: ROCm refuses that (ROCm/rocm-systems#5686), so ROCm builds are not "
                                    f"chosen for this GPU; set {OVERRIDE}_<node> for the GPUs it fits instead{node}")
            continue
        gpu.gfx_effective = gfx
    applied = [g for g in gpus if g.gfx_override and not g.gfx_override_refused and g.gfx_effective != g.gfx]
    for var in dict.fromkeys(g.gfx_override for g in applied):
        some = [g for g in applied if g.gfx_override == var]
        profile.warn("amd_gpu", f"{var}={env[var]}: ROCm runs "
                                + ", ".join(f"{g.name} ({g.gfx})" for g in some) + f" as {some[0].gfx_effective}")


# -- CUDA ----------------------------------------------------------------------------------------


def cuda_rank(gpu) -> tuple:
    """CUDA's fastest-first order is a guess CUDA makes at run time ("a simple heuristic", CUDA C
    Programming Guide, CUDA Environment Variables) that NVIDIA does not publish.  Ours: the higher
    compute capability first, then more memory, then PCI order; device 0 is the one that matters
    most (the guide: "make that device 0, leaving the order of the rest of the devices
    unspecified")."""
    cc = tuple(gpu.compute_capability) if gpu.compute_capability else (0, 0)
    return (-cc[0], -cc[1], -(gpu.memory_bytes or 0), gpu.index)


def cuda_visibility(host, profile, gpus: list, uuids: list) -> None:
    """``visible`` and ``cuda_index`` of each NVIDIA GPU after CUDA_VISIBLE_DEVICES, read in CUDA's
    order: PCI order with CUDA_DEVICE_ORDER=PCI_BUS_ID, else fastest first (guessed; a warning says
    so when several GPUs make the guess matter).  UUIDs name a GPU whatever the order.  CUDA
    numbers only the GPUs its driver can use."""
    spec = host.env.get("CUDA_VISIBLE_DEVICES")
    usable = [i for i, g in enumerate(gpus) if g.usable and g.driver_loaded]
    cuda = usable if profile.cuda_order == "pci" else sorted(usable, key=lambda i: cuda_rank(gpus[i]))
    if spec is None:
        chosen = list(range(len(cuda)))
    else:
        chosen, problem = parse_visible(spec, len(cuda), [uuids[i] for i in cuda])
        warn_visible(profile, "nvidia", "CUDA_VISIBLE_DEVICES", spec, problem, len(chosen))
        numeric = any(t.strip().isdecimal() for t in spec.split(","))
        if profile.cuda_order == "fastest" and len(cuda) > 1 and numeric and chosen:
            taken = ", ".join(f"{c} as {gpus[cuda[c]].name}" for c in chosen)
            profile.warn("nvidia", f"CUDA_VISIBLE_DEVICES={spec} counts GPUs in CUDA's fastest-first order, which "
                                   f"CUDA guesses at run time; read here with device {taken} (the guess: "
                                   "highest compute capability, then most memory); set CUDA_DEVICE_ORDER=PCI_BUS_ID "
                                   "or name GPUs by UUID to be sure")
        kept = {cuda[c] for c in chosen}
        for i in usable:  # a GPU CUDA cannot use is not hidden by the variable: it is unusable
            gpus[i].visible = i in kept
    for n, c in enumerate(chosen):
        gpus[cuda[c]].cuda_index = n


# -- Vulkan --------------------------------------------------------------------------------------


def vulkan_devices(host, profile, cpu_renderers: int = 0) -> None:
    """``vulkan_driver`` of every GPU: the installed ICD of its vendor (probes/tables/vulkan_icds.json).
    An NVIDIA GPU needs the NVIDIA driver loaded as well: its Vulkan driver is part of it.  The
    device nodes the driver opens are judged by the GPU's own access facts (the render node for
    RADV and ANV, /dev/nvidia* for NVIDIA).  Then ``vulkan_visible`` after GGML_VK_VISIBLE_DEVICES."""
    from probes import tables

    by_vendor: dict[str, str] = {}
    for icd in profile.vulkan.gpu_drivers:
        vendor = tables.vulkan_vendor(icd)
        if vendor:
            by_vendor.setdefault(vendor, icd)
    for g in profile.amd_gpus:
        g.vulkan_driver = by_vendor.get("amd")
    for g in profile.nvidia_gpus:
        g.vulkan_driver = by_vendor.get("nvidia") if g.driver_loaded else None
    for g in profile.intel_gpus:
        g.vulkan_driver = by_vendor.get("intel")
    spec = host.env.get("GGML_VK_VISIBLE_DEVICES")
    if spec is None:
        return
    gpus = [g for g in (*profile.amd_gpus, *profile.nvidia_gpus, *profile.intel_gpus) if g.vulkan_driver]
    count = len(gpus) + cpu_renderers
    indices: list[int] = []
    for token in spec.replace(",", " ").split():
        if not token.isdecimal():
            profile.warn("vulkan", f"GGML_VK_VISIBLE_DEVICES={spec!r}: entry {token!r} is not a device index; "
                                   "llama.cpp's Vulkan backend stops reading the list there")
            break
        indices.append(int(token))
    past = [i for i in indices if i >= count]
    if past:
        profile.warn("vulkan", f"GGML_VK_VISIBLE_DEVICES={spec!r}: index {past[0]} is past the last Vulkan device "
                               f"(this machine has {count}): llama.cpp's Vulkan backend stops with "
                               "'Invalid Vulkan device index'")
    kept = [i for i in indices if i < count]
    if not kept:  # no device at all, whatever the order: the build runs on the CPU (one device: index 0 is it)
        for g in gpus:
            g.vulkan_visible = False
        if gpus and not past:
            profile.warn("vulkan", f"GGML_VK_VISIBLE_DEVICES={spec!r} keeps no Vulkan device: llama.cpp's Vulkan "
                                   "backend uses none of the GPUs")
    elif set(range(count)) - set(kept):  # some of several devices (with one, a non-empty list keeps it)
        profile.warn("vulkan", f"GGML_VK_VISIBLE_DEVICES={spec!r} keeps {len(set(kept))} of {count} Vulkan devices, "
                               "counted in the Vulkan loader's order, which the probe does not see: the pick names "
                               "the best GPU; `pick-backend verify` lists the devices the build uses")
