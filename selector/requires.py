"""Row conditions beyond OS and device (``row.requires`` in a catalog): checked by the engine
against the Machine, pure.  Each key names one condition; see docs/catalogs.md.

``check(machine, row, gpu=None)`` gives '' when every condition holds, else the reason in words (the
first condition that fails); ``gpu`` is the profile device the row is judged on (the machine's
chosen NVIDIA GPU when not given).  ``KEYS`` says what each key's value must be; the catalog loader validates
against it, so a typo in a catalog is an input error naming the entry, not a silently ignored gate.
"""

from __future__ import annotations

import re

# key -> kind of value: "str" (non-empty string), "version" (a dotted number: "575", "2.39"),
# "strs" (non-empty list of strings)
KEYS = {
    "executable": "str",  # a program on PATH
    "arch": "strs",  # CPU architectures the image is built for: x86_64, arm64
    "nvidia_driver_min": "version",  # NVIDIA kernel driver, e.g. "580"
    "glibc_min": "version",  # the C library of a Linux host, e.g. "2.39"
    "macos_min": "version",  # macOS product version, e.g. "15"
    "boards": "strs",  # device-tree board / SoC tokens, e.g. rk3588 (Profile.board)
    "cuda": "cuda",  # the CUDA build: {"toolkit": "12.8", "sass": ["sm_86", "sm_120a"], "ptx": ["sm_61"]}
}

_VERSION = re.compile(r"^\d+(\.\d+)*$")


def version_tuple(text) -> tuple[int, ...] | None:
    """"575.51.03" -> (575, 51, 3); "2.39" -> (2, 39); None when no leading number."""
    if not isinstance(text, str):
        return None
    m = re.match(r"\s*(\d+(?:\.\d+)*)", text)
    if not m:
        return None
    return tuple(int(p) for p in m.group(1).split("."))


def at_least(have: str | None, need: str) -> bool | None:
    """True when version ``have`` >= ``need``, compared number by number (575.51.03 >= 575,
    2.39 >= 2.4 since 39 > 4); None when ``have`` is unknown or not a version."""
    h, n = version_tuple(have), version_tuple(need)
    if h is None or n is None:
        return None
    width = max(len(h), len(n))
    return h + (0,) * (width - len(h)) >= n + (0,) * (width - len(n))


def is_version(text) -> bool:
    return isinstance(text, str) and bool(_VERSION.match(text))


def _words(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _board_tokens(board: str | None) -> set[str]:
    if not board:
        return set()
    return {t for t in re.split(r"[^a-z0-9]+", board.lower()) if t}


_EMULATION = None


def _emulation() -> list:
    global _EMULATION
    if _EMULATION is None:
        import os

        from probes.inputs import read_json

        path = os.path.join(os.path.dirname(__file__), "catalogs", "emulation.json")
        _EMULATION = read_json(path, "emulation table not found")["rules"]
    return _EMULATION


def emulated_arch(os_name: str, arch: str) -> str | None:
    """The architecture this OS runs through emulation on ``arch`` (Windows on arm64: x86_64), or None."""
    return next((r["runs"] for r in _emulation() if r["os"] == os_name and r["host"] == arch), None)


def emulation_note(m, wanted) -> str | None:
    """The note when this OS runs a build of one of the ``wanted`` architectures through its own
    emulation (catalogs/emulation.json: Windows on Arm runs x86_64 builds), else None.  One rule for
    every recipe and every row: the architecture gate and a CPU entry's families alike."""
    for rule in _emulation():
        if rule["os"] == m.os and rule["host"] == m.arch and rule["runs"] in wanted:
            return rule["note"]
    return None


def arch_reason(arch: str, wanted) -> str:
    return f"the image is built for {_words(list(wanted))} only (found {arch})"


# version gates: key -> (what, how to read the machine's version)
_MINIMUMS = {
    "nvidia_driver_min": ("NVIDIA driver", lambda m, gpu: getattr(gpu, "driver_version", None) or
                          (getattr(m.first("nvidia_gpu"), "driver_version", None))),
    "glibc_min": ("glibc", lambda m, gpu: m.profile.os.glibc),
    "macos_min": ("macOS", lambda m, gpu: m.profile.os.version if m.os == "macos" else None),
}


# -- CUDA builds against the driver ------------------------------------------------------------
#
# A CUDA image carries, per GPU family, either SASS (machine code: runs on the same major compute
# capability at an equal or higher minor; an arch-specific "a" target such as sm_120a only on that
# exact one) or only PTX (compiled by the driver when the program loads: runs on any equal or newer
# capability, but the driver must know the PTX of the toolkit that wrote it).  So SASS needs a
# driver of the toolkit's major version (CUDA minor version compatibility), PTX needs a driver of
# the toolkit's own version or newer.  The driver's CUDA version comes from NVML
# (cuda_driver_version 12020 = 12.2), else from its version number and NVIDIA's table
# (selector/catalogs/cuda-drivers.json).

_SM = re.compile(r"^sm_(\d+)(\d)(a|f)?$")


def parse_sm(text) -> tuple[int, int, bool] | None:
    """"sm_86" -> (8, 6, False); "sm_120a" -> (12, 0, True); None when not an sm target."""
    m = _SM.match(text) if isinstance(text, str) else None
    return (int(m.group(1)), int(m.group(2)), m.group(3) == "a") if m else None


_DRIVERS = None


def cuda_drivers() -> dict:
    """NVIDIA's minimum driver per CUDA release (data file, read once)."""
    global _DRIVERS
    if _DRIVERS is None:
        import os

        from probes.inputs import read_json

        path = os.path.join(os.path.dirname(__file__), "catalogs", "cuda-drivers.json")
        _DRIVERS = read_json(path, "CUDA driver table not found")
    return _DRIVERS


def driver_cuda(gpu) -> tuple[int, int] | None:
    """The highest CUDA version the GPU's driver runs: NVML's answer, else the driver version
    looked up in NVIDIA's table; None without a driver."""
    v = getattr(gpu, "cuda_driver_version", None)
    if isinstance(v, int) and v > 0:
        return v // 1000, (v % 1000) // 10
    have = getattr(gpu, "driver_version", None)
    if not have:
        return None
    best = None
    for release, need in cuda_drivers()["releases"].items():
        if at_least(have, need):
            t = version_tuple(release)
            if best is None or t > best:
                best = t
    return (best[0], best[1]) if best else None


def _cc(gpu) -> tuple[int, int] | None:
    cc = getattr(gpu, "compute_capability", None)
    if isinstance(cc, (list, tuple)) and len(cc) == 2:
        return int(cc[0]), int(cc[1])
    p = parse_sm(getattr(gpu, "sm", None))
    return (p[0], p[1]) if p else None


def cuda_reason(gpu, build: dict) -> str:
    """'' when the GPU and its driver run this CUDA build, else why not."""
    tk = build["toolkit"]
    tkv = version_tuple(tk)
    name = getattr(gpu, "name", "") or "NVIDIA GPU"
    if gpu is None or getattr(gpu, "driver_loaded", True) is False or getattr(gpu, "sm", None) is None:
        return f"the CUDA {tk} image needs the NVIDIA driver, and none is loaded for {name}"
    cc = _cc(gpu)
    sm = gpu.sm
    sass = [parse_sm(t) for t in build.get("sass", [])]
    ptx = [parse_sm(t) for t in build.get("ptx", [])]
    if cc is None:
        return f"compute capability of {name} unknown"
    has_sass = any(t and ((t[0], t[1]) == cc if t[2] else (t[0] == cc[0] and t[1] <= cc[1])) for t in sass)
    has_ptx = any(t and not t[2] and (t[0], t[1]) <= cc for t in ptx)
    if not has_sass and not has_ptx:
        built = ", ".join(build.get("sass", []) + [f"{t} (PTX)" for t in build.get("ptx", [])])
        return f"the CUDA {tk} image has no kernels for {sm} ({name}); it is built for {built}"
    have = driver_cuda(gpu)
    if have is None:
        return ""  # a loaded driver of unknown version (a --sm install target, a registry without it): not judged
    drv = getattr(gpu, "driver_version", None)
    found = f"found {drv}, CUDA {have[0]}.{have[1]}" if have and drv else (
        f"found CUDA {have[0]}.{have[1]}" if have else "driver version unknown")
    if has_sass:
        if have is None or have[0] < tkv[0]:
            need = cuda_drivers()["minor_compat"].get(str(tkv[0]))
            return f"needs an NVIDIA driver for CUDA {tkv[0]}.x" + (f" ({need} or newer" if need else " (") + f"; {found})"
        return ""
    if have is None or have < tkv[:2]:
        need = cuda_drivers()["releases"].get(tk)
        return (f"the CUDA {tk} image has only PTX for {sm}, which the driver compiles at load time: needs a "
                f"driver for CUDA {tk} or newer" + (f" ({need} or newer" if need else " (") + f"; {found})")
    return ""


def check(m, row, gpu=None) -> str:
    """'' when every condition of the row holds, else the reason in words.  ``gpu`` is the Profile
    device the row is judged on (None for a CPU entry): device facts such as the NVIDIA driver are
    read from it.  Device access and a loaded NVIDIA driver are the engine's (every GPU entry)."""
    req = row.requires
    if not req:
        return ""
    exe = req.get("executable")
    if exe and not m.executables.get(exe):
        return f"{exe} is not on PATH"
    arch = req.get("arch")
    if arch and m.arch not in arch and emulation_note(m, arch) is None:
        return arch_reason(m.arch, arch)
    for key, (what, read) in _MINIMUMS.items():
        need = req.get(key)
        if need:
            have = read(m, gpu)
            ok = at_least(have, need)
            if not ok:
                found = f"found {have}" if ok is False else f"{what} version unknown"
                return f"needs {what} {need} or newer ({found})"
    boards = req.get("boards")
    if boards:
        board = m.profile.board
        if not _board_tokens(board) & {b.lower() for b in boards}:
            found = f"found {board}" if board else "no such board found"
            return f"needs a {_words(boards)} board ({found})"
    build = req.get("cuda")
    if build:
        why = cuda_reason(gpu if gpu is not None else m.first("nvidia_gpu"), build)
        if why:
            return why
    return ""
