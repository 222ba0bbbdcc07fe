"""The CLI's core: exit codes, the error every command raises, names matched in any case, the
shared options and the inputs they load (machine, catalog, settings, cache), and the one call that
decides.  Every command module imports from here; nothing here imports a command."""

from __future__ import annotations

import os

import click

from probes.inputs import InputError
from selector.choices import CHANNELS, METRICS, POLICIES
from selector.names import did_you_mean, match_name, printable, shown  # noqa: F401 - the commands' names

EXIT_OK, EXIT_USAGE, EXIT_UNSUPPORTED, EXIT_INSTALL, EXIT_INPUT = 0, 2, 3, 4, 5


class Fail(Exception):
    """Stop with a message on stderr and a documented exit code."""

    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)


# Options that take a value, over every command: the router below must know them to find the
# command name behind them (`pick-backend --root DIR probe`).  tests/test_first_hour.py checks this list
# against the commands' real options.
VALUE_OPTS = frozenset({
    "--root", "--profile", "--catalog", "--cache-dir", "--channel", "--config", "--policy", "--backend",
    "--prefix", "--recipes", "--write", "--engine", "--guide", "--gfx", "--sm", "--os", "--arch",
    "--timeout", "--from-file", "--allow-unverified", "--metric", "--depth",  # verify, install, --policy measured
    "--model", "-m", "--ctx-size", "--cache-type-k", "--cache-type-v", "--parallel",  # models and plan
    "--check-timeout",  # plan --check (--check's own value is optional: it is never taken for a command)
    "--backends", "--repetitions", "-r", "--prompt", "--gen",  # bench
    "--gpu", "--vram", "--ram",  # a described machine
})


# shell completion (click's: `_PICK_BACKEND_COMPLETE=bash_source pick-backend`, see README)


def _catalog_names(kind: str, ctx=None, recipe: str | None = None) -> list[str]:
    try:
        from selector import catalog

        name = ((ctx.params.get("catalog") if ctx is not None else None) or "lemonade")
        cat = catalog.load(name)
    except Exception:  # completion never fails loudly
        return []
    if kind == "recipes":
        return list(cat.recipes)
    recipes = [recipe] if recipe in cat.recipes else list(cat.recipes)
    return list(dict.fromkeys(b for r in recipes for b in cat.recipes[r].backends))


def complete_recipe(ctx, param, incomplete):
    return [n for n in _catalog_names("recipes", ctx) if n.startswith(incomplete)]


def complete_backend(ctx, param, incomplete):
    recipe = ctx.params.get("recipe") or next(iter(ctx.params.get("recipes") or ()), None)
    return [n for n in _catalog_names("backends", ctx, recipe) if n.startswith(incomplete)]


def complete_catalog(ctx, param, incomplete):
    from click.shell_completion import CompletionItem

    from selector.catalog import BUILTIN

    # all items, not names and one item: click wraps every entry again when the first is a str
    return [CompletionItem(n) for n in BUILTIN if n.startswith(incomplete)] + [CompletionItem(incomplete, type="file")]


# options: each command takes the ones that apply to it

OPTIONS = {
    "root": click.option("--root", type=click.Path(file_okay=False), default=None,
                         help="Probe a capture directory instead of this machine (env PICK_BACKEND_ROOT)."),
    "profile": click.option("--profile", "profile_path", type=click.Path(), default=None,
                            help="Use a saved Profile (`probe --json` output; '-' for stdin) instead of probing."),
    "catalog": click.option("--catalog", default=None, shell_complete=complete_catalog,
                            help="Catalog: lemonade (default), localai, or a catalog file."),
    "cache_dir": click.option("--cache-dir", type=click.Path(), default=None,
                              help="Backend cache root (default: Lemonade's, ~/.cache/lemonade)."),
    "channel": click.option("--channel", type=click.Choice(CHANNELS, case_sensitive=False), default=None,
                            help="ROCm channel (env PICK_BACKEND_CHANNEL; default stable)."),
    "config": click.option("--config", "config_path", type=click.Path(), default=None,
                           help="Lemonade-style config.json (env PICK_BACKEND_CONFIG)."),
    "policy": click.option("--policy", type=click.Choice(POLICIES, case_sensitive=False), default=None,
                           help="accelerator-first (default), Lemonade's own rule, or measured (the fastest in "
                                "`pick-backend bench` results)."),
    "metric": click.option("--metric", type=click.Choice(METRICS, case_sensitive=False), default=None,
                           help="With --policy measured: generation (tg, default) or prompt (pp) speed."),
    "depth": click.option("--depth", default=None, metavar="N[,N...]",
                          help="Tokens already in the context (llama-bench's -d): with --policy measured, the depth "
                               "compared (default 0); bench: the depths measured (e.g. 0,4096)."),
    "prefer_system": click.option("--prefer-system/--no-prefer-system", default=None,
                                  help="Allow (or forbid) picking a llama-server found on PATH."),
}
DECIDE = ("root", "profile", "catalog", "cache_dir", "channel", "config", "policy", "metric", "depth", "prefer_system")


def options(*names):
    """Add the named shared options (see OPTIONS) to a command."""
    def deco(f):
        for n in reversed(names):
            f = OPTIONS[n](f)
        return f
    return deco


common = options(*DECIDE)  # every shared option (commands that decide, or have not said)


def describe_options(f):
    """--gpu / --vram / --ram: a machine described in words (selector/described.py)."""
    f = click.option("--ram", default=None, metavar="SIZE",
                     help="System memory of the described machine (e.g. 64G).")(f)
    f = click.option("--vram", default=None, metavar="SIZE",
                     help="Memory of each described GPU, where the tables lack it or to override them (e.g. 24G).")(f)
    f = click.option("--gpu", "gpu", multiple=True, metavar="NAME",
                     help="Judge with this GPU instead of the ones found (repeat for several, e.g. --gpu 'RTX 4090').")(f)
    return f


class Opts:
    """The command's options, with their environment fallbacks, and the loaded inputs."""

    def __init__(self, ctx, kwargs):
        self.v = {k: kwargs.get(k) for k in
                  ("root", "profile_path", "catalog", "cache_dir", "channel", "config_path", "policy", "metric",
                   "prefer_system")}
        self.v["depths"] = depths(kwargs.get("depth"))
        if self.v["root"] and self.v["profile_path"]:
            raise Fail(EXIT_USAGE, "--root and --profile both name the machine to judge; give one")
        if not self.v["root"] and not self.v["profile_path"]:
            self.v["root"] = os.environ.get("PICK_BACKEND_ROOT") or None
        for k in ("channel", "policy", "metric"):  # choices are matched case-insensitively; keep the canonical form
            if self.v[k]:
                self.v[k] = self.v[k].lower()
        if self.v["cache_dir"] and os.path.exists(self.v["cache_dir"]) and not os.path.isdir(self.v["cache_dir"]):
            raise InputError(self.v["cache_dir"], "--cache-dir must be a directory, found a file")
        if self.v["cache_dir"]:  # absolute once, here at the edge: verify runs builds from their own directory
            self.v["cache_dir"] = os.path.abspath(self.v["cache_dir"])
        self._profile = None
        self._catalog = None
        gpus, vram, ram = kwargs.get("gpu") or (), kwargs.get("vram"), kwargs.get("ram")
        self.described = (list(gpus), vram, ram) if (gpus or vram is not None or ram is not None) else None

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
            self._profile = self.described_as(self._profile)
        return self._profile

    def described_as(self, profile):
        """``profile`` changed by --gpu / --vram / --ram (this machine, the replayed or the saved one)."""
        if not self.__dict__.get("described"):
            return profile
        from selector.described import DescribeError, describe

        try:
            return describe(profile, *self.described)
        except DescribeError as e:
            raise Fail(EXIT_USAGE, str(e)) from None

    def use_profile(self, profile) -> None:
        """Judge ``profile`` from now on: a machine the command made itself (install's --gfx/--sm/
        --os/--arch target, the one document of a batch file), taken as it is."""
        self._profile = profile

    def catalog(self):
        if self._catalog is None:
            from selector import catalog

            self._catalog = catalog.load(self.catalog_name)
        return self._catalog

    @property
    def catalog_name(self) -> str:
        """A built-in catalog's name (any case) or a path; any other bare word is a typo (exit 2)."""
        name = self.v["catalog"] or "lemonade"
        from selector.catalog import BUILTIN

        builtin = match_name(name, BUILTIN)
        if builtin:
            return builtin
        if os.sep not in name and "/" not in name and not name.endswith(".json") and not os.path.exists(name):
            raise Fail(EXIT_USAGE, did_you_mean(name, BUILTIN, "catalog") + " (or give a catalog file: ./my.json)")
        return name

    def recipe_names(self, names, all_=False) -> list[str]:
        cat = self.catalog()
        if all_ or not names:
            return list(cat.recipes)
        out = []
        for n in names:
            r = match_name(n, cat.recipes)
            if r is None:
                known = [match_name(k, cat.recipes) for k in names]
                for k in filter(None, known):
                    b = match_name(n, cat.recipes[k].backends)
                    if b:
                        raise Fail(EXIT_USAGE, f"'{b}' is a backend of {k}, not a recipe: "
                                               f"`pick-backend check {k} {b}` tells whether it runs here, "
                                               f"`pick-backend {k} --backend {b}` pins it")
                raise Fail(EXIT_USAGE, did_you_mean(n, cat.recipes, "recipe"))
            out.append(r)
        return list(dict.fromkeys(out))

    def backend_name(self, recipe: str, backend: str) -> str:
        """``backend`` as the catalog spells it for ``recipe`` (any case); exit 2 when unknown."""
        backends = self.catalog().recipes[recipe].backends
        b = match_name(backend, backends)
        if b is None:
            raise Fail(EXIT_USAGE, did_you_mean(backend, backends, f"backend of {recipe}"))
        return b

    def settings(self, recipes, backend=None, measured=None):
        from selector import settings as settings_mod

        return settings_mod.build(self.catalog().recipes, channel=self.channel, prefer_system=self.prefer_system,
                                  policy=self.policy, backend=backend, backend_recipes=recipes,
                                  config_path=self.config_path, metric=self.metric, measured=measured,
                                  depth=self.depths[0] if self.depths else 0)

    def installed(self):
        if self.profile_path and not self.cache_dir:
            return {}  # a saved profile from another machine: this machine's cache says nothing
        from selector.install.states import cache_root, installed

        return installed(cache_root(self.cache_dir), self.catalog().recipes, self.binary_of)

    def binary_of(self, recipe: str) -> str | None:
        """The executable a recipe's build holds (the catalog's asset rules), read only when asked."""
        if not hasattr(self, "_binaries"):
            try:
                from selector.install.resolve import load_assets

                self._binaries = {r: a.get("binary") for r, a in load_assets(self.catalog().name)["recipes"].items()
                                  if isinstance(a, dict)}
            except Exception:  # noqa: BLE001 - no asset rules for this catalog: nothing to look for
                self._binaries = {}
        return self._binaries.get(recipe)

    def pins(self):
        from selector.catalog import load_pins

        return load_pins(self.catalog().name)


MAX_DEPTH = 1 << 24  # tokens: past any model's context


def depths(text: str | None) -> list[int] | None:
    """--depth "0,4096" as [0, 4096] (each once, in the order given); None where not given."""
    if text is None:
        return None
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part.isdigit() or int(part) > MAX_DEPTH:
            raise Fail(EXIT_USAGE, f"--depth {text}: each depth is a whole number of tokens from 0 to {MAX_DEPTH} "
                                   "(comma-separated: 0,4096)")
        if int(part) not in out:
            out.append(int(part))
    return out


def decide_all(o: Opts, names, backend=None):
    from selector import engine
    from selector.settings import for_recipe

    profile, cat = o.profile(), o.catalog()
    if backend and backend.lower() != "auto":
        backends = {o.backend_name(n, backend) for n in names}
        backend = backends.pop() if len(backends) == 1 else backend
    installed, pins = o.installed(), o.pins()

    def measured():  # --policy measured: the fresh bench results, read only when asked for
        from selector.bench import fresh_measurements, measurable
        from selector.install.states import cache_root

        bad: list[str] = []
        found = fresh_measurements(cache_root(o.cache_dir), installed, profile, bad)
        return measurable(cat.name), found, [f"{p}: not a readable bench record; ignored (pick-backend bench writes "
                                             f"it again)" for p in bad]

    s, warnings = o.settings(names, backend, measured)
    if o.metric and s.policy != "measured":
        raise Fail(EXIT_USAGE, "--metric chooses what --policy measured compares; give --policy measured too")
    if s.policy == "measured" and o.depths and len(o.depths) > 1:
        raise Fail(EXIT_USAGE, f"--depth {','.join(map(str, o.depths))}: --policy measured compares at one depth")
    m = engine.Machine(profile)
    decisions = [engine.decide(profile, cat, n, installed, for_recipe(s, cat, n), pins, machine=m) for n in names]
    return profile, cat, s, decisions, warnings
