#!/usr/bin/env python3
"""Build pick-backend.pyz: the whole command in one file that any CPython 3.10 or newer runs, with no
pip, no virtual environment and no network (docs/pyz.md).

    python3 tools/build_pyz.py                      # -> dist/pick-backend.pyz, its SHA-256 printed
    python3 tools/build_pyz.py --out FILE --wheels DIR

The file holds this checkout's `probes` and `selector` packages and the pure-Python wheels that
tools/pyz.lock pins, by version and SHA-256 (`pip download` fetches them from PyPI into --wheels,
once; a wheel whose hash differs is refused).  Each dependency keeps its METADATA and licence files
(`NAME-VERSION.dist-info/`).  What is not pure Python stays out: numpy and gguf (`models`, `plan`
and `bench` say they need them), pyamdgpuinfo (the probe reads sysfs without it), py7zr (a .7z
install says it needs it), isal (gzip falls back to the standard library).

The same inputs give the same bytes wherever and whenever they are built: entries sorted by name,
every time 1980-01-01 00:00, every mode 0644, one compression level, line ends of the project's
own files made LF, and nothing from the paths or the clock.  (Deflate is zlib's: a Python linked to
zlib-ng instead compresses differently; `--stored` writes no compression, the same bytes under any
zlib.)

`--from-installed` takes the dependencies from this interpreter's installed distributions instead
of the wheels (the tests build so: they have no network).  An installed distribution holds its
wheel's files plus what pip adds (RECORD, INSTALLER, byte code, scripts) and, for a distribution
installed from a compiled wheel (charset-normalizer), its extension modules: those are left out,
so at the locked versions the result is the same file as from the wheels.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCK = os.path.join(ROOT, "tools", "pyz.lock")
PACKAGES = ("probes", "selector")
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold
MODE = 0o100644
SHEBANG = b"#!/usr/bin/env python3\n"
INNER = "payload.zip"
BINARY = (".so", ".pyd", ".dylib", ".dll", ".exe")
LICENCE = re.compile(r"(LICEN[CS]E|COPYING|NOTICE|AUTHORS)", re.I)
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)\s+--hash=sha256:([0-9a-f]{64})\s*$")


class BuildError(Exception):
    pass


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    sha256: str


def norm(name: str) -> str:
    """A distribution name as wheels and dist-info directories spell it (PEP 427/503)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def read_lock(path: str = LOCK) -> list[Pin]:
    pins = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = PIN.match(line)
            if not m:
                raise BuildError(f"{path}:{n}: not 'NAME==VERSION --hash=sha256:HEX': {line!r}")
            pins.append(Pin(m[1], m[2], m[3]))
    return pins


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _wheel_for(pin: Pin, wheels: str) -> str | None:
    prefix = f"{norm(pin.name)}-{pin.version}-"
    for n in sorted(os.listdir(wheels)) if os.path.isdir(wheels) else []:
        if n.lower().startswith(prefix.lower()) and n.endswith(".whl") and sha256_of(os.path.join(wheels, n)) == pin.sha256:
            return os.path.join(wheels, n)
    return None


def fetch(pins: list[Pin], wheels: str) -> dict[str, str]:
    """{name: wheel path} for every pin, downloading the missing ones with pip (pure wheels only,
    their hashes required)."""
    missing = [p for p in pins if not _wheel_for(p, wheels)]
    if missing:
        os.makedirs(wheels, exist_ok=True)
        req = os.path.join(wheels, "requirements.txt")
        with open(req, "w", encoding="utf-8") as f:
            f.writelines(f"{p.name}=={p.version} --hash=sha256:{p.sha256}\n" for p in missing)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--only-binary", ":all:",
               "--platform", "any", "--implementation", "py", "--abi", "none", "--python-version", "3.10",
               "--dest", wheels, "-r", req]
        print("+", " ".join(cmd), file=sys.stderr)
        if subprocess.run(cmd).returncode != 0:
            raise BuildError("pip download failed (above); the wheels are fetched from PyPI once, into " + wheels)
    out = {}
    for p in pins:
        w = _wheel_for(p, wheels)
        if not w:
            raise BuildError(f"no wheel of {p.name}=={p.version} with sha256 {p.sha256} in {wheels}")
        out[p.name] = w
    return out


def keep(rel: str, distinfo: str) -> bool:
    """Whether a file of a distribution (its path in site-packages or in the wheel) goes in: the
    importable files, and of the dist-info only METADATA and the licence files."""
    parts = rel.split("/")
    if rel.startswith("../") or "__pycache__" in parts or rel.endswith((".pyc", ".pyo")) or rel.endswith(BINARY):
        return False
    if parts[0] == distinfo:
        rest = "/".join(parts[1:])
        return rest == "METADATA" or rest.startswith("licenses/") or bool(LICENCE.match(rest))
    return not parts[0].endswith((".dist-info", ".data"))


def wheel_files(path: str) -> dict[str, bytes]:
    name, version = os.path.basename(path).split("-")[:2]
    distinfo = f"{name}-{version}.dist-info"
    out = {}
    with zipfile.ZipFile(path) as z:
        for n in z.namelist():
            if n.endswith("/"):
                continue
            if n.endswith(BINARY):
                raise BuildError(f"{os.path.basename(path)} holds {n}, which is not pure Python")
            if n.startswith(f"{name}-{version}.data/"):
                raise BuildError(f"{os.path.basename(path)} installs files outside site-packages ({n})")
            if keep(n, distinfo):
                out[n] = z.read(n)
    return out


def installed_files(pin: Pin) -> tuple[dict[str, bytes], str]:
    """The files a pinned distribution installed in this interpreter, as the wheel holds them, and
    the installed version."""
    from importlib import metadata

    try:
        d = metadata.distribution(pin.name)
    except metadata.PackageNotFoundError:
        raise BuildError(f"{pin.name} is not installed in {sys.executable} (--from-installed)") from None
    distinfo = f"{norm(d.metadata['Name'])}-{d.version}.dist-info"
    out = {}
    for f in d.files or ():
        rel = str(f).replace(os.sep, "/")
        if keep(rel, distinfo):
            with open(f.locate(), "rb") as fh:
                out[rel] = fh.read()
    if not out:
        raise BuildError(f"{pin.name}: no RECORD of its files in {sys.executable}")
    return out, d.version


def project_files(root: str = ROOT) -> dict[str, bytes]:
    """This checkout's packages: every file but byte code and hidden files, text made LF (a
    Windows checkout gives the same bytes)."""
    out = {}
    for pkg in PACKAGES:
        for top, dirs, files in os.walk(os.path.join(root, pkg)):
            dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
            for n in files:
                if n.startswith(".") or n.endswith((".pyc", ".pyo")):
                    continue
                full = os.path.join(top, n)
                with open(full, "rb") as f:
                    data = f.read()
                if n.endswith((".py", ".json", ".txt", ".md")):
                    data = data.replace(b"\r\n", b"\n")
                out[os.path.relpath(full, root).replace(os.sep, "/")] = data
    version = re.search(rb'__version__ = "([^"]+)"', out["selector/__init__.py"])[1].decode()
    # the user agent and `importlib.metadata.version("pick-backend")` answer as installed
    out[f"pick_backend-{version}.dist-info/METADATA"] = (
        f"Metadata-Version: 2.1\nName: pick-backend\nVersion: {version}\nLicense: MIT\n").encode()
    return out


LAUNCHER = r'''# pick-backend.pyz: written by tools/build_pyz.py (docs/pyz.md).  Unpacks the packages beside
# it once, into a directory named by their hash, and runs the command from there: the byte code
# Python writes there makes every later start as fast as an installed pick-backend.
import os
import sys

PAYLOAD = "@PAYLOAD@"
EXIT_CANNOT_RUN = 4


def _say(msg):
    sys.stderr.write("pick-backend: %s\n" % msg)
    sys.stderr.flush()


def _roots():
    own = os.environ.get("PICK_BACKEND_PYZ_CACHE")
    if own:
        yield own
        return
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Local")
    elif sys.platform == "darwin":
        base = os.path.join(os.path.expanduser("~"), "Library", "Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    yield os.path.join(base, "pick-backend", "pyz")
    import tempfile  # only when the user's cache cannot be used

    yield os.path.join(tempfile.gettempdir(), "pick-backend-pyz" + ("-%d" % os.getuid() if hasattr(os, "getuid") else ""))


def _own(path):
    """A directory this user owns and other users cannot write (a shared temporary directory is
    neither); a group-writable one is a user's own under Debian's and Ubuntu's private groups."""
    if not hasattr(os, "getuid"):
        return True
    st = os.stat(path)
    return st.st_uid == os.getuid() and not st.st_mode & 0o002


def _unpack(archive, root):
    import io
    import shutil
    import tempfile
    import zipfile

    os.makedirs(root, mode=0o700, exist_ok=True)
    if not _own(root):
        raise OSError("%s belongs to another user or every user can write it" % root)
    target = os.path.join(root, PAYLOAD)
    tmp = tempfile.mkdtemp(prefix=PAYLOAD + ".", dir=root)
    try:
        with zipfile.ZipFile(archive) as z:
            z.extractall(tmp, [n for n in z.namelist() if n not in ("__main__.py", "payload.zip")])
            with zipfile.ZipFile(io.BytesIO(z.read("payload.zip"))) as inner:
                inner.extractall(tmp)
        open(os.path.join(tmp, ".complete"), "w").close()
        try:
            os.rename(tmp, target)
        except OSError:
            if not os.path.isfile(os.path.join(target, ".complete")):  # not another run's, done first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _home(archive):
    errors = []
    for root in _roots():
        target = os.path.join(root, PAYLOAD)
        try:
            if os.path.isfile(os.path.join(target, ".complete")) and _own(root):
                return target
            return _unpack(archive, root)
        except Exception as e:  # OSError, a damaged inner zip: the next place, then the message
            errors.append("%s (%s)" % (root, getattr(e, "strerror", None) or e))
    _say("cannot unpack %s into %s; set PICK_BACKEND_PYZ_CACHE to a directory this user can write"
         % (os.path.basename(archive), " or ".join(errors)))
    sys.exit(EXIT_CANNOT_RUN)


def _run():
    if sys.version_info < (3, 10):
        _say("needs Python 3.10 or newer; this is %d.%d (%s)" % (sys.version_info[0], sys.version_info[1], sys.executable))
        sys.exit(EXIT_CANNOT_RUN)
    archive = os.path.dirname(os.path.abspath(__file__))
    home = _home(archive)
    sys.path[:] = [home] + [p for p in sys.path if os.path.abspath(p or os.curdir) != archive]
    from selector.cli import main

    main()


_run()
'''


def launcher(payload: str) -> bytes:
    return LAUNCHER.replace("@PAYLOAD@", payload).encode()


def payload_id(entries: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for n in sorted(entries):
        h.update(n.encode() + b"\0" + str(len(entries[n])).encode() + b"\0" + entries[n])
    return h.hexdigest()[:24]


def _zip(files: dict[str, bytes], method: int, prefix: bytes = b"") -> bytes:
    buf = io.BytesIO()
    buf.write(prefix)
    with zipfile.ZipFile(buf, "w") as z:
        for n in sorted(files):
            info = zipfile.ZipInfo(n, EPOCH)
            info.compress_type = method if n != INNER else zipfile.ZIP_STORED  # compressed inside already
            info.create_system = 3  # Unix, wherever it is built (Windows would write 0)
            info.external_attr = MODE << 16
            z.writestr(info, files[n], compresslevel=None if info.compress_type == zipfile.ZIP_STORED else 9)
    return buf.getvalue()


def archive(entries: dict[str, bytes], stored: bool = False) -> bytes:
    """The zipapp's bytes: the shebang line, then a zip of the launcher, each distribution's
    METADATA and licences (readable with any zip tool) and one inner zip of the rest.  Python reads
    the outer zip's directory on every start to find the launcher: 31 entries took it 0.1 ms here,
    all 778 in one zip 2.4 ms."""
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    outer = {n: d for n, d in entries.items() if n.split("/")[0].endswith(".dist-info")}
    inner = {n: d for n, d in entries.items() if n not in outer}
    outer[INNER] = _zip(inner, method)
    outer["__main__.py"] = launcher(payload_id(entries))
    return _zip(outer, method, SHEBANG)


def collect(pins: list[Pin], wheels: str | None, from_installed: bool, root: str = ROOT) -> tuple[dict[str, bytes], list[str]]:
    """Every entry but the launcher, and notes on what differs from the lock."""
    entries = project_files(root)
    notes = []
    if from_installed:
        for p in pins:
            files, version = installed_files(p)
            if version != p.version:
                notes.append(f"{p.name} {version} is installed, the lock pins {p.version}: this file is not the pinned build")
            entries.update(files)
    else:
        for path in fetch(pins, wheels).values():
            entries.update(wheel_files(path))
    return entries, notes


def default_wheels() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pick-backend", "wheels")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "dist", "pick-backend.pyz"), help="the file to write (default: dist/pick-backend.pyz)")
    ap.add_argument("--wheels", default=None, help="where the pinned wheels are, or are downloaded to (default: ~/.cache/pick-backend/wheels)")
    ap.add_argument("--lock", default=LOCK, help="the pins (default: tools/pyz.lock)")
    ap.add_argument("--from-installed", action="store_true", help="the dependencies from this interpreter's installed distributions")
    ap.add_argument("--stored", action="store_true", help="no compression: the same bytes under any zlib")
    a = ap.parse_args(argv)
    try:
        pins = read_lock(a.lock)
        entries, notes = collect(pins, a.wheels or default_wheels(), a.from_installed)
    except (BuildError, OSError) as e:
        print(f"build_pyz: {e}", file=sys.stderr)
        return 1
    data = archive(entries, a.stored)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o755)
    os.replace(tmp, a.out)
    for n in notes:
        print(f"build_pyz: note: {n}", file=sys.stderr)
    print(f"{hashlib.sha256(data).hexdigest()}  {a.out}")
    print(f"{len(data):,} bytes, {len(entries) + 1} files, {len(pins)} pinned distributions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
