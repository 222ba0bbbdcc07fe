"""The command line: parse -> probe -> decide -> render.  Thin on purpose.

``pick-backend RECIPE...`` is short for ``pick-backend pick RECIPE...``.  Commands that live in
their own modules (install, guide, labels, ...) are registered in LAZY and imported only when run,
so that the everyday path starts fast.
"""

from __future__ import annotations

import os
import sys

import click

from probes.host import InputError

EXIT_OK, EXIT_USAGE, EXIT_UNSUPPORTED, EXIT_INSTALL, EXIT_INPUT = 0, 2, 3, 4, 5

# command name -> "module:function", imported on first use
LAZY: dict[str, str] = {
    "probe": "selector.cli_commands:probe_cmd",
    "capture": "selector.cli_commands:capture_cmd",
    "check": "selector.cli_commands:check_cmd",
    "matrix": "selector.cli_commands:matrix_cmd",
    "recipes": "selector.cli_commands:recipes_cmd",
    "guide": "selector.cli_guide:guide_cmd",
    "labels": "selector.cli_labels:labels_cmd",
    "install": "selector.cli_install:install_cmd",
    "status": "selector.cli_install:status_cmd",
    "uninstall": "selector.cli_install:uninstall_cmd",
    "verify": "selector.cli_verify:verify_cmd",  # issue 16
}


class Fail(Exception):
    """Stop with a message on stderr and a documented exit code."""

    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)


def did_you_mean(word: str, choices, what: str) -> str:
    import difflib  # only on the error path: it costs milliseconds to import

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    hint = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(sorted(choices))})"
    return f"unknown {what} '{word}'{hint}"


class Group(click.Group):
    """Routes ``pick-backend llamacpp`` to ``pick``; loads LAZY commands on demand."""

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

    def resolve_command(self, ctx, args):
        if args and not args[0].startswith("-") and self.get_command(ctx, args[0]) is None:
            args = ["pick", *args]
        return super().resolve_command(ctx, args)


# ------------------------------------------------------------------------------------------------
# options every command accepts (also before the command name)

COMMON = [
    click.option("--root", type=click.Path(file_okay=False), default=None,
                 help="Probe a capture directory instead of this machine (env PICK_BACKEND_ROOT)."),
    click.option("--profile", "profile_path", type=click.Path(), default=None,
                 help="Use a saved Profile (the output of `probe --json`) instead of probing."),
    click.option("--catalog", default=None, help="Catalog: lemonade (default), localai, or a catalog file."),
    click.option("--cache-dir", default=None, help="Backend cache root (default: Lemonade's)."),
    click.option("--channel", type=click.Choice(["stable", "nightly"]), default=None,
                 help="ROCm channel (env PICK_BACKEND_CHANNEL; default stable)."),
    click.option("--config", "config_path", default=None,
                 help="Lemonade-style config.json (env PICK_BACKEND_CONFIG)."),
    click.option("--policy", type=click.Choice(["accelerator-first", "lemonade"]), default=None,
                 help="accelerator-first (default) or Lemonade's own rule."),
    click.option("--prefer-system/--no-prefer-system", default=None,
                 help="Allow the system llama-server to be picked."),
]


def common(f):
    for opt in reversed(COMMON):
        f = opt(f)
    return f


class Opts:
    """Merged options (command-level beats group-level) and the loaded inputs."""

    def __init__(self, ctx, kwargs):
        parent = ctx.find_object(dict) or {}
        self.v = {k: (kwargs.get(k) if kwargs.get(k) is not None else parent.get(k)) for k in
                  ("root", "profile_path", "catalog", "cache_dir", "channel", "config_path", "policy", "prefer_system")}
        if not self.v["root"]:
            self.v["root"] = os.environ.get("PICK_BACKEND_ROOT") or None
        self._profile = None
        self._catalog = None

    def __getattr__(self, name):
        try:
            return self.__dict__["v"][name]
        except KeyError:
            raise AttributeError(name) from None

    def profile(self, detailed: bool = False):
        if self._profile is None:
            if self.profile_path:
                from selector.profiles import read_profile

                self._profile = read_profile(self.profile_path)
            else:
                from probes import probe
                from probes.host import open_host

                self._profile = probe(open_host(self.root), detailed=detailed)
        return self._profile

    def catalog(self):
        if self._catalog is None:
            from selector import catalog

            self._catalog = catalog.load(self.catalog_name)
        return self._catalog

    @property
    def catalog_name(self) -> str:
        return self.v["catalog"] or "lemonade"

    def recipe_names(self, names, all_=False) -> list[str]:
        cat = self.catalog()
        if all_ or not names:
            return list(cat.recipes)
        for n in names:
            if n not in cat.recipes:
                raise Fail(EXIT_USAGE, did_you_mean(n, cat.recipes, "recipe"))
        return list(dict.fromkeys(names))

    def settings(self, recipes, backend=None):
        from selector import settings as settings_mod

        return settings_mod.build(self.catalog().recipes, channel=self.channel, prefer_system=self.prefer_system,
                                  policy=self.policy, backend=backend, backend_recipes=recipes,
                                  config_path=self.config_path)

    def installed(self):
        if self.profile_path and not self.cache_dir:
            return {}  # a saved profile from another machine: this machine's cache says nothing
        from selector.install.states import cache_root, installed

        return installed(cache_root(self.cache_dir), self.catalog().recipes)

    def pins(self):
        from selector.catalog import load_pins

        return load_pins(self.catalog().name)


def decide_all(o: Opts, names, backend=None):
    from selector import engine

    profile, cat = o.profile(), o.catalog()
    s, warnings = o.settings(names, backend)
    if backend:
        for n in names:
            if backend != "auto" and backend not in cat.recipes[n].backends:
                raise Fail(EXIT_USAGE, did_you_mean(backend, cat.recipes[n].backends, f"backend of {n}"))
    for n, b in s.backends.items():
        if n in cat.recipes and b not in cat.recipes[n].backends:
            warnings.append(f"config pins {n} to unknown backend '{b}'; ignored")
            del s.backends[n]
    installed, pins = o.installed(), o.pins()
    m = engine.Machine(profile)
    decisions = [engine.decide(profile, cat, n, installed, s, pins, machine=m) for n in names]
    return profile, cat, s, decisions, warnings


# ------------------------------------------------------------------------------------------------


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@common
@click.version_option(package_name="pick-backend", prog_name="pick-backend")
@click.pass_context
def main_group(ctx, **kwargs):
    """Pick the backend build of a local inference engine that runs on this machine.

    \b
    pick-backend llamacpp            the pick for llama.cpp, with every backend's verdict
    pick-backend probe               what this machine is
    pick-backend check llamacpp rocm installer gate: exit 0 if supported, 3 if not
    """
    ctx.obj = {k: v for k, v in kwargs.items()}


@main_group.command("pick")
@click.argument("recipes", nargs=-1)
@common
@click.option("--all", "all_", is_flag=True, help="Every recipe of the catalog.")
@click.option("--backend", default=None, help="Pin the backend (anything but 'auto' is chosen even if unsupported).")
@click.option("--json", "as_json", is_flag=True, help="Print the Pick JSON.")
@click.pass_context
def pick_cmd(ctx, recipes, all_, backend, as_json, **kwargs):
    """Pick the backend for RECIPE(s) and say why every other one was passed over."""
    from selector import render

    o = Opts(ctx, kwargs)
    if o.profile_path and os.path.isdir(o.profile_path) or (o.profile_path or "").endswith((".jsonl", "-")):
        from selector.profiles import pick_batch

        sys.exit(pick_batch(o, recipes, all_, backend))
    if not recipes and not all_:
        raise Fail(EXIT_USAGE, "name a recipe (e.g. pick-backend llamacpp) or pass --all; "
                               "`pick-backend recipes` lists them")
    names = o.recipe_names(recipes, all_)
    profile, cat, s, decisions, warnings = decide_all(o, names, backend)
    if profile.amd_gpus:  # the guide is written for Radeon machines: elsewhere it has nothing to add
        from selector.guide import add_advice

        add_advice(profile, decisions)  # the guide's warnings; its file is opened only when one can bite
    own = None
    if "capability" in cat.extra:  # the engine picks a build by itself too (LocalAI): say what it would take
        from selector.capability import advise

        own = advise(profile, cat, decisions)
    if as_json:
        render.emit_json(render.pick_json(profile, cat, s, decisions, warnings, own))
    else:
        render.picks_human(profile, cat, decisions, render.console(), s, warnings, own)
    if not all_ and not all(d.ok for d in decisions):
        sys.exit(EXIT_UNSUPPORTED)


def main(argv=None):
    try:
        main_group.main(args=argv, prog_name="pick-backend", standalone_mode=False)
    except Fail as e:
        click.echo(f"pick-backend: {e}", err=True)
        sys.exit(e.code)
    except InputError as e:
        click.echo(f"pick-backend: {e}", err=True)
        sys.exit(EXIT_INPUT)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_USAGE if isinstance(e, click.UsageError) else e.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as e:  # ProfileError and the like carry their own exit codes
        code = getattr(e, "exit_code", None)
        if code is None:
            raise
        click.echo(f"pick-backend: {e}", err=True)
        sys.exit(code)
    sys.exit(0)
