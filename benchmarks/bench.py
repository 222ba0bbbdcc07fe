"""pick-backend benchmark.  Run: python benchmarks/bench.py [--runs N]

1. Whole-process wall time as ratios against a baseline measured in the same loop (A B A B ...),
   median of N runs after a warm-up: these machines are noisy, ratios are what carries over.
2. Engine throughput: recipe decisions per second over every fixture Profile x every recipe of
   every bundled catalog, in-process.
3. Probe scaling: probe time for synthetic captures with 1, 8, 64 and 256 GPUs.
4. Fleet: `pick-backend pick --profile FILE.jsonl --all --json` over 1,000 saved Profiles.
5. Install: `pick-backend install llamacpp` of a llama.cpp-like .tar.gz from a server on 127.0.0.1
   against `curl` + `sha256sum` + `tar -xzf` on the same bytes, paired in the same loop; peak memory
   (max RSS) of the install process.
6. One file: `python pick-backend.pyz check` and `llamacpp --json` against the installed command
   with the same interpreter, paired; the file's size and its first start (which unpacks it).
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
# sandbox machines) would make every run recompile every module instead, and PYTHONUNBUFFERED (set
# there too) would make every printed line its own write.  Measure what users get.
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")}


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


HEAVY = ("requests", "cpuinfo", "rich", "gguf", "numpy")  # never on the --json pick path (README, "Performance")


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


def engine_many_gpus(gpus: int = 64) -> float:
    """Decisions/s for one synthetic node of ``gpus`` identical GPUs (every device is judged)."""
    import tempfile

    from probes import probe
    from probes.host import CaptureHost
    from selector import catalog, engine

    with tempfile.TemporaryDirectory() as d:
        synthetic_capture(d, gpus)
        p = probe(CaptureHost(d))
    cat = catalog.load("lemonade")
    m = engine.Machine(p)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        for r in cat.recipes:
            engine.decide(p, cat, r, machine=m)
            n += 1
    return n / (time.perf_counter() - t0)


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


def make_llama_archive(path: str, unpacked_mb: int) -> None:
    """A llama.cpp-like release: a few big shared libraries that compress to about half (like the
    CUDA/ROCm builds: 163 MB .tar.gz for 300 MB unpacked), plus the binary."""
    import gzip
    import io
    import random
    import tarfile

    rnd = random.Random(42)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w|") as t:
        def add(name, data, mode=0o644):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            t.addfile(info, io.BytesIO(data))

        add("llama-b1/llama-server", b"#!/bin/sh\necho llama-server\n" + b"\0" * 4000, 0o755)
        pattern = (b"ggml tensor kernel " * 8000)[:136 << 10]

        class Blocks(io.RawIOBase):  # generated as tarfile reads: the benchmark itself stays small
            def __init__(self, n):
                self.n, self.buf = n, b""

            def readable(self):
                return True

            def read(self, size=-1):
                while len(self.buf) < size and self.n:
                    self.buf += rnd.randbytes(120 << 10) + pattern  # 256 KiB: half random, half a pattern
                    self.n -= 1
                out, self.buf = self.buf[:size], self.buf[size:]
                return out

        left, i = unpacked_mb, 0
        while left > 0:
            mb = min(left, 50)
            info = tarfile.TarInfo(f"llama-b1/libggml-part{i}.so")
            info.size, info.mode = mb << 20, 0o644
            t.addfile(info, Blocks(mb * 4))
            left -= mb
            i += 1


def peak_rss_mib(pid: int, proc) -> float:
    """Peak resident memory of ``pid`` (VmHWM, polled until it exits; Linux), else ru_maxrss."""
    peak = 0.0
    path = f"/proc/{pid}/status"
    while proc.poll() is None:
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) / 1024)
        except OSError:
            pass
        time.sleep(0.01)
    return peak


def install_speed(runs: int, unpacked_mb: int):
    """(ours s, baseline s, ratio, peak RSS MiB, archive MiB), median of paired runs."""
    import hashlib
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    tmp = tempfile.mkdtemp(prefix="pb-bench-")
    try:
        tag = json.load(open(os.path.join(ROOT, "selector", "catalogs", "lemonade-versions.json")))["llamacpp"]["vulkan"]
        asset = f"llama-{tag}-bin-ubuntu-vulkan-x64.tar.gz"
        archive = os.path.join(tmp, asset)
        make_llama_archive(archive, unpacked_mb)
        size = os.path.getsize(archive)
        h = hashlib.sha256()
        with open(archive, "rb") as f:
            for b in iter(lambda: f.read(1 << 20), b""):
                h.update(b)
        digest = "sha256:" + h.hexdigest()

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                if self.path.startswith("/repos/"):
                    body = json.dumps({"assets": [{"name": asset, "size": size, "digest": digest,
                                                   "browser_download_url": f"{url}/dl/{asset}"}]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(size))
                self.end_headers()
                with open(archive, "rb") as f:
                    shutil.copyfileobj(f, self.wfile, 1 << 20)

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        env = dict(ENV, PICK_BACKEND_GITHUB_API=url, GITHUB_TOKEN="")
        cache, out = os.path.join(tmp, "cache"), os.path.join(tmp, "out")
        ours = EXE + ["--root", os.path.join(MACHINES, "linux-ubuntu24.04-strix-halo"), "install", "llamacpp",
                      "--cache-dir", cache, "--json"]
        dl = os.path.join(tmp, "dl.tar.gz")
        base = ["sh", "-c", f"curl -sf -o {dl} {url}/dl/{asset} && sha256sum {dl} >/dev/null && "
                            f"mkdir -p {out} && tar -xzf {dl} -C {out}"]

        def timed(cmd):
            shutil.rmtree(cache, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
            peak = peak_rss_mib(p.pid, p)  # polling costs both sides the same few wake-ups
            t = time.perf_counter() - t0
            if p.returncode:
                raise SystemExit(f"{cmd[:3]} failed: {p.stderr.read().decode()[-500:]}")
            return t, peak

        timed(ours), timed(base)  # warm-up (page cache, byte-compiled modules)
        ta, tb, ratios, rss = [], [], [], []
        for _ in range(runs):
            x, m = timed(ours)
            y, _ = timed(base)
            ta.append(x)
            tb.append(y)
            ratios.append(x / y)
            rss.append(m)
        httpd.shutdown()
        return statistics.median(ta), statistics.median(tb), statistics.median(ratios), max(rss), size / 2**20
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--install-mb", type=int, default=300, help="unpacked size of the install benchmark's archive")
    ap.add_argument("--install-runs", type=int, default=3)
    ap.add_argument("--only-install", action="store_true", help="run only section 5")
    ap.add_argument("--pyz", default=None, help="section 6 on this pick-backend.pyz (default: built from the installed "
                    "distributions by tools/build_pyz.py --from-installed)")
    ap.add_argument("--only-pyz", action="store_true", help="run only section 6")
    args = ap.parse_args()
    if args.only_install:
        compile_package()
        report_install(args)
        return
    if args.only_pyz:
        compile_package()
        report_pyz(args)
        return
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
    many = engine_many_gpus(64)
    print(f"   one node of 64 GPUs: {many:,.0f} decisions/s, every GPU judged per row "
          f"({'ok' if many >= 20000 else 'MISSED'}, target >= 20,000)")
    print("\n3. probe scaling (synthetic captures, in-process, median of 5)")
    for n, t in probe_scaling():
        print(f"   {n:4d} GPUs  {t * 1000:8.1f} ms  {t * 1000 / n:6.2f} ms/GPU")
    rate, t = fleet()
    print(f"\n4. fleet: 1,000 profiles in {t:.2f} s = {rate:,.0f} profiles/s "
          f"({'ok' if rate >= 500 else 'MISSED'}, target >= 500)")
    report_install(args)
    report_pyz(args)


def report_install(args):
    try:
        import isal  # noqa: F401

        gz = "ISA-L (isal)"
    except ImportError:
        gz = "zlib (pip install isal for ISA-L)"
    ours, base, ratio, rss, mb = install_speed(args.install_runs, args.install_mb)
    print(f"\n5. install: {mb:.0f} MiB .tar.gz ({args.install_mb} MiB unpacked) from 127.0.0.1, gzip via {gz}, "
          f"median of {args.install_runs} paired runs")
    print(f"   pick-backend install {ours:6.2f} s   curl+sha256sum+tar {base:6.2f} s   ratio {ratio:.2f} "
          f"({'ok' if ratio <= 0.8 else 'MISSED'}, target <= 0.8)")
    print(f"   peak memory {rss:.0f} MiB ({'ok' if rss < 100 else 'MISSED'}, target < 100)")


def pyz_speed(runs: int, pyz: str | None) -> tuple[list, int, float]:
    """Paired start-up of the one file against the installed command (both on this interpreter),
    its size and its first start, which unpacks it into an empty cache."""
    with tempfile.TemporaryDirectory() as d:
        if not pyz:
            pyz = os.path.join(d, "pick-backend.pyz")
            subprocess.run([PY, os.path.join(ROOT, "tools", "build_pyz.py"), "--from-installed", "--out", pyz],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ENV["PICK_BACKEND_PYZ_CACHE"] = os.path.join(d, "cache")
        try:
            first = wall([PY, pyz, "--version"])
            rows = [(f"pick-backend.pyz {' '.join(cmd)}", f"pick-backend {' '.join(cmd)}",
                     *paired([PY, pyz, *cmd], EXE + list(cmd), runs), 1.3)
                    for cmd in (("check", "llamacpp", "rocm"), ("llamacpp", "--json"))]
        finally:
            del ENV["PICK_BACKEND_PYZ_CACHE"]
        return rows, os.path.getsize(pyz), first


def report_pyz(args):
    rows, size, first = pyz_speed(args.runs, args.pyz)
    print(f"\n6. one file: pick-backend.pyz, {size / 2**20:.1f} MiB; first start (unpacks it) {first:.2f} s")
    print(f"   {'command':38} {'baseline':34} {'A s':>7} {'B s':>7} {'A/B':>6}  target")
    for a, b, ta, tb, ratio, target in rows:
        print(f"   {a:38} {b:34} {ta:7.3f} {tb:7.3f} {ratio:6.2f}  {'ok' if ratio <= target else 'MISSED'} (<= {target})")


if __name__ == "__main__":
    main()
