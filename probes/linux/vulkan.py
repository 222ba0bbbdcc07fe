"""Vulkan: the loader (answered by the Host) and the ICD manifests in the loader's search path.
lavapipe (lvp_icd) renders on the CPU and does not count as a GPU driver."""

from __future__ import annotations

from probes import runtime_env

CPU_ICDS = ("lvp_icd", "swiftshader_icd")


def _search_dirs(env) -> list[str]:
    home = env.get("HOME", "/root")
    dirs = [env.get("XDG_CONFIG_HOME") or f"{home}/.config"]
    dirs += (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")
    dirs += ["/etc", "/usr/local/etc"]
    dirs.append(env.get("XDG_DATA_HOME") or f"{home}/.local/share")
    dirs += (env.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(":")
    out = []
    for d in dirs:
        if d and d.startswith("/"):
            p = d.rstrip("/") + "/vulkan/icd.d"
            if p not in out:
                out.append(p)
    return out


def probe(host, profile) -> None:
    profile.vulkan.loader = host.vulkan_loader()
    override = host.env.get("VK_DRIVER_FILES") or host.env.get("VK_ICD_FILENAMES")
    names: list[str] = []
    if override:
        for item in override.split(":"):
            if item.endswith(".json"):
                names.append(item.rsplit("/", 1)[-1])
            else:
                names += host.listdir(item)
    else:
        for d in _search_dirs(host.env):
            names += host.listdir(d)
    drivers, cpu = [], set()
    for n in names:
        if not n.endswith(".json"):
            continue
        stem = n[:-5].split(".")[0]
        if stem in CPU_ICDS:
            cpu.add(stem)
        if stem in CPU_ICDS or stem in drivers:
            continue
        drivers.append(stem)
    profile.vulkan.gpu_drivers = drivers
    runtime_env.vulkan_devices(host, profile, len(cpu))
