"""The machine: ``probe`` (what this machine is) and ``capture`` (write it down for replay).

Imported only when run (LAZY in selector/cli/app.py), so that `pick-backend RECIPE` does not pay
for building their options at start-up.
"""

from __future__ import annotations

import os
import sys

import click

from selector.cli.core import DECIDE, EXIT_INSTALL, EXIT_OK, EXIT_UNSUPPORTED, EXIT_USAGE, Fail, Opts, complete_backend, complete_recipe, decide_all, options  # noqa: E501


@click.command("probe")
@options("root", "profile")
@click.option("--json", "as_json", is_flag=True, help="Print the Profile JSON.")
@click.option("--detailed", is_flag=True, help="Also ask py-cpuinfo what it adds (slow: over a second).")
@click.pass_context
def probe_cmd(ctx, as_json, detailed, **kwargs):
    """Probe the machine (OS, CPU, AMD/NVIDIA GPUs, NPUs, Metal, Vulkan)."""
    from selector import render

    o = Opts(ctx, kwargs)
    profile = o.profile(detailed=detailed)
    if as_json:
        render.emit_json(profile.to_dict())
    else:
        render.probe_human(profile, render.console())


@click.command("capture")
@click.argument("directory", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the captured Profile JSON instead of the summary.")
@click.option("--root", hidden=True, default=None)
@click.option("--profile", "profile_path", hidden=True, default=None)
@click.option("--force", is_flag=True, help="Replace an earlier capture in DIRECTORY (never other files).")
def capture_cmd(directory, as_json, root, profile_path, force):
    """Write a capture of this machine to a new or empty DIRECTORY (replay it with --root DIRECTORY)."""
    from probes.capture import CaptureRefused, write_capture
    from selector import render

    if root or profile_path:  # accepted only to say why they cannot apply
        raise Fail(EXIT_USAGE, "capture records this machine; --root and --profile do not apply "
                               "(to copy a capture, copy its directory)")
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise Fail(EXIT_INSTALL, f"cannot write a capture to {directory}: it is a file, not a directory")
    try:
        profile = write_capture(directory, force=force)
    except CaptureRefused as e:
        raise Fail(EXIT_USAGE, str(e)) from None
    except OSError as e:
        raise Fail(EXIT_INSTALL, f"cannot write a capture to {directory}: "
                                 f"{e.strerror or e}{f' ({e.filename})' if e.filename else ''}") from None
    if as_json:
        render.emit_json(profile)
    else:
        n = sum(len(files) for _, _, files in os.walk(os.path.join(directory, "fs")))
        click.echo(f"captured {n} files to {directory} (replay: pick-backend --root {directory} probe)")
