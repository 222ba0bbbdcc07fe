"""`verify`: run the installed build of the pick (or of --backend, or the system binary) with its
device listing and say whether it sees the picked device.  The logic is selector.verify; this
module finds the build, prints, and hands `install --verify`, `status --verify` and
`labels --verify` the same check."""

from __future__ import annotations

import os
import shutil
import sys

import click

from selector.cli.core import EXIT_UNSUPPORTED, EXIT_USAGE, Fail, Opts, common, complete_backend, complete_recipe, decide_all


def _binary_name(o: Opts, name: str, step: dict) -> str | None:
    if step.get("binary"):
        return step["binary"]
    try:
        from selector.install.resolve import load_assets

        return load_assets(o.catalog().name).get("recipes", {}).get(name, {}).get("binary")
    except Exception:  # noqa: BLE001 - a catalog without asset rules: nothing to search for
        return None


def plan_for(o: Opts, name: str, backend: str | None = None):
    """(decision, verdict, expected device, step, spec) for RECIPE (and --backend)."""
    from selector import verify

    profile, cat, _s, (d,), _w = decide_all(o, [name], backend)
    if d.backend is None:
        raise Fail(EXIT_UNSUPPORTED, f"{name}: {d.reason}; nothing to verify")
    v = d.verdict(d.backend)
    expected = verify.enrich(verify.expected_device(d, v), profile)
    spec = verify.load_spec(cat.name)
    step = verify.step_for(spec, name, d.backend)
    step["binary"] = _binary_name(o, name, step)
    return profile, d, expected, step, spec


def verify_recipe(o: Opts, name: str, backend: str | None, timeout: float, path: str | None = None,
                  extra_libs=()) -> dict:
    """The verify report for RECIPE: the installed build (or the build staged at ``path``)."""
    from selector import verify
    from selector.engine import install_dir_name
    from selector.install.states import cache_root

    profile, d, expected, step, spec = plan_for(o, name, backend)
    cache = cache_root(o.cache_dir)
    recipe = o.catalog().recipes[name]
    dirname = install_dir_name(recipe, d.backend, d.channel)
    libs = list(extra_libs)
    if d.backend == "system":
        exe = shutil.which(step["binary"]) if step["binary"] else None
        where = exe
    else:
        where = path or os.path.join(cache, "bin", name, dirname)
        exe = verify.installed_binary(where, step["binary"], profile.os.name)
        if dirname.startswith("rocm") and dirname.endswith("stable"):
            libs += verify.therock_libs(cache)
    run_env = dict(getattr(d, "run_env", None) or {})
    rep = verify.verify_build(exe, step, expected, run_env=run_env, timeout=timeout, lib_dirs=libs, spec=spec,
                              profile=profile, recipe=name, backend=d.backend if backend else "")
    head = {"schema_version": 1, "recipe": name, "backend": d.backend,
            "dir": None if d.backend == "system" else dirname, "path": where}
    recorded = o.installed().get(name, {}).get(dirname) if d.backend != "system" else None
    own = rep.get("build")
    if own and recorded and recorded.startswith("b") and recorded != f"b{own['number']}":
        rep["version_note"] = (f"the install record says {recorded}; the build itself says build {own['number']} "
                               f"(commit {own['commit']})")
    return {**head, **rep}


def print_report(rep: dict, err: bool = False) -> None:
    from selector.verify import WORDS

    echo = (lambda s: click.echo(s, err=True)) if err else click.echo
    echo(f"{rep['recipe']} {rep['backend']}: {WORDS[rep['verdict']]}: {rep['message']}")
    if rep.get("command"):
        env = " ".join(f"{k}={v}" for k, v in (rep.get("env") or {}).items())
        echo(f"  ran       {(env + ' ') if env else ''}{' '.join(rep['command'])}"
             + ("" if rep["status"] is None else f" (exit {rep['status']})"))
    for line in rep.get("evidence") or []:
        echo(f"  evidence  {line}")
    if rep.get("version_note"):
        echo(f"  note      {rep['version_note']}")
    if rep.get("causes"):
        echo("  likely causes:")
        for c in rep["causes"]:
            echo(f"    - {c}")
    if rep.get("fix"):
        echo(f"  fix       {rep['fix']}")


MAX_TIMEOUT = 86400.0  # a day; the process wait cannot take infinity (or NaN) as a limit


def check_timeout(timeout: float) -> None:
    if not (0 < timeout <= MAX_TIMEOUT):  # also false for NaN
        raise Fail(EXIT_USAGE, f"--timeout {timeout:g}: must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}")


@click.command("verify")
@click.argument("recipe", shell_complete=complete_recipe)
@common
@click.option("--backend", default=None, shell_complete=complete_backend, help="Verify this backend's installed build instead of the pick's.")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds the build may take to answer.")
@click.option("--json", "as_json", is_flag=True, help="Print the verify report as JSON.")
@click.pass_context
def verify_cmd(ctx, recipe, backend, timeout, as_json, **kwargs):
    """Run the installed build of RECIPE's pick with its device listing: does it see the picked device?

    \b
    exit 0  verified: the build lists the picked device (or starts, where it has no listing)
    exit 3  other device (only the iGPU, only llvmpipe), no GPU, unreadable output, not installed
    exit 4  does not start: a missing library, a wrong architecture, a crash, no answer in time
    """
    check_timeout(timeout)
    o = Opts(ctx, kwargs)
    (name,) = o.recipe_names([recipe])
    rep = verify_recipe(o, name, backend, timeout)
    _remember_ids(o, rep)
    if as_json:
        from selector.render import emit_json

        emit_json(rep)
    else:
        print_report(rep)
    sys.exit(rep["exit_code"])


def _remember_ids(o: Opts, rep: dict) -> None:
    """Keep the id the build gave the picked device (ROCm0, CUDA1) for `plan`, with the build's
    version: a new build's numbering is read again."""
    from selector import store
    from selector.install.states import cache_root, read_version

    exp = rep.get("expected") or {}
    if not rep.get("matched") or not rep.get("dir") or not rep.get("path") or not exp:
        return
    key = exp.get("uuid") or exp.get("bus_id") or f"{exp.get('type')}:{exp.get('index')}"
    cache = cache_root(o.cache_dir)
    try:
        store.write(store.path(cache, "devices", f"{rep['recipe']}/{rep['dir']}"),
                    {"recipe": rep["recipe"], "dir": rep["dir"], "version": read_version(rep["path"]),
                     "ids": {key: rep["matched"]}})
    except OSError:
        pass  # a read-only cache: plan says the id is unknown


# ------------------------------------------------------------------------------------------------
# for install --verify


def install_callback(o: Opts, name: str, backend: str | None, plan, cache: str, timeout: float, keep: bool,
                     sink: list):
    """``verify(staging_dir) -> (ok, exit_code, message)`` for installer.install(): runs the staged
    build (with a staged or installed TheRock runtime on the library path) and records the report
    in ``sink``.  With ``keep`` (--keep-unverified) a failure is reported but does not stop the swap."""
    from selector.install.installer import dest_path

    libs = []
    for a in plan.artifacts:
        if a.kind == "runtime":
            dest = dest_path(cache, a)
            for p in (dest + ".staging", dest):
                if os.path.isdir(os.path.join(p, "lib")):
                    libs.append(os.path.join(p, "lib"))
                    break

    def verify(staging_dir):
        rep = verify_recipe(o, name, backend, timeout, path=staging_dir, extra_libs=libs)
        sink.append(rep)
        ok = rep["exit_code"] == 0
        from selector.verify import WORDS

        msg = f"verification of the new build: {WORDS[rep['verdict']]}: {rep['message']}"
        return (ok or keep), rep["exit_code"], msg

    return verify
