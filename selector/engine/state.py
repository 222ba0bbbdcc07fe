"""Where a backend stands in the cache: the directory a build installs to and its install state."""

from __future__ import annotations

from selector.catalog import Recipe


def recipe_channel(recipe: Recipe, settings) -> str:
    """The ROCm channel clamped to what the recipe offers (sd-cpp is stable-only)."""
    if recipe.rocm_channels and settings.channel not in recipe.rocm_channels:
        return recipe.rocm_channels[0]
    return settings.channel


def install_dir_name(recipe: Recipe, backend: str, channel: str) -> str:
    """Name of the backend's directory in the cache: rocm on a channel-capable recipe is
    ``rocm-<channel>``."""
    if backend == "rocm" and recipe.rocm_channels:
        return f"rocm-{channel}"
    return backend


def state_for(recipe: Recipe, backend: str, channel: str, supported: bool, installed: dict, pins: dict) -> str:
    if not supported:
        return "unsupported"
    if backend == "system":
        return "installed"  # it is the binary on PATH
    dirname = install_dir_name(recipe, backend, channel)
    inst = installed.get(recipe.name, {})
    if dirname not in inst:
        return "installable"
    have = inst[dirname]
    rpins = pins.get(recipe.name, {})
    want = rpins.get(dirname, rpins.get(backend))
    if want is None:
        return "installed" if have else "update_required"
    # an installed "<pin>-<suffix>" matches, as in Lemonade (system_info.cpp: vllm writes
    # vllm0.20.1-rocm7.12.0-gfx1151 for the pin vllm0.20.1-rocm7.12.0)
    return "installed" if have == want or (have or "").startswith(want + "-") else "update_required"
