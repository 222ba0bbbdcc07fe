"""Safe unpacking and the atomic swap into the cache.

``extract(archive, staging)`` unpacks .zip, .tar.gz/.tgz and .tar.xz (and .7z when py7zr is
installed) into a staging directory in one streaming pass: each entry is checked, then written.
Escape is impossible by construction, not by judging the text of names and links:

- every directory on the way to an entry is opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to
  the one before (``dir_fd``), starting at the staging directory, so no write ever passes through a
  link, whatever earlier entries created; files are created ``O_CREAT | O_EXCL | O_NOFOLLOW``;
- symbolic links are created only after every file and directory is written, and then every link
  in the finished tree is resolved component by component against the real tree: a link that
  leaves the tree, or that passes through another link on the way, refuses the archive;
- hard links are copies of a regular file already written into the tree;
- Python's tarfile ``data`` filter is not relied on (Pythons before 3.10.12 / 3.11.4 lack it).

Caps (``Caps``): expanded bytes and entry count, checked against each entry's declared size before
it is written (and the whole archive's declared total for zip and 7z), and counted while writing.

``Swap`` moves the old install to ``<dest>.old``, the staging tree to ``<dest>``, and either commits
(removing ``.old``) or rolls back; ``repair(dest)`` finishes or undoes a swap a crash interrupted.
``lock(path)`` serializes two installs of the same backend.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
import sys
import tarfile
import zipfile

from selector.install import env_number

GiB = 1 << 30
DEFAULT_MAX_UNPACKED = 32 * GiB
DEFAULT_MAX_ENTRIES = 200_000
MAX_UNPACKED_ENV = "PICK_BACKEND_MAX_UNPACKED"
MAX_ENTRIES_ENV = "PICK_BACKEND_MAX_ENTRIES"
COPY_CHUNK = 1 << 20
MAX_DEPTH = 64  # parts of an archive entry's path; real builds have under 10 (docs/install.md)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIRFLAG = getattr(os, "O_DIRECTORY", 0)
BINARY = getattr(os, "O_BINARY", 0)
HAVE_DIRFD = os.open in os.supports_dir_fd and os.mkdir in os.supports_dir_fd and bool(NOFOLLOW)


class ArchiveError(Exception):
    """The archive is unusable or hostile (exit 4)."""


class Caps:
    """Limits on what one archive may unpack to (documented in docs/install.md)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_UNPACKED, max_entries: int = DEFAULT_MAX_ENTRIES):
        self.max_bytes, self.max_entries = max_bytes, max_entries

    @classmethod
    def from_env(cls, env=None) -> Caps:
        env = os.environ if env is None else env
        return cls(env_number(env, MAX_UNPACKED_ENV, DEFAULT_MAX_UNPACKED, int),
                   env_number(env, MAX_ENTRIES_ENV, DEFAULT_MAX_ENTRIES, int))


def human(n: int | float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def archive_kind(name: str) -> str:
    low = name.lower()
    for ext, kind in ((".zip", "zip"), (".tar.gz", "tgz"), (".tgz", "tgz"), (".tar.xz", "txz"), (".7z", "7z")):
        if low.endswith(ext):
            return kind
    raise ArchiveError(f"unsupported archive: {name} (supported: .zip, .tar.gz, .tar.xz, .7z with py7zr)")


def _check_name(name: str, archive: str) -> str:
    n = name.replace("\\", "/")
    if "\0" in n:
        raise ArchiveError(f"{archive}: refusing entry with a NUL byte in its name: {name!r}")
    if n.startswith("/") or (len(n) > 1 and n[1] == ":") or posixpath.isabs(n):
        raise ArchiveError(f"{archive}: refusing entry with an absolute path: {name}")
    parts = [p for p in n.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"{archive}: refusing entry that climbs out with '..': {name}")
    if len(parts) > MAX_DEPTH:
        raise ArchiveError(f"{archive}: refusing an entry {len(parts)} levels deep (at most {MAX_DEPTH} parts): "
                           f"{'/'.join(parts[:3])}/...")
    return "/".join(parts)


def walk(root: str):
    """os.walk without recursion (a tree deeper than Python's recursion limit is walked too) and
    never into a link: (dirpath, dirnames, filenames), top-down; pruning ``dirnames`` prunes."""
    stack = [root]
    while stack:
        top = stack.pop()
        dirs, files = [], []
        try:
            with os.scandir(top) as it:
                for e in it:
                    try:
                        (dirs if e.is_dir(follow_symlinks=False) else files).append(e.name)
                    except OSError:
                        files.append(e.name)
        except OSError:
            continue
        yield top, dirs, files
        stack.extend(os.path.join(top, d) for d in reversed(dirs))


class Tree:
    """Writes entries under ``root`` without ever following a link (see the module docstring)."""

    def __init__(self, root: str, label: str, caps: Caps | None = None):
        os.makedirs(root, exist_ok=True)
        self.root, self.label = root, label
        self.caps = caps or Caps()
        self.total = 0
        self.count = 0
        self.links: list[tuple[str, str]] = []
        self.rootfd = os.open(root, os.O_RDONLY | DIRFLAG) if HAVE_DIRFD else None

    def close(self):
        if self.rootfd is not None:
            os.close(self.rootfd)
            self.rootfd = None

    # -- limits
    def admit(self, name: str, size: int) -> None:
        self.count += 1
        if self.count > self.caps.max_entries:
            raise ArchiveError(f"{self.label}: more than {self.caps.max_entries} entries; refusing "
                               f"(cap {MAX_ENTRIES_ENV})")
        if size < 0 or self.total + size > self.caps.max_bytes:
            raise ArchiveError(f"{self.label}: unpacks to more than {human(self.caps.max_bytes)} (at {name}, "
                               f"{human(max(size, 0))}); refusing before writing it (cap {MAX_UNPACKED_ENV})")

    def _count(self, n: int, name: str) -> None:
        self.total += n
        if self.total > self.caps.max_bytes:
            raise ArchiveError(f"{self.label}: unpacks to more than {human(self.caps.max_bytes)} (at {name}); "
                               f"refusing (cap {MAX_UNPACKED_ENV})")

    # -- directories
    def _refuse(self, rel, where, why):
        return ArchiveError(f"{self.label}: refusing {rel}: {where} {why}")

    def _parent(self, rel: str):
        """An fd (or path) of the real directory holding ``rel``, created as needed, never via a link."""
        parts = rel.split("/")[:-1]
        if not HAVE_DIRFD:
            p = self.root
            for i, part in enumerate(parts):
                p = os.path.join(p, part)
                if os.path.islink(p):
                    raise self._refuse(rel, "/".join(parts[:i + 1]), "is a link")
                if not os.path.exists(p):
                    os.mkdir(p, 0o755)
                elif not os.path.isdir(p):
                    raise self._refuse(rel, "/".join(parts[:i + 1]), "is a file")
            return p
        fd = os.dup(self.rootfd)
        try:
            for i, part in enumerate(parts):
                try:
                    nfd = os.open(part, os.O_RDONLY | DIRFLAG | NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    nfd = os.open(part, os.O_RDONLY | DIRFLAG | NOFOLLOW, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                        what = "is a link" if _is_link(part, fd) else "is not a directory"
                        raise self._refuse(rel, "/".join(parts[:i + 1]), what) from None
                    raise
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _done_parent(self, parent):
        if HAVE_DIRFD:
            os.close(parent)

    def mkdir(self, rel: str) -> None:
        if not rel:
            return
        self.admit(rel, 0)
        parent = self._parent(rel + "/x")
        self._done_parent(parent)

    # -- files
    def _clear(self, parent, name, rel):
        """Remove what an earlier entry put at ``name`` (a file or a link, never followed)."""
        try:
            st = os.lstat(name, dir_fd=parent) if HAVE_DIRFD else os.lstat(os.path.join(parent, name))
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            raise self._refuse(rel, rel, "is already a directory")
        if HAVE_DIRFD:
            os.unlink(name, dir_fd=parent)
        else:
            os.unlink(os.path.join(parent, name))

    def file(self, rel: str, src, size: int, mode: int) -> None:
        """Write ``src`` (a readable file object) to ``rel``; ``size`` is the declared size."""
        self.admit(rel, size)
        perm = 0o755 if mode & 0o111 else 0o644
        name = rel.rsplit("/", 1)[-1]
        parent = self._parent(rel)
        try:
            self._clear(parent, name, rel)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | BINARY
            fd = os.open(name, flags, perm, dir_fd=parent) if HAVE_DIRFD else \
                os.open(os.path.join(parent, name), flags, perm)
        finally:
            self._done_parent(parent)
        with open(fd, "wb", closefd=True) as out:
            written = 0
            read = src.read
            while True:
                block = read(COPY_CHUNK)
                if not block:
                    break
                written += len(block)
                if written > size:
                    self._count(written - size, rel)  # more than declared still counts against the cap
                out.write(block)
        self._count(min(written, size), rel)

    def hardlink(self, rel: str, target_rel: str) -> None:
        """A copy of the regular file ``target_rel`` already in the tree."""
        parent = self._parent(target_rel)
        tname = target_rel.rsplit("/", 1)[-1]
        try:
            # links are made last, so NOFOLLOW on a hard link's target is a second guard no test can reach
            try:
                if HAVE_DIRFD:
                    fd = os.open(tname, os.O_RDONLY | NOFOLLOW | BINARY, dir_fd=parent)  # pragma: no mutate
                else:
                    fd = os.open(os.path.join(parent, tname), os.O_RDONLY | NOFOLLOW | BINARY)  # pragma: no mutate
            except OSError:
                raise ArchiveError(f"{self.label}: refusing hard link {rel} -> {target_rel} "
                                   "(not a file written earlier)") from None
        finally:
            self._done_parent(parent)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a directory opens read-only too
            os.close(fd)
            raise ArchiveError(f"{self.label}: refusing hard link {rel} -> {target_rel} (not a regular file)")
        with open(fd, "rb", closefd=True) as src:
            self.file(rel, src, st.st_size, st.st_mode)

    def symlink(self, rel: str, target: str) -> None:
        self.admit(rel, 0)
        t = target.replace("\\", "/")
        if not t or "\0" in t or t.startswith("/") or (len(t) > 1 and t[1] == ":"):
            raise ArchiveError(f"{self.label}: refusing link {rel} -> {target} (absolute or empty target)")
        self.links.append((rel, t))

    def finish(self) -> None:
        """Create the links, last, then check every link in the finished tree."""
        for rel, target in self.links:
            name = rel.rsplit("/", 1)[-1]
            parent = self._parent(rel)
            try:
                self._clear(parent, name, rel)
                if HAVE_DIRFD:
                    os.symlink(target, name, dir_fd=parent)
                else:
                    os.symlink(target, os.path.join(parent, name))
            finally:
                self._done_parent(parent)
        check_links(self.root, self.label)


def _is_link(name, dir_fd) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def check_links(root: str, label: str) -> None:
    """Every symbolic link under ``root`` must resolve inside it without passing through another
    link (its own final target may be a link: ``libx.so -> libx.so.1 -> libx.so.1.2``)."""
    for dirpath, dirnames, filenames in walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                continue
            rel = os.path.relpath(p, root).replace(os.sep, "/")
            target = os.readlink(p)
            t = target.replace("\\", "/")
            if t.startswith("/") or (len(t) > 1 and t[1] == ":"):
                raise ArchiveError(f"{label}: refusing link {rel} -> {target} (absolute target)")
            cur = rel.split("/")[:-1]
            comps = [c for c in t.split("/") if c not in ("", ".")]
            for i, c in enumerate(comps):
                if c == "..":
                    if not cur:
                        raise ArchiveError(f"{label}: refusing link {rel} -> {target} (points outside the archive)")
                    cur.pop()
                    continue
                cur.append(c)
                here = os.path.join(root, *cur)
                if i < len(comps) - 1 and os.path.islink(here):
                    raise ArchiveError(f"{label}: refusing link {rel} -> {target} (resolves through the link "
                                       f"{'/'.join(cur)})")
        # walk never descends into links to directories: nothing below a link is visited


def extract(archive, staging: str, name: str | None = None, caps: Caps | None = None) -> None:
    """Unpack ``archive`` (a path, or a readable binary file object for tar kinds) into ``staging``."""
    label = name or os.path.basename(archive)
    kind = archive_kind(label)
    tree = Tree(staging, label, caps)
    try:
        if kind == "zip":
            _extract_zip(archive, tree)
        elif kind in ("tgz", "txz"):
            _extract_tar(archive, tree, kind)
        else:
            _extract_7z(archive, tree)
        tree.finish()
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, ValueError, LookupError, NotImplementedError) as e:
        raise ArchiveError(f"{label}: not a readable archive ({e.__class__.__name__}: {e})") from None
    except Exception as e:
        # the decoders' own errors: ISA-L raises igzip_lib.IsalError on a bad deflate block
        if type(e).__module__.startswith(("py7zr", "isal", "igzip_lib", "gzip", "lzma", "zlib")) or \
                type(e).__name__ in ("BadGzipFile", "LZMAError", "IsalError", "error"):  # pragma: no mutate
            raise ArchiveError(f"{label}: not a readable archive ({e.__class__.__name__}: {e})") from None
        raise
    finally:
        tree.close()


# A declared size past max(RATIO x the archive, RATIO_FLOOR) is a decompression bomb: cargo's rule for
# crate archives (rust-lang/cargo, "max(20 x compressed size, 512 MiB)"). Real builds stay far below
# it: llama.cpp CPU/Vulkan 2-3:1, a CUDA build 8.6:1 (ggml-org/llama.cpp#16205), a TheRock runtime
# 5.7:1 (lemonade-sdk/lemonade#1124).
RATIO, RATIO_FLOOR = 20, 512 * 1024 * 1024


def _archive_size(archive) -> int | None:
    try:
        if isinstance(archive, (str, bytes, os.PathLike)):
            return os.path.getsize(archive)
        pos = archive.tell()
        size = archive.seek(0, os.SEEK_END)
        archive.seek(pos)
        return size
    except (OSError, AttributeError, ValueError):
        return None


def _check_declared(tree: Tree, declared: int, archive) -> None:
    """Refuse, before a byte is written, an archive whose index declares more than the cap or more
    than RATIO times its own size (past RATIO_FLOOR)."""
    if declared > tree.caps.max_bytes:
        raise ArchiveError(f"{tree.label}: declares {human(declared)} unpacked, more than the cap of "
                           f"{human(tree.caps.max_bytes)}; refusing before writing ({MAX_UNPACKED_ENV})")
    size = _archive_size(archive)
    if size and declared > max(RATIO * size, RATIO_FLOOR):
        raise ArchiveError(f"{tree.label}: declares {human(declared)} unpacked from {human(size)}, more than "
                           f"{RATIO} times its size and over {human(RATIO_FLOOR)} (a decompression bomb); "
                           "refusing before writing")


def _extract_zip(archive, tree: Tree):
    with zipfile.ZipFile(archive) as z:
        infos = z.infolist()
        _check_declared(tree, sum(max(i.file_size, 0) for i in infos), archive)
        if len(infos) > tree.caps.max_entries:
            raise ArchiveError(f"{tree.label}: {len(infos)} entries, more than {tree.caps.max_entries}; "
                               f"refusing ({MAX_ENTRIES_ENV})")
        for info in infos:
            rel = _check_name(info.filename, tree.label)
            mode = info.external_attr >> 16 if info.create_system == 3 else 0
            if not rel:
                continue
            if info.is_dir():
                tree.mkdir(rel)
            elif stat.S_ISLNK(mode):
                if info.file_size > 4096:
                    raise ArchiveError(f"{tree.label}: refusing link {rel} (target of {info.file_size} bytes)")
                tree.symlink(rel, z.read(info).decode("utf-8", "replace"))
            elif mode and not stat.S_ISREG(mode):
                raise ArchiveError(f"{tree.label}: refusing special file {info.filename}")
            else:
                with z.open(info) as src:
                    tree.file(rel, src, info.file_size, mode)


def _open_gzip(path):
    """ISA-L's gzip reader (python-isal, ~2x faster) when installed, else the standard library's."""
    try:
        from isal import igzip  # optional

        return igzip.IGzipFile(fileobj=path, mode="rb") if hasattr(path, "read") else igzip.open(path, "rb")
    except ImportError:
        import gzip

        return gzip.GzipFile(fileobj=path, mode="rb") if hasattr(path, "read") else gzip.open(path, "rb")


def _extract_tar(archive, tree: Tree, kind):
    if kind == "tgz":
        raw = _open_gzip(archive)
    else:
        import lzma

        raw = lzma.open(archive, "rb")
    # "r:" over the decompressing reader, not "r|": members are still read one after the other in a
    # single forward pass (the reader only ever seeks forward), without tarfile's stream buffer copies
    with raw, tarfile.open(fileobj=raw, mode="r:") as t:
        for m in t:  # one streaming pass: each member is checked, then written, in archive order
            rel = _check_name(m.name, tree.label)
            if m.isdir():
                tree.mkdir(rel)
            elif m.issym():
                tree.symlink(rel, m.linkname)
            elif m.islnk():
                tree.hardlink(rel, _check_name(m.linkname, tree.label))
            elif m.isfile():
                if not rel:
                    continue
                tree.file(rel, t.extractfile(m), m.size, m.mode)
            else:
                raise ArchiveError(f"{tree.label}: refusing special file {m.name}")


def _writers(tree: Tree, files: dict, staging: str):
    """py7zr's writer factory for ``tree``: each entry written only where the listing declared it, through
    the Tree's checks (its size admitted, its parent opened without following links); and the writers
    made, to close."""
    from py7zr.io import Py7zIO, WriterFactory

    class Out(Py7zIO):
        def __init__(self, rel):
            self.rel, self.n, self.out = rel, 0, None

        def write(self, s):
            if self.out is None:
                size = files.get(self.rel, 0)
                tree.admit(self.rel, size)
                name = self.rel.rsplit("/", 1)[-1]
                parent = tree._parent(self.rel)
                try:
                    tree._clear(parent, name, self.rel)
                    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | BINARY
                    fd = os.open(name, flags, 0o755, dir_fd=parent) if HAVE_DIRFD else \
                        os.open(os.path.join(parent, name), flags, 0o755)
                finally:
                    tree._done_parent(parent)
                self.out = open(fd, "wb", closefd=True)
            self.n += len(s)
            tree._count(len(s), self.rel)
            return self.out.write(s)

        def read(self, size=None):
            return b""

        def seek(self, offset, whence=0):
            return 0

        def flush(self):
            if self.out is not None:
                self.out.flush()

        def size(self):
            return self.n

        def close(self):
            if self.out is not None:
                self.out.close()
                self.out = None

    made = []

    class Factory(WriterFactory):
        def create(self, filename):
            rel = _check_name(os.path.relpath(os.path.abspath(filename), staging), tree.label)
            if rel not in files:
                raise ArchiveError(f"{tree.label}: refusing unexpected entry {filename}")
            o = Out(rel)
            # py7zr closes each writer itself; closing them again below only guards a version that does not
            made.append(o)  # pragma: no mutate
            return o

    return Factory(), made


def _extract_7z(archive, tree: Tree):
    try:
        import py7zr  # optional
    except ImportError:
        raise ArchiveError(f"unsupported archive: {tree.label} (.7z needs the optional py7zr package: "
                           "pip install py7zr)") from None

    with py7zr.SevenZipFile(archive) as z:
        entries = z.list()
        _check_declared(tree, sum(e.uncompressed or 0 for e in entries if not e.is_directory), archive)
        files = {}
        for e in entries:
            rel = _check_name(e.filename, tree.label)
            if e.is_symlink:
                raise ArchiveError(f"{tree.label}: refusing link {e.filename} (links in .7z archives are not supported)")
            if e.is_directory:
                tree.mkdir(rel)
            elif rel:
                files[rel] = e.uncompressed or 0
        staging = os.path.abspath(tree.root)
        factory, made = _writers(tree, files, staging)
        z.extractall(path=staging, factory=factory)
        for o in made:
            o.close()
        for rel in files:  # empty files get no write()
            # (on POSIX a '/' inside one part joins the same: the split is for Windows)
            if not os.path.lexists(os.path.join(tree.root, *rel.split("/"))):  # pragma: no mutate
                import io

                tree.file(rel, io.BytesIO(b""), 0, 0o644)


def strip_wrapper(staging: str, expect: str) -> bool:
    """When ``expect`` is not at the top of ``staging`` but the tree is one wrapper directory
    (TheRock's ``therock-dist/``) that holds it, move the wrapper's content up.  True if stripped."""
    # (on POSIX a '/' inside one part joins the same: the split is for Windows)
    if os.path.lexists(os.path.join(staging, *expect.split("/"))):  # pragma: no mutate
        return False
    top = os.listdir(staging)
    if len(top) != 1:
        return False
    wrapper = os.path.join(staging, top[0])
    if os.path.islink(wrapper) or not os.path.isdir(wrapper):
        return False
    # (on POSIX a '/' inside one part joins the same: the split is for Windows)
    if not os.path.lexists(os.path.join(wrapper, *expect.split("/"))):  # pragma: no mutate
        return False
    tmp = staging + ".unwrap"
    remove_tree(tmp)
    os.rename(wrapper, tmp)
    os.rmdir(staging)
    os.rename(tmp, staging)
    return True


def make_executable(root: str, rel: str) -> None:
    """Lemonade chmods the binaries after unpacking; some release archives carry no modes."""
    # (on POSIX a '/' inside one part joins the same: the split is for Windows)
    p = os.path.join(root, *rel.split("/"))  # pragma: no mutate
    st = os.lstat(p)
    if stat.S_ISREG(st.st_mode) and not st.st_mode & 0o100:
        os.chmod(p, (st.st_mode & 0o777) | 0o755 & ~0o022)


def find_binary(root: str, binary: str, os_name: str) -> str:
    """Relative path of ``binary`` inside ``root`` (searched recursively, never through links); a
    copy without execute bits is made executable, as Lemonade does after unpacking."""
    names = {binary + ".exe", binary} if os_name == "windows" else {binary}
    for dirpath, dirnames, filenames in walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            if f in names:
                p = os.path.join(dirpath, f)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                rel = os.path.relpath(p, root)
                # os.name: a Windows host has no execute bit to set (the same on every POSIX host)
                if os_name != "windows" and os.name != "nt" and not os.access(p, os.X_OK):  # pragma: no mutate
                    make_executable(root, rel.replace(os.sep, "/"))
                return rel
    raise ArchiveError(f"the archive does not contain {binary}")


def write_own(staging: str, name: str, text: str) -> None:
    """Write the tool's own file (version.txt, install.json, method.txt) at the top of ``staging``:
    whatever the archive put there (a file, a link onto the binary, a directory) is removed first and
    the file is created new, never through a link."""
    p = os.path.join(staging, name)
    if os.path.islink(p) or os.path.isfile(p):
        os.unlink(p)
    elif os.path.isdir(p):
        remove_tree(p)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | BINARY, 0o644)
    with open(fd, "w", encoding="utf-8", closefd=True) as f:
        f.write(text)


def remove_tree(path: str) -> None:
    """Remove a file, link or directory tree, without recursion (shutil.rmtree recurses, and a tree
    deeper than the recursion limit would stop it with RecursionError) and never through a link."""
    if os.path.islink(path) or os.path.isfile(path):
        os.remove(path)
        return
    if not os.path.isdir(path):
        return
    dirs = []
    for dirpath, dirnames, filenames in walk(path):
        dirs.append(dirpath)
        for f in filenames:
            try:
                os.unlink(os.path.join(dirpath, f))
            except OSError:
                pass
    for d in reversed(dirs):
        try:
            os.rmdir(d)
        except OSError:
            pass


def crash_point(step: str) -> None:
    """Test hook: ``PICK_BACKEND_TEST_KILL_AT=<step>`` kills this process with SIGKILL at ``step``
    (tests prove that any crash leaves the old or the new install, never a mix)."""
    if os.environ.get("PICK_BACKEND_TEST_KILL_AT") == step:
        import signal

        # run only in a process killed before coverage can save, so the mutation driver cannot map it;
        # test_install_safety's kill -9 tests pin it (they expect the exit by SIGKILL)
        sys.stdout.flush()  # pragma: no mutate
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))  # pragma: no mutate


class Swap:
    """dest -> dest.old, staging -> dest; ``commit`` removes .old, ``rollback`` restores it."""

    def __init__(self, staging: str, dest: str, kind: str = "backend"):
        self.staging, self.dest, self.old = staging, dest, dest + ".old"
        self.kind = kind
        self.had_old = False
        self.done = False

    def run(self) -> None:
        remove_tree(self.old)  # a leftover from a crash (repair() ran first: dest exists or never did)
        if os.path.lexists(self.dest):
            os.rename(self.dest, self.old)
            self.had_old = True
            crash_point(f"{self.kind}-old-moved")
        try:
            os.rename(self.staging, self.dest)
        except BaseException:
            if self.had_old:
                os.rename(self.old, self.dest)
                self.had_old = False
            raise
        self.done = True
        crash_point(f"{self.kind}-swapped")

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


def repair(dest: str) -> list[str]:
    """Finish or undo what a crash left around ``dest`` (call it under the lock): a ``.old`` with no
    ``dest`` goes back (the crash came between the two renames); a ``.old`` next to ``dest`` is the
    replaced install (the crash came before its removal); ``.staging`` and ``.unwrap`` are half-made.
    Returns what was done, for messages."""
    done = []
    old = dest + ".old"
    if os.path.lexists(old):
        if not os.path.lexists(dest):
            os.rename(old, dest)
            done.append(f"restored {dest} from {old}")
        else:
            remove_tree(old)
            done.append(f"removed {old}")
    for suffix in (".staging", ".staging.unwrap", ".trash"):
        if os.path.lexists(dest + suffix):
            remove_tree(dest + suffix)
            done.append(f"removed {dest + suffix}")
    for p in _partials(dest):
        os.remove(p)
        done.append(f"removed {p}")
    return done


def _partials(dest: str) -> list[str]:
    """Downloads a killed install left: ``.<dest name>.<asset>.partial`` beside ``dest``."""
    parent, name = os.path.split(dest)
    try:
        return [os.path.join(parent, n) for n in os.listdir(parent)
                if n.startswith(f".{name}.") and n.endswith(".partial")]
    except OSError:
        return []


def needs_repair(dest: str) -> bool:
    return any(os.path.lexists(dest + s) for s in (".old", ".staging", ".staging.unwrap", ".trash")) or \
        bool(_partials(dest))


class LockError(OSError):
    pass


@contextlib.contextmanager
def lock(path: str, wait_message=None, blocking: bool = True):
    """An exclusive lock on ``path`` (fcntl on Unix, msvcrt on Windows).  When another process holds
    it, ``wait_message`` (a callable) is called once and the lock is waited for; with
    ``blocking=False`` a held lock raises BlockingIOError instead."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # never through a link: a link planted at <dest>.lock would make the lock create its target
    # anywhere (as root on a shared cache, any file); O_NOFOLLOW refuses a link as the last part
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | NOFOLLOW | BINARY, 0o644)
    except OSError as e:
        if os.path.islink(path) or e.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "a symbolic link where the lock file belongs (not followed; remove it)",
                          path) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file where the lock file belongs (remove it)", path)
    f = os.fdopen(fd, "r+b")
    try:
        if os.name == "nt":  # pragma: no cover
            import msvcrt

            told = False
            while True:
                try:
                    msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)
                    break
                except OSError:
                    if not blocking:
                        # its one caller (repair_cache) skips any OSError by type; the words are never shown
                        raise BlockingIOError(errno.EAGAIN, "locked", path) from None  # pragma: no mutate
                    if not told and wait_message:
                        wait_message()
                        told = True
                    import time

                    time.sleep(0.2)
        else:
            import fcntl

            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not blocking:
                    raise
                if wait_message:
                    wait_message()
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        yield
    finally:
        f.close()  # closing the file releases the lock (flock and msvcrt alike)


def repair_cache(cache: str, only: str | None = None) -> list[str]:
    """``repair`` every install under ``<cache>/bin`` that a crash left a ``.old`` or ``.staging``
    beside (or just ``only``), each under its lock; one that an install holds right now is left
    alone, and so is a cache that cannot be written (read-only): status still reports it."""
    done: list[str] = []
    base = os.path.join(cache, "bin")
    dests = set()
    if only:
        dests.add(only)
    else:
        try:
            groups = sorted(os.listdir(base))
        except OSError:
            return done
        for g in groups:
            try:
                names = os.listdir(os.path.join(base, g))
            except OSError:
                continue
            for n in names:
                if n.startswith(".") and n.endswith(".partial"):  # .<dest>.<asset>.partial: find <dest> by its lock
                    parts = n[1:].split(".")
                    for i in range(1, len(parts)):
                        if ".".join(parts[:i]) + ".lock" in names:
                            dests.add(os.path.join(base, g, ".".join(parts[:i])))
                    continue
                for suffix in (".staging.unwrap", ".old", ".staging", ".trash"):
                    if n.endswith(suffix) and not n.startswith("."):
                        dests.add(os.path.join(base, g, n[:-len(suffix)]))
                        break
    for d in sorted(dests):  # each was found by a leftover that needs_repair() also sees
        try:
            with lock(d + ".lock", blocking=False):
                done += repair(d)
        except OSError:  # held by a running install, or a read-only cache
            continue
    return done
