"""Settings from flags, environment and a Lemonade-style config.json: flags beat env beat config.

config.json (Lemonade's shape): top-level ``rocm_channel``; per-recipe sections such as
``"llamacpp": {"backend": "rocm", "prefer_system": false}``.  Unknown keys are warnings; a wrong
type is an InputError naming the key (exit 5).
"""

from __future__ import annotations

import os

from probes.inputs import InputError, read_json
from selector.engine import CHANNELS, POLICIES, Settings

RECIPE_KEYS = {"backend": str, "prefer_system": bool}


def read_config(path: str, recipes) -> tuple[dict, list[str]]:
    data = read_json(path, "config file not found")
    if not isinstance(data, dict):
        raise InputError(path, "top level must be a JSON object")
    warnings = []
    out: dict = {"recipes": {}}
    for key, value in data.items():
        if key == "rocm_channel":
            if isinstance(value, str):
                value = value.lower()
            if not isinstance(value, str) or value not in CHANNELS:
                raise InputError(path, f"key 'rocm_channel' must be one of {', '.join(CHANNELS)}, found {value!r}")
            out["channel"] = value
        elif key in recipes:
            if not isinstance(value, dict):
                raise InputError(path, f"key '{key}' must be an object")
            section = {}
            for k, v in value.items():
                if k in RECIPE_KEYS:
                    if not isinstance(v, RECIPE_KEYS[k]):
                        raise InputError(path, f"key '{key}.{k}' must be a {RECIPE_KEYS[k].__name__}, found {type(v).__name__}")
                    section[k] = v
                else:
                    warnings.append(f"{path}: unknown key '{key}.{k}' ignored")
            out["recipes"][key] = section
        else:
            warnings.append(f"{path}: unknown key '{key}' ignored")
    return out, warnings


def build(recipes, *, channel=None, prefer_system=None, policy=None, backend=None, backend_recipes=(),
          config_path=None, env=None, metric=None, measured=None, depth=0) -> tuple[Settings, list[str]]:
    """The settings, resolved once: flags beat the environment beat config.json.  ``backend`` pins the
    backend for ``backend_recipes`` (from --backend, already spelled as the catalog does); a backend
    that config.json pins is matched in any case, and one its recipe does not have is an InputError
    naming the file and the field (exit 5).  ``measured`` (called only under --policy measured) gives
    (the recipes bench can measure, the fresh measurements, warnings); ``depth``, the context depth
    it compares at."""
    env = os.environ if env is None else env
    warnings: list[str] = []
    cfg: dict = {"recipes": {}}
    config_path = config_path or env.get("PICK_BACKEND_CONFIG")
    if config_path:
        cfg, warnings = read_config(config_path, recipes)
    env_channel = env.get("PICK_BACKEND_CHANNEL")
    env_channel = env_channel.lower() if env_channel else env_channel  # names match in any case
    if env_channel and env_channel not in CHANNELS:
        raise InputError("PICK_BACKEND_CHANNEL", f"must be one of {', '.join(CHANNELS)}, found {env_channel!r}")
    policy = (policy or env.get("PICK_BACKEND_POLICY") or "accelerator-first").lower()
    if policy not in POLICIES:
        raise InputError("PICK_BACKEND_POLICY", f"must be one of {', '.join(POLICIES)}, found {policy!r}")
    backends, sources, prefer_by_recipe = {}, {}, {}
    for rname, section in cfg["recipes"].items():
        if "backend" in section and section["backend"].lower() != "auto":
            backends[rname] = _config_backend(config_path, rname, section["backend"], recipes[rname].backends)
            sources[rname] = f"config.json ({config_path})"
        if "prefer_system" in section:
            prefer_by_recipe[rname] = section["prefer_system"]
    if prefer_system is not None:
        prefer_by_recipe = {}
    if backend and backend != "auto":
        for r in backend_recipes:
            backends[r], sources[r] = backend, "--backend"
    measurable, measurements = None, {}
    if policy == "measured" and measured is not None:  # the results are read only when asked for
        measurable, measurements, more = measured()
        warnings += more
    s = Settings(channel=channel or env_channel or cfg.get("channel") or "stable",
                 prefer_system=bool(prefer_system), policy=policy, backends=backends, backend_sources=sources,
                 prefer_system_by_recipe=prefer_by_recipe, metric=(metric or "tg").lower(),
                 measurements=measurements, measurable=measurable, depth=depth)
    return s, warnings


def _config_backend(path, recipe: str, name: str, known) -> str:
    """config.json's pin for ``recipe`` as the catalog spells it (any case); exit 5 when it has none."""
    from selector.names import did_you_mean, match_name

    found = match_name(name, known)
    if found is None:
        raise InputError(path, f"key '{recipe}.backend': " + did_you_mean(name, known, f"backend of {recipe}"))
    return found


def for_recipe(s: Settings, catalog, recipe: str) -> Settings:
    """``s`` as one recipe is decided under: published llama-bench results (selector/evidence.py) speak
    for a catalog's llama.cpp recipes alone (``llama_cpp_recipes``); the file is read only where two
    builds run on the chosen device."""
    if recipe not in catalog.extra.get("llama_cpp_recipes", ()):
        return s if s.published is None else s.replace(published=None)
    if s.published is not None:
        return s
    from selector import evidence

    return s.replace(published=evidence.load)
