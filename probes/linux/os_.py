"""OS: kernel release, distro (through the ``distro`` package), WSL, container.

``distro`` reads the os-release and ``*-release`` files of a root directory.  On this machine it
reads ``/``.  For a capture it must never read outside the capture, and distro follows symbolic
links wherever they point; so the files are read through the Host (whose capture reader refuses
links that leave the capture) and handed to distro as a private tree of plain files.
"""

from __future__ import annotations

import os
import re

# the names distro looks at in /etc (distro._DISTRO_RELEASE_BASENAME_PATTERN, distro 1.9.0)
_RELEASE_NAME = re.compile(r"^\w+[-_](release|version)$")
_OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")


def _tree(host) -> dict[str, str]:
    """The files distro may read, as this host sees them: absolute path -> text."""
    out = {}
    for path in (*_OS_RELEASE, "/etc/debian_version"):
        text = host.read(path)
        if text is not None:
            out[path] = text
    osr = out.get(_OS_RELEASE[0], out.get(_OS_RELEASE[1], ""))
    if not re.search(r"(?m)^\s*ID=\S", osr) or not re.search(r"(?m)^\s*VERSION_ID=\S", osr):
        # distro falls back to /etc/*-release (CentOS 6, Alpine without VERSION_ID, ...)
        for name in host.listdir("/etc"):
            if _RELEASE_NAME.match(name) and f"/etc/{name}" not in out:
                text = host.read(f"/etc/{name}")
                if text is not None:
                    out[f"/etc/{name}"] = text
    return out


# IDs distro reports under another name (distro 1.9.0 NORMALIZED_OS_ID): for these, distro answers
DISTRO_RENAMES = ("ol", "opensuse-leap")


def _from_os_release() -> tuple[str, str, str] | None:
    """(id, version, like) from this machine's os-release through the standard library
    (platform.freedesktop_os_release, Python 3.10+), when it has ID and VERSION_ID: then distro
    answers from those same fields alone (lower-cased ID, VERSION_ID, ID_LIKE), and its import
    (logging, argparse, subprocess: over 10 ms) stays off the everyday path.  An ID distro
    renames, or anything unusual, goes to distro."""
    import platform

    try:
        osr = platform.freedesktop_os_release()
    except OSError:
        return None
    ident = osr.get("ID", "").lower().replace(" ", "_")
    version = osr.get("VERSION_ID", "")
    if not ident or not version or ident in DISTRO_RENAMES:
        return None
    return ident, version, osr.get("ID_LIKE", "")


def distro_info(host) -> tuple[str, str, str] | None:
    """(id, version, like) as distro reports them; None when there is no os-release at all."""
    tree = _tree(host)
    if not tree:
        return None
    osr = tree.get(_OS_RELEASE[0], tree.get(_OS_RELEASE[1], ""))
    # With ID and VERSION_ID in os-release, distro answers from it alone; naming no release file
    # (os.devnull) spares it a scan of every file in /etc (milliseconds, on every run).
    complete = bool(re.search(r"(?m)^\s*ID=\S", osr) and re.search(r"(?m)^\s*VERSION_ID=\S", osr))
    release_file = os.devnull if complete else None
    if not host.is_capture and complete:
        fast = _from_os_release()
        if fast is not None:
            return fast
    import distro

    if not host.is_capture:  # this machine: distro reads / itself (what it reads, the host read too)
        d = distro.LinuxDistribution(include_lsb=False, include_uname=False, include_oslevel=False,
                                     distro_release_file=release_file)
        return d.id(), d.version(), d.like()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pick-backend-os.") as root:
        for path, text in tree.items():
            dest = os.path.join(root, path.lstrip("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "w", encoding="utf-8") as f:
                f.write(text)
        d = distro.LinuxDistribution(root_dir=root, include_lsb=False, include_uname=False, include_oslevel=False,
                                     distro_release_file=release_file)
        return d.id(), d.version(), d.like()


def probe(host, profile) -> None:
    p = profile.os
    p.name = "linux"
    p.version = host.release
    try:
        info = distro_info(host)
    except (ValueError, UnicodeError) as e:  # distro's shlex parser on a broken os-release line
        profile.warn("os", f"os-release could not be parsed ({e}): distro unknown")
        info = ()
    if info is None:
        profile.warn("os", "no /etc/os-release or /usr/lib/os-release: distro unknown")
    elif info:
        p.distro.id, p.distro.version, p.distro.like = info
    version = host.read("/proc/version") or ""
    p.wsl = "microsoft" in version.lower() or host.exists("/dev/dxg")
    p.container = host.exists("/.dockerenv") or host.exists("/run/.containerenv")
