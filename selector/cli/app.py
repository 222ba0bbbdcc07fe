"""The command line: parse -> probe -> decide -> render.  Thin on purpose.

``pick-backend RECIPE...`` is short for ``pick-backend pick RECIPE...``.  Every command lives in a
module of this package, registered in LAZY and imported only when run, so that the everyday path
starts fast; this module holds the router, the group and the one exit path.
"""

from __future__ import annotations

import errno
import os
import sys

import click

from probes.inputs import InputError
from selector.cli.core import EXIT_INPUT, EXIT_INSTALL, EXIT_USAGE, VALUE_OPTS, Fail, _catalog_names, match_name, printable

# standard output that cannot take what is written (`> file` on a full disk or over a quota, a
# failing device): exit 4, "a destination cannot be written"; these errors carry no file name
_OUTPUT_ERRNOS = {getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EFBIG", "EIO", "EBADF") if hasattr(errno, n)}

# command name -> "module:function", imported on first use
LAZY: dict[str, str] = {
    "pick": "selector.cli.pick:pick_cmd",
    "probe": "selector.cli.machine:probe_cmd",
    "capture": "selector.cli.machine:capture_cmd",
    "check": "selector.cli.support:check_cmd",
    "matrix": "selector.cli.support:matrix_cmd",
    "recipes": "selector.cli.support:recipes_cmd",
    "guide": "selector.cli.guide:guide_cmd",
    "labels": "selector.cli.labels:labels_cmd",
    "install": "selector.cli.install:install_cmd",
    "status": "selector.cli.install:status_cmd",
    "uninstall": "selector.cli.install:uninstall_cmd",
    "verify": "selector.cli.verify:verify_cmd",
    "models": "selector.cli.models:models_cmd",
    "plan": "selector.cli.models:plan_cmd",
    "bench": "selector.cli.bench:bench_cmd",
}


def route(args: list[str], commands) -> list[str]:
    """Put the command name first: options may come before it (`pick-backend --root DIR probe`), and
    anything that is not a command is a pick (`pick-backend --all`, `pick-backend --json llamacpp`,
    `pick-backend LlamaCpp`).  Only help and version stay with the group."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            break
        if a.startswith("-") and a != "-":
            i += 2 if a in VALUE_OPTS else 1
            continue
        cmd = a if a in commands else match_name(a, commands)
        if cmd is not None:
            return [cmd, *args[:i], *args[i + 1:]]
        break
    if not args or all(a in ("-h", "--help", "--version") for a in args):
        return args
    if "--version" in args[:i + 1]:  # `pick-backend --version --json`: the version, whatever else
        return ["--version"]
    return ["pick", *args]


class _Params:
    """Stands for a context whose only parameter is known (completion's --catalog)."""

    def __init__(self, params):
        self.params = params


def _only_options(args: list[str]) -> bool:
    """Every word is an option or the value of one (no command, no recipe yet)."""
    i = 0
    while i < len(args):
        if not args[i].startswith("-") or args[i] == "-":
            return False
        i += 2 if args[i] in VALUE_OPTS else 1
    return True


class ReaderLeft(Exception):
    """The reader closed the pipe.  Not an OSError: click turns a broken pipe into exit 1 itself,
    and README promises 0 (see _reader_left)."""


class Group(click.Group):
    """Routes ``pick-backend llamacpp`` to ``pick``; loads LAZY commands on demand."""

    def make_context(self, *args, **kwargs):  # --help and --version print while the arguments are parsed
        try:
            return super().make_context(*args, **kwargs)
        except BrokenPipeError:
            raise ReaderLeft from None

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise ReaderLeft from None

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(LAZY))

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is None and name in LAZY:
            import importlib

            module, attr = LAZY[name].split(":")
            cmd = getattr(importlib.import_module(module), attr)
            self.add_command(cmd, name)
        return cmd

    def parse_args(self, ctx, args):
        args = list(args)
        routed = route(args, set(self.commands) | set(LAZY))
        if ctx.resilient_parsing:  # shell completion
            if routed[:1] == ["pick"] and args and args[-1] not in VALUE_OPTS and _only_options(args):
                # after leading options only (`pick-backend --json ch<TAB>`, `--root DIR ins<TAB>`) the
                # next word may be a command or a recipe: complete at the group, not inside `pick`
                ctx.meta["pick_backend.leading"] = args  # (--catalog among them names the recipes)
                return super().parse_args(ctx, [])
            if routed and routed[-1] in VALUE_OPTS:
                # the word being completed is this option's value: without it the command's other
                # arguments still parse (`install llamacpp --backend <TAB>` knows the recipe)
                routed = routed[:-1]
        return super().parse_args(ctx, routed)

    def shell_complete(self, ctx, incomplete):
        from click.shell_completion import CompletionItem

        items = super().shell_complete(ctx, incomplete)
        if not incomplete.startswith("-"):
            leading = ctx.meta.get("pick_backend.leading") or []
            cat = leading[leading.index("--catalog") + 1] if "--catalog" in leading[:-1] else None
            names = _catalog_names("recipes", _Params({"catalog": cat}) if cat else ctx)
            items += [CompletionItem(n) for n in names if n.startswith(incomplete)]
        return items


def _version(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    from selector import __version__

    click.echo(f"pick-backend {__version__}")
    ctx.exit()


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show the version and exit.")
def main_group():
    """Pick the backend build of a local inference engine that runs on this machine.

    \b
    pick-backend llamacpp             the pick for llama.cpp, and why
    pick-backend --all                the pick for every recipe
    pick-backend probe                what this machine is
    pick-backend check llamacpp rocm  exit 0 if supported here, 3 if not

    Options go before or after the command name; `pick-backend COMMAND --help` lists a command's.
    """


# ------------------------------------------------------------------------------------------------
# the one exit path: a message (and with --json a JSON error object) and a documented exit code

ASCII = str.maketrans({"→": "->", "✓": "+", "✗": "x", "·": "-", "…": "...", "—": "-", "–": "-", "≥": ">=",
                       "≤": "<=", "×": "x", "•": "*", "─": "-", "│": "|", "━": "-"})


class _AsciiStream:
    """A text stream whose encoding cannot say the arrows and ticks (cp1252, ascii): write them
    in ASCII, and anything else it cannot encode as '?'."""

    def __init__(self, inner):
        self._inner = inner

    def write(self, s):
        return self._inner.write(s.translate(ASCII) if isinstance(s, str) else s)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _Closed:
    """Standard output closed by the caller (``>&-``): a write fails as it would on the descriptor,
    so the command ends with "writing the output failed" (exit 4), as coreutils do."""

    encoding = "utf-8"

    def write(self, s):
        raise OSError(errno.EBADF, "standard output is closed")

    def flush(self):
        pass

    def isatty(self):
        return False


def _fit_streams() -> None:
    if sys.stdout is None:
        sys.stdout = _Closed()
    if sys.stderr is None:  # messages have nowhere to go; the exit code still says what happened
        sys.stderr = open(os.devnull, "w")
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        enc = getattr(stream, "encoding", None) or "ascii"
        try:
            "→✓✗·…".encode(enc)
            continue
        except (UnicodeEncodeError, LookupError):
            pass
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError):
            pass
        setattr(sys, name, _AsciiStream(stream))


def _cut(message: str, limit: int = 400) -> str:
    """A message that echoes a huge argument, cut in the middle: both ends (the file, the field)
    stay.  Undecodable bytes from argv are escaped."""
    message = printable(message)
    if len(message) > limit:
        half = (limit - 3) // 2
        message = f"{message[:half]}...{message[-half:]}"
    return message


def _fail(code: int, message: str, as_json: bool) -> None:
    message = _cut(message)
    if as_json:
        import json

        try:
            sys.stdout.write(json.dumps({"error": message, "exit": code}) + "\n")
        except OSError:  # standard output is what failed: stderr still says why
            pass
    click.echo(f"pick-backend: {message}", err=True)
    sys.exit(code)


def _output_words(e: Exception) -> str:
    return f"writing the output failed: {getattr(e, 'strerror', None) or e}"


def _output_failed(e: OSError) -> None:
    _fail(EXIT_INSTALL, _output_words(e), False)


def main(argv=None):
    """The console script (``argv`` None: this process is the command) ends through ``_leave``;
    a caller that passes ``argv`` (tests, an embedding program) gets SystemExit as usual."""
    if argv is not None:
        return _main(argv)
    try:
        _main(None)
    except SystemExit as e:
        _leave(e.code)


def _leave(code) -> None:
    """End the process now that the command is done: atexit handlers run (coverage, a temporary
    directory's finalizer), stdout and stderr are flushed, and then the interpreter's teardown,
    which frees every module rich and click loaded one object at a time (about 10 ms, a tenth of
    a pick), is skipped.  Nothing is lost by it: files are written and closed by the time a command
    returns, and with a non-daemon thread still running the usual exit joins it (a daemon thread, such
    as an NVML query that hung, is dropped either way)."""
    import threading

    me = threading.current_thread()
    if any(t is not me and t.is_alive() and not t.daemon for t in threading.enumerate()):
        raise SystemExit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"), as Python prints it
        sys.stderr.write(f"{code}\n")
        code = 1
    import atexit

    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # a reader that left (| head -1): what it did not read is gone
        pass
    except (OSError, ValueError) as e:  # an error message that could not be written either
        if not code:
            sys.stderr.write(f"pick-backend: {_output_words(e)}\n")
            code = EXIT_INSTALL
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


def _main(argv):
    _fit_streams()
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    if any("\0" in a for a in args):  # no path or name can hold one (os calls raise ValueError)
        _fail(EXIT_USAGE, "an argument contains a NUL character", as_json)
    try:
        main_group.main(args=args, prog_name="pick-backend", standalone_mode=False)
    except Fail as e:
        _fail(e.code, str(e), as_json and not getattr(e, "json_printed", False))
    except InputError as e:
        _fail(EXIT_INPUT, str(e), as_json)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as e:
        e.message = _cut(e.message)  # click echoes the offending argument, however long
        if isinstance(e, click.NoSuchOption):
            e.option_name = _cut(e.option_name, 60)
        if as_json:
            _fail(EXIT_USAGE, e.format_message(), True)
        e.show()
        sys.exit(EXIT_USAGE)
    except click.ClickException as e:
        if as_json:
            _fail(e.exit_code, e.format_message(), True)
        e.show()
        sys.exit(e.exit_code)
    except (BrokenPipeError, ReaderLeft):
        _reader_left()
    except OSError as e:  # a path given to a command that cannot be used as one (a file for a directory...)
        if e.filename is None and e.errno in _OUTPUT_ERRNOS:
            _output_failed(e)
        where = printable(e.filename or "?")
        _fail(EXIT_INPUT, f"{where}: {e.strerror or e}", as_json)
    except Exception as e:  # ProfileError and the like carry their own exit codes
        code = getattr(e, "exit_code", None)
        if code is None:
            if os.environ.get("PICK_BACKEND_DEBUG"):
                raise
            _fail(1, f"internal error: {type(e).__name__}: {e} (PICK_BACKEND_DEBUG=1 shows where; "
                     "please report it)", as_json)
        _fail(code, str(e), as_json and not getattr(e, "json_printed", False))
    try:
        sys.stdout.flush()  # what is still buffered: a reader that left shows here, not at exit
    except BrokenPipeError:
        _reader_left()
    except OSError as e:
        _output_failed(e)
    sys.exit(0)


def _reader_left() -> None:
    """The reader closed the pipe (``| head -1``): nothing more can reach it.  stdout goes to devnull
    (so the flush at exit cannot fail again, Python's own recipe) and the command ends with 0."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    sys.exit(0)

