"""The command line: parse -> probe -> decide -> render.  Thin on purpose.

``pick-backend RECIPE...`` is short for ``pick-backend pick RECIPE...``.  Commands that live in
their own modules (install, guide, labels, ...) are registered in LAZY and imported only when run,
so that the everyday path starts fast.
"""

from __future__ import annotations

import difflib
import os
import sys

import click

from probes.host import InputError

EXIT_OK, EXIT_USAGE, EXIT_UNSUPPORTED, EXIT_INSTALL, EXIT_INPUT = 0, 2, 3, 4, 5

# command name -> "module:function", imported on first use
LAZY: dict[str, str] = {
    "guide": "selector.cli_guide:guide_cmd",
    "labels": "selector.cli_labels:labels_cmd",
    "install": "selector.cli_install:install_cmd",
    "status": "selector.cli_install:status_cmd",
    "uninstall": "selector.cli_install:uninstall_cmd",
}


class Fail(Exception):
    """Stop with a message on stderr and a documented exit code."""

    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)


def did_you_mean(word: str, choices, what: str) -> str:
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


@main_group.command("probe")
@common
@click.option("--json", "as_json", is_flag=True, help="Print the Profile JSON.")
@click.option("--detailed", is_flag=True, help="Also ask py-cpuinfo (slow: over a second).")
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


@main_group.command("capture")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Also print the Profile JSON.")
def capture_cmd(directory, as_json):
    """Write a capture of this machine to DIRECTORY (replay it with --root DIRECTORY)."""
    from probes.capture import write_capture
    from selector import render

    profile = write_capture(directory)
    if as_json:
        render.emit_json(profile)
    else:
        n = sum(len(files) for _, _, files in os.walk(os.path.join(directory, "fs")))
        click.echo(f"captured {n} files to {directory} (replay: pick-backend --root {directory} probe)")


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
    from selector.guide import add_advice

    add_advice(profile, decisions)  # the guide's warnings; its file is opened only when one can bite
    if as_json:
        render.emit_json(render.pick_json(profile, cat, s, decisions, warnings))
    else:
        render.picks_human(profile, cat, decisions, render.console(), s, warnings)
    if not all_ and not all(d.ok for d in decisions):
        sys.exit(EXIT_UNSUPPORTED)


@main_group.command("check")
@click.argument("recipe")
@click.argument("backend")
@common
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
@click.pass_context
def check_cmd(ctx, recipe, backend, as_json, **kwargs):
    """Installer gate: exit 0 when BACKEND of RECIPE is supported here, 3 when not."""
    from selector import render

    o = Opts(ctx, kwargs)
    (name,) = o.recipe_names([recipe])
    if backend not in o.catalog().recipes[name].backends:
        raise Fail(EXIT_USAGE, did_you_mean(backend, o.catalog().recipes[name].backends, f"backend of {name}"))
    profile, cat, s, (d,), warnings = decide_all(o, [name])
    v = d.verdict(backend)
    if as_json:
        render.emit_json({
            "schema_version": render.PICK_SCHEMA_VERSION,
            "catalog": cat.name,
            "host": render.host_summary(profile),
            "recipe": name,
            "backend": backend,
            "supported": v.supported,
            "state": v.state,
            "reason": v.reason,
            "device": v.device.to_dict() if v.device else None,
            "notes": v.notes,
            "pick": d.backend,
        })
    elif v.supported:
        click.echo(f"{name} {backend}: supported on {render._device_words(v.device)} ({v.state})")
    else:
        click.echo(f"{name} {backend}: unsupported: {v.reason}", err=True)
    sys.exit(EXIT_OK if v.supported else EXIT_UNSUPPORTED)


@main_group.command("matrix")
@click.argument("recipe", required=False)
@common
@click.option("--here", is_flag=True, help="Add this machine's verdict for every recipe x backend.")
@click.option("--json", "as_json", is_flag=True, help="Print the catalog (and verdicts) as JSON.")
@click.pass_context
def matrix_cmd(ctx, recipe, here, as_json, **kwargs):
    """Show the support matrix of the catalog."""
    from selector import render

    o = Opts(ctx, kwargs)
    cat = o.catalog()
    names = o.recipe_names([recipe] if recipe else [])
    verdicts = None
    if here:
        _, _, _, decisions, _ = decide_all(o, names)
        verdicts = {(d.recipe, v.name): v for d in decisions for v in d.backends}
    if as_json:
        out = {"schema_version": 1, "catalog": cat.name, "title": cat.title, "source": cat.source, "recipes": {}}
        for n in names:
            r = cat.recipes[n]
            rows = []
            for row in r.rows:
                item = {"backend": row.backend, "tier": row.tier, "format": row.format, "os": list(row.os),
                        "devices": {t: list(f) for t, f in row.devices}}
                if verdicts is not None:
                    v = verdicts[(n, row.backend)]
                    item["here"] = {"supported": v.supported, "state": v.state, "reason": v.reason}
                rows.append(item)
            out["recipes"][n] = {"display_name": r.display_name, "rows": rows}
        render.emit_json(out)
    else:
        render.matrix_human(cat, names, render.console(), verdicts)


@main_group.command("recipes")
@common
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def recipes_cmd(ctx, as_json, **kwargs):
    """List the recipes of the catalog."""
    from selector import render

    o = Opts(ctx, kwargs)
    cat = o.catalog()
    if as_json:
        render.emit_json({n: {"display_name": r.display_name, "backends": r.backends} for n, r in cat.recipes.items()})
        return
    width = max(len(n) for n in cat.recipes)
    for n, r in cat.recipes.items():
        click.echo(f"{n.ljust(width)}  {r.display_name}  [{', '.join(r.backends)}]")


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
