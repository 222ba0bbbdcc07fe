"""Row conditions beyond OS and device (``row.requires`` in a catalog): checked by the engine
against the Machine, pure.  Each key names one condition; see docs/catalogs.md.

``check(machine, row)`` gives '' when every condition holds, else the reason in words (the first
condition that fails).  ``KEYS`` says what each key's value must be; the catalog loader validates
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


def arch_reason(arch: str, wanted) -> str:
    return f"the image is built for {_words(list(wanted))} only (found {arch})"


# version gates: key -> (what, how to read the machine's version)
_MINIMUMS = {
    "nvidia_driver_min": ("NVIDIA driver", lambda m, gpu: getattr(gpu, "driver_version", None) or
                          (m.nvidia.driver_version if m.nvidia is not None else None)),
    "glibc_min": ("glibc", lambda m, gpu: m.profile.os.glibc),
    "macos_min": ("macOS", lambda m, gpu: m.profile.os.version if m.os == "macos" else None),
}


def check(m, row, gpu=None) -> str:
    """'' when every condition of the row holds, else the reason in words.  ``gpu`` is the Profile
    device the row is judged on (None for a CPU entry): device facts such as the NVIDIA driver are
    read from it when it has them."""
    req = row.requires
    if not req:
        return ""
    exe = req.get("executable")
    if exe and not m.executables.get(exe):
        return f"{exe} is not on PATH"
    arch = req.get("arch")
    if arch and m.arch not in arch:
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
    return ""
