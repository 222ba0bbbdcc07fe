"""The values a setting or a flag takes, one tuple each: the records and the data files are checked
against them, and the CLI offers them as click's choices, so no list of values is typed twice."""

from __future__ import annotations

POLICIES = ("accelerator-first", "lemonade", "measured")  # --policy, PICK_BACKEND_POLICY
METRICS = ("tg", "pp")  # --metric: generation or prompt processing speed
CHANNELS = ("stable", "nightly")  # --channel, PICK_BACKEND_CHANNEL, config.json rocm_channel
OSES = ("linux", "windows", "macos")  # catalog and guide rows; install --os
ARCHES = ("x86_64", "arm64")  # install --arch
UNVERIFIED = ("runtime", "backend", "all")  # install --allow-unverified: kinds of asset without a digest
