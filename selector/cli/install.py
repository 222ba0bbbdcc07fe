"""`install`, `status`, `uninstall`: put the picked backend build into the cache Lemonade shares.

Parse -> (probe or a synthetic target) -> engine -> resolver (data: <catalog>-assets.json) ->
selector.install.installer.  requests is imported only here, never on the `pick` path.
"""

from __future__ import annotations

import os
import re
import sys

import click

from probes.record import Record
from selector.choices import ARCHES, OSES, UNVERIFIED
from selector.cli.core import (shown, EXIT_INSTALL, EXIT_UNSUPPORTED, EXIT_USAGE, DECIDE, Fail, Opts, common, complete_backend,
                          complete_recipe, decide_all, did_you_mean, options)

GFX_RE = re.compile(r"^gfx[0-9]{2,3}([0-9a-f]|X)$")  # gfx1151, gfx90a, or a family as Lemonade names it: gfx110X
SM_RE = re.compile(r"^sm_[0-9]{2,3}[a-z]?$")


def _known_gfx(gfx: str) -> bool:
    """A target some AMD GPU of the tables has (probes/tables: the PCI table and the GC map), or a
    family (trailing X) that covers one."""
    from probes import tables

    known = {d["gfx"] for d in tables.load("amd_pci")["devices"] if d.get("gfx")}
    known |= {tables.gfx_name(v) for v in tables.load("amd_gfx")["gc_to_gfx_target_version"].values()}
    return gfx in known or (gfx.endswith("X") and any(k.startswith(gfx[:-1]) for k in known))


def _known_sm(sm: str) -> bool:
    """The compute capability of some NVIDIA GPU of the tables (probes/tables/nvidia.json), with an
    arch-specific or family suffix allowed (sm_120a, sm_100f)."""
    from probes import tables

    known = {f"sm_{a}{b}" for a, b in (row["cc"] for row in tables.load("nvidia")["compute_capability_by_name"])}
    return sm.rstrip("af") in known


def _target_profile(base, gfx, sm, os_name, arch):
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


def _hardware_gfx(profile, device):
    """The chosen AMD GPU's hardware gfx (KFD's, before HSA_OVERRIDE_GFX_VERSION): Lemonade names ROCm
    assets and the TheRock directory after it (see selector/install/resolve.py)."""
    if device is None or device.type != "amd_gpu":
        return None
    for g in profile.amd_gpus:
        if g.index == device.index and g.gfx:
            return g.gfx
    return None


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


def _finite(ctx, param, value):
    """--timeout nan passes FloatRange (nan compares false) and would switch the deadline off."""
    if value is not None and not value < float("inf"):
        raise click.BadParameter(f"{value} is not a number of seconds", ctx, param)
    return value


def _explain(e) -> str:
    return f"{e}; the previous install is untouched"


@click.command("install")
@click.argument("recipe", shell_complete=complete_recipe)
@common
@click.option("--backend", default=None, shell_complete=complete_backend, help="Install this backend instead of the pick.")
@click.option("--dry-run", is_flag=True, help="Print repository, tag, asset, URL, size, digest and destination; download nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print a result object (no progress bar).")
@click.option("--force", is_flag=True, help="Install even if the backend is unsupported here (with --gfx/--sm/--os/--arch: for another machine).")
@click.option("--gfx", default=None, help="Target AMD GPU (gfx1100) instead of this machine's.")
@click.option("--sm", default=None, help="Target NVIDIA GPU (sm_89) instead of this machine's.")
@click.option("--os", "os_name", type=click.Choice(OSES), default=None, help="Target OS.")
@click.option("--arch", type=click.Choice(ARCHES), default=None, help="Target CPU architecture.")
@click.option("--allow-unverified", "allow_unverified", multiple=True,
              type=click.Choice(UNVERIFIED),
              help="Install an asset of this kind (runtime: the TheRock runtime; backend; all) that has no "
                   "SHA-256 to check against. Repeatable.")
@click.option("--reinstall", is_flag=True, help="Download again even if the pinned version is installed.")
@click.option("--timeout", type=click.FloatRange(min=1), default=None, callback=_finite,
              help="Overall deadline in seconds for API calls and downloads (default 3600; env PICK_BACKEND_TIMEOUT).")
@click.option("--from-file", "from_file", multiple=True, type=click.Path(dir_okay=False),
              help="Install from this downloaded release archive instead of downloading it (the SHA-256 is still "
                   "checked against the pin or the release). Repeatable (backend and runtime).")
@click.option("--verify", "verify_flag", is_flag=True,
              help="Run the new build's device check before it replaces the old one (see `verify`).")
@click.option("--keep-unverified", is_flag=True, help="With --verify: install even when the check fails.")
@click.pass_context
def install_cmd(ctx, recipe, backend, dry_run, as_json, force, gfx, sm, os_name, arch, allow_unverified, reinstall,
                timeout, from_file, verify_flag=False, keep_unverified=False, **kwargs):
    """Download, verify and install the picked backend build of RECIPE (or --backend B)."""
    _install(ctx, InstallRequest(recipe=recipe, backend=backend, dry_run=dry_run, as_json=as_json, force=force,
                                 gfx=gfx, sm=sm, os_name=os_name, arch=arch, allow_unverified=allow_unverified,
                                 reinstall=reinstall, timeout=timeout, from_file=from_file, verify=verify_flag,
                                 keep_unverified=keep_unverified), kwargs)


def _install(ctx, req: InstallRequest, kwargs):
    from probes.inputs import InputError
    from selector import render
    from selector.engine import Device
    from selector.install import resolve
    from selector.install.states import cache_root

    o = Opts(ctx, kwargs)
    (name,) = o.recipe_names([req.recipe])
    if req.gfx and not (GFX_RE.match(req.gfx) and _known_gfx(req.gfx)):
        raise Fail(EXIT_USAGE, f"--gfx {shown(req.gfx)!r} is not a gfx target of any AMD GPU the tables know "
                               "(e.g. gfx1100, gfx1151, gfx90a, or a family: gfx110X)")
    if req.sm and not (SM_RE.match(req.sm) and _known_sm(req.sm)):
        raise Fail(EXIT_USAGE, f"--sm {shown(req.sm)!r} is not the CUDA target of any NVIDIA GPU the tables know "
                               "(e.g. sm_89, sm_120)")
    target = any((req.gfx, req.sm, req.os_name, req.arch))
    if target:
        o.use_profile(_target_profile(o.profile(), req.gfx, req.sm, req.os_name, req.arch))
    profile, cat, s, (d,), warnings = decide_all(o, [name], req.backend)
    if d.backend is None:
        raise Fail(EXIT_UNSUPPORTED, f"{name}: {d.reason}")
    v = d.verdict(d.backend)
    if d.backend == "system" and v.supported:
        exe = (profile.executables or {}).get("llama-server")
        if req.as_json:  # one JSON document on stdout, like every --json
            render.emit_json({"schema_version": 1, "recipe": name, "backend": "system", "channel": d.channel,
                              "dir": "system", "version": None, "device": v.device.to_dict() if v.device else None,
                              "path": exe, "dry_run": req.dry_run, "state": "system", "artifacts": [],
                              "warnings": list(warnings) + list(d.warnings)})
            return
        click.echo(f"{name}: the pick is the system llama-server on PATH; nothing to install")
        return
    device = v.device
    if not v.supported:
        if not req.force:
            raise Fail(EXIT_UNSUPPORTED, f"{name} {d.backend} is unsupported here: {v.reason} "
                                         "(--force with --gfx/--sm/--os/--arch installs it for another machine)")
        if device is None and req.gfx:
            device = Device("amd_gpu", req.gfx, 0, f"target {req.gfx}")
        elif device is None and req.sm:
            device = Device("nvidia_gpu", req.sm, 0, f"target {req.sm}")
    try:
        assets = resolve.load_assets(cat.name)
    except InputError:
        raise
    try:
        plan = resolve.plan(assets, cat.recipes[name], d.backend, d.channel, device, profile.os.name,
                            profile.cpu.arch, o.pins(), hw_gfx=_hardware_gfx(profile, device))
    except resolve.NoRule as e:
        raise Fail(EXIT_UNSUPPORTED, str(e)) from None
    cache = cache_root(o.cache_dir)
    out = {
        "schema_version": 1,
        "recipe": name,
        "backend": d.backend,
        "channel": d.channel,
        "dir": plan.dirname,
        "version": plan.tag,
        "device": device.to_dict() if device else None,
        "path": os.path.join(cache, "bin", name, plan.dirname),
        "dry_run": req.dry_run,
        "artifacts": [],
        "warnings": list(warnings) + list(d.warnings),
    }

    if req.dry_run:
        from selector.install.download import DownloadError, Limits
        from selector.install.installer import dest_path, read_version, resolve_remote

        limits = Limits.from_env(deadline=req.timeout)  # the same limits (and a malformed one is exit 5)
        asked = True
        try:
            resolve_remote(plan.artifacts, attempts=2, limits=limits)  # a plan, not a download: don't wait long
        except DownloadError as e:
            out["warnings"].append(f"releases API: {e}")
            asked = False
        for a in plan.artifacts:
            item = a.to_dict()
            # the digest is "unknown" when the API could not be asked, "none" only when it said so
            item["digest_known"] = bool(item.get("digest")) or (asked or not a.repo)
            item["path"] = dest_path(cache, a)
            item["installed_version"] = read_version(item["path"])
            if a.repo and not a.url:
                item["url"] = f"https://github.com/{a.repo}/releases/download/{a.tag}/{a.asset}"
            out["artifacts"].append(item)
        if req.as_json:
            render.emit_json(out)
        else:
            _print_plan(out)
        return

    from selector.install.download import Limits
    from selector.term import Progress
    from selector.install.installer import InstallError, VerifyFailed, install, match_files

    # --- install --verify (issue 16) ---
    verify_cb, reports = None, []
    if req.verify:
        from selector.cli.verify import install_callback, print_report

        verify_cb = install_callback(o, name, req.backend, plan, cache, 30.0, req.keep_unverified, reports)
    # --- end install --verify ---
    try:
        files = match_files(plan, req.from_file)
        with Progress(enabled=False if req.as_json else None) as progress:
            results = install(plan, cache, profile.os.name, req.allow_unverified, req.reinstall, progress,
                              limits=Limits.from_env(deadline=req.timeout), from_files=files, verify=verify_cb)
    except VerifyFailed as e:
        out["state"] = "verify_failed"
        out["verify"] = reports[-1] if reports else None
        if req.as_json:  # one JSON document: the result, with the error and exit code in it
            out["error"], out["exit"] = f"{e}; the previous install is untouched", e.exit_code
            render.emit_json(out)
            sys.exit(e.exit_code)
        if reports:
            print_report(reports[-1], err=True)
        raise Fail(e.exit_code, f"{e}; the previous install is untouched (--keep-unverified installs it anyway)") \
            from None
    except InstallError as e:
        raise Fail(e.exit_code, _explain(e) if e.exit_code == EXIT_INSTALL else str(e)) from None
    out["artifacts"] = results
    out["state"] = "installed"
    if req.verify and not reports:  # nothing new was unpacked: check what is installed
        from selector.cli.verify import verify_recipe

        reports.append(verify_recipe(o, name, req.backend, 30.0))
    if req.verify:
        out["verify"] = reports[-1]
    verify_code = reports[-1]["exit_code"] if reports and not req.keep_unverified else 0
    if req.as_json:
        render.emit_json(out)
        if verify_code:
            sys.exit(verify_code)
        return
    for w in out["warnings"]:
        click.echo(f"warning: {w}", err=True)
    for r in results:
        what = "TheRock runtime" if r["kind"] == "runtime" else f"{name} {plan.dirname}"
        if r["action"] == "present":
            click.echo(f"{what} {r['version']} is already installed: {r['path']}")
            continue
        check = ("SHA-256 verified (" + (r.get("digest_source") or "") + ")") if r.get("verified") else "UNVERIFIED"
        click.echo(f"installed {what} {r['version']} ({r['asset']}, {check}) -> {r['path']}")
    if reports:
        print_report(reports[-1])
        if reports[-1]["exit_code"] and req.keep_unverified:
            click.echo("warning: installed although the check failed (--keep-unverified)", err=True)
    if verify_code:
        sys.exit(verify_code)


def _size(n) -> str:
    if n is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _print_plan(out):
    click.echo(f"{out['recipe']} {out['backend']} ({out['dir']}, {out['version']}): dry run, nothing downloaded")
    for a in out["artifacts"]:
        click.echo(f"  {a['kind']}:")
        if a["repository"]:
            click.echo(f"    repository   {a['repository']}")
            click.echo(f"    tag          {a['tag']}")
        click.echo(f"    asset        {a['asset']}")
        click.echo(f"    url          {a['url']}")
        click.echo(f"    size         {_size(a['size'])}")
        if a["digest"]:
            click.echo(f"    digest       {a['digest']}")
        elif a.get("digest_known", True):
            click.echo("    digest       none published (install needs --allow-unverified)")
        else:
            click.echo("    digest       unknown (the releases API could not be asked; see the warning)")
        click.echo(f"    destination  {a['path']}"
                   + (f" (installed: {a['installed_version']})" if a.get("installed_version") else ""))
    for w in out["warnings"]:
        click.echo(f"warning: {w}", err=True)


def _split_dir(recipe, dirname):
    """install directory -> (backend, channel)"""
    if recipe.rocm_channels and dirname.startswith("rocm-") and dirname[5:] in ("stable", "nightly"):
        return "rocm", dirname[5:]
    return dirname, "stable"


@click.command("status")
@options(*DECIDE)  # the cache with the catalog's pins; with --verify, the pick (device, run_env) too
@click.option("--json", "as_json", is_flag=True, help="Print the installed backends as JSON.")
@click.option("--verify", "verify_flag", is_flag=True, help="Run each installed build's device check (see `verify`).")
@click.pass_context
def status_cmd(ctx, as_json, verify_flag=False, **kwargs):
    """Every installed backend: version, pinned version, state and path."""
    _status(ctx, as_json, verify_flag, kwargs)


def _status(ctx, as_json, verify_flag, kwargs):
    from selector import render
    from selector.engine import state_for
    from selector.install.installer import read_record
    from selector.install.states import cache_root, installed, runtimes

    o = Opts(ctx, kwargs)
    cat = o.catalog()
    cache = cache_root(o.cache_dir)
    from selector.install.unpack import repair_cache

    for msg in repair_cache(cache):  # a crash's leftovers: finish or undo the swap, as install would
        click.echo(f"repaired: {msg}", err=True)
    inst = installed(cache, cat.recipes, o.binary_of)
    pins = o.pins()
    rows = []
    for rname in sorted(inst):
        recipe = cat.recipes[rname]
        for dirname in sorted(inst[rname]):
            backend, channel = _split_dir(recipe, dirname)
            rp = pins.get(rname, {})
            path = os.path.join(cache, "bin", rname, dirname)
            rec = read_record(path)
            rows.append({
                "recipe": rname,
                "backend": backend,
                "dir": dirname,
                "version": inst[rname][dirname],
                "pinned": rp.get(dirname, rp.get(backend)),
                "state": state_for(recipe, backend, channel, True, inst, pins),
                "verified": rec.get("verified"),
                "path": path,
            })
    rts = runtimes(cache)
    measured = _measurements(o, cache, inst)
    worst = 0
    if verify_flag:  # issue 16: status --verify
        from selector.cli.verify import verify_recipe

        for r in rows:
            rep = verify_recipe(o, r["recipe"], r["backend"], 30.0, path=r["path"])
            r["device_check"] = rep
            worst = max(worst, rep["exit_code"])
    if as_json:
        render.emit_json({"schema_version": 1, "cache": cache, "backends": rows, "runtimes": rts,
                          "measurements": measured})
        sys.exit(worst)
    if not rows and not rts and not measured:
        click.echo(f"nothing installed in {cache}")
        return
    con = render.console()
    render.status_human(cache, rows, rts, con)
    if measured:
        _measurements_human(con, measured)
    sys.exit(worst)


def _measurements(o: Opts, cache: str, inst: dict) -> list[dict]:
    """The bench results in the cache, each fresh or stale (and why); the machine is probed only
    when there are some."""
    from selector import bench

    bad: list[str] = []
    recs = bench.records(cache, bad)
    for p in bad:
        click.echo(f"pick-backend: {p}: not a readable bench record; ignored", err=True)
    if not recs:
        return []
    profile = o.profile()
    devices = bench.devices_of(profile)
    out = []
    for r in sorted(recs, key=lambda r: (r["recipe"], r.get("model", {}).get("label", ""), r["test"], r.get("backend", ""))):
        why = bench.staleness(r, inst, profile, devices)
        out.append({**r, "fresh": why is None, "stale_because": why})
    return out


def _measurements_human(con, measured: list[dict]) -> None:
    con.print("measurements (pick-backend bench; --policy measured uses the fresh, steady ones)", style="bold",
              markup=False)
    for r in measured:
        speed = f"{r['avg_ts']:.1f} ± {r.get('stddev_ts', 0):.1f} t/s" if r.get("status") == "ok" else f"failed: {r.get('why')}"
        state = ("fresh" if r["fresh"] else f"stale: {r['stale_because']}") + \
            (", noisy: never chosen" if r.get("noisy") else "")
        version = r.get("version") or "version unknown"
        con.print(f"  {r['recipe']} {r.get('dir')} {version}  {r['test']}  {r['model'].get('label')}  "
                  f"{r['device'].get('name')}  {speed}  ({str(r.get('at', ''))[:10]}, {state})", markup=False, highlight=False,
                  soft_wrap=True)


@click.command("uninstall")
@click.argument("recipe", shell_complete=complete_recipe)
@click.argument("backend", shell_complete=complete_backend)
@options("catalog", "cache_dir", "channel", "config")  # rocm means the active channel's
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
@click.pass_context
def uninstall_cmd(ctx, recipe, backend, as_json, **kwargs):
    """Remove an installed BACKEND of RECIPE from the cache (rocm means the active channel's)."""
    _uninstall(ctx, recipe, backend, as_json, kwargs)


def _uninstall(ctx, recipe, backend, as_json, kwargs):
    from selector import render
    from selector.engine import install_dir_name, recipe_channel
    from selector.install.states import cache_root
    from selector.install.unpack import lock, remove_tree, repair

    o = Opts(ctx, kwargs)
    (name,) = o.recipe_names([recipe])
    r = o.catalog().recipes[name]
    dirs = set(r.backends) | {f"rocm-{c}" for c in r.rocm_channels if "rocm" in r.backends}
    if backend not in dirs:
        raise Fail(EXIT_USAGE, did_you_mean(backend, r.backends, f"backend of {name}"))
    if backend in r.backends:
        s, _ = o.settings([name])
        dirname = install_dir_name(r, backend, recipe_channel(r, s))
    else:
        dirname = backend
    path = os.path.join(cache_root(o.cache_dir), "bin", name, dirname)
    removed = False
    if not os.path.lexists(path) and not os.path.lexists(path + ".old") and not os.path.lexists(path + ".staging"):
        pass  # nothing there: no lock needed (and none can be taken on a read-only cache)
    else:
        try:
            with lock(path + ".lock", lambda: click.echo(
                    f"pick-backend: waiting for another install of {name}/{dirname} (lock {path}.lock)", err=True)):
                repair(path)  # a crash's leftovers first: .old back in place or removed, .staging removed
                if os.path.isdir(path):
                    trash = path + ".trash"
                    remove_tree(trash)
                    os.rename(path, trash)  # gone from the cache's point of view at once
                    remove_tree(trash)
                    removed = True
        except OSError as e:
            raise Fail(EXIT_INSTALL, f"uninstall of {name} {dirname} failed: {e.strerror or e}: "
                                     f"{e.filename or path}") from None
    if as_json:
        render.emit_json({"schema_version": 1, "recipe": name, "dir": dirname, "path": path, "removed": removed})
    elif removed:
        click.echo(f"removed {name} {dirname} ({path})")
    else:
        click.echo(f"{name} {dirname} is not installed ({path})")
    sys.exit(0)
