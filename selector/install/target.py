"""What one `install` is asked for, beyond the options every command shares: the request, a target
machine given by --gfx/--sm/--os/--arch (an image build for another machine), the device a forced
install is for, and the result it reports (the JSON of docs/json.md, `install --json`).  No I/O
beyond the bundled tables."""

from __future__ import annotations

import os
import re

from probes.record import Record

GFX_RE = re.compile(r"^gfx[0-9]{2,3}([0-9a-f]|X)$")  # gfx1151, gfx90a, or a family as Lemonade names it: gfx110X
SM_RE = re.compile(r"^sm_[0-9]{2,3}[a-z]?$")


class InstallRequest(Record):
    """What one `install` was asked to do, beyond the options every command shares (Opts)."""

    recipe: str
    backend: str | None = None  # --backend: this backend instead of the pick
    dry_run: bool = False
    as_json: bool = False
    force: bool = False  # even where the backend is unsupported (for another machine with a target)
    gfx: str | None = None  # --gfx / --sm / --os / --arch: install for this target, not this machine
    sm: str | None = None
    os_name: str | None = None
    arch: str | None = None
    allow_unverified: tuple[str, ...] = ()  # kinds of asset that may lack a SHA-256: runtime, backend, all
    reinstall: bool = False
    timeout: float | None = None  # overall deadline in seconds (None: the environment's or the default)
    from_file: tuple[str, ...] = ()  # downloaded release archives to install from
    verify: bool = False  # run the new build's device check before it replaces the old one
    keep_unverified: bool = False  # with verify: install even when the check fails

    @property
    def targeted(self) -> bool:
        """Another machine than this one is described (--gfx, --sm, --os or --arch)."""
        return any((self.gfx, self.sm, self.os_name, self.arch))


def known_gfx(gfx: str) -> bool:
    """A target some AMD GPU of the tables has (probes/tables: the PCI table and the GC map), or a
    family (trailing X) that covers one."""
    from probes import tables

    if not GFX_RE.match(gfx):
        return False
    known = {d["gfx"] for d in tables.load("amd_pci")["devices"] if d.get("gfx")}
    known |= {tables.gfx_name(v) for v in tables.load("amd_gfx")["gc_to_gfx_target_version"].values()}
    return gfx in known or (gfx.endswith("X") and any(k.startswith(gfx[:-1]) for k in known))


def known_sm(sm: str) -> bool:
    """The compute capability of some NVIDIA GPU of the tables (probes/tables/nvidia.json), with an
    arch-specific or family suffix allowed (sm_120a, sm_100f)."""
    from probes import tables

    if not SM_RE.match(sm):
        return False
    known = {f"sm_{a}{b}" for a, b in (row["cc"] for row in tables.load("nvidia")["compute_capability_by_name"])}
    return sm.rstrip("af") in known


def target_profile(base, gfx, sm, os_name, arch):
    """A Profile for another machine (image builds): the given OS/arch and one GPU of the given target."""
    from probes.profile import CPU, OS, AmdGpu, Metal, NvidiaGpu, Profile, Vulkan

    os_name = os_name or base.os.name
    arch = arch or base.cpu.arch
    p = Profile(os=OS(name=os_name), cpu=CPU(arch=arch, brand="target"))
    if gfx:
        p.amd_gpus.append(AmdGpu(index=0, name=f"target {gfx}", gfx=gfx, gfx_effective=gfx, source="target",
                                 vulkan_driver="radeon_icd"))  # a target GPU is taken to have its drivers
    if sm:
        major, minor = sm[3:-1], sm[-1]
        cc = [int(major), int(minor)] if major.isdecimal() and minor.isdecimal() else None
        p.nvidia_gpus.append(NvidiaGpu(index=0, name=f"target {sm}", sm=sm, compute_capability=cc, source="target",
                                       vulkan_driver="nvidia_icd"))
    if os_name == "macos" and arch == "arm64":
        p.metal = Metal(available=True, chip="target")
    p.vulkan = Vulkan(loader=True, gpu_drivers=[g.vulkan_driver for g in (*p.amd_gpus, *p.nvidia_gpus)])
    return p


def hardware_gfx(profile, device):
    """The chosen AMD GPU's hardware gfx (KFD's, before HSA_OVERRIDE_GFX_VERSION): Lemonade names ROCm
    assets and the TheRock directory after it (see selector/install/resolve.py)."""
    if device is None or device.type != "amd_gpu":
        return None
    for g in profile.amd_gpus:
        if g.index == device.index and g.gfx:
            return g.gfx
    return None


def forced_device(device, req: InstallRequest):
    """The device a forced install is for: the verdict's, else the target GPU given."""
    from selector.engine import Device

    if device is None and req.gfx:
        return Device("amd_gpu", req.gfx, 0, f"target {req.gfx}")
    if device is None and req.sm:
        return Device("nvidia_gpu", req.sm, 0, f"target {req.sm}")
    return device


def result(name: str, d, device, plan, cache: str, dry_run: bool, warnings) -> dict:
    """The result `install` reports (before its artifacts): docs/json.md, `install --json`."""
    return {
        "schema_version": 1,
        "recipe": name,
        "backend": d.backend,
        "channel": d.channel,
        "dir": plan.dirname,
        "version": plan.tag,
        "device": device.to_dict() if device else None,
        "path": os.path.join(cache, "bin", name, plan.dirname),
        "dry_run": dry_run,
        "artifacts": [],
        "warnings": list(warnings) + list(d.warnings),
    }


def planned_artifacts(plan, cache: str, limits) -> tuple[list[dict], list[str]]:
    """A dry run's artifacts: what would be downloaded where, each digest as the releases API gives it
    (asked briefly: a plan, not a download), and a warning when the API could not be asked."""
    from selector.install.download import DownloadError
    from selector.install.installer import dest_path, read_version, resolve_remote

    warnings, asked = [], True
    try:
        resolve_remote(plan.artifacts, attempts=2, limits=limits)
    except DownloadError as e:
        warnings.append(f"releases API: {e}")
        asked = False
    out = []
    for a in plan.artifacts:
        item = a.to_dict()
        # the digest is "unknown" when the API could not be asked, "none" only when it said so
        item["digest_known"] = bool(item.get("digest")) or (asked or not a.repo)
        item["path"] = dest_path(cache, a)
        item["installed_version"] = read_version(item["path"])
        if a.repo and not a.url:
            item["url"] = f"https://github.com/{a.repo}/releases/download/{a.tag}/{a.asset}"
        out.append(item)
    return out, warnings


def split_dir(recipe, dirname):
    """install directory -> (backend, channel)"""
    if recipe.rocm_channels and dirname.startswith("rocm-") and dirname[5:] in ("stable", "nightly"):
        return "rocm", dirname[5:]
    return dirname, "stable"


def status_rows(cat, cache: str, inst: dict, pins: dict) -> list[dict]:
    """`status`: one row per installed backend directory (docs/json.md, `status --json`)."""
    from selector.engine import state_for
    from selector.install.installer import read_record

    rows = []
    for rname in sorted(inst):
        recipe = cat.recipes[rname]
        for dirname in sorted(inst[rname]):
            backend, channel = split_dir(recipe, dirname)
            rp = pins.get(rname, {})
            path = os.path.join(cache, "bin", rname, dirname)
            rows.append({
                "recipe": rname,
                "backend": backend,
                "dir": dirname,
                "version": inst[rname][dirname],
                "pinned": rp.get(dirname, rp.get(backend)),
                "state": state_for(recipe, backend, channel, True, inst, pins),
                "verified": read_record(path).get("verified"),
                "path": path,
            })
    return rows


def measurements(recs: list[dict], inst: dict, profile) -> list[dict]:
    """The bench records, each fresh or stale (and why), in a stable order."""
    from selector import bench

    devices = bench.devices_of(profile)
    out = []
    for r in sorted(recs, key=lambda r: (r["recipe"], r.get("model", {}).get("label", ""), r["test"], r.get("backend", ""))):
        why = bench.staleness(r, inst, profile, devices)
        out.append({**r, "fresh": why is None, "stale_because": why})
    return out


def uninstall(path: str, on_wait) -> bool:
    """Remove the install at ``path`` under its lock (a crash's leftovers first); whether there was one.
    Nothing there takes no lock (none can be taken on a read-only cache)."""
    from selector.install.unpack import lock, remove_tree, repair

    if not any(os.path.lexists(path + suffix) for suffix in ("", ".old", ".staging")):
        return False
    with lock(path + ".lock", on_wait):
        repair(path)  # .old back in place or removed, .staging removed
        if not os.path.isdir(path):
            return False
        trash = path + ".trash"
        remove_tree(trash)
        os.rename(path, trash)  # gone from the cache's point of view at once
        remove_tree(trash)
        return True
