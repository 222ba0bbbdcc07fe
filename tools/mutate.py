"""Mutation testing for pick-backend: small changes to one module, each run against the tests that
cover it; a mutant the tests still pass is a behaviour nothing pins.

Why our own driver and not mutmut: most tests run the real CLI in a subprocess (``python -m
selector``), which mutmut's in-process trampolines do not reach.  This driver copies the work tree
to a scratch directory, writes each mutant into the copy's source file and runs pytest there with
``PYTHONPATH`` pointing at the copy, so in-process tests and CLI subprocesses alike run the mutant.

    nice -n 15 python tools/mutate.py selector/catalog.py            # the module's mapped tests
    nice -n 15 python tools/mutate.py probes/linux/amd.py --tests tests/test_probe_fallbacks.py
    nice -n 15 python tools/mutate.py selector/requires.py --sample 40 --seed 1
    python tools/mutate.py selector/catalog.py --list                 # the mutants, nothing run

Slow (one pytest run per mutant): never part of .ci/run.  See docs/testing.md.

Operators: comparison flips (== !=, < <=, > >=, in / not in, is / is not), and <-> or, dropping a
``not``, arithmetic and shift flips, True <-> False, n -> n + 1, identifier-like strings changed,
``return x`` -> ``return None`` (not for ``return False``/``0``: equivalent where the answer is tested
for truth, and the constant is flipped anyway), ``x = e`` -> ``x = None`` (not for ``x = False``, alike), a call statement deleted (a warning
never issued, an item never appended), continue <-> break. Message wording is left alone: strings
with spaces, f-strings and docstrings are not mutated, nor annotations, decorators and imports. A
line ending in ``# pragma: no mutate`` is skipped (for a mutant shown equivalent; say why on the
line above).

Each mutant runs only the tests that execute its statement: one coverage run first maps line -> test
ids, counting the CLI subprocesses the tests start (a sitecustomize on the copy's path starts coverage
in them, with the test's id as context).  Needs ``coverage`` (``pip install -e '.[mutate]'``); without
it, or with ``--all-tests``, every mapped test runs on every mutant.  ``-j 2`` runs two mutants at
once, each in its own copy.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# module -> the tests that pin it, fastest-failing first (pytest -x stops at the first failure).
TESTS = {
    "selector/catalog.py": ["tests/test_catalog_validation.py", "tests/test_localai.py", "tests/test_decide_cli.py",
                            "tests/test_guide.py", "tests/test_fixtures.py"],
    "selector/requires.py": ["tests/test_requires.py", "tests/test_catalog_validation.py", "tests/test_localai.py",
                             "tests/test_fixtures.py", "tests/test_decide_cli.py"],
    "selector/engine/*": ["tests/test_new_vendor.py", "tests/test_every_device.py", "tests/test_requires.py", "tests/test_decide_cli.py",
                           "tests/test_fixtures.py", "tests/test_localai.py", "tests/test_localai_capability.py",
                           "tests/test_engine_properties.py", "tests/test_state_versions.py",
                           "tests/test_bench.py", "tests/test_probe_fallbacks.py",  # --policy measured; access words
                           "tests/test_catalog_validation.py", "tests/test_windows_macos.py", "tests/test_labels.py"],
    "probes/linux/*": ["tests/test_probe_fallbacks.py", "tests/test_probe_linux.py", "tests/test_fixtures.py"],
    "probes/runtime_env.py": ["tests/test_probe_fallbacks.py", "tests/test_probe_devices.py", "tests/test_fixtures.py",
                              "tests/test_decide_cli.py"],
    "probes/util.py": ["tests/test_probe_fallbacks.py", "tests/test_probe_devices.py", "tests/test_fixtures.py"],
    "probes/host.py": ["tests/test_host.py", "tests/test_capture.py", "tests/test_fixtures.py"],
    "selector/render_install.py": ["tests/test_install.py", "tests/test_install_assets.py", "tests/test_bench.py"],
    "probes/inputs.py": ["tests/test_host.py", "tests/test_catalog_validation.py", "tests/test_decide_cli.py"],
    "selector/install/*": ["tests/test_unpack.py", "tests/test_download.py", "tests/test_github.py",
                           "tests/test_installer.py", "tests/test_resolve.py", "tests/test_states.py",
                           "tests/test_install_lock.py", "tests/test_unpack_gzip.py", "tests/test_install_record.py",
                           "tests/test_install_safety.py", "tests/test_install_audit.py", "tests/test_install.py",
                           "tests/test_install_assets.py", "tests/test_verify_install.py"],
    # the estimate's calibration: the published runs' tests hold it
    "selector/models/speed.py": ["tests/test_models.py", "tests/test_evidence.py"],
    # the plan's estimate, its gates and reasons (issue 32) are held by the published runs' tests
    "selector/models/planner.py": ["tests/test_models.py", "tests/test_plan_line.py", "tests/test_real_engine.py",
                                   "tests/test_evidence.py"],
    # plan --check: the engine's report, the comparison and what is kept, held by the real CPU build, the
    # stand-in builds and the H200's CUDA figures
    "selector/models/check.py": ["tests/test_serve.py", "tests/test_gpu_engine.py", "tests/test_check_cli.py"],
    "selector/models/engine_report.py": ["tests/test_serve.py", "tests/test_gpu_engine.py", "tests/test_check_cli.py"],
    "selector/models/measured.py": ["tests/test_check_cli.py"],
    "selector/serve.py": ["tests/test_serve.py", "tests/test_check_cli.py"],
    "selector/models/*": ["tests/test_models.py", "tests/test_plan_line.py", "tests/test_real_engine.py"],  # the real build holds the fit
    "selector/bench.py": ["tests/test_bench.py", "tests/test_real_engine.py"],
    # the runner (clean_env, run, _kill: --lines 313-392) and the judge; the whole suite takes hours
    "selector/verify.py": ["tests/test_verify.py", "tests/test_bench.py", "tests/test_verify_install.py",
                           "tests/test_first_hour.py"],
    "probes/memory.py": ["tests/test_models.py", "tests/test_fixtures.py"],
    "selector/evidence.py": ["tests/test_evidence.py", "tests/test_bench.py"],
    "selector/bandwidth.py": ["tests/test_gpu_table.py", "tests/test_evidence.py", "tests/test_described.py",
                              "tests/test_models.py"],
}


def survivors_in(log: str, module: str) -> set[tuple[str, str]]:
    """(change, line text) of each mutant of ``module`` a previous run reported as SURVIVED."""
    import re

    pat = re.compile(r"SURVIVED (\S+?):\d+ #\d+ (.+?)    \| (.*?)(?:  \((?:no test executes|error|timeout).*\))?$")
    out = set()
    with open(log, encoding="utf-8") as f:
        for line in f:
            m = pat.search(line.rstrip("\n"))
            if m and m.group(1) == module:
                out.add((m.group(2), m.group(3).strip()))
    return out


def tests_for(module: str) -> list[str]:
    if module in TESTS:
        return TESTS[module]
    pkg = os.path.dirname(module) + "/*"
    return TESTS.get(pkg, ["tests"])


# ---- mutants ----------------------------------------------------------------------------------

CMP = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE,
       ast.GtE: ast.Gt, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
       ast.LShift: ast.RShift, ast.RShift: ast.LShift, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd}
SYM = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.In: "in",
       ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.Add: "+", ast.Sub: "-", ast.Mult: "*",
       ast.Div: "/", ast.FloorDiv: "//", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|"}


def _skipped_nodes(tree) -> set[int]:
    """ids of nodes never mutated: docstrings, annotations, decorators, f-strings, imports."""
    skip: set[int] = set()

    def all_of(node):
        for n in ast.walk(node):
            skip.add(id(n))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                all_of(body[0])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for dec in node.decorator_list:  # @lru_cache(maxsize=8): tuning, not behaviour
                all_of(dec)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            all_of(node.returns)
        if isinstance(node, ast.arg) and node.annotation is not None:
            all_of(node.annotation)
        if isinstance(node, ast.AnnAssign):
            all_of(node.annotation)
        if isinstance(node, ast.JoinedStr):
            all_of(node)
        if isinstance(node, ast.ImportFrom):
            all_of(node)
    return skip


def _mutations(node):
    """(description, apply) for each mutation of this node; apply(node) changes it in place."""
    out = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            new = CMP.get(type(op))
            if new:
                def apply(n, i=i, new=new):
                    n.ops[i] = new()
                out.append((f"{SYM[type(op)]} -> {SYM[new]}", apply))
    elif isinstance(node, ast.BoolOp):
        new = ast.Or if isinstance(node.op, ast.And) else ast.And
        out.append(("and -> or" if new is ast.Or else "or -> and", lambda n, new=new: setattr(n, "op", new())))
    elif isinstance(node, ast.BinOp) and type(node.op) in BIN:
        if not (isinstance(node.op, ast.Add) and isinstance(node.left, (ast.Constant, ast.JoinedStr))
                and isinstance(getattr(node.left, "value", None), str)):
            new = BIN[type(node.op)]
            out.append((f"{SYM[type(node.op)]} -> {SYM[new]}", lambda n, new=new: setattr(n, "op", new())))
    elif isinstance(node, ast.Constant):
        v = node.value
        if v is True or v is False:
            out.append((f"{v} -> {not v}", lambda n: setattr(n, "value", not n.value)))
        elif isinstance(v, int) and not isinstance(v, bool):
            out.append((f"{v} -> {v + 1}", lambda n: setattr(n, "value", n.value + 1)))
        elif isinstance(v, str) and not any(c.isspace() for c in v) and len(v) < 80:
            out.append((f"{v!r} -> 'XX{v}XX'", lambda n: setattr(n, "value", f"XX{n.value}XX")))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append(("not x -> x", "unwrap"))
    elif isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value in (None, False)):
        # (return False -> None is equivalent wherever the answer is tested for truth; False -> True is made)
        out.append(("return x -> return None", lambda n: setattr(n, "value", ast.Constant(None))))
    elif isinstance(node, ast.Assign) and not (isinstance(node.value, ast.Constant) and node.value.value in (None, False)) \
            and not all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets):
        out.append(("x = e -> x = None", lambda n: setattr(n, "value", ast.Constant(None))))
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        out.append(("call deleted", "pass"))
    elif isinstance(node, ast.Continue):
        out.append(("continue -> break", "break"))
    elif isinstance(node, ast.Break):
        out.append(("break -> continue", "continue"))
    return out


class Mutant:
    def __init__(self, index, node_no, which, line, desc, stmt_line=None):
        self.index, self.node_no, self.which, self.line, self.desc = index, node_no, which, line, desc
        self.stmt_line = stmt_line or line  # the line coverage records for the statement holding the mutant
        self.status = "not run"


def _numbered(tree):
    return list(ast.walk(tree))


def mutants_of(source: str) -> list[Mutant]:
    tree = ast.parse(source)
    skip = _skipped_nodes(tree)
    lines = source.splitlines()
    stmt_of = {}
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.stmt):
            for node in ast.walk(stmt):
                stmt_of[id(node)] = stmt.lineno  # inner statements are walked later and overwrite
    out = []
    for no, node in enumerate(_numbered(tree)):
        if id(node) in skip or not hasattr(node, "lineno"):
            continue
        if "pragma: no mutate" in lines[node.lineno - 1]:
            continue
        for which, (desc, _) in enumerate(_mutations(node)):
            out.append(Mutant(len(out), no, which, node.lineno, desc, stmt_of.get(id(node))))
    return out


class _Replace(ast.NodeTransformer):
    def __init__(self, target, kind):
        self.target, self.kind = target, kind

    def generic_visit(self, node):
        super().generic_visit(node)
        if node is self.target:
            if self.kind == "unwrap":
                return node.operand
            if self.kind == "pass":
                return ast.Pass()
            if self.kind == "break":
                return ast.Break()
            if self.kind == "continue":
                return ast.Continue()
        return node


def mutated_source(source: str, m: Mutant) -> str:
    tree = ast.parse(source)
    node = _numbered(tree)[m.node_no]
    _, apply = _mutations(node)[m.which]
    if callable(apply):
        apply(node)
    else:
        tree = _Replace(node, apply).visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


# ---- running ----------------------------------------------------------------------------------

def make_copy() -> str:
    """A scratch copy of the work tree (fixtures linked, not copied: they are only read)."""
    dest = tempfile.mkdtemp(prefix="pick-mutate-")
    ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", "fixtures", ".pytest_cache", ".hypothesis")
    for name in os.listdir(ROOT):
        src = os.path.join(ROOT, name)
        if name in (".git", ".venv", ".pytest_cache", ".hypothesis", "__pycache__"):
            continue
        if name == "fixtures":
            os.symlink(src, os.path.join(dest, name))
        elif os.path.isdir(src):
            shutil.copytree(src, os.path.join(dest, name), symlinks=True, ignore=ignore)
        else:
            shutil.copy2(src, os.path.join(dest, name))
    return dest


def run_tests(copy: str, tests: list[str], timeout: float | None) -> tuple[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = copy + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--hypothesis-seed=0", *tests]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - t0
    dt = time.monotonic() - t0
    if p.returncode == 0:
        return "survived", dt
    if p.returncode in (1, 2, 3):  # a test failed, or collection/import broke on the mutant
        return "killed", dt
    return f"error rc={p.returncode}: {p.stdout[-500:]}{p.stderr[-500:]}", dt


# ---- which tests run which line (coverage) -----------------------------------------------------

_PLUGIN = """
import json
import os
import time

import pytest

DURATIONS = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # subprocesses take the test's id as their static context (the coveragerc reads this variable);
    # this process switches its dynamic context
    os.environ["PICK_MUTATE_TEST"] = item.nodeid
    import coverage

    cov = coverage.Coverage.current()
    if cov is not None:
        cov.switch_context(item.nodeid)
    t0 = time.monotonic()
    yield
    DURATIONS[item.nodeid] = time.monotonic() - t0
    if cov is not None:
        cov.switch_context("")
    os.environ.pop("PICK_MUTATE_TEST", None)


def pytest_sessionfinish(session):
    with open(os.path.join(os.path.dirname(__file__), "durations.json"), "w") as f:
        json.dump(DURATIONS, f)
"""


def tests_by_line(copy: str, modules: list[str], tests: list[str]):
    """({module: {line: test ids that execute it}}, {test id: seconds}), counting this process and every
    CLI subprocess a test starts; "" stands for "at import, outside any test".  None without coverage."""
    try:
        import coverage
    except ImportError:
        return None
    site = os.path.join(copy, ".mutcov")
    os.makedirs(site, exist_ok=True)
    with open(os.path.join(site, "sitecustomize.py"), "w", encoding="utf-8") as f:
        f.write("import coverage\ncoverage.process_startup()\n")
    with open(os.path.join(site, "mutcov_plugin.py"), "w", encoding="utf-8") as f:
        f.write(_PLUGIN)
    rc = os.path.join(site, "coveragerc")
    with open(rc, "w", encoding="utf-8") as f:
        f.write("[run]\nparallel = True\ndata_file = " + os.path.join(site, "data") + "\n"
                "context = ${PICK_MUTATE_TEST}\ninclude =\n"
                + "".join(f"    {os.path.join(copy, m)}\n" for m in modules))
    env = dict(os.environ, COVERAGE_PROCESS_START=rc, PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join([site, copy] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "mutcov_plugin",
           "--hypothesis-seed=0", *tests]
    p = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"the tests fail under coverage; cannot map lines to tests:\n{p.stdout[-2000:]}")
    cov = coverage.Coverage(config_file=rc)
    cov.combine(data_paths=[site])
    data = cov.get_data()
    out = {}
    for m in modules:
        by_line = data.contexts_by_lineno(os.path.join(copy, m)) or {}
        out[m] = {line: {c.split("|")[-1] for c in ctxs} for line, ctxs in by_line.items()}
    with open(os.path.join(site, "durations.json"), encoding="utf-8") as f:
        durations = json.load(f)
    shutil.rmtree(site, ignore_errors=True)
    return out, durations


def select_tests(m: Mutant, by_line: dict[int, set[str]] | None, tests: list[str], first=(),
                 durations=None) -> list[str] | None:
    """The tests to run on this mutant: those that execute its statement (with the module's own test
    files, ``first``, when the statement also runs at import); [] when no test reaches it.  The own
    files' tests come first, then the fastest: a mutant dies sooner, a survivor costs less."""
    if by_line is None:
        return tests
    ids = set(by_line.get(m.stmt_line, set()))
    if "" in ids:
        # run at import too (a module constant, a def line): every CLI test that imported it is in ids
        # already; the pytest process imported it outside any test, so add the module's own test files
        ids.discard("")
        ids |= {t for t in first if t not in ids}
    durations = durations or {}
    took: dict[str, float] = {}
    for i in ids:  # a parametrized test by its function: some ids hold a path of the scratch copy
        fn = i.split("[", 1)[0]
        took[fn] = took.get(fn, 0.0) + durations.get(i, 1.0)
    own = {t: n for n, t in enumerate(first)}
    # a whole file counts by what its tests took; it runs first of all, before any single test
    return sorted(took, key=lambda f: (own.get(f.split("::")[0], len(own)), "::" in f, took[f], f))


def _check_copy_is_imported(copy: str) -> None:
    env = dict(os.environ, PYTHONPATH=copy, PYTHONDONTWRITEBYTECODE="1")
    where = subprocess.run([sys.executable, "-c", "import probes, selector; print(probes.__file__, selector.__file__)"],
                           cwd=copy, env=env, capture_output=True, text=True).stdout.split()
    if len(where) != 2 or not all(w.startswith(os.path.realpath(copy)) or w.startswith(copy) for w in where):
        raise SystemExit(f"the scratch copy is not what Python imports ({where}); mutants would not run")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="+", help="source files, e.g. selector/catalog.py probes/linux/amd.py")
    ap.add_argument("--tests", nargs="+", help="test files to run per mutant (default: the module's mapping)")
    ap.add_argument("--sample", type=int, help="run a random sample of this many mutants per module")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    ap.add_argument("--lines", help="only mutants on these lines, e.g. 120-180")
    ap.add_argument("--jobs", "-j", type=int, default=1, help="mutants run at once, each in its own copy")
    ap.add_argument("--all-tests", action="store_true",
                    help="run every mapped test on each mutant, not only those that execute its line")
    ap.add_argument("--rerun", metavar="LOG",
                    help="only the mutants a previous run's output (LOG) reported as survivors, found again by "
                         "their change and line text, so edits that moved lines do not matter")
    ap.add_argument("--list", action="store_true", help="list the mutants; run nothing")
    ap.add_argument("--show", type=int, metavar="N", help="print mutant N of the (single) module as a diff")
    args = ap.parse_args(argv)

    copies: list[str] = []
    mapped: dict = {}
    totals = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean the scratch copies up on kill too
    try:
        for module in args.modules:
            module = os.path.relpath(os.path.abspath(module), ROOT)
            with open(os.path.join(ROOT, module), encoding="utf-8") as f:
                source = f.read()
            muts = mutants_of(source)
            lines = source.splitlines()
            if args.lines:
                lo, _, hi = args.lines.partition("-")
                muts = [m for m in muts if int(lo) <= m.line <= int(hi or lo)]
            if args.show is not None:
                import difflib

                m = muts[args.show]
                base = ast.unparse(ast.parse(source)).splitlines()
                sys.stdout.writelines(l + "\n" for l in difflib.unified_diff(
                    base, mutated_source(source, m).splitlines(), module, f"mutant {m.index}", lineterm=""))
                return 0
            rerun: set[int] = set()
            if args.rerun:  # with --sample too: both sets in one run, counted apart
                wanted = survivors_in(args.rerun, module)
                rerun = {m.index for m in muts if (m.desc, lines[m.line - 1].strip()) in wanted}
            sampled = set(range(len(muts))) if not args.rerun or args.sample else set()
            if args.sample and args.sample < len(muts):
                sampled = {m.index for m in random.Random(args.seed).sample(muts, args.sample)}
            muts = [m for m in muts if m.index in sampled | rerun]
            if args.list:
                for m in muts:
                    print(f"{module}:{m.line}: #{m.index} {m.desc}    | {lines[m.line - 1].strip()}")
                print(f"{module}: {len(muts)} mutants")
                continue
            while len(copies) < max(1, args.jobs):
                copies.append(make_copy())
                _check_copy_is_imported(copies[-1])
            tests = args.tests or [t for t in tests_for(module) if os.path.exists(os.path.join(copies[0], t))]
            for c in copies:
                with open(os.path.join(c, module), "w", encoding="utf-8") as f:
                    f.write(source)
            key = tuple(tests)
            if key not in mapped and not args.all_tests:
                # one coverage run of these tests maps every module given that uses them
                same = [os.path.relpath(os.path.abspath(x), ROOT) for x in args.modules]
                same = [x for x in same if (args.tests or tests_for(x)) == (args.tests or tests_for(module))]
                t0 = time.monotonic()
                mapped[key] = tests_by_line(copies[0], same, tests)
                if mapped[key] is not None:
                    print(f"coverage of {len(tests)} test file(s) mapped in {time.monotonic() - t0:.0f}s", flush=True)
            if mapped.get(key) is None:
                status, base = run_tests(copies[0], tests, None)
                if status != "survived":
                    print(f"{module}: the tests fail before any mutation ({status}); fix them first",
                          file=sys.stderr)
                    return 2
                by_line, durations = None, None
            else:
                by_line, durations = mapped[key][0][module], dict(mapped[key][1])
                base = sum(durations.values())
                for nodeid, took in list(durations.items()):  # a test function: all its parameters
                    fn = nodeid.split("[", 1)[0]
                    if fn != nodeid:
                        durations[fn] = durations.get(fn, 0.0) + took
                for nodeid, took in mapped[key][1].items():  # a whole file: all its tests
                    f = nodeid.split("::", 1)[0]
                    durations[f] = durations.get(f, 0.0) + took
            how = "all of them per mutant" if by_line is None else "per mutant, those that execute its line"

            def timeout_for(selected):
                if durations is None:
                    return 3 * base + 30
                return 3 * sum(durations.get(t, base) for t in selected) + 30
            print(f"{module}: {len(muts)} mutants, tests: {' '.join(tests)} ({base:.0f}s unmutated; {how})",
                  flush=True)
            survivors = []
            done = [0]
            lock = threading.Lock()
            free = list(copies)

            def one(m: Mutant) -> None:
                selected = select_tests(m, by_line, tests, tests_for(module), durations)
                if not selected:
                    m.status = "no test executes this line"
                else:
                    with lock:
                        copy = free.pop()
                    try:
                        with open(os.path.join(copy, module), "w", encoding="utf-8") as f:
                            f.write(mutated_source(source, m))
                        # the first test alone first: most mutants die there, without collecting the rest
                        m.status, _ = run_tests(copy, selected[:1], timeout_for(selected[:1]))
                        if m.status == "survived" and len(selected) > 1:
                            m.status, _ = run_tests(copy, selected[1:], timeout_for(selected[1:]))
                        with open(os.path.join(copy, module), "w", encoding="utf-8") as f:
                            f.write(source)
                    finally:
                        with lock:
                            free.append(copy)
                    if m.status == "timeout":
                        m.status = "killed"  # an endless loop is caught by the suite's time limit
                with lock:
                    done[0] += 1
                    n = done[0]
                    if m.status != "killed":
                        survivors.append(m)
                        print(f"  [{n}/{len(muts)}] SURVIVED {module}:{m.line} #{m.index} {m.desc}"
                              f"    | {lines[m.line - 1].strip()}"
                              + ("" if m.status == "survived" else f"  ({' '.join(m.status.split())[:300]})"),
                              flush=True)
                    elif n % 25 == 0:
                        print(f"  [{n}/{len(muts)}] {n - len(survivors)} killed so far", flush=True)

            with concurrent.futures.ThreadPoolExecutor(max_workers=len(copies)) as pool:
                list(pool.map(one, muts))
            lost = {m.index for m in survivors}
            if rerun:
                print(f"{module}: the earlier survivors: {len(rerun - lost)}/{len(rerun)} killed now", flush=True)
            if sampled:
                killed = len(sampled - lost)
                totals.append((module, killed, len(sampled)))
                pct = 100.0 * killed / len(sampled)
                print(f"{module}: {killed}/{len(sampled)} killed ({pct:.0f}%)"
                      + (f", sample of {args.sample} (seed {args.seed})" if args.sample else ""), flush=True)
        if len(totals) > 1:
            print("\nsummary")
            all_killed = sum(k for _, k, _ in totals)
            all_total = sum(t for _, _, t in totals)
            for module, killed, total in totals + [("all", all_killed, all_total)]:
                print(f"  {module:32} {killed:4}/{total:<4} {100.0 * killed / total if total else 100:5.1f}%")
        return 0
    finally:
        for c in copies:
            shutil.rmtree(c, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
