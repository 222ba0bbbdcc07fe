"""Which files to download for a decision: pure, no I/O beyond reading the bundled data file.

``plan(assets, recipe, backend, channel, device, os_name, arch, pins)`` turns the engine's choice (the
backend and the device it chose) and the asset rules of ``<catalog>-assets.json`` into a Plan: one
artifact for the backend build and, for ROCm builds that need it, one for the TheRock runtime of the
device's gfx target.  Names follow Lemonade's own install code (each rule cites its source), so both
tools find the same files in the shared cache.  Nothing here talks to the network; sizes and digests
come later from the releases API (see github.py).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from probes.inputs import InputError, read_json
from selector.catalog import CATALOG_DIR
from selector.engine import install_dir_name

THEROCK_URL_ENV = "PICK_BACKEND_THEROCK_URL"


class NoRule(Exception):
    """No asset rule for this recipe/backend/OS/arch, or the device lacks a part the name needs (exit 3)."""


@dataclass
class Artifact:
    kind: str  # "backend" | "runtime"
    dest: str  # relative to <cache>/bin, e.g. "llamacpp/rocm-stable" or "therock/gfx1151-7.14.0"
    version: str  # written to version.txt
    asset: str  # file name, or a pattern with '*' matched against the release's assets
    repo: str | None = None  # GitHub owner/name; None for a plain URL (TheRock tarball)
    tag: str | None = None
    url: str | None = None  # known up front for plain URLs; from the API for GitHub assets
    binary: str | None = None  # executable that must exist after unpacking
    expect: str | None = None  # a path that must exist after unpacking (runtime)
    pinned_sha256: str | None = None  # "sha256:<hex>" from the data file: wins over the API's digest
    size: int | None = None
    digest: str | None = None  # from the API
    method: str | None = None  # runtime: "tarball" (Lemonade's method.txt)

    @property
    def expected_digest(self) -> str | None:
        return self.pinned_sha256 or self.digest

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "repository": self.repo,
            "tag": self.tag,
            "asset": self.asset,
            "url": self.url,
            "size": self.size,
            "digest": self.expected_digest,
            "digest_source": "pinned" if self.pinned_sha256 else ("api" if self.digest else None),
            "destination": self.dest,
            "version": self.version,
        }


@dataclass
class Plan:
    recipe: str
    backend: str
    dirname: str
    tag: str
    artifacts: list[Artifact] = field(default_factory=list)

    @property
    def main(self) -> Artifact:
        return self.artifacts[0]


def assets_path(catalog_name: str) -> str:
    return os.path.join(CATALOG_DIR, f"{catalog_name}-assets.json")


def load_assets(catalog_name: str = "lemonade", path: str | None = None) -> dict:
    """The asset rules of a catalog, validated; a bad file raises InputError (exit 5)."""
    path = path or assets_path(catalog_name)
    data = read_json(path, "", default={"recipes": {}})
    _validate(data, path)
    return data


def _validate(data, path):
    def need(cond, where, msg):
        if not cond:
            raise InputError(path, f"{where}: {msg}")

    need(isinstance(data, dict), "top level", "must be a JSON object")
    recipes = data.get("recipes", {})
    need(isinstance(recipes, dict), "recipes", "must be an object")
    for rname, r in recipes.items():
        need(isinstance(r, dict), f"recipes.{rname}", "must be an object")
        need(isinstance(r.get("binary"), str) and r["binary"], f"recipes.{rname}.binary", "must be a non-empty string")
        backends = r.get("backends")
        need(isinstance(backends, dict), f"recipes.{rname}.backends", "must be an object")
        for bname, rules in backends.items():
            where = f"recipes.{rname}.backends.{bname}"
            need(isinstance(rules, list), where, "must be a list of rules")
            for i, rule in enumerate(rules):
                w = f"{where}[{i}]"
                need(isinstance(rule, dict), w, "must be an object")
                for key in ("os", "arch", "repo", "asset"):
                    need(isinstance(rule.get(key), str) and rule[key], f"{w}.{key}", "must be a non-empty string")
                need(rule.get("runtime") in (None, "therock"), f"{w}.runtime", "must be 'therock' when present")
                need("/" in rule["repo"], f"{w}.repo", "must be owner/name")
                need("/" not in rule["asset"] and ".." not in rule["asset"], f"{w}.asset", "must be a plain file name")
                for key in ("pin", "release_tag", "pin_overrides"):
                    need(rule.get(key) is None or (isinstance(rule[key], str) and rule[key]), f"{w}.{key}",
                         "must be a non-empty string when present")
    tr = data.get("therock")
    if tr is not None:
        for key in ("version", "base_url", "asset", "dir", "url_mapping"):
            need(key in tr, f"therock.{key}", "is missing")
        need(isinstance(tr["url_mapping"], dict), "therock.url_mapping", "must be an object")
        need(tr.get("architectures") is None or isinstance(tr["architectures"], list), "therock.architectures",
             "must be a list of gfx targets")
    ni = data.get("no_install", {})
    need(isinstance(ni, dict), "no_install", "must be an object {recipe: {backend: reason}}")
    for rname, m in ni.items():
        if not rname.startswith("_"):
            need(isinstance(m, dict) and all(isinstance(v, str) for v in m.values()), f"no_install.{rname}",
                 "must map backends to reasons")


def rocm_family(assets: dict, gfx: str) -> str:
    """The release family for a gfx target (gfx1201 -> gfx120X); unlisted targets verbatim."""
    fams = assets.get("rocm_asset_families", {})
    return fams.get(gfx, gfx) if isinstance(fams.get(gfx, gfx), str) else gfx


def pinned_checksum(assets: dict, repo: str | None, tag: str | None, asset: str) -> str | None:
    """checksums.github.<owner/name>.<tag>.<asset>, or checksums.url.<file name> for plain URLs."""
    sums = assets.get("checksums", {}) or {}
    if repo:
        v = (((sums.get("github") or {}).get(repo) or {}).get(tag) or {}).get(asset)
    else:
        v = (sums.get("url") or {}).get(asset)
    return v if isinstance(v, str) else None


def short_tag(tag: str) -> str:
    """sd.cpp's asset version: ``master-820-de298c2`` -> ``master-de298c2`` (the middle part dropped when it
    is a number), else the tag unchanged (Lemonade sdcpp_server.cpp:93-115)."""
    parts = tag.split("-", 2)
    if len(parts) == 3 and parts[1].isdecimal():
        return f"{parts[0]}-{parts[2]}"
    return tag


def lemonade_rocm_arch(assets: dict, gfx: str, os_name: str) -> str:
    """The arch Lemonade's SystemInfo::get_rocm_arch() reports for a GPU whose hardware target is ``gfx``:
    the KFD target itself on Linux, the family name (gfx110X, gfx1151, gfx120X) on Windows, where Lemonade
    reads it from the marketing name (system_info.cpp:1818-1887, 3474-3499 at e385039e)."""
    return rocm_family(assets, gfx) if os_name == "windows" else gfx


def _fill(pattern: str, values: dict) -> str:
    out = pattern
    for k, v in values.items():
        out = out.replace("{" + k + "}", v)
    return out


def _rule(assets: dict, recipe, backend: str, dirname: str, os_name: str, arch: str):
    """(the recipe's asset rules, the rule for this OS and arch); NoRule, saying why, where none is."""
    rname = recipe.name
    reason = ((assets.get("no_install") or {}).get(rname) or {}).get(backend)
    if isinstance(reason, str):
        raise NoRule(f"no install rule for {rname} {backend}: {reason}")
    fmt = next((r.format for r in getattr(recipe, "rows", []) if r.backend == backend), None)
    if fmt == "container":
        raise NoRule(f"no install rule for {rname} {backend}: it runs as a container image, which pick-backend "
                     "does not pull; use the image's own instructions")
    rdata = assets.get("recipes", {}).get(rname)
    if not rdata:
        raise NoRule(f"no install rule for {rname} {backend} (no asset rules for {rname} in the catalog's assets file)")
    rules = rdata["backends"].get(dirname) or rdata["backends"].get(backend)
    if not rules:
        raise NoRule(f"no install rule for {rname} {backend}" + (f" ({dirname})" if dirname != backend else ""))
    rule = next((r for r in rules if r["os"] == os_name and r["arch"] == arch), None)
    if rule is None:  # the OS runs another arch's build through its own emulation (Windows on Arm: x64)
        from selector.requires import emulated_arch

        other = emulated_arch(os_name, arch)
        rule = next((r for r in rules if r["os"] == os_name and r["arch"] == other), None) if other else None
    if rule is None:
        have = ", ".join(f"{r['os']}/{r['arch']}" for r in rules)
        raise NoRule(f"no install rule for {rname} {backend} on {os_name}/{arch} (published for: {have})")
    return rdata, rule


def _therock(assets: dict, therock: dict, rname: str, backend: str, gfx, os_name: str, env):
    """The TheRock runtime a ROCm build needs on this GPU (None where Lemonade installs none)."""
    if not therock:
        raise NoRule(f"{rname} {backend} needs the TheRock runtime but the assets file has no 'therock' block")
    if not gfx:
        raise NoRule(f"{rname} {backend}: the TheRock runtime is chosen by the GPU's gfx target; none was found")
    rock_arch = lemonade_rocm_arch(assets, gfx, os_name)
    known = therock.get("architectures")
    if known is not None and rock_arch not in known:
        # Lemonade installs no runtime for an arch it does not list (backend_manager.cpp:241-254)
        return None
    mapped = therock["url_mapping"].get(rock_arch) or rock_arch  # unmapped: verbatim, as Lemonade does
    version = therock["version"]
    os_word = (therock.get("os_names") or {}).get(os_name, os_name)
    rt_asset = _fill(therock["asset"], {"os": os_word, "therock": mapped, "version": version})
    base = (env.get(THEROCK_URL_ENV) or therock["base_url"]).rstrip("/")
    dest = _fill(therock["dir"], {"arch": rock_arch, "version": version})
    expect = (therock.get("expect_by_os") or {}).get(os_name) or therock.get("expect")
    return Artifact("runtime", dest, version, rt_asset, url=f"{base}/{rt_asset}", expect=expect,
                    pinned_sha256=pinned_checksum(assets, None, None, rt_asset), method="tarball")


def plan(assets: dict, recipe, backend: str, channel: str, device, os_name: str, arch: str, pins: dict,
         env=None, hw_gfx: str | None = None) -> Plan:
    """The artifacts to install for ``backend`` of ``recipe`` on ``device`` (the engine's choice).

    ``hw_gfx`` is the hardware gfx target of the chosen AMD GPU (the profile's ``AmdGpu.gfx``, which
    ``HSA_OVERRIDE_GFX_VERSION`` does not change); Lemonade names ROCm assets and the TheRock directory
    after it.  Without it the device's family (the effective target) stands in."""
    env = os.environ if env is None else env
    rname = recipe.name
    dirname = install_dir_name(recipe, backend, channel)
    rdata, rule = _rule(assets, recipe, backend, dirname, os_name, arch)
    therock = assets.get("therock") or {}
    gfx = device.family if device is not None and device.type == "amd_gpu" else None
    if gfx and hw_gfx:
        gfx = hw_gfx
    values = {
        "therock_mm": ".".join(str(therock.get("version", "")).split(".")[:2]),
        "therock": str(therock.get("version", "")),
    }
    text = rule["asset"] + (rule.get("release_tag") or "")
    if "{sm}" in text:
        if device is None or device.type != "nvidia_gpu" or not device.family:
            raise NoRule(f"{rname} {backend}: the asset name needs the GPU's CUDA target (sm_XX); "
                         "none was found (pass --force --sm sm_89 to install for another machine)")
        values["sm"] = device.family
    needs_gfx = any(p in text for p in ("{family}", "{rocm_arch}")) or rule.get("pin_overrides")
    if needs_gfx:
        if not gfx:
            raise NoRule(f"{rname} {backend}: the asset name needs the GPU's gfx target; none was found "
                         "(pass --force --gfx gfx1100 to install for another machine)")
        values["rocm_arch"] = lemonade_rocm_arch(assets, gfx, os_name)
        values["family"] = rocm_family(assets, values["rocm_arch"])

    rpins = pins.get(rname, {})
    pin_key = rule.get("pin")
    tag = rpins.get(pin_key) if pin_key else None
    tag = tag or rpins.get(dirname) or rpins.get(backend)
    if rule.get("pin_overrides"):
        over = rpins.get(rule["pin_overrides"])
        if isinstance(over, dict) and isinstance(over.get(values["family"]), str):
            tag = over[values["family"]]
    if not tag or not isinstance(tag, str):
        raise NoRule(f"no version pin for {rname} {dirname} in the catalog's versions file")
    values.update({
        "tag": tag,
        "tag_short": short_tag(tag),
        "tag_nov": tag[1:] if tag.startswith("v") else tag,
    })
    release = tag
    if rule.get("release_tag"):
        # vllm: one release per GPU family; a pin that already names a family must name this one
        m = re.search(r"-(gfx[0-9a-fA-FxX]+)$", tag)
        if m and m.group(1) != values.get("family"):
            raise NoRule(f"{rname} {backend}: the pin {tag} targets {m.group(1)} but this GPU is "
                         f"{values.get('family')}")
        release = tag if m else _fill(rule["release_tag"], values)
    values["release_tag"] = release
    asset = _fill(rule["asset"], values)
    main = Artifact("backend", f"{rname}/{dirname}", release, asset, repo=rule["repo"], tag=release,
                    binary=rdata["binary"], pinned_sha256=pinned_checksum(assets, rule["repo"], release, asset))
    out = Plan(rname, backend, dirname, release, [main])

    runtime = _therock(assets, therock, rname, backend, gfx, os_name, env) if rule.get("runtime") == "therock" else None
    if runtime is not None:
        out.artifacts.append(runtime)
    return out
