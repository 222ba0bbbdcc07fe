"""Input files and their errors: what probes and selector both read by.

A capture, a catalog, a config, a profile, a guide: every input file is read here, and every
failure is an :class:`InputError` naming the file (exit code 5).  This module touches no machine
and knows no recipe: it imports nothing from ``probes`` or ``selector`` (tests/test_house.py), so
``probes/host.py`` stays the one door to the machine and the selector need not go through it to
read its own data files.
"""

from __future__ import annotations

import json
import os
import stat


class InputError(Exception):
    """An input file (capture, config, catalog, profile) is unreadable or invalid: exit code 5."""

    exit_code = 5

    def __init__(self, path, message: str):
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


_NOT_GIVEN = object()


def open_regular(path):
    """Open ``path`` for reading in binary, only when it is a regular file: a FIFO, socket or device
    (planted in a capture or named as an input) would block the read forever.  O_NONBLOCK makes the
    open itself return at once; the check is on the opened file, so nothing can swap it in between."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            import errno

            raise OSError(errno.EINVAL, "not a regular file", path)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_json(path, missing: str, default=_NOT_GIVEN):
    """Parse a JSON input file (capture, catalog, config, profile, guide...).  Every failure is an
    InputError naming the file (exit 5); ``missing`` says what a file that is not there means,
    unless ``default`` is given, which is then returned instead."""
    try:
        with open_regular(path) as f:
            text = f.read().decode("utf-8")
    except FileNotFoundError:
        if default is not _NOT_GIVEN:
            return default
        raise InputError(path, missing) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, f"cannot read: {e.strerror if isinstance(e, OSError) and e.strerror else e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}") from None
    except RecursionError:
        raise InputError(path, "not valid input: JSON nested too deeply") from None


def need(cond, path, where: str, message: str) -> None:
    """Validation step of a data-file loader: raise InputError naming the file and the entry."""
    if not cond:
        raise InputError(path, f"{where}: {message}")
