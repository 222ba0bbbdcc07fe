"""Device-tree board: the SoC of an Arm board from ``/proc/device-tree/compatible``
(NUL-separated, most specific first), looked up in probes/tables/boards.json.  The NVIDIA probe
already names Jetson boards; this one does not overwrite it."""

from __future__ import annotations

from probes import tables
from probes.linux.nvidia import compatible_strings


def probe(host, profile) -> None:
    if profile.board:
        return
    compat = compatible_strings(host)
    if not compat:
        return
    row = tables.board(compat)
    if row is not None:
        profile.board = row["board"]
