"""The run environment: the variables that make an engine use the device chosen for it, and the
notes where a variable cannot say it (Vulkan's own device order, a process-wide HSA override)."""

from __future__ import annotations

from selector.engine.devices import Machine
from selector.engine.records import Device, Verdict
from selector.kinds import GPU_TYPES, TYPE_WORDS, VISIBLE_ENV, kind


def run_env_for(m: Machine, v: Verdict) -> tuple[dict[str, str], str, list[Device]]:
    """The environment that makes the engine run on the chosen device when several of its kind are
    visible, and a note where it cannot be given.

    A compute build (ROCm, CUDA) is pinned to the satisfying devices that the same build serves: where
    the catalog's family tokens are separate builds (ROCm per gfx family) the devices matched by the
    chosen one's token (a gfx110X build never gets a gfx1032); else every satisfying device (the row
    lists the build's targets).  Nothing is set when every visible device of the kind is among them.
    Vulkan's device order is not known before the build runs, so it gets a note instead of a guess."""
    dev = v.device
    if dev is not None and dev.type in GPU_TYPES and v.access == "graphics":
        # Vulkan enumerates the GPUs of every vendor that have a Vulkan driver
        gpus = {t: n for t in GPU_TYPES if (n := sum(1 for u in m.every[t] if not u.closed["graphics"]))}
        total = sum(gpus.values())
        if total < 2:
            return {}, "", []
        what = f"{total} {TYPE_WORDS[dev.type]}s" if len(gpus) == 1 else \
            f"{total} GPUs ({', '.join(f'{n} {TYPE_WORDS[t]}' for t, n in gpus.items())})"
        return {}, (f"{what} are visible; Vulkan numbers devices in its own order, "
                    f"so pin one with GGML_VK_VISIBLE_DEVICES after `pick-backend verify` lists them"), []
    if dev is None or dev.type not in VISIBLE_ENV:
        return {}, "", []
    var = VISIBLE_ENV[dev.type]
    facts = kind(dev.type)
    # the devices the compute runtime enumerates: those it can open
    visible = [u for u in m.visible[dev.type] if u.enumerated]
    # a shell value is read in the runtime's own order, which may be a guess (CUDA's): pin by id anyway,
    # so the engine gets the device judged here whatever the order
    pin_anyway = bool(facts.get("pin_when_set")) and var in m.profile.device_env and len(m.every[dev.type]) > 1
    if len(visible) < 2 and not pin_anyway:
        return {}, "", []
    if facts.get("one_build_per_family"):
        group = [d for d in v.devices if d.token == dev.token]
    else:
        group = list(v.devices)
    if len(group) == len(visible) and not pin_anyway:
        return {}, "", []
    group.sort(key=lambda d: d.index)  # a GPU always has its index
    if dev.type == "nvidia_gpu":
        return _cuda(m, group)
    ids = [str(_first_int(d.unit.runtime_index, d.index)) for d in group]
    return {var: ",".join(ids)}, "", group


def _cuda(m: Machine, group: list[Device]):
    """CUDA takes UUIDs (they survive re-enumeration) or indices."""
    if all(d.uuid for d in group):
        return {"CUDA_VISIBLE_DEVICES": ",".join(d.uuid for d in group)}, "", group
    # by index: CUDA counts fastest first unless told PCI order, and run_env replaces any
    # CUDA_VISIBLE_DEVICES of this shell, so the index is the GPU's place in PCI (NVML) order
    # among every GPU CUDA can use, visible here or not
    usable = sorted((u for u in m.every["nvidia_gpu"] if u.enumerated), key=lambda u: u.index)
    pos = {id(u): n for n, u in enumerate(usable)}
    ids = [str(pos.get(id(d.unit), d.index)) for d in group]
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(ids)}, "", group


def _first_int(*values) -> int:
    for v in values:
        if isinstance(v, int):
            return v
    return 0


def override_notes(m: Machine, v: Verdict) -> list[str]:
    """A process-wide HSA_OVERRIDE_GFX_VERSION that ROCm refuses for some GPUs: how to say it per node
    (for a ROCm build; a Vulkan build does not read it)."""
    dev = v.device
    if not v.supported or v.access == "graphics" or dev is None or dev.type != "amd_gpu":
        return []
    env = m.profile.device_env
    value = env.get("HSA_OVERRIDE_GFX_VERSION")
    every = m.profile.amd_gpus
    refused = [g for g in every if g.gfx_override == "HSA_OVERRIDE_GFX_VERSION" and g.gfx_override_refused]
    if value is None or not refused:
        return []
    fits = [d.gpu for d in v.devices if d.gpu is not None and d.gpu.gfx_override == "HSA_OVERRIDE_GFX_VERSION"
            and d.gpu.gfx_effective != d.gpu.gfx]
    names = ", ".join(f"{g.name} ({g.gfx})" for g in refused)
    out = f"HSA_OVERRIDE_GFX_VERSION={value} applies to every AMD GPU of the process; ROCm refuses it for {names}"
    per_node = [f"HSA_OVERRIDE_GFX_VERSION_{g.kfd_node}={value}" for g in fits if g.kfd_node is not None]
    if per_node:
        out += (f": to override only {', '.join(g.name for g in fits)}, set {' '.join(per_node)} instead "
                f"(ROCr reads HSA_OVERRIDE_GFX_VERSION_<KFD node>)")
    return [out]
