"""Measured speed: run an installed build's ``llama-bench``, keep the results, say which are fresh.

One record per (recipe, build directory, device, model, test) in ``<cache>/pick-backend/bench/``
(selector/store.py: written whole or not at all).  A record carries the build's version, the
device's driver and the device itself; when any of them differs from the machine now, the record
is stale: shown as such and never used by ``--policy measured``.  A run that crashed, hung, printed
no JSON or ran without the GPU is recorded as failed, with the tail of its output, and never wins.
"""

from __future__ import annotations

import json
import os

from selector.engine import device_key  # noqa: F401 - the key records are filed under

OK, FAILED = "ok", "failed"
TAIL = 12  # lines of output kept as the evidence of a failure


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
    n_p, n_g = row.get("n_prompt", 0), row.get("n_gen", 0)
    if n_p and not n_g:
        return f"pp{n_p}"
    if n_g and not n_p:
        return f"tg{n_g}"
    if n_p and n_g:
        return f"pp{n_p}+tg{n_g}"
    return None


def parse(text: str) -> list[dict]:
    """llama-bench ``-o json``: a JSON array of one object per test.  Raises ValueError with why."""
    start = text.find("[")
    if start < 0:
        raise ValueError("no JSON array in the output")
    try:
        rows = json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError as e:
        raise ValueError(f"the JSON does not parse ({e.msg} at character {e.pos})") from None
    if not isinstance(rows, list) or not rows:
        raise ValueError("the JSON is not a list of results")
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise ValueError(f"result {i} is not an object")
        for k in ("avg_ts", "stddev_ts"):
            if not isinstance(r.get(k), (int, float)) or isinstance(r.get(k), bool) or r[k] < 0:
                raise ValueError(f"result {i}: {k} is {r.get(k)!r}, not a speed")
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


def records(cache: str) -> list[dict]:
    from selector import store

    return [r for _p, r in store.records(cache, "bench")
            if isinstance(r.get("recipe"), str) and isinstance(r.get("device"), dict) and isinstance(r.get("test"), str)]


def staleness(rec: dict, installed: dict, profile, devices: dict) -> str | None:
    """Why a record no longer describes this machine (None: fresh).  ``devices``: devices_of(profile)."""
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


def fresh_measurements(cache: str, installed: dict, profile) -> dict:
    """{recipe: [fresh ok records]} for --policy measured."""
    out: dict = {}
    devices = devices_of(profile)
    for r in records(cache):
        if r.get("status") == OK and staleness(r, installed, profile, devices) is None:
            out.setdefault(r["recipe"], []).append(r)
    return out
