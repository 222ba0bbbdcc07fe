"""Safe unpacking and the atomic swap into the cache.

``extract(archive, staging)`` unpacks .zip, .tar.gz/.tgz and .tar.xz (and .7z when py7zr is
installed) into a staging directory, refusing absolute paths, ``..`` and links that point outside.
``Swap`` moves the old install to ``<dest>.old``, the staging tree to ``<dest>``, and either commits
(removing ``.old``) or rolls back.  ``lock(path)`` serializes two installs of the same backend.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import stat
import tarfile
import zipfile


class ArchiveError(Exception):
    """The archive is unusable (exit 4)."""


def archive_kind(name: str) -> str:
    low = name.lower()
    for ext, kind in ((".zip", "zip"), (".tar.gz", "tar"), (".tgz", "tar"), (".tar.xz", "tar"), (".7z", "7z")):
        if low.endswith(ext):
            return kind
    raise ArchiveError(f"unsupported archive: {name} (supported: .zip, .tar.gz, .tar.xz)")


def _check_name(name: str, archive: str) -> str:
    n = name.replace("\\", "/")
    if n.startswith("/") or (len(n) > 1 and n[1] == ":") or posixpath.isabs(n):
        raise ArchiveError(f"{archive}: refusing entry with an absolute path: {name}")
    parts = [p for p in n.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"{archive}: refusing entry that climbs out with '..': {name}")
    return "/".join(parts)


def _check_link(name: str, target: str, archive: str, hard: bool = False) -> None:
    t = target.replace("\\", "/")
    if t.startswith("/") or (len(t) > 1 and t[1] == ":"):
        raise ArchiveError(f"{archive}: refusing link {name} -> {target} (absolute target)")
    base = "" if hard else posixpath.dirname(name)
    resolved = posixpath.normpath(posixpath.join(base, t))
    if resolved == ".." or resolved.startswith("../"):
        raise ArchiveError(f"{archive}: refusing link {name} -> {target} (points outside the archive)")


def extract(archive: str, staging: str, name: str | None = None) -> None:
    label = name or os.path.basename(archive)
    kind = archive_kind(label)
    os.makedirs(staging, exist_ok=True)
    try:
        if kind == "zip":
            _extract_zip(archive, staging, label)
        elif kind == "tar":
            _extract_tar(archive, staging, label)
        else:
            _extract_7z(archive, staging, label)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, ValueError) as e:
        raise ArchiveError(f"{label}: not a readable archive ({e})") from None


def _extract_zip(archive, staging, label):
    with zipfile.ZipFile(archive) as z:
        infos = z.infolist()
        links = []
        for info in infos:
            rel = _check_name(info.filename, label)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                target = z.read(info).decode("utf-8", "replace")
                _check_link(rel, target, label)
                links.append((rel, target))
        for info in infos:
            rel = _check_name(info.filename, label)
            if not rel:
                continue
            mode = info.external_attr >> 16
            out = os.path.join(staging, *rel.split("/"))
            if info.is_dir():
                os.makedirs(out, exist_ok=True)
                continue
            if stat.S_ISLNK(mode):
                continue
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(info) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
            if mode & 0o111:
                os.chmod(out, 0o755)
        for rel, target in links:
            out = os.path.join(staging, *rel.split("/"))
            os.makedirs(os.path.dirname(out), exist_ok=True)
            os.symlink(target, out)


def _extract_tar(archive, staging, label):
    with tarfile.open(archive) as t:
        members = t.getmembers()
        for m in members:
            rel = _check_name(m.name, label)
            if m.issym():
                _check_link(rel, m.linkname, label)
            elif m.islnk():
                _check_name(m.linkname, label)
                _check_link(rel, m.linkname, label, hard=True)
            elif not (m.isfile() or m.isdir()):
                raise ArchiveError(f"{label}: refusing special file {m.name}")
        if hasattr(tarfile, "data_filter"):
            t.extractall(staging, filter="data")  # a second line of defence (Python 3.12+)
        else:  # pragma: no cover - older Pythons
            t.extractall(staging)


def _extract_7z(archive, staging, label):
    try:
        import py7zr  # optional
    except ImportError:
        raise ArchiveError(f"unsupported archive: {label} (.7z needs the optional py7zr package: "
                           "pip install py7zr)") from None
    with py7zr.SevenZipFile(archive) as z:
        for n in z.getnames():
            _check_name(n, label)
        z.extractall(staging)


def find_binary(root: str, binary: str, os_name: str) -> str:
    """Relative path of the executable ``binary`` inside ``root`` (searched recursively)."""
    names = {binary + ".exe", binary} if os_name == "windows" else {binary}
    found_not_exec = None
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            if f in names:
                p = os.path.join(dirpath, f)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                if os_name == "windows" or os.name == "nt" or os.access(p, os.X_OK):
                    return os.path.relpath(p, root)
                found_not_exec = os.path.relpath(p, root)
    if found_not_exec:
        raise ArchiveError(f"{found_not_exec} in the archive is not executable")
    raise ArchiveError(f"the archive does not contain {binary}")


def remove_tree(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.remove(path)
    elif os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)


class Swap:
    """dest -> dest.old, staging -> dest; ``commit`` removes .old, ``rollback`` restores it."""

    def __init__(self, staging: str, dest: str):
        self.staging, self.dest, self.old = staging, dest, dest + ".old"
        self.had_old = False
        self.done = False

    def run(self) -> None:
        remove_tree(self.old)  # a leftover from a crash
        if os.path.lexists(self.dest):
            os.rename(self.dest, self.old)
            self.had_old = True
        try:
            os.rename(self.staging, self.dest)
        except BaseException:
            if self.had_old:
                os.rename(self.old, self.dest)
                self.had_old = False
            raise
        self.done = True

    def rollback(self) -> None:
        if self.done:
            remove_tree(self.dest)
            self.done = False
        if self.had_old:
            os.rename(self.old, self.dest)
            self.had_old = False

    def commit(self) -> None:
        if self.had_old:
            remove_tree(self.old)
            self.had_old = False


@contextlib.contextmanager
def lock(path: str):
    """An exclusive lock on ``path`` (fcntl on Unix, msvcrt on Windows), waiting for the holder."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    f = open(path, "a+")
    try:
        if os.name == "nt":  # pragma: no cover
            import msvcrt

            while True:
                try:
                    msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    continue
        else:
            import fcntl

            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        yield
    finally:
        if os.name != "nt":
            import fcntl

            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        f.close()
