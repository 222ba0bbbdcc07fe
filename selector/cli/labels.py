"""``pick-backend labels``: node labels for Kubernetes Node Feature Discovery (see docs/fleet.md).

The labels themselves are built by selector.labels (pure); this module parses options, writes the
feature file atomically and prints.
"""

from __future__ import annotations

import os
import sys
import tempfile

import click

from selector.cli.core import DECIDE, EXIT_INSTALL, EXIT_USAGE, Fail, Opts, decide_all, options

LABELS_SCHEMA_VERSION = 1


def write_atomic(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename.  The temp file lives in the same directory and
    its name starts with '.', which NFD's local source skips; it is removed on any failure, and the
    previous file is untouched."""
    import errno
    import stat

    path = os.path.abspath(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):  # the rename would replace a device node or a link itself
        raise OSError(errno.EINVAL, "not a regular file (a device, FIFO, socket, link or directory); refusing to "
                                    "replace it", path)
    directory, base = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@click.command("labels")
@options(*DECIDE)
@click.option("--prefix", default=None,
              help="Prefix of every label name (default 'pick-backend.'); 'ns.example.com/pb.' adds a namespace.")
@click.option("--recipes", "recipes_csv", default=None,
              help="Comma-separated recipes to label (default: every recipe of the catalog).")
@click.option("--json", "as_json", is_flag=True, help="Print {schema_version, labels} as JSON.")
@click.option("--write", "write_path", type=click.Path(), default=None,
              help="Write the NFD feature file to PATH atomically (prints nothing unless --json).")
@click.option("--verify", "verify_flag", is_flag=True,
              help="Add <recipe>.verified=true|false: run each installed pick's device check (see `verify`).")
@click.pass_context
def labels_cmd(ctx, prefix, recipes_csv, as_json, write_path, verify_flag=False, **kwargs):
    """Node labels (name=value per line) for Kubernetes Node Feature Discovery's local source.

    \b
    pick-backend labels
    pick-backend labels --recipes llamacpp,whispercpp --json
    pick-backend labels --write /etc/kubernetes/node-feature-discovery/features.d/pick-backend
    """
    from selector import labels as labels_mod

    prefix = labels_mod.DEFAULT_PREFIX if prefix is None else prefix
    try:
        labels_mod.split_prefix(prefix)
    except ValueError as e:
        raise Fail(EXIT_USAGE, f"--prefix: {e}") from None
    if write_path is not None and not write_path.strip():
        raise Fail(EXIT_USAGE, "--write needs a file name (without --write the labels go to stdout)")
    o = Opts(ctx, kwargs)
    wanted = [r.strip() for r in (recipes_csv or "").split(",") if r.strip()]
    names = o.recipe_names(wanted)
    profile, _cat, _s, decisions, _warnings = decide_all(o, names)
    verified = None
    if verify_flag:  # issue 16: only builds that are installed (or the system binary) are run
        from selector.cli.verify import verify_recipe
        from selector.engine import INSTALLED_STATES

        verified = {d.recipe: verify_recipe(o, d.recipe, None, 30.0)["exit_code"] == 0
                    for d in decisions if d.ok and d.state in INSTALLED_STATES}
    lbls = labels_mod.labels(profile, decisions, prefix, verified)
    if write_path:
        existed = os.path.lexists(write_path)  # what the message may promise: a file there stays as it was
        try:
            write_atomic(write_path, labels_mod.feature_file(lbls))
        except OSError as e:
            kept = "the previous file is untouched" if existed else "nothing was written"
            raise Fail(EXIT_INSTALL, f"cannot write {write_path}: {e.strerror or e}; {kept}") from None
    if as_json:
        from selector.render import emit_json

        emit_json({"schema_version": LABELS_SCHEMA_VERSION, "labels": lbls})
    elif not write_path:
        sys.stdout.write(labels_mod.feature_file(lbls))
