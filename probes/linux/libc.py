"""The C library: glibc version (``os.confstr('CS_GNU_LIBC_VERSION')`` on the live host,
capture.json ``libc`` in a capture).  Images built against a newer glibc fail to start on an older
one, so catalogs gate on it (``requires.glibc_min``)."""

from __future__ import annotations

import re


def probe(host, profile) -> None:
    info = host.libc() if hasattr(host, "libc") else {}
    if not isinstance(info, dict) or not info:
        return
    name, version = info.get("name"), info.get("version")
    if name != "glibc":
        return  # musl and others: no glibc version to compare
    if not isinstance(version, str) or not re.match(r"^\d+(\.\d+)+$", version.strip()):
        profile.warn("libc", f"libc.version {version!r} is not a glibc version; ignored")
        return
    profile.os.glibc = version.strip()
