"""The terminal, at the bottom of the house: the rich console laid out for the terminal's width and
the progress bar.  The renderer and the installer both use it; it imports nothing of the project."""

from __future__ import annotations

import sys


def console(stderr: bool = False):
    """A rich console laid out for the terminal's width (COLUMNS, where set, is that width); in a pipe
    or file lines are never wrapped or padded, so that grep and cut see one line per fact."""
    import os

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    # COLUMNS/LINES that are not plain numbers ('¹' passes str.isdigit, then int() fails inside rich) are
    # taken as unset
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES") or (v.isascii() and v.isdecimal() and int(v) > 0)}
    # a pipe or file is never wrapped, whatever COLUMNS says (an exported COLUMNS=5 would shred it):
    # one line per fact, for grep and cut
    width = None if tty else 100_000
    con = Console(file=_NoTrailingSpaces(stream), highlight=False, soft_wrap=False, emoji=False, width=width,
                  _environ=env)
    con.on_broken_pipe = _reader_left  # rich's own exits 1; a reader that stops early is no failure here
    return con


def _reader_left() -> None:
    """The reader closed the pipe (``| head -1``).  rich's own handler exits 1; hand it to the CLI's
    exit path instead (selector/cli/app.py), which silences stdout and ends with 0."""
    raise BrokenPipeError


class _NoTrailingSpaces:
    """rich pads wrapped lines and table cells with spaces up to the width: drop them at the end of
    every line (before any closing style codes)."""

    def __init__(self, inner):
        self._inner = inner

    def write(self, text):
        import re

        return self._inner.write(re.sub(r" +((?:\x1b\[[0-9;]*m)*)(?=\n)", r"\1", text))

    def __getattr__(self, name):
        return getattr(self._inner, name)


def wrap_parts(parts, width: int, sep: str = " · ") -> str:
    """Join ``parts`` with ``sep``, breaking lines between parts (never inside one) to fit ``width``."""
    lines, cur = [], ""
    mark = sep.rstrip()
    for i, p in enumerate(parts):
        more = len(mark) if i < len(parts) - 1 else 0  # the " ·" a line ends with when another follows
        if cur and len(cur) + len(sep) + len(p) + more > width:
            lines.append(cur + mark)
            cur = p
        else:
            cur = f"{cur}{sep}{p}" if cur else p
    return "\n".join(lines + [cur])


class Progress:
    """A rich progress bar (bytes, rate, ETA) on a terminal; nothing otherwise."""

    def __init__(self, enabled: bool | None = None):
        self.enabled = sys.stdout.isatty() if enabled is None else enabled
        self.narrow = False
        self._bar = None
        self._task = None
        self.label = ""

    def __enter__(self):
        if self.enabled:
            from rich.progress import (BarColumn, DownloadColumn, Progress as RichProgress, TextColumn,
                                       TimeRemainingColumn, TransferSpeedColumn)

            con = console()
            # narrow (under 100 columns): the file name goes on a line of its own above the bar, and
            # the speed column goes, so that no cell is cut to "0.… 100… 0:0…"
            self.narrow = con.width < 100
            cols = ([BarColumn(bar_width=None), DownloadColumn(), TimeRemainingColumn()] if self.narrow else
                    [TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                     TimeRemainingColumn()])
            self._bar = RichProgress(*cols, transient=False, console=con)
            self._bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def say(self, msg: str) -> None:
        if self._bar is not None:
            self._bar.console.print(msg, markup=False, highlight=False)
        else:
            sys.stderr.write(f"pick-backend: {msg}\n")
            sys.stderr.flush()

    def start(self, total, done):
        if self._bar is None:
            return
        if self._task is None:
            if self.narrow and self.label:
                self._bar.console.print(self.label, markup=False, highlight=False, soft_wrap=True)
            self._task = self._bar.add_task(self.label, total=total, completed=done)
        else:
            self._bar.reset(self._task, total=total, completed=done, description=self.label)

    def new(self, label: str):
        self.label = label
        self._task = None

    def advance(self, n):
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, n)
