#!/usr/bin/env python3
"""Capture a GPU machine and what a real llama.cpp GPU build allocates there, in one timed run.

Run on a machine with an NVIDIA GPU (a device machine lent to a session: CUDA's compiler, no
network).  It
  1. records the machine: nvidia-smi, `pick-backend probe --json`, `pick-backend capture`;
  2. builds llama.cpp with CUDA from a source tarball (in the background) while it writes random-weight
     models at real models' widths (tests/engine_gguf.py REAL_SHAPES);
  3. for each case asks `pick-backend plan --json` for the launch line, then runs that line through
     `llama-fit-params --fit-print on` and a short `llama-server -lv 4` start, noting what the driver
     says the process holds on the GPU, and stops it with SIGINT so it prints its memory breakdown;
  4. runs llama-bench at several depths where time is left.
Everything goes into one archive under --out, re-packed after every step, so a run cut short keeps
what it did.  The tests read the archive's figures (tests/data/device/); docs/captures.md says how.

    python3 tools/device_capture.py --out DIR --src llama.cpp-SRC.tar.gz --build-script build_llama_cuda.sh
    python3 tools/device_capture.py --out DIR --bin ../shared/llama.cpp/bin --backend cpu   # a dry run here
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

# (model, ctx, slots, cache type, plan options): dense, sliding-window, MoE and tied; one and four
# slots; f16 and q8_0 caches; a GPU too small for the whole model (partial layers, experts on the CPU)
CASES = [
    ("llama3-8b-q4_0", 4096, 1, "f16", []),
    ("gemma3-4b-q8_0", 4096, 1, "f16", []),
    ("qwen3moe-30b-a3b-12l-q4_0", 4096, 1, "f16", []),
    ("qwen2.5-3b-tied-q8_0", 4096, 1, "f16", []),
    ("llama3-8b-q4_0", 32768, 1, "f16", []),
    ("gemma3-4b-q8_0", 32768, 1, "f16", []),
    ("qwen3moe-30b-a3b-12l-q4_0", 32768, 1, "q8_0", []),
    ("llama3-8b-q4_0", 8192, 4, "q8_0", []),
    ("gemma3-4b-q8_0", 8192, 4, "f16", []),
    ("qwen2.5-3b-tied-q8_0", 16384, 2, "q8_0", []),
    ("llama3-8b-q4_0", 4096, 1, "f16", ["--vram", "4G"]),
    ("qwen3moe-30b-a3b-12l-q4_0", 8192, 1, "f16", ["--vram", "3G"]),
]
BENCH = [("llama3-8b-q4_0", "0,4096,32768"), ("qwen3moe-30b-a3b-12l-q4_0", "0,4096,32768"),
         ("gemma3-4b-q8_0", "0,4096,32768"), ("qwen2.5-3b-tied-q8_0", "0,4096")]


class Run:
    def __init__(self, out: str, budget: float):
        self.t0, self.budget, self.out = time.monotonic(), budget, out
        self.work = os.path.join("/tmp", "device-capture")
        os.makedirs(os.path.join(self.work, "runs"), exist_ok=True)

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.t0)

    def log(self, msg: str) -> None:
        line = f"[{time.monotonic() - self.t0:6.1f}s] {msg}"
        print(line, flush=True)
        with open(os.path.join(self.work, "steps.log"), "a") as f:
            f.write(line + "\n")

    def save(self, name: str, text: str) -> None:
        with open(os.path.join(self.work, name), "w") as f:
            f.write(text)

    def pack(self) -> None:
        tmp = os.path.join(self.out, ".device-capture.tar.gz")
        with tarfile.open(tmp, "w:gz") as t:
            t.add(self.work, arcname="device-capture")
        os.replace(tmp, os.path.join(self.out, "device-capture.tar.gz"))


def sh(argv, timeout=60, env=None) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout + ("\n--- stderr ---\n" + p.stderr if p.stderr else "")
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, f"{type(e).__name__}: {e}"


def machine(r: Run) -> None:
    py = [sys.executable, "-m", "selector"]
    for name, argv in [("nvidia-smi-q.txt", ["nvidia-smi", "-q"]), ("nvidia-smi.txt", ["nvidia-smi"]),
                       ("uname.txt", ["uname", "-a"]), ("lscpu.txt", ["lscpu"]),
                       ("meminfo.txt", ["cat", "/proc/meminfo"]),
                       ("probe.json", py + ["probe", "--json"]), ("pick.txt", py + ["llamacpp"]),
                       ("capture.txt", py + ["capture", os.path.join(r.work, "capture")])]:
        rc, text = sh(argv, timeout=90)
        r.save(name, text)
        r.log(f"{name}: rc {rc}")


def start_build(r: Run, script: str, src: str):
    r.log("build started")
    f = open(os.path.join(r.work, "build.out"), "w")
    return subprocess.Popen(["bash", script, src, "/tmp/llama-cuda"], stdout=f, stderr=subprocess.STDOUT,
                            start_new_session=True)


def models(r: Run, names) -> dict:
    import engine_gguf
    os.makedirs("/tmp/models", exist_ok=True)
    paths = {}
    for n in names:
        paths[n] = engine_gguf.write(f"/tmp/models/{n}.gguf", n, tile=True)
        r.log(f"model {n}: {os.path.getsize(paths[n])} bytes")
    return paths


def finish_build(r: Run, proc) -> tuple[str, dict] | None:
    try:
        rc = proc.wait(timeout=max(1, r.left() - 60))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        r.log("build: out of time")
        return None
    lines = open(os.path.join(r.work, "build.out")).read().split("\n")
    r.log(f"build: rc {rc}")
    if rc != 0:
        return None
    env = dict(os.environ)
    for ln in lines:
        if ln.startswith("export LD_LIBRARY_PATH="):
            value = ln.split("=", 1)[1].split("${", 1)[0]  # the script appends any LD_LIBRARY_PATH set
            env["LD_LIBRARY_PATH"] = value + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    bindir = [ln for ln in lines if ln.strip()][-1].strip()
    return bindir, env


def plan(r: Run, model: str, ctx: int, slots: int, ctype: str, extra, backend: str) -> dict | None:
    argv = [sys.executable, "-m", "selector", "plan", "llamacpp", "--model", model, "--ctx-size", str(ctx),
            "--parallel", str(slots), "--cache-type-k", ctype, "--cache-type-v", ctype, "--backend", backend,
            "--json", *extra]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    try:
        return json.loads(p.stdout)
    except ValueError:
        r.log(f"plan failed (rc {p.returncode}): {p.stderr[-500:]}")
        return None


def fit_params(bindir: str, env: dict, args: list[str]) -> tuple[int, str]:
    keep = [a for a in args if a != "--no-kv-unified"]
    return sh([os.path.join(bindir, "llama-fit-params"), *keep, "--fit-print", "on"], timeout=120, env=env)


def server(r: Run, bindir: str, env: dict, args: list[str], log_path: str) -> dict:
    """Start llama-server with the plan's line, wait until it listens, read the driver, stop it."""
    argv = [os.path.join(bindir, "llama-server"), *args, "-lv", "4", "--host", "127.0.0.1", "--port", "18765"]
    with open(log_path, "w") as f:
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    seen, t = {}, time.monotonic()
    while time.monotonic() - t < min(240, r.left() - 20) and p.poll() is None:
        if "listening on" in open(log_path, errors="replace").read():
            seen["listening_s"] = round(time.monotonic() - t, 1)
            seen["apps"] = sh(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv"])[1]
            seen["gpu"] = sh(["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv"])[1]
            break
        time.sleep(0.25)
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    seen["rc"] = p.returncode
    return seen


def cases(r: Run, bindir: str, env: dict, paths: dict, backend: str, which: slice) -> None:
    for i, (name, ctx, slots, ctype, extra) in list(enumerate(CASES))[which]:
        if r.left() < 60:
            r.log("cases: out of time")
            return
        tag = f"{i:02d}-{name}-c{ctx}-p{slots}-{ctype}{'-' + '-'.join(extra).strip('-') if extra else ''}"
        pj = plan(r, paths[name], ctx, slots, ctype, extra, backend)
        if not pj or not pj.get("args"):
            r.log(f"{tag}: no launch line")
            continue
        run_env = {**env, **(pj.get("env") or {})}
        d = os.path.join(r.work, "runs", tag)
        os.makedirs(d, exist_ok=True)
        json.dump(pj, open(os.path.join(d, "plan.json"), "w"), indent=1)
        rc, text = fit_params(bindir, run_env, pj["args"])
        open(os.path.join(d, "fit-params.txt"), "w").write(f"rc {rc}\n{text}")
        seen = server(r, bindir, run_env, pj["args"], os.path.join(d, "server.log"))
        json.dump(seen, open(os.path.join(d, "driver.json"), "w"), indent=1)
        r.log(f"{tag}: fit-params rc {rc}, server {seen}")
        r.pack()


def bench(r: Run, bindir: str, env: dict, paths: dict, ngl: str, which: slice) -> None:
    for name, depths in BENCH[which]:
        if r.left() < 90:
            r.log("bench: out of time")
            return
        argv = [os.path.join(bindir, "llama-bench"), "-m", paths[name], "-ngl", ngl, "-fa", "1", "-b", "2048",
                "-ub", "512", "-ctk", "f16", "-ctv", "f16", "-p", "512", "-n", "128", "-d", depths, "-r", "3",
                "-o", "json"]
        rc, text = sh(argv, timeout=max(10, r.left() - 60), env=env)
        r.save(f"bench-{name}.json", text)
        r.log(f"bench {name}: rc {rc}")
        r.pack()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--src")
    ap.add_argument("--build-script")
    ap.add_argument("--bin", help="an existing build's bin directory (no build)")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--budget", type=float, default=540)
    ap.add_argument("--only", nargs="*", help="models to use (default: every one of CASES)")
    a = ap.parse_args()
    r = Run(a.out, a.budget)
    proc = start_build(r, a.build_script, a.src) if not a.bin else None
    machine(r)
    r.pack()
    global CASES, BENCH
    if a.only:
        CASES = [c for c in CASES if c[0] in a.only]
        BENCH = [b for b in BENCH if b[0] in a.only]
    paths = models(r, dict.fromkeys(c[0] for c in CASES))
    built = finish_build(r, proc) if proc else (a.bin, dict(os.environ))
    r.pack()
    if not built:
        return 1
    bindir, env = built
    for name, flag in (("version.txt", "--version"), ("list-devices.txt", "--list-devices")):
        r.save(name, sh([os.path.join(bindir, "llama-server"), flag], env=env)[1])
    ngl = "0" if a.backend == "cpu" else "99"
    # the four shapes at 4096 first, then the 8B's speed at depth, then the rest
    cases(r, bindir, env, paths, a.backend, slice(0, 4))
    bench(r, bindir, env, paths, ngl, slice(0, 1))
    cases(r, bindir, env, paths, a.backend, slice(4, None))
    bench(r, bindir, env, paths, ngl, slice(1, None))
    r.log("done")
    r.pack()
    return 0


if __name__ == "__main__":
    sys.exit(main())
