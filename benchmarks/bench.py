"""pick-backend benchmark.  Run: python benchmarks/bench.py [--runs N]

1. Whole-process wall time as ratios against a baseline measured in the same loop (A B A B ...),
   median of N runs after a warm-up: these machines are noisy, ratios are what carries over.
2. Engine throughput: recipe decisions per second over every fixture Profile x every recipe of
   every bundled catalog, in-process.
3. Probe scaling: probe time for synthetic captures with 1, 8, 64 and 256 GPUs.
4. Fleet: `pick-backend pick --profile FILE.jsonl --all --json` over 1,000 saved Profiles.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
MACHINES = os.path.join(ROOT, "fixtures", "machines")
PY = sys.executable
EXE = [PY, "-m", "selector"]
# A user's `pip install` byte-compiles the package; PYTHONDONTWRITEBYTECODE (set on some CI and
# sandbox machines) would make every run recompile every module instead.  Measure what users get.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def compile_package():
    import compileall

    for pkg in ("probes", "selector"):
        compileall.compile_dir(os.path.join(ROOT, pkg), quiet=1)


def wall(cmd, env=None, tty=False) -> float:
    env = env or ENV
    t0 = time.perf_counter()
    if tty:
        import pty

        pid, fd = pty.fork()
        if pid == 0:
            os.execvpe(cmd[0], cmd, env)
        while True:
            try:
                if not os.read(fd, 65536):
                    break
            except OSError:
                break
        os.waitpid(pid, 0)
    else:
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - t0


def paired(a, b, runs, tty=False):
    wall(a, tty=tty), wall(b)  # warm-up
    ta, tb, ratios = [], [], []
    for _ in range(runs):
        x = wall(a, tty=tty)
        y = wall(b)
        ta.append(x)
        tb.append(y)
        ratios.append(x / y)
    return statistics.median(ta), statistics.median(tb), statistics.median(ratios)


def whole_process(runs):
    rows = []
    click_json = [PY, "-c", "import click, json"]
    rich_base = [PY, "-c", "import click, rich.console, rich.table"]
    rows.append(("pick-backend llamacpp --json", "python -c 'import click, json'",
                 *paired(EXE + ["llamacpp", "--json"], click_json, runs), 1.5))
    rows.append(("pick-backend llamacpp (pipe)", "python -c 'import click, rich...'",
                 *paired(EXE + ["llamacpp"], rich_base, runs), 1.3))
    rows.append(("pick-backend llamacpp (pty)", "python -c 'import click, rich...'",
                 *paired(EXE + ["llamacpp"], rich_base, runs, tty=True), 1.3))
    archspec = shutil.which("archspec", path=os.path.dirname(PY) + os.pathsep + os.environ.get("PATH", ""))
    if archspec:
        rows.append(("pick-backend probe --json", "archspec cpu",
                     *paired(EXE + ["probe", "--json"], [archspec, "cpu"], runs), None))
    return rows


HEAVY = ("requests", "cpuinfo", "rich")  # never on the --json pick path (README, "Performance")


def heavy_imports() -> tuple[list[str], float]:
    """Heavy modules imported by `pick-backend llamacpp --json`, and distro's own import cost (ms)."""
    r = subprocess.run([PY, "-X", "importtime", *EXE[1:], "llamacpp", "--json"], capture_output=True, text=True,
                       env=ENV, check=False)
    seen, distro_us = set(), 0
    for line in r.stderr.splitlines():
        if "|" not in line:
            continue
        name = line.split("|")[-1].strip()
        seen.add(name.split(".")[0])
        if name == "distro":
            distro_us = int(line.split("|")[1])
    return sorted(seen & set(HEAVY)), distro_us / 1000


def engine_throughput():
    from probes import probe
    from probes.host import CaptureHost
    from selector import catalog, engine

    profiles = [probe(CaptureHost(os.path.join(MACHINES, d))) for d in sorted(os.listdir(MACHINES))
                if os.path.isfile(os.path.join(MACHINES, d, "capture.json"))]
    cats = [catalog.load(n) for n in catalog.BUILTIN if os.path.exists(catalog.resolve_path(n))]
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 2.0:
        for p in profiles:
            m = engine.Machine(p)
            for c in cats:
                for r in c.recipes:
                    engine.decide(p, c, r, machine=m)
                    n += 1
    return n / (time.perf_counter() - t0), len(profiles), sum(len(c.recipes) for c in cats)


def synthetic_capture(root: str, gpus: int) -> None:
    """A Linux capture with `gpus` RX 7900 XTX cards: KFD nodes, DRM devices, PCI functions."""
    fs = os.path.join(root, "fs")

    def put(path, text):
        p = os.path.join(fs, path.lstrip("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)

    def link(path, target):
        p = os.path.join(fs, path.lstrip("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        os.symlink(target, p)

    put("/etc/os-release", 'ID=ubuntu\nVERSION_ID="24.04"\n')
    put("/proc/cpuinfo", "processor\t: 0\nmodel name\t: AMD EPYC 9654\n")
    put("/sys/class/kfd/kfd/topology/nodes/0/properties", "cpu_cores_count 96\nsimd_count 0\ngfx_target_version 0\n")
    for i in range(gpus):
        bus, bdf = i + 1, f"0000:{(i + 1) % 256:02x}:{(i // 256):02x}.0"
        dev = f"/sys/devices/pci0000:00/{bdf}"
        put(f"/sys/class/kfd/kfd/topology/nodes/{i + 1}/properties",
            f"cpu_cores_count 0\nsimd_count 192\ngfx_target_version 110000\nvendor_id 4098\ndevice_id 29772\n"
            f"location_id {bus << 8}\ndomain 0\ndrm_render_minor {128 + i}\n")
        for attr, val in (("vendor", "0x1002"), ("device", "0x744c"), ("revision", "0xc8"), ("class", "0x030000"),
                          ("mem_info_vram_total", "25753026560")):
            put(f"{dev}/{attr}", val + "\n")
        put(f"{dev}/board_info", "type : oam\n")
        link(f"/sys/class/drm/renderD{128 + i}/device", f"../../../devices/pci0000:00/{bdf}")
        link(f"/sys/bus/pci/devices/{bdf}", f"../../../devices/pci0000:00/{bdf}")
    with open(os.path.join(root, "capture.json"), "w") as f:
        json.dump({"format": 1, "platform": {"system": "Linux", "machine": "x86_64", "release": "6.8.0"},
                   "nvml": {"error": "LibraryNotFound"}}, f)


def probe_scaling():
    from probes import probe
    from probes.host import CaptureHost

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (1, 8, 64, 256):
            root = os.path.join(tmp, f"g{n}")
            synthetic_capture(root, n)
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                prof = probe(CaptureHost(root))
                times.append(time.perf_counter() - t0)
            assert len(prof.amd_gpus) == n
            out.append((n, statistics.median(times)))
    return out


def fleet(count=1000):
    from probes import probe
    from probes.host import CaptureHost

    profiles = [probe(CaptureHost(os.path.join(MACHINES, d))).to_dict() for d in sorted(os.listdir(MACHINES))
                if os.path.isfile(os.path.join(MACHINES, d, "capture.json"))]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fleet.jsonl")
        with open(path, "w") as f:
            for i in range(count):
                doc = dict(profiles[i % len(profiles)])
                doc["name"] = f"node{i:04d}"
                f.write(json.dumps(doc) + "\n")
        t = wall(EXE + ["pick", "--profile", path, "--all", "--json"])
    return count / t, t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    compile_package()
    print(f"pick-backend benchmark · {os.cpu_count()} cores · Python {sys.version.split()[0]}\n")
    print("1. whole process (median of paired runs)")
    print(f"   {'command':34} {'baseline':36} {'A s':>7} {'B s':>7} {'A/B':>6}  target")
    for a, b, ta, tb, ratio, target in whole_process(args.runs):
        verdict = "" if target is None else ("ok" if ratio <= target else "MISSED") + f" (<= {target})"
        print(f"   {a:34} {b:36} {ta:7.3f} {tb:7.3f} {ratio:6.2f}  {verdict}")
    heavy, distro_ms = heavy_imports()
    print(f"\n   --json pick path imports {', '.join(heavy) if heavy else 'none'} of {', '.join(HEAVY)} "
          f"({'MISSED' if heavy else 'ok'}); distro costs {distro_ms:.1f} ms of it")
    rate, nprof, nrec = engine_throughput()
    print(f"\n2. engine: {rate:,.0f} recipe decisions/s over {nprof} fixture profiles x {nrec} recipes "
          f"({'ok' if rate >= 20000 else 'MISSED'}, target >= 20,000)")
    print("\n3. probe scaling (synthetic captures, in-process, median of 5)")
    for n, t in probe_scaling():
        print(f"   {n:4d} GPUs  {t * 1000:8.1f} ms  {t * 1000 / n:6.2f} ms/GPU")
    rate, t = fleet()
    print(f"\n4. fleet: 1,000 profiles in {t:.2f} s = {rate:,.0f} profiles/s "
          f"({'ok' if rate >= 500 else 'MISSED'}, target >= 500)")


if __name__ == "__main__":
    main()
