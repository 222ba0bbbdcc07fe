"""Row conditions beyond OS and device (``row.requires`` in a catalog): checked by the engine
against the Machine, pure.  Each key names one condition; see docs/catalogs.md."""

from __future__ import annotations


def check(m, row) -> str:
    """'' when every condition of the row holds, else the reason in words."""
    return ""
