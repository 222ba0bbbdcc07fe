"""What ``models``, ``plan`` and ``bench`` need beyond the rest of pick-backend: the ``gguf`` package
(GGUF's constants: file types) and numpy (which gguf brings; the memory bandwidth measurement).
Neither is pure Python's standard library, and pick-backend.pyz carries neither (docs/pyz.md): these
commands say so before they start, instead of failing halfway with an internal error.
"""

from __future__ import annotations

import importlib.util
import sys

from selector.cli.core import EXIT_INSTALL, Fail

MODEL_PACKAGES = ("gguf", "numpy")


def model_packages(command: str) -> None:
    """Fail with exit 4 (a missing piece, as an archive that needs py7zr) naming what is missing."""
    missing = [m for m in MODEL_PACKAGES if importlib.util.find_spec(m) is None]
    if missing:
        what = " and ".join(missing)
        raise Fail(EXIT_INSTALL, f"{command} needs the {what} package{'s' if len(missing) > 1 else ''}, which "
                   f"this Python ({sys.executable}) cannot import (pick-backend.pyz carries neither): "
                   f"install gguf for it (`python3 -m pip install gguf`, which brings numpy), or install "
                   f"pick-backend with pip (README)")
