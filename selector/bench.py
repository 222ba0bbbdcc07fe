"""Measured speed: run an installed build's ``llama-bench``, keep the results, say which are fresh.

One record per (recipe, build directory, device, model, test) in ``<cache>/pick-backend/bench/``
(selector/store.py: written whole or not at all).  A record carries the build's version, the
device's driver and the device itself; when any of them differs from the machine now, the record
is stale: shown as such and never used by ``--policy measured``.  A run that crashed, hung, printed
no JSON or ran without the GPU is recorded as failed, with the tail of its output, and never wins.
"""

from __future__ import annotations

import json
import math
import os

from selector.engine import device_key  # noqa: F401 - the key records are filed under

OK, FAILED = "ok", "failed"
TAIL = 12  # lines of output kept as the evidence of a failure
# a test whose runs' standard deviation is more than this share of their mean says more about the
# machine's other work than about the build (llama-bench's own runs of one build on an idle machine
# vary by 1-3%): measured once more, and if still so, kept as noisy and never chosen
NOISY = 0.10


def tools(catalog: str) -> dict:
    """The benchmark tool of each recipe of a catalog (``catalogs/<catalog>-bench.json``), those whose
    output this module reads (``llama-bench-json``) and those it does not (with a ``note`` why)."""
    path = os.path.join(os.path.dirname(__file__), "catalogs", f"{catalog}-bench.json")
    try:
        with open(path, encoding="utf-8") as f:
            recipes = json.load(f).get("recipes", {})
    except OSError:
        return {}
    return {k: v for k, v in recipes.items() if isinstance(v, dict)} if isinstance(recipes, dict) else {}


def spec_of(catalog: str, recipe: str) -> dict | None:
    """The benchmark tool of the recipe, when it prints what this module reads."""
    r = tools(catalog).get(recipe)
    return r if r and r.get("parser") == "llama-bench-json" else None


def none_words(catalog: str, recipe: str) -> str:
    """Why a recipe has no tool this module reads, in words."""
    r = tools(catalog).get(recipe)
    return r["note"] if r and r.get("note") else "none is known for it"


def measurable(catalog: str) -> frozenset:
    """The recipes ``bench`` can measure: a benchmark tool whose output it reads."""
    return frozenset(k for k, v in tools(catalog).items() if v.get("parser") == "llama-bench-json")


class BenchError(Exception):
    """The benchmark could not be run at all (bad input): said in words."""


def devices_of(profile) -> dict:
    """{device key: (type, Profile record)} for every device of the machine, keyed as the engine
    keys its Devices (engine.device_key)."""
    out: dict = {"cpu": ("cpu", None)}
    for g in profile.amd_gpus:
        out[g.unique_id or (g.pci.bus_id if g.pci else None) or f"amd_gpu:{g.index}"] = ("amd_gpu", g)
    for g in profile.nvidia_gpus:
        out[g.uuid or (g.pci.bus_id if g.pci else None) or f"nvidia_gpu:{g.index}"] = ("nvidia_gpu", g)
    if profile.metal.available:
        out["metal:0"] = ("metal", None)
    return out


def driver_of(profile, kind: str, gpu) -> str | None:
    """What a driver upgrade changes: NVIDIA's driver version; amdgpu and i915 are in the kernel;
    Metal comes with macOS."""
    if kind == "cpu":
        return None
    if kind == "nvidia_gpu":
        return getattr(gpu, "driver_version", None)
    return f"{profile.os.name} {profile.os.version}"


def test_name(row: dict) -> str | None:
    """llama-bench's test of a result: pp512, tg128, pp512+tg128; at a depth (-d), tg128@d4096."""
    n_p, n_g, depth = row.get("n_prompt", 0), row.get("n_gen", 0), row.get("n_depth") or 0
    at = f"@d{depth}" if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0 else ""
    if n_p and not n_g:
        return f"pp{n_p}{at}"
    if n_g and not n_p:
        return f"tg{n_g}{at}"
    if n_p and n_g:
        return f"pp{n_p}+tg{n_g}{at}"
    return None


def depth_of(test: str) -> int:
    """The depth of a test name: tg128@d4096 -> 4096, tg128 -> 0."""
    return int(test.rsplit("@d", 1)[1]) if "@d" in test else 0


def _speed(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def parse(text: str) -> list[dict]:
    """llama-bench ``-o json``: a JSON array of one object per test, after whatever lines the build
    printed first (ggml_vulkan's device lines, a timestamp).  Raises ValueError with why."""
    rows, why = None, "no JSON array in the output"
    decoder = json.JSONDecoder()
    first = text.lstrip()
    if first.startswith("{"):
        try:
            if isinstance(decoder.raw_decode(first)[0], dict):
                raise ValueError("the JSON is one object, not llama-bench's list of results")
        except json.JSONDecodeError:
            pass
    pos = 0
    while rows is None:
        at = text.find("[", pos)
        if at < 0:
            raise ValueError(why)
        if at == 0 or text[at - 1] == "\n":  # an array starts a line: llama-bench's output
            try:
                got = decoder.raw_decode(text[at:])[0]
            except ValueError as e:
                why = f"the JSON does not parse ({e.msg} at character {e.pos})"
            else:
                if isinstance(got, list):
                    rows = got
        pos = at + 1
    if not rows:
        raise ValueError("the JSON is an empty list: no results")
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise ValueError(f"result {i} is not an object")
        if not _speed(r.get("avg_ts")):
            raise ValueError(f"result {i}: avg_ts is {r.get('avg_ts')!r}, not a speed (a positive finite number)")
        sd = r.get("stddev_ts")
        if not (isinstance(sd, (int, float)) and not isinstance(sd, bool) and math.isfinite(sd) and sd >= 0):
            raise ValueError(f"result {i}: stddev_ts is {sd!r}, not a spread")
        if test_name(r) is None:
            raise ValueError(f"result {i}: neither n_prompt nor n_gen is set")
        out.append(r)
    return out


def saw_gpu(rows: list[dict], expect_gpu: bool) -> bool:
    """llama-bench names the backends it ran on and the GPUs it saw (``backends``, ``gpu_info``)."""
    if not expect_gpu:
        return True
    for r in rows:
        backends = str(r.get("backends", ""))
        if backends and backends.upper() != "CPU" and r.get("n_gpu_layers", 1) != 0 and r.get("gpu_info", "x"):
            return True
    return False


def noisy_tests(result: dict) -> list[str]:
    """The tests of a judged run whose spread is large against their mean."""
    return [t for t, x in result.get("tests", {}).items()
            if x.get("avg_ts") and x.get("stddev_ts", 0) > NOISY * x["avg_ts"]]


def spread(result: dict) -> float:
    """The largest relative spread of a run's tests (infinite for a failed run): the steadier run wins."""
    xs = [x["stddev_ts"] / x["avg_ts"] for x in result.get("tests", {}).values() if x.get("avg_ts")]
    return max(xs) if xs and result.get("status") == OK else math.inf


def identity(path: str | None) -> dict | None:
    """A build outside the cache (the system one) as a file: a new build on PATH makes its records stale."""
    if not path:
        return None
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return {"name": os.path.basename(path), "path": real, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def tail(text: str, n: int = TAIL) -> list[str]:
    lines = [x.rstrip() for x in text.splitlines() if x.strip()]
    return lines[-n:]


def run(argv: list[str], env: dict, timeout: float) -> dict:
    """Run one benchmark in its own process group (verify's runner): {status, stdout, stderr,
    seconds, why}.  A timeout, Ctrl-C or SIGTERM ends the whole group (llama-bench and anything it
    started); Ctrl-C and SIGTERM then raise KeyboardInterrupt."""
    from selector.verify import run as run_build

    r = run_build(argv, env, timeout)
    res = {"stdout": r["stdout"], "stderr": r["stderr"], "seconds": r["seconds"]}
    if r["start_error"]:
        return {**res, "status": FAILED, "why": f"cannot start: {r['start_error']}"}
    if r["timed_out"]:
        return {**res, "status": FAILED, "why": f"no result within {timeout:g} s (hung); stopped"}
    if r["status"] != 0:
        how = f"killed by signal {-r['status']}" if r["status"] < 0 else f"exit status {r['status']}"
        return {**res, "status": FAILED, "why": f"crashed ({how})"}
    return {**res, "status": OK, "why": ""}


def record_key(recipe: str, dirname: str, dev_key: str, model_key: str, test: str) -> str:
    return f"{recipe}/{dirname}/{dev_key}/{model_key}/{test}"


def model_key(path: str) -> str:
    """A model file as the same model: its name and size (a re-download of the same file matches)."""
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    return f"{os.path.basename(path)}:{size}"


def save(cache: str, rec: dict) -> None:
    from selector import store

    store.write(store.path(cache, "bench", record_key(rec["recipe"], rec["dir"], rec["device"]["key"],
                                                      rec["model"]["key"], rec["test"])), rec)


def records(cache: str, bad: list | None = None) -> list[dict]:
    """The readable records; the path of every file that is not one goes to ``bad`` (never used)."""
    import os as _os

    from selector import store

    out = []
    base = _os.path.join(cache, store.DIR, "bench")
    try:
        names = sorted(n for n in _os.listdir(base) if n.endswith(".json"))
    except OSError:
        return out
    for n in names:
        path = _os.path.join(base, n)
        r = store.read(path)
        if r is not None and _valid(r):
            out.append(r)
        elif bad is not None:
            bad.append(path)
    return out


def _valid(r: dict) -> bool:
    dev, model = r.get("device"), r.get("model")
    if not (isinstance(r.get("recipe"), str) and isinstance(r.get("backend"), str) and isinstance(r.get("test"), str)
            and isinstance(r.get("dir"), str) and isinstance(r.get("at"), str)
            and isinstance(dev, dict) and isinstance(dev.get("key"), str) and isinstance(model, dict)
            and isinstance(model.get("key"), str) and r.get("status") in (OK, FAILED)):
        return False
    return r["status"] != OK or (_speed(r.get("avg_ts")) and isinstance(r.get("stddev_ts"), (int, float)))


def staleness(rec: dict, installed: dict, profile, devices: dict) -> str | None:
    """Why a record no longer describes this machine (None: fresh).  ``devices``: devices_of(profile)."""
    if rec.get("dir") == "system":  # the build is the file PATH names now, as the pick runs it
        was = rec.get("binary") if isinstance(rec.get("binary"), dict) else {}
        now = identity(profile.executables.get(was.get("name") or "llama-server"))
        if now is None:
            return "no build of that name is on PATH now"
        if now != was:
            return "the build on PATH is not the one measured"
    else:
        version = installed.get(rec["recipe"], {}).get(rec.get("dir"))
        if version is None:
            return "the build is no longer installed"
        if version != rec.get("version"):
            return f"the build is now {version}, measured {rec.get('version')}"
    key = rec["device"].get("key")
    if key not in devices:
        return "the device is no longer here"
    now = driver_of(profile, *devices[key])
    if now != rec["device"].get("driver"):
        return f"the driver is now {now}, measured with {rec['device'].get('driver')}"
    return None


def fresh_measurements(cache: str, installed: dict, profile, bad: list | None = None) -> dict:
    """{recipe: [fresh ok records]} for --policy measured; unreadable records' paths go to ``bad``."""
    out: dict = {}
    devices = devices_of(profile)
    for r in records(cache, bad):
        if r.get("status") == OK and staleness(r, installed, profile, devices) is None:
            out.setdefault(r["recipe"], []).append(r)
    return out


def tool_of(cache: str, recipe: str, dirname: str, binary: str | None, tool: str, os_name: str,
            system: bool = False) -> tuple[str | None, str | None]:
    """(the build's server, its benchmark tool beside it).  The system build is the server on PATH;
    its tool is beside that name, else beside the file a link names (a package's bin/ links)."""
    import shutil

    from selector.verify import installed_binary

    suffix = ".exe" if os_name == "windows" else ""
    if system:
        server = shutil.which(binary) if binary else None
        if not server:
            return None, None
        for d in dict.fromkeys((os.path.dirname(server), os.path.dirname(os.path.realpath(server)))):
            if os.path.isfile(os.path.join(d, tool + suffix)):
                return server, os.path.join(d, tool + suffix)
        return server, os.path.join(os.path.dirname(server), tool + suffix)
    server = installed_binary(os.path.join(cache, "bin", recipe, dirname), binary, os_name)
    return server, (os.path.join(os.path.dirname(server), tool + suffix) if server else None)


def judge(head: dict, r: dict, tests: list[str], expect_gpu: bool) -> dict:
    """One benchmark run as a result: ok with each test's figures (keyed as test_name keys them), or failed
    with why and the tail of its output (it crashed, printed no JSON, ran on the CPU, lacked a test)."""
    text = r["stdout"]
    evidence = tail(r["stderr"] or r["stdout"])
    if r["status"] != OK:
        return {**head, "status": FAILED, "why": r["why"], "evidence": evidence, "tests": {}}
    try:
        rows = parse(text)
    except ValueError as e:
        return {**head, "status": FAILED, "why": f"unreadable output: {e}", "evidence": tail(text) or evidence,
                "tests": {}}
    if not saw_gpu(rows, expect_gpu):
        return {**head, "status": FAILED, "why": "it ran on the CPU: llama-bench saw no GPU",
                "evidence": evidence, "tests": {}}
    got = {}
    for row in rows:
        t = test_name(row)
        got[t] = {"avg_ts": float(row["avg_ts"]), "stddev_ts": float(row["stddev_ts"]),
                  "samples_ts": [float(x) for x in row.get("samples_ts", []) if isinstance(x, (int, float))],
                  "build": {"commit": row.get("build_commit"), "number": row.get("build_number")},
                  "gpu_info": row.get("gpu_info"), "backends": row.get("backends")}
    absent = [t for t in tests if t not in got]
    if absent:
        return {**head, "status": FAILED, "why": f"no result for {', '.join(absent)}", "evidence": evidence,
                "tests": got}
    return {**head, "status": OK, "why": "", "evidence": [], "tests": got}


def test_record(out: dict, test: str) -> dict:
    """The record of one test of a judged run (save() files it under its test, depth included)."""
    t = out["tests"].get(test)
    own = {"build_version": out["build_version"]} if out.get("build_version") else {}
    depth = depth_of(test)
    if out["status"] == "ok" and t:
        return {"test": test, "depth": depth, "status": "ok", "version": out["version"], **own, **t}
    return {"test": test, "depth": depth, "status": "failed", "why": out["why"], "evidence": out["evidence"]}
