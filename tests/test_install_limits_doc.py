"""The limits docs/install.md promises are the ones the code applies: the table is read, not copied."""

import os
import re

from conftest import ROOT
from selector.install.download import Limits
from selector.install.unpack import Caps

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def _table() -> dict[str, str]:
    text = open(os.path.join(ROOT, "docs", "install.md"), encoding="utf-8").read()
    section = text.split("## Limits", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("what", "---"):
            rows[cells[0]] = cells[1]
    return rows


def _bytes(text: str) -> int:
    n, unit = re.fullmatch(r"([\d,]+) (\w+)", text).groups()
    return int(n.replace(",", "")) * UNITS[unit]


def test_documented_defaults_are_the_applied_ones():
    t = _table()
    lim, caps = Limits.from_env({}), Caps.from_env({})
    assert lim.connect == float(t["connect timeout"].split()[0])
    assert lim.read == float(t["read timeout (no byte for this long)"].split()[0])
    assert lim.deadline == float(t["overall deadline (API calls, downloads, waits, per command)"].split()[0])
    speed, window = re.fullmatch(r"(\d+) B/s over (\d+) s", t["minimum speed, averaged over a window"]).groups()
    assert (lim.min_speed, lim.speed_window) == (float(speed), float(window))
    assert lim.max_download == _bytes(t["download size"])
    assert caps.max_bytes == _bytes(t["unpacked size of one archive"])
    assert caps.max_entries == int(t["entries in one archive"].replace(",", ""))


def test_each_limit_follows_its_variable():
    env = {"PICK_BACKEND_CONNECT_TIMEOUT": "2", "PICK_BACKEND_READ_TIMEOUT": "3", "PICK_BACKEND_TIMEOUT": "4",
           "PICK_BACKEND_MIN_SPEED": "5", "PICK_BACKEND_SPEED_WINDOW": "6", "PICK_BACKEND_MAX_DOWNLOAD": "7",
           "PICK_BACKEND_MAX_UNPACKED": "8", "PICK_BACKEND_MAX_ENTRIES": "9"}
    lim, caps = Limits.from_env(env), Caps.from_env(env)
    assert (lim.connect, lim.read, lim.deadline, lim.min_speed, lim.speed_window, lim.max_download) == (2, 3, 4, 5, 6, 7)
    assert (caps.max_bytes, caps.max_entries) == (8, 9)


def test_the_fixed_limits_are_the_documented_ones():
    # the rows with no variable: the API answer cap, the path depth, cargo's ratio rule, the attempts
    from selector.install import download, unpack

    t = _table()
    assert download.MAX_API_BODY == _bytes(t["one releases API answer (decoded)"])
    assert unpack.MAX_DEPTH == int(t["parts of one entry's path (`a/b/c` is 3)"].split(";")[0])
    ratio = next(v for k, v in t.items() if k.startswith("declared unpacked size against the archive's size"))
    n, floor = re.match(r"max\((\d+) x the archive, ([\d,]+ \w+)\)", ratio).groups()
    assert (unpack.RATIO, unpack.RATIO_FLOOR) == (int(n), _bytes(floor))
    assert download.ATTEMPTS == int(t["attempts without progress"])
