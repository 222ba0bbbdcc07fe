"""The kinds of device (catalogs/device-kinds.json): what a catalog row may name and how a kind is
spoken of.  Data, read once; ``register`` adds a kind (a new vendor: its probe record, this entry,
a mapping into the engine's device record in selector/engine/devices.py, and catalog rows)."""

from __future__ import annotations

import json
import os

_PATH = os.path.join(os.path.dirname(__file__), "catalogs", "device-kinds.json")

with open(_PATH, encoding="utf-8") as _f:
    KINDS: dict[str, dict] = json.load(_f)["kinds"]

# kept in place (lists and dicts that register() extends), so every importer sees a kind added later
DEVICE_TYPES: list[str] = []
ACCELERATORS: list[str] = []
GPU_TYPES: list[str] = []  # kinds a Vulkan build reaches through their Vulkan driver
TYPE_WORDS: dict[str, str] = {}
VISIBLE_ENV: dict[str, str] = {}


def _index() -> None:
    for seq in (DEVICE_TYPES, ACCELERATORS, GPU_TYPES):
        seq.clear()
    TYPE_WORDS.clear()
    VISIBLE_ENV.clear()
    for name, k in KINDS.items():
        DEVICE_TYPES.append(name)
        TYPE_WORDS[name] = k["words"]
        if k.get("accelerator"):
            ACCELERATORS.append(name)
        if k.get("graphics"):
            GPU_TYPES.append(name)
        if k.get("visible_env"):
            VISIBLE_ENV[name] = k["visible_env"]


_index()


# llama.cpp's backends: a catalog backend of one of these names runs on it (selector/catalogs/llamacpp-fit.json
# "reserve" and the published results name the same ones)
RUNTIMES = ("rocm", "cuda", "vulkan", "metal", "sycl", "cpu")


def runtime(backend: str, kind_name: str, access: str = "compute") -> str:
    """The llama.cpp backend a build runs on its device: its own name where it is one, vulkan for a build
    that opens GPUs for graphics, else the kind's compute runtime (``system``: the device's)."""
    if backend in RUNTIMES:
        return backend
    if access == "graphics":
        return "vulkan"
    return KINDS.get(kind_name, {}).get("runtime", "cpu")


def kind(name: str) -> dict:
    return KINDS.get(name, {})


def register(name: str, spec: dict) -> None:
    """Add (or replace) a kind; ``unregister`` takes it away again."""
    if not isinstance(spec.get("words"), str):
        raise ValueError(f"device kind {name!r}: 'words' must be a string")
    KINDS[name] = dict(spec)
    _index()


def unregister(name: str) -> None:
    KINDS.pop(name, None)
    _index()
