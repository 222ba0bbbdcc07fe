"""What LocalAI installs by itself: its capability string, computed from a Profile by the rules in
the catalog's ``capability`` section, and what that means for each recipe.  Pure, no I/O.

LocalAI picks one capability string per process (``pkg/system/capabilities.go``): a forced value
(environment variable, else a run file), else its own detection, rule by rule.  A meta backend
(``llama-cpp``) maps the capability to a concrete image through its ``capabilities`` map (falling
back to ``default``, then ``cpu``), and a concrete image is offered only when its name passes the
compatibility filter for that capability.  The rules, the fallback and the filter are data in
``selector/catalogs/localai.json``; this module only evaluates them, so nothing here is named after
a backend.
"""

from __future__ import annotations

from probes.inputs import InputError, need

GIB = 1 << 30
CONDITIONS = ("os", "arch", "vendor", "cuda_dir", "vram_at_most")


class Choice:
    """The capability LocalAI would use: ``value``, ``source`` (``env``, ``run_file`` or
    ``detected``) and ``why`` in words."""

    def __init__(self, value: str, source: str, why: str, hint: str = ""):
        self.value, self.source, self.why, self.hint = value, source, why, hint

    def to_dict(self) -> dict:
        return {"capability": self.value, "source": self.source, "why": self.why, "hint": self.hint}


# -- the machine as LocalAI's detection sees it ---------------------------------------------------


def facts(profile, vendors) -> dict:
    """vendor (first of ``vendors`` present, or None), total VRAM, CUDA toolkit directories."""
    present = {"nvidia": bool(profile.nvidia_gpus), "amd": bool(profile.amd_gpus),
               "intel": bool(getattr(profile, "intel_gpus", None))}
    vendor = next((v for v in vendors if present.get(v)), None)
    vram = sum(g.memory_bytes or 0 for g in profile.nvidia_gpus) + sum(g.vram_bytes or 0 for g in profile.amd_gpus)
    return {"os": profile.os.name, "arch": profile.cpu.arch, "vendor": vendor, "vram": vram,
            "cuda_dirs": list(getattr(profile, "cuda_toolkits", None) or [])}


def _holds(cond: dict, f: dict) -> bool:
    for key, want in cond.items():
        if key == "vendor":
            if (f["vendor"] or "none") != want:
                return False
        elif key == "cuda_dir":
            if want not in f["cuda_dirs"]:
                return False
        elif key == "vram_at_most":
            if f["vram"] > want:
                return False
        elif f.get(key) != want:
            return False
    return True


def detect(profile, spec: dict) -> Choice:
    forced = getattr(profile, "localai_capability", None)
    if forced:
        src = getattr(profile, "localai_capability_source", None) or "env"
        where = spec["env"] if src == "env" else spec["run_file"]
        return Choice(forced, "env" if src == "env" else "run_file", f"forced by {where}",
                      "read from this shell's environment; the LocalAI process may have another" if src == "env" else "")
    f = facts(profile, spec["vendors"])
    for rule in spec["rules"]:
        if _holds(rule.get("if", {}), f):
            from selector.engine.words import placeholders

            value = placeholders(rule["capability"], {"vendor": f["vendor"] or "default"})
            words = {"vram": f"{f['vram'] / GIB:.1f} GiB", "vendor": f["vendor"] or "", "env": spec["env"],
                     "run_file": spec["run_file"]}
            return Choice(value, "detected", placeholders(rule["why"], words), placeholders(rule.get("hint", ""), words))
    return Choice("default", "detected", "no rule matched")


def resolve(capability: str, capmap: dict, fallback) -> str | None:
    """The key of ``capmap`` LocalAI uses for ``capability`` (SystemState.Capability); None when
    the map has neither it nor a fallback key (LocalAI then lists no such backend)."""
    if capability in capmap:
        return capability
    for key in fallback:
        if key in capmap:
            return key
    return None


def compatible(image: str, capability: str, spec: dict) -> bool:
    """Whether LocalAI offers the concrete ``image`` under ``capability`` (IsBackendCompatible)."""
    if capability == spec.get("disable"):
        return True
    name = image.lower()
    for rule in spec["compatibility"]:
        if any(t in name for t in rule["tokens"]):
            if "prefix" in rule:
                return capability.startswith(rule["prefix"])
            return capability in rule["capabilities"]
    return True


# -- per recipe -----------------------------------------------------------------------------------


def image_of(verdict) -> str | None:
    cmd = verdict.extra.get("install") if verdict is not None else None
    return cmd.split()[-1] if cmd else None


def advise(profile, catalog, decisions) -> dict | None:
    """``{"capability": Choice.to_dict(), "recipes": {recipe: {...}}, "notes": [...]}`` for a catalog
    with a ``capability`` section; None otherwise."""
    spec = catalog.extra.get("capability")
    if not spec:
        return None
    choice = detect(profile, spec)
    env, engine = spec["env"], spec.get("engine", "the engine")
    recipes: dict[str, dict] = {}
    wanted: dict[str, list[str]] = {}  # capability value -> recipes that need it forced
    for d in decisions:
        recipe = catalog.recipes[d.recipe]
        capmap = recipe.extra.get("capabilities")
        out: dict = {"installs": None, "same_as_pick": None, "commands": [], "note": ""}
        if capmap is not None:
            key = resolve(choice.value, capmap, spec["fallback"])
            own = capmap.get(key) if key else None
            if own is not None and not compatible(own, choice.value, spec):
                own = None
            out["installs"] = own
        chosen = d.verdict(d.backend) if d.backend and d.ok else None
        pick = image_of(chosen)
        if pick is None:
            if out["installs"]:
                out["note"] = (f"{engine} would install {out['installs']} by itself, but no image of "
                               f"{d.recipe} runs on this machine")
            recipes[d.recipe] = out
            continue
        out["same_as_pick"] = pick == out["installs"] if capmap is not None else None
        if capmap is None:
            out["note"] = f"{engine}'s backend index has no capability map for {d.recipe}: install the image by name"
        if out["same_as_pick"]:
            out["commands"] = [f"local-ai backends install {d.recipe}"]
        else:
            if compatible(pick, choice.value, spec):
                out["commands"] = [f"local-ai backends install {pick}"]
            else:
                value = (chosen.extra.get("env") or {}).get(env)
                if value:
                    wanted.setdefault(value, []).append(d.recipe)
                    out["commands"] = [f"{env}={value} local-ai backends install {pick}"]
                    out["note"] = (f"LocalAI hides {pick} under capability '{choice.value}'; {env} is read once "
                                   f"per LocalAI process and applies to every backend it installs, not only {d.recipe}")
                else:
                    out["commands"] = [f"local-ai backends install {pick}"]
            if out["installs"] and not out["note"]:
                out["note"] = f"{engine} by itself would install {out['installs']}"
                theirs = next((v for v in d.backends if image_of(v) == out["installs"]), None)
                if theirs is not None and not theirs.supported:
                    out["note"] += f", which does not run here: {theirs.reason}"
        recipes[d.recipe] = out
    notes = []
    if len(wanted) > 1:
        parts = "; ".join(f"{v} for {', '.join(rs)}" for v, rs in wanted.items())
        notes.append(f"these picks need different values of {env} ({parts}), but {engine} reads one value for "
                     "all of its backends: install each with its own value, one at a time, and do not leave any "
                     "of them set for the running server")
    return {"engine": engine, "capability": choice.to_dict(), "recipes": recipes, "notes": notes}


# -- validation (called by the catalog loader) -----------------------------------------------------


def validate(spec, path) -> None:
    w = "capability"
    need(isinstance(spec, dict), path, w, "must be an object")
    for key in ("engine", "env", "run_file"):
        need(isinstance(spec.get(key), str) and spec.get(key), path, f"{w}.{key}", "must be a non-empty string")
    for key in ("vendors", "fallback"):
        v = spec.get(key)
        need(isinstance(v, list) and v and all(isinstance(x, str) for x in v), path, f"{w}.{key}",
             "must be a non-empty list of strings")
    rules = spec.get("rules")
    need(isinstance(rules, list) and rules, path, f"{w}.rules", "must be a non-empty list")
    for i, rule in enumerate(rules):
        rw = f"{w}.rules[{i}]"
        need(isinstance(rule, dict), path, rw, "must be an object")
        for key in ("capability", "why"):
            need(isinstance(rule.get(key), str) and rule.get(key), path, f"{rw}.{key}", "must be a non-empty string")
        need(isinstance(rule.get("hint", ""), str), path, f"{rw}.hint", "must be a string")
        cond = rule.get("if", {})
        need(isinstance(cond, dict), path, f"{rw}.if", "must be an object")
        bad = [k for k in cond if k not in CONDITIONS]
        need(not bad, path, f"{rw}.if", f"unknown condition {bad[0] if bad else ''!r} (known: {', '.join(CONDITIONS)})")
        if "vram_at_most" in cond:
            need(isinstance(cond["vram_at_most"], int) and not isinstance(cond["vram_at_most"], bool), path,
                 f"{rw}.if.vram_at_most", "must be a number of bytes")
    comp = spec.get("compatibility")
    need(isinstance(comp, list), path, f"{w}.compatibility", "must be a list")
    for i, rule in enumerate(comp):
        cw = f"{w}.compatibility[{i}]"
        need(isinstance(rule, dict) and isinstance(rule.get("tokens"), list) and rule["tokens"], path, cw,
             "must be an object with a non-empty 'tokens' list")
        need(isinstance(rule.get("prefix"), str) or isinstance(rule.get("capabilities"), list), path, cw,
             "needs 'prefix' (a string) or 'capabilities' (a list)")


def validate_map(capmap, path, where) -> None:
    if not (isinstance(capmap, dict) and capmap and all(isinstance(k, str) and isinstance(v, str) and v
                                                       for k, v in capmap.items())):
        raise InputError(path, f"{where}: must be a non-empty object {{capability: image}}")
