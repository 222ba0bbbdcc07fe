"""Ask an installed build what it sees: run its device listing, read it, compare with the pick.

The pick is a prediction from the hardware and the matrix; this module closes the loop.  How each
recipe's builds are asked is data (``<catalog>-verify.json``: the arguments, which parser reads the
output, the device-name prefixes a backend's devices carry); the code holds only the parsers and the
rules below.  Parsing and judging are pure functions (tested on their own); ``run`` is the only
part that starts a process: no stdin, no proxy, no ``LLAMA_ARG_*`` variables (nothing that could
make a build download a model), a time limit, and the whole process group killed when it is hit.

Verdicts and their exit codes:

=================  ====  =====================================================================
``verified``          0  the build lists the picked device (or, with a ``starts`` parser, starts)
``other_device``      3  it runs, but lists another device: only the iGPU, only llvmpipe, a GPU
                         where the pick said the CPU, ...
``no_gpu``            3  it runs and lists no GPU at all (with likely causes from the probe)
``unknown``           3  it exits 0 but prints no device list that can be read
``not_installed``     3  there is no build to run
``does_not_start``    4  a missing shared library, a wrong architecture, a crash, a hang
=================  ====  =====================================================================
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

from probes.inputs import InputError, read_json

VERIFIED, OTHER, NO_GPU, UNKNOWN, NOT_INSTALLED, NO_START = (
    "verified", "other_device", "no_gpu", "unknown", "not_installed", "does_not_start")
EXIT = {VERIFIED: 0, OTHER: 3, NO_GPU: 3, UNKNOWN: 3, NOT_INSTALLED: 3, NO_START: 4}
WORDS = {VERIFIED: "verified", OTHER: "other device", NO_GPU: "no GPU", UNKNOWN: "unknown",
         NOT_INSTALLED: "not installed", NO_START: "does not start"}
PARSERS = ("ggml-devices", "starts")
DEFAULT_TIMEOUT = 30.0
TAIL_LINES, TAIL_CHARS = 20, 2000
# environment that could reach the network or change what a build does at start
_DROP_ENV = ("http_proxy", "https_proxy", "all_proxy", "ftp_proxy", "no_proxy")
_DROP_PREFIX = ("LLAMA_ARG_",)


# ------------------------------------------------------------------------------------------------
# the data file


def spec_path(catalog_name: str) -> str:
    from selector.catalog import CATALOG_DIR

    return os.path.join(CATALOG_DIR, f"{catalog_name}-verify.json")


def load_spec(catalog_name: str = "lemonade", path: str | None = None) -> dict:
    """The verify rules of a catalog, validated; a bad file raises InputError (exit 5).  A catalog
    without a verify file gets the default: start the build with --help."""
    path = path or spec_path(catalog_name)
    data = read_json(path, "", default={})

    def need(cond, where, msg):
        if not cond:
            raise InputError(path, f"{where}: {msg}")

    need(isinstance(data, dict), "top level", "must be a JSON object")

    def check_step(step, where):
        need(isinstance(step, dict), where, "must be an object")
        if "args" in step:
            need(isinstance(step["args"], list) and all(isinstance(a, str) for a in step["args"]),
                 f"{where}.args", "must be a list of strings")
        if "parser" in step:
            need(step["parser"] in PARSERS, f"{where}.parser", f"must be one of {', '.join(PARSERS)}")
        if "prefixes" in step:
            need(isinstance(step["prefixes"], list) and all(isinstance(p, str) for p in step["prefixes"]),
                 f"{where}.prefixes", "must be a list of strings")

    check_step(data.get("default", {}), "default")
    recipes = data.get("recipes", {})
    need(isinstance(recipes, dict), "recipes", "must be an object")
    for rname, r in recipes.items():
        need(isinstance(r, dict), f"recipes.{rname}", "must be an object")
        if "binary" in r:
            need(isinstance(r["binary"], str) and r["binary"], f"recipes.{rname}.binary", "must be a non-empty string")
        check_step(r.get("default", {}), f"recipes.{rname}.default")
        backends = r.get("backends", {})
        need(isinstance(backends, dict), f"recipes.{rname}.backends", "must be an object")
        for b, step in backends.items():
            check_step(step, f"recipes.{rname}.backends.{b}")
    return data


def step_for(spec: dict, recipe: str, backend: str) -> dict:
    """{binary, args, parser, prefixes} for one recipe and backend (rocm-stable reads as rocm)."""
    r = spec.get("recipes", {}).get(recipe, {})
    b = backend[:-7] if backend.endswith("-stable") else backend[:-8] if backend.endswith("-nightly") else backend
    step = {"args": ["--help"], "parser": "starts", "prefixes": []}
    for layer in (spec.get("default", {}), r.get("default", {}), r.get("backends", {}).get(b, {})):
        step.update({k: v for k, v in layer.items() if k in ("args", "parser", "prefixes")})
    step["binary"] = r.get("binary")
    step["backend"] = b
    return step


# ------------------------------------------------------------------------------------------------
# parsing (pure)

_HEADER = re.compile(r"^\s*Available devices:\s*$")
_DEVICE = re.compile(
    r"^\s+(?P<id>(?P<prefix>[A-Za-z][A-Za-z_]*?)(?P<index>\d*)): (?P<name>.+?) "
    r"\((?P<total>\d+) MiB, (?P<free>\d+) MiB free\)(?:\s*\[PCI (?P<pci>[0-9A-Fa-f:.]+)\])?\s*$")


def parse_devices(text: str, software=("llvmpipe", "lavapipe", "swiftshader"),
                  cpu_prefixes=("CPU", "BLAS", "RPC")) -> tuple[bool, list[dict]]:
    """(header seen, devices) from ``--list-devices`` output.  Each device: ``id`` (``Vulkan0``),
    ``backend`` (``Vulkan``), ``index`` (0, or null for ``Metal``), ``name``, ``total_mib``,
    ``free_mib``, ``pci`` (when printed), ``kind`` (``gpu``, ``software``, ``cpu``), ``line``."""
    seen, out = False, []
    for line in text.splitlines():
        if _HEADER.match(line):
            seen = True
            continue
        if not seen:
            continue
        m = _DEVICE.match(line)
        if not m:
            continue
        name = m["name"]
        low = name.lower()
        kind = ("software" if any(s in low for s in software)
                else "cpu" if m["prefix"] in cpu_prefixes else "gpu")
        out.append({
            "id": m["id"], "backend": m["prefix"], "index": int(m["index"]) if m["index"] else None,
            "name": name, "total_mib": int(m["total"]), "free_mib": int(m["free"]),
            "pci": m["pci"].lower() if m["pci"] else None, "kind": kind, "line": line.strip(),
        })
    return seen, out


_GENERIC = {"amd", "ati", "radeon", "nvidia", "geforce", "graphics", "gpu", "tm", "r", "intel", "apple",
            "corporation", "inc", "radv", "mesa", "driver", "proprietary", "series", "with", "w"}
_VENDOR = {"amd": "amd", "radeon": "amd", "radv": "amd", "instinct": "amd", "nvidia": "nvidia",
           "geforce": "nvidia", "quadro": "nvidia", "tesla": "nvidia", "intel": "intel", "apple": "apple"}
_TYPE_VENDOR = {"amd_gpu": "amd", "nvidia_gpu": "nvidia", "intel_gpu": "intel", "metal": "apple"}


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", (name or "").lower()) if t}


def _models(tokens: set[str]) -> set[str]:
    """The tokens that name a model (carry a digit: 4090, 8060s, gfx1151, m3), not a vendor word."""
    return {t for t in tokens if any(c.isdigit() for c in t) and t not in _GENERIC}


def _vendor(tokens: set[str]) -> str | None:
    for t in tokens:
        if t in _VENDOR:
            return _VENDOR[t]
    return None


def _norm_pci(bus_id: str | None) -> str | None:
    """0000:03:00.0 and 00000000:01:00.0 (NVML) compare as domain-less bus:dev.fn."""
    if not bus_id:
        return None
    parts = bus_id.lower().split(":")
    return ":".join(parts[-2:]) if len(parts) >= 2 else bus_id.lower()


def match_device(expected: dict | None, dev: dict) -> tuple[bool, str]:
    """Is the listed device ``dev`` the picked device ``expected`` (type, family, name, memory_bytes,
    bus_id, integrated)?  (answer, why).  A printed PCI id decides; else the model tokens of the
    names (``4090``, ``8060s``, or the gfx target RADV prints) and the memory; a device with a
    generic name (``AMD Radeon Graphics``) is matched by memory, or, for an integrated GPU whose
    memory is shared and not fixed, by being a GPU of the same vendor."""
    if expected is None:
        return True, "no picked device to compare with: any GPU counts"
    want_pci, got_pci = _norm_pci(expected.get("bus_id")), _norm_pci(dev.get("pci"))
    if want_pci and got_pci:
        same = want_pci == got_pci
        return same, f"PCI {dev['pci']}" + ("" if same else f" is not {expected['bus_id']}")
    dtoks, etoks = _tokens(dev["name"]), _tokens(expected.get("name") or "")
    want_vendor = _TYPE_VENDOR.get(expected.get("type"))
    got_vendor = _vendor(dtoks)
    if want_vendor and got_vendor and want_vendor != got_vendor:
        return False, f"a {got_vendor.upper()} device, the pick is {want_vendor.upper()}"
    mem = expected.get("memory_bytes")
    integrated = bool(expected.get("integrated"))
    mem_ok = None
    if mem and not integrated and dev.get("total_mib"):
        want_mib = mem / 1048576
        mem_ok = abs(dev["total_mib"] - want_mib) <= 0.1 * want_mib
    fam = (expected.get("family") or "").lower()
    dmodels = _models(dtoks)
    emodels = _models(etoks) | ({fam} if fam.startswith("gfx") else set())
    named = bool(_models(etoks) - {fam})  # the pick's name has a model ("AMD GPU (gfx1201)" has none)
    if dmodels:
        if dmodels & emodels:
            if mem_ok is False:
                return False, f"the name matches but {dev['total_mib']} MiB is not the pick's {mem // 1048576} MiB"
            return True, "name" + (" and memory" if mem_ok else "")
        if named or mem_ok is None:
            return False, f"'{dev['name']}' is not '{expected.get('name')}'"
    if mem_ok is not None:
        return mem_ok, ("memory" if mem_ok else f"{dev['total_mib']} MiB is not the pick's {mem // 1048576} MiB")
    if integrated and (got_vendor in (None, want_vendor)):
        return True, "the only kind of GPU this integrated device can be (a generic name; shared memory)"
    return False, f"'{dev['name']}' cannot be told apart from other devices"


def _did_not_start(output: str, status: int | None, timed_out: bool, start_error: str | None, spec: dict):
    """(verdict, message, evidence, fix) of a run that did not get to list its devices; None when it did."""
    fixes = spec.get("fixes", {})
    if start_error is not None:
        arch = "exec format" in start_error.lower()
        return (NO_START, start_error, [start_error], fixes.get("wrong_arch") if arch else None)
    if timed_out:
        return (NO_START, "timed out: no answer within the time limit", tail_lines(output, 5))
    lib = re.search(r"error while loading shared libraries: (\S+?): (.*)", output)
    if lib:
        name = lib.group(1)
        rocm = any(name.startswith(p) for p in spec.get("rocm_libraries", []))
        fix = (fixes.get("therock") if rocm else fixes.get("missing_library", "")).replace("{library}", name)
        return (NO_START, f"a shared library cannot be loaded: {name} ({lib.group(2).strip()})",
                [lib.group(0).strip()], fix)
    for pat, what in ((r"cannot execute binary file|Exec format error", "wrong_arch"),
                      (r"version `GLIBC_[0-9.]+' not found", "glibc")):
        m = re.search(pat, output)
        if m:
            line = next((x for x in output.splitlines() if m.group(0) in x), m.group(0))
            fix = fixes.get("wrong_arch") if what == "wrong_arch" else \
                "the build needs a newer C library (glibc) than this system has"
            return (NO_START, "the executable cannot run on this system", [line.strip()], fix)
    for pat in spec.get("unknown_flag", {}).get("patterns", []):
        if pat in output:
            line = next((x for x in output.splitlines() if pat in x), pat)
            return (UNKNOWN, "the build does not know its device-listing flag", [line.strip()],
                    spec["unknown_flag"].get("fix"))
    known = spec.get("exit_statuses", {}).get(str(status)) if status is not None else None
    if known:
        return (NO_START, f"{known}, exit status {status}", tail_lines(output, 5),
                fixes.get("wrong_arch") if "architecture" in known else None)
    if status is None or status != 0:
        why = f"killed by signal {-status}" if status is not None and status < 0 else f"exit status {status}"
        return (NO_START, f"the build stopped with {why}", tail_lines(output, 5))
    return None


def judge(step: dict, expected: dict | None, status: int | None, output: str, *, timed_out: bool = False,
          start_error: str | None = None, spec: dict | None = None) -> dict:
    """The verdict for one run.  ``status``: exit status (negative: killed by that signal);
    ``output``: stdout and stderr together.  Returns {verdict, message, evidence, devices, matched}."""
    spec = spec or {}
    fixes = spec.get("fixes", {})
    devices: list[dict] = []
    res = {"verdict": None, "message": "", "evidence": [], "devices": devices, "matched": None, "fix": None}

    def done(verdict, message, evidence=(), fix=None):
        res.update(verdict=verdict, message=message, evidence=list(evidence), fix=fix)
        return res

    stopped = _did_not_start(output, status, timed_out, start_error, spec)
    if stopped is not None:
        return done(*stopped)

    if step.get("parser") == "starts":
        return done(VERIFIED, "the build starts (it has no device listing to compare with the pick)",
                    tail_lines(output, 1))

    software = spec.get("software_devices", {}).get("names", ("llvmpipe", "lavapipe", "swiftshader"))
    seen, devs = parse_devices(output, tuple(software), tuple(spec.get("cpu_prefixes", ("CPU", "BLAS", "RPC"))))
    devices.extend(devs)
    if not seen:
        return done(UNKNOWN, "the build ran but printed no device list that can be read", tail_lines(output, 5))
    prefixes = step.get("prefixes") or []
    mine = [d for d in devs if not prefixes or d["backend"] in prefixes]
    gpus = [d for d in mine if d["kind"] == "gpu"]
    soft = [d for d in mine if d["kind"] == "software"]
    want_gpu = expected is None or expected.get("type") != "cpu"
    if not want_gpu:
        if gpus:  # the build will offload to them: the pick said the CPU, so the two disagree
            return done(OTHER, "the pick runs on the CPU, but the build lists GPUs and will use them: the probe "
                               "found no driver of this backend for them", [d["line"] for d in gpus],
                        fixes.get("unseen_gpu"))
        return done(VERIFIED, "the build starts and lists no GPU, as picked (CPU)", tail_lines(output, 2))
    if not gpus and soft:
        return done(OTHER, "the build sees only a software renderer, not the GPU", [d["line"] for d in soft],
                    fixes.get("software_only"))
    if not gpus:
        ev = [d["line"] for d in devs] or tail_lines(output, 5)
        return done(NO_GPU, "the build sees no GPU: it would run on the CPU", ev)
    reasons = []
    for d in gpus:
        ok, why = match_device(expected, d)
        if ok:
            res["matched"] = d
            return done(VERIFIED, f"the build sees the picked device as {d['id']} ({why})", [d["line"]])
        reasons.append(f"{d['id']}: {why}")
    sel = spec.get("device_selectors", {}).get(step.get("backend"), "")
    fix = (fixes.get("other_device") or "").replace("{selector}", sel or "see the engine's documentation")
    return done(OTHER, "the build does not list the picked device; " + "; ".join(reasons),
                [d["line"] for d in gpus], fix)


def tail_lines(text: str, n: int = TAIL_LINES) -> list[str]:
    lines = [x for x in (text or "").splitlines() if x.strip()]
    return lines[-n:]


def tail(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    out = "\n".join((text or "").splitlines()[-lines:])
    return out[-chars:]


# ------------------------------------------------------------------------------------------------
# running (the only part with side effects)


def clean_env(base=None, run_env: dict | None = None, lib_dirs=()) -> dict:
    """The environment a verification runs in: ``base`` (os.environ) without proxies or
    ``LLAMA_ARG_*``, with ``run_env`` (the pick's device pinning) and ``lib_dirs`` in front of
    LD_LIBRARY_PATH (the build's own directory; TheRock's lib for ROCm stable builds)."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k.lower() not in _DROP_ENV and not k.startswith(_DROP_PREFIX)}
    env.update(run_env or {})
    if lib_dirs and os.name != "nt":  # pragma: no mutate (os.name reads the same on every test host)
        old = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = os.pathsep.join([*lib_dirs, *([old] if old else [])])
    return env


def run(cmd: list[str], env: dict, timeout: float, cwd: str | None = None) -> dict:
    """Run ``cmd`` with no stdin and a time limit; on timeout the whole process group is killed.
    {status, stdout, stderr, timed_out, start_error, missing, seconds} (``missing``: the executable is not there)."""
    t0 = time.monotonic()
    out = {"status": None, "stdout": "", "stderr": "", "timed_out": False, "start_error": None, "missing": False}
    # its own process group, so that a timeout or Ctrl-C ends whatever the build started (POSIX; the
    # os.name test reads the same on every host this runs tests on)
    kw = {"start_new_session": True} if os.name != "nt" else {}  # pragma: no mutate
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, cwd=cwd, **kw)
    except FileNotFoundError as e:
        out["start_error"], out["missing"] = f"{cmd[0]}: not found ({e.strerror})", True
        out["seconds"] = round(time.monotonic() - t0, 3)
        return out
    except OSError as e:  # ENOEXEC (another architecture), EACCES (not executable)
        out["start_error"] = f"{cmd[0]}: cannot be executed: {e.strerror or e}"
        out["seconds"] = round(time.monotonic() - t0, 3)
        return out
    previous = _term_interrupts()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out["timed_out"] = True
        _kill(proc)
        try:  # a grace period for the pipes to close (its length is tuning, not behaviour)
            stdout, stderr = proc.communicate(timeout=5)  # pragma: no mutate
        except subprocess.TimeoutExpired:  # a grandchild outside the group holds the pipes
            stdout, stderr = b"", b""
    except BaseException:  # Ctrl-C, or SIGTERM (made an interrupt below): the group goes with us
        _kill(proc)
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    out["status"] = None if out["timed_out"] else proc.returncode
    out["stdout"] = stdout.decode("utf-8", "replace")
    out["stderr"] = stderr.decode("utf-8", "replace")
    out["seconds"] = round(time.monotonic() - t0, 3)
    return out


def _term_interrupts():
    """While a build runs, SIGTERM interrupts as Ctrl-C does, so its process group is ended too;
    returns the handler to put back (None where signals cannot be set: not the main thread)."""
    def on_term(signum, frame):
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, on_term)
    except ValueError:
        return None


def _kill(proc) -> None:
    try:
        if os.name != "nt":  # pragma: no mutate (the same on every host the tests run on)
            os.killpg(proc.pid, signal.SIGKILL)  # the build and whatever it started
        else:  # Windows: no process groups to signal
            proc.kill()  # pragma: no mutate (no Windows host runs these tests)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass


# ------------------------------------------------------------------------------------------------
# finding the build


def installed_binary(path: str, binary: str | None, os_name: str) -> str | None:
    """The executable of the build installed (or staged) at ``path``: install.json's ``binary``,
    else a search for the recipe's binary name."""
    if not os.path.isdir(path):
        return None
    from selector.install.installer import read_record

    rel = read_record(path).get("binary")
    if isinstance(rel, str) and rel and not os.path.isabs(rel) and ".." not in rel.split("/"):
        p = os.path.join(path, *rel.split("/"))
        if os.path.isfile(p):
            return p
    if not binary:
        return None
    from selector.install.unpack import find_binary

    try:
        rel = find_binary(path, binary, os_name)
    except Exception:  # noqa: BLE001 - ArchiveError: not there
        return None
    return os.path.join(path, rel)


def therock_libs(cache: str) -> list[str]:
    """lib directories of the TheRock runtimes installed in the cache (Lemonade runs ROCm stable
    builds with them on the library path)."""
    base = os.path.join(cache, "bin", "therock")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    return [os.path.join(base, n, "lib") for n in names
            if not n.endswith((".staging", ".old", ".lock")) and os.path.isdir(os.path.join(base, n, "lib"))]


# ------------------------------------------------------------------------------------------------
# likely causes of "no GPU", from the probe


def causes(profile, expected: dict | None, backend: str, env: dict) -> list[str]:
    """What the probe knows that would make a build see no GPU."""
    out: list[str] = []
    if profile is None:
        return out
    typ = (expected or {}).get("type")
    idx = (expected or {}).get("index")
    if typ == "amd_gpu" or backend in ("rocm", "vulkan"):
        for g in profile.amd_gpus:
            if idx is not None and typ == "amd_gpu" and g.index != idx:
                continue
            fix = getattr(g, "access_fix", None)
            if fix:
                out.append(f"{g.name}: {fix}")
            elif backend == "rocm" and getattr(g, "usable_compute", True) is False:
                out.append(f"{g.name}: no read-write access to /dev/kfd or its render node")
            elif backend == "vulkan" and getattr(g, "usable_graphics", True) is False:
                out.append(f"{g.name}: no read-write access to its render node (render group)")
            if backend == "rocm" and g.gfx_effective and g.gfx and g.gfx_effective != g.gfx:
                out.append(f"HSA_OVERRIDE_GFX_VERSION makes {g.gfx} run as {g.gfx_effective}; "
                           "a build without kernels for that target finds no device")
            if backend == "rocm" and g.source not in ("kfd", "target"):
                out.append(f"{g.name}: amdgpu's compute interface (KFD, /dev/kfd) was not found")
    if typ == "nvidia_gpu" or backend == "cuda":
        for g in profile.nvidia_gpus:
            if getattr(g, "driver_loaded", True) is False:
                out.append(f"{g.name}: no NVIDIA driver drives it (none loaded, or the card is bound to another)")
            fix = getattr(g, "access_fix", None)
            if fix:
                out.append(f"{g.name}: {fix}")
    if backend == "vulkan" or (backend == "system" and typ in ("amd_gpu", "intel_gpu")):
        if not profile.vulkan.loader:
            out.append("the Vulkan loader (libvulkan.so.1) is not installed")
        elif not profile.vulkan.gpu_drivers:
            out.append("no Vulkan driver (ICD) for a GPU is installed: only a CPU renderer or none")
    for k in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GGML_VK_VISIBLE_DEVICES"):
        if k in env:
            out.append(f"{k}={env[k]} is set and may hide the device")
    return list(dict.fromkeys(out))


def expected_device(decision, verdict) -> dict | None:
    """The picked device as a dict (type, family, index, name, memory_bytes, bus_id, integrated)."""
    dev = getattr(verdict, "device", None) if verdict is not None else None
    dev = dev or getattr(decision, "device", None)
    if dev is None:
        return None
    out = dev.to_dict()
    for k in ("memory_bytes", "bus_id", "uuid"):
        out.setdefault(k, getattr(dev, k, None))
    return out


def enrich(expected: dict | None, profile) -> dict | None:
    """Fill memory, PCI id and integrated from the Profile's device with the picked index (the
    engine's Device carries them once issue 12 lands; before that the Profile has them)."""
    if expected is None or profile is None:
        return expected
    typ, idx = expected.get("type"), expected.get("index")
    for g in (profile.amd_gpus if typ == "amd_gpu" else profile.nvidia_gpus if typ == "nvidia_gpu" else []):
        if g.index == idx:
            if typ == "amd_gpu":
                expected.setdefault("integrated", g.integrated)
                if expected.get("memory_bytes") is None:
                    expected["memory_bytes"] = g.vram_bytes
            else:
                if expected.get("memory_bytes") is None:
                    expected["memory_bytes"] = g.memory_bytes
            pci = getattr(g, "pci", None)
            if expected.get("bus_id") is None and pci is not None:
                expected["bus_id"] = pci.bus_id
            break
    return expected


BUILD = re.compile(r"\(build (\d+), commit ([0-9a-f]+)\)")


def verify_build(exe: str | None, step: dict, expected: dict | None, *, run_env: dict | None = None,
                 timeout: float = DEFAULT_TIMEOUT, lib_dirs=(), spec: dict | None = None, profile=None,
                 recipe: str = "", backend: str = "") -> dict:
    """Run one build and judge it: the report that ``verify --json`` prints (less the header)."""
    spec = spec or {}
    fixes = spec.get("fixes", {})
    env_shown = dict(run_env or {})
    if exe is None:
        flag = f" --backend {backend}" if backend else ""
        fix = (fixes.get("not_installed") or "").replace("{recipe}", recipe).replace("{backend_flag}", flag)
        return {"verdict": NOT_INSTALLED, "exit_code": EXIT[NOT_INSTALLED],
                "message": f"no {step.get('binary') or 'build'} to run", "evidence": [], "fix": fix or None,
                "causes": [], "devices": [], "matched": None, "expected": expected, "command": None,
                "env": env_shown, "status": None, "timed_out": False, "stderr_tail": "", "seconds": 0.0}
    cmd = [exe, *step.get("args", [])]
    dirs = [os.path.dirname(exe), *lib_dirs]
    env = clean_env(None, run_env, dirs)
    r = run(cmd, env, timeout, cwd=os.path.dirname(exe) or None)
    both = r["stdout"] + ("\n" if r["stdout"] and r["stderr"] else "") + r["stderr"]
    res = judge(step, expected, r["status"], both, timed_out=r["timed_out"], start_error=r["start_error"], spec=spec)
    if r["timed_out"]:
        res["message"] = f"timed out after {timeout:g} s: the build did not answer"
        res["fix"] = (fixes.get("timeout") or "").replace("{timeout}", f"{timeout:g}") or None
    report = {
        "verdict": res["verdict"], "exit_code": EXIT[res["verdict"]], "message": res["message"],
        "evidence": res["evidence"], "fix": res["fix"].replace("{recipe}", recipe or "RECIPE") if res["fix"] else None,
        "causes": [],
        "devices": [{k: v for k, v in d.items() if k != "line"} for d in res["devices"]],
        "matched": res["matched"]["id"] if res["matched"] else None,
        "expected": expected, "command": cmd, "env": env_shown, "status": r["status"],
        "timed_out": r["timed_out"], "stderr_tail": tail(r["stderr"]), "seconds": r["seconds"],
    }
    if res["verdict"] in (NO_GPU, OTHER):
        report["causes"] = causes(profile, expected, step.get("backend", backend), env)
    own = BUILD.search(both)  # llama.cpp's --version: "version: 0.5.0-dev (build 11312, commit 0c1e570)"
    report["build"] = {"number": int(own[1]), "commit": own[2]} if own else None
    return report
