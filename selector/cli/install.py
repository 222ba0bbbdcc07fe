"""`install`, `status`, `uninstall`: put the picked backend build into the cache Lemonade shares.

Parse -> (probe or a synthetic target) -> engine -> resolver (data: <catalog>-assets.json) ->
selector.install.installer; what an install is asked for and reports is selector/install/target.py,
its words selector/render_install.py.  requests is imported only here, never on the `pick` path.
"""

from __future__ import annotations

import os
import sys

import click

from selector.choices import ARCHES, OSES, UNVERIFIED
from selector.cli.core import (shown, EXIT_INSTALL, EXIT_UNSUPPORTED, EXIT_USAGE, DECIDE, Fail, Opts, common, complete_backend,
                          complete_recipe, decide_all, did_you_mean, options)
from selector.install.target import InstallRequest


def _finite(ctx, param, value):
    """--timeout nan passes FloatRange (nan compares false) and would switch the deadline off."""
    if value is not None and not value < float("inf"):
        raise click.BadParameter(f"{value} is not a number of seconds", ctx, param)
    return value


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
    from selector import render_install

    o = Opts(ctx, kwargs)
    (name,) = o.recipe_names([req.recipe])
    _check_target(req)
    found = _pick(o, req, name)
    if found is None:
        return  # the system build on PATH: nothing to install
    d, device, plan, out, cache, profile = found
    if req.dry_run:
        from selector.install.download import Limits
        from selector.install.target import planned_artifacts

        out["artifacts"], more = planned_artifacts(plan, cache, Limits.from_env(deadline=req.timeout))
        out["warnings"] += more  # the same limits as an install (and a malformed one is exit 5)
        _emit(out) if req.as_json else render_install.dry_run(out)
        return
    reports: list = []
    out["artifacts"] = _run_install(o, req, name, plan, cache, profile, out, reports)
    out["state"] = "installed"
    if req.verify and not reports:  # nothing new was unpacked: check what is installed
        from selector.cli.verify import verify_recipe

        reports.append(verify_recipe(o, name, req.backend, 30.0))
    if req.verify:
        out["verify"] = reports[-1]
    verify_code = reports[-1]["exit_code"] if reports and not req.keep_unverified else 0
    if req.as_json:
        _emit(out)
    else:
        render_install.installed(name, plan.dirname, out)
        if reports:
            from selector.cli.verify import print_report

            print_report(reports[-1])
            if reports[-1]["exit_code"] and req.keep_unverified:
                click.echo("warning: installed although the check failed (--keep-unverified)", err=True)
    if verify_code:
        sys.exit(verify_code)


def _emit(out: dict) -> None:
    from selector import render

    render.emit_json(out)


def _check_target(req: InstallRequest) -> None:
    """--gfx and --sm name a target some GPU of the tables has (exit 2 otherwise)."""
    from selector.install.target import known_gfx, known_sm

    if req.gfx and not known_gfx(req.gfx):
        raise Fail(EXIT_USAGE, f"--gfx {shown(req.gfx)!r} is not a gfx target of any AMD GPU the tables know "
                               "(e.g. gfx1100, gfx1151, gfx90a, or a family: gfx110X)")
    if req.sm and not known_sm(req.sm):
        raise Fail(EXIT_USAGE, f"--sm {shown(req.sm)!r} is not the CUDA target of any NVIDIA GPU the tables know "
                               "(e.g. sm_89, sm_120)")


def _pick(o: Opts, req: InstallRequest, name: str):
    """The pick and what installing it means: (decision, device, plan, result, cache, profile); None
    when the pick is the system build (said here)."""
    from selector.install import resolve
    from selector.install.states import cache_root
    from selector.install.target import forced_device, hardware_gfx, result, target_profile

    if req.targeted:
        o.use_profile(target_profile(o.profile(), req.gfx, req.sm, req.os_name, req.arch))
    profile, cat, _s, (d,), warnings = decide_all(o, [name], req.backend)
    if d.backend is None:
        raise Fail(EXIT_UNSUPPORTED, f"{name}: {d.reason}")
    v = d.verdict(d.backend)
    if d.backend == "system" and v.supported:
        _system(name, d, v, profile, req, warnings)
        return None
    if not v.supported and not req.force:
        raise Fail(EXIT_UNSUPPORTED, f"{name} {d.backend} is unsupported here: {v.reason} "
                                     "(--force with --gfx/--sm/--os/--arch installs it for another machine)")
    device = v.device if v.supported else forced_device(v.device, req)
    assets = resolve.load_assets(cat.name)
    try:
        plan = resolve.plan(assets, cat.recipes[name], d.backend, d.channel, device, profile.os.name,
                            profile.cpu.arch, o.pins(), hw_gfx=hardware_gfx(profile, device))
    except resolve.NoRule as e:
        raise Fail(EXIT_UNSUPPORTED, str(e)) from None
    cache = cache_root(o.cache_dir)
    return d, device, plan, result(name, d, device, plan, cache, req.dry_run, warnings), cache, profile


def _system(name, d, v, profile, req: InstallRequest, warnings) -> None:
    exe = (profile.executables or {}).get("llama-server")
    if req.as_json:  # one JSON document on stdout, like every --json
        _emit({"schema_version": 1, "recipe": name, "backend": "system", "channel": d.channel,
               "dir": "system", "version": None, "device": v.device.to_dict() if v.device else None,
               "path": exe, "dry_run": req.dry_run, "state": "system", "artifacts": [],
               "warnings": list(warnings) + list(d.warnings)})
        return
    click.echo(f"{name}: the pick is the system llama-server on PATH; nothing to install")


def _run_install(o: Opts, req: InstallRequest, name, plan, cache, profile, out: dict, reports: list) -> list:
    """Install the plan (with --verify, the new build checked before it replaces the old one); the
    artifacts' results.  A failure ends the command with its exit code, the previous install untouched."""
    from selector.install.download import Limits
    from selector.install.installer import InstallError, VerifyFailed, install, match_files
    from selector.term import Progress

    verify_cb = None
    if req.verify:  # install --verify (issue 16)
        from selector.cli.verify import install_callback

        verify_cb = install_callback(o, name, req.backend, plan, cache, 30.0, req.keep_unverified, reports)
    try:
        files = match_files(plan, req.from_file)
        with Progress(enabled=False if req.as_json else None) as progress:
            return install(plan, cache, profile.os.name, req.allow_unverified, req.reinstall, progress,
                           limits=Limits.from_env(deadline=req.timeout), from_files=files, verify=verify_cb)
    except VerifyFailed as e:
        out["state"] = "verify_failed"
        out["verify"] = reports[-1] if reports else None
        if req.as_json:  # one JSON document: the result, with the error and exit code in it
            out["error"], out["exit"] = f"{e}; the previous install is untouched", e.exit_code
            _emit(out)
            sys.exit(e.exit_code)
        if reports:
            from selector.cli.verify import print_report

            print_report(reports[-1], err=True)
        raise Fail(e.exit_code, f"{e}; the previous install is untouched (--keep-unverified installs it anyway)") \
            from None
    except InstallError as e:
        untouched = "; the previous install is untouched" if e.exit_code == EXIT_INSTALL else ""
        raise Fail(e.exit_code, f"{e}{untouched}") from None


@click.command("status")
@options(*DECIDE)  # the cache with the catalog's pins; with --verify, the pick (device, run_env) too
@click.option("--json", "as_json", is_flag=True, help="Print the installed backends as JSON.")
@click.option("--verify", "verify_flag", is_flag=True, help="Run each installed build's device check (see `verify`).")
@click.pass_context
def status_cmd(ctx, as_json, verify_flag=False, **kwargs):
    """Every installed backend: version, pinned version, state and path."""
    _status(ctx, as_json, verify_flag, kwargs)


def _status(ctx, as_json, verify_flag, kwargs):
    from selector import render, render_install
    from selector.install.states import cache_root, installed, runtimes
    from selector.install.target import status_rows
    from selector.install.unpack import repair_cache

    o = Opts(ctx, kwargs)
    cat = o.catalog()
    cache = cache_root(o.cache_dir)
    for msg in repair_cache(cache):  # a crash's leftovers: finish or undo the swap, as install would
        click.echo(f"repaired: {msg}", err=True)
    inst = installed(cache, cat.recipes, o.binary_of)
    rows = status_rows(cat, cache, inst, o.pins())
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
        render_install.measurements(con, measured)
    sys.exit(worst)


def _measurements(o: Opts, cache: str, inst: dict) -> list[dict]:
    """The bench results in the cache, each fresh or stale (and why); the machine is probed only
    when there are some."""
    from selector import bench
    from selector.install.target import measurements

    bad: list[str] = []
    recs = bench.records(cache, bad)
    for p in bad:
        click.echo(f"pick-backend: {p}: not a readable bench record; ignored", err=True)
    return measurements(recs, inst, o.profile()) if recs else []


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
    from selector.install.target import uninstall

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
    try:
        removed = uninstall(path, lambda: click.echo(
            f"pick-backend: waiting for another install of {name}/{dirname} (lock {path}.lock)", err=True))
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
