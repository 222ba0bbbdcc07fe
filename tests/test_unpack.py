"""Unpacking in process (selector/install/unpack.py): what each hostile entry is refused with, the
caps, wrapper directories, the swap and its repair.  Every archive test runs twice: through the
descriptor-relative writer Linux and macOS use (O_NOFOLLOW, dir_fd) and through the path-based
writer Windows uses, so the Windows defences are exercised here too."""

import io
import lzma
import os
import stat
import sys
import tarfile
import zipfile

import pytest

from selector.install import unpack
from selector.install.unpack import ArchiveError, Caps


@pytest.fixture(params=["dirfd", "paths"])
def writer(request, monkeypatch):
    if request.param == "paths":
        monkeypatch.setattr(unpack, "HAVE_DIRFD", False)
    elif not unpack.HAVE_DIRFD:
        pytest.skip("this platform has no dir_fd writer")
    return request.param


def tar_of(entries, mode="w:gz"):
    """(name, bytes) files, (name, None) directories, (name, ("sym"|"hard", target)) links."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as t:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if isinstance(data, tuple):
                info.type = tarfile.SYMTYPE if data[0] == "sym" else tarfile.LNKTYPE
                info.linkname = data[1]
                t.addfile(info)
            elif data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                t.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zip_of(entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in entries:
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            if isinstance(data, tuple):
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                z.writestr(info, data[1])
            elif data is None:
                info.external_attr = (stat.S_IFDIR | 0o755) << 16
                z.writestr(info if name.endswith("/") else zipfile.ZipInfo(name + "/"), b"")
            else:
                info.external_attr = (stat.S_IFREG | 0o644) << 16
                z.writestr(info, data)
    return buf.getvalue()


def zip_entry(name, mode, data):
    """A zip of one entry made on Unix with this full mode (file type bits included)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        info = zipfile.ZipInfo(name)
        info.create_system = 3
        info.external_attr = mode << 16
        z.writestr(info, data)
    return buf.getvalue()


def unpack_bytes(tmp_path, name, data, caps=None):
    p = tmp_path / name
    p.write_bytes(data)
    staging = tmp_path / ("staging-" + name)
    unpack.extract(str(p), str(staging), name, caps)
    return staging


def refused(tmp_path, name, data, caps=None):
    with pytest.raises(ArchiveError) as e:
        unpack_bytes(tmp_path, name, data, caps)
    return str(e.value)


# ---- names ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("ext, kind", [(".zip", "zip"), (".tar.gz", "tgz"), (".TGZ", "tgz"), (".tar.xz", "txz"),
                                       (".7z", "7z"), (".Zip", "zip")])
def test_archive_kinds(ext, kind):
    assert unpack.archive_kind("llama" + ext) == kind


@pytest.mark.parametrize("name", ["llama.tar", "llama.tar.bz2", "llama.rar", "llama"])
def test_unsupported_archive_names_the_file_and_what_is_supported(name):
    with pytest.raises(ArchiveError) as e:
        unpack.archive_kind(name)
    assert str(e.value) == f"unsupported archive: {name} (supported: .zip, .tar.gz, .tar.xz, .7z with py7zr)"


@pytest.mark.parametrize("n, text", [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
                                     (5 << 20, "5.0 MiB"), (3 << 30, "3.0 GiB"), (2 << 40, "2.0 TiB"),
                                     (4096 << 40, "4096.0 TiB")])
def test_human_sizes(n, text):
    assert unpack.human(n) == text


@pytest.mark.parametrize("name, words", [("/etc/x", "absolute path"), ("C:x", "absolute path"),
                                         ("a/../../x", "climbs out"), ("..", "climbs out")])
def test_entry_names_refused(tmp_path, writer, name, words):
    msg = refused(tmp_path, "a.tar.gz", tar_of([(name, b"x")]))
    assert msg.startswith("a.tar.gz: refusing entry") and words in msg


def test_a_nul_byte_in_a_name_is_refused():
    # tar headers end names at the first NUL; zip and 7z names can hold one
    with pytest.raises(ArchiveError) as e:
        unpack._check_name("bin/llama\0-server", "a.zip")
    assert str(e.value) == "a.zip: refusing entry with a NUL byte in its name: 'bin/llama\\x00-server'"


def test_dot_components_are_dropped_not_refused(tmp_path, writer):
    s = unpack_bytes(tmp_path, "a.tar.gz", tar_of([("./bin/./llama-server", b"x"), (".", None), ("./", None)]))
    assert (s / "bin" / "llama-server").read_bytes() == b"x"
    # an entry that names the top itself is skipped, and what follows is still unpacked
    s = unpack_bytes(tmp_path, "b.tar.gz", tar_of([(".", b"not a file"), ("a", b"1")]))
    assert (s / "a").read_bytes() == b"1"
    s = unpack_bytes(tmp_path, "c.zip", zip_of([("./", None), ("a", b"1")]))
    assert (s / "a").read_bytes() == b"1"


# ---- what an entry may not be -------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["a.tar.gz", "a.zip"])
def test_a_file_under_a_link_is_refused_and_nothing_leaves_the_tree(tmp_path, writer, fmt):
    outside = tmp_path / "outside"
    outside.mkdir()
    make = tar_of if fmt.endswith("gz") else zip_of
    data = make([("lib", ("sym", str(outside)) if fmt.endswith("gz") else ("sym", "../outside")),
                 ("lib/evil.so", b"x")])
    msg = refused(tmp_path, fmt, data)
    # tar: the absolute target is refused on sight; zip: links come last, and lib is a directory by then
    assert msg in (f"{fmt}: refusing link lib -> {outside} (absolute or empty target)",
                   f"{fmt}: refusing lib: lib is already a directory"), msg
    assert list(outside.iterdir()) == []


def test_a_directory_in_the_way_of_a_file_and_a_file_in_the_way_of_a_directory(tmp_path, writer):
    msg = refused(tmp_path, "a.tar.gz", tar_of([("bin", b"file"), ("bin/llama-server", b"x")]))
    assert msg == "a.tar.gz: refusing bin/llama-server: bin is not a directory" or \
        msg == "a.tar.gz: refusing bin/llama-server: bin is a file"
    msg = refused(tmp_path, "b.tar.gz", tar_of([("bin/x", b"1"), ("bin", b"file")]))
    assert msg == "b.tar.gz: refusing bin: bin is already a directory"


def test_a_link_in_the_path_of_a_later_file_is_named_as_a_link(tmp_path, writer):
    # links are made last, so the later file meets no link; a link over an earlier directory is refused at the end
    msg = refused(tmp_path, "a.tar.gz", tar_of([("d/x", b"1"), ("d", ("sym", "e")), ("e", None)]))
    assert "refusing d" in msg and "already a directory" in msg


def test_a_later_entry_replaces_an_earlier_file_never_writing_through_it(tmp_path, writer):
    s = unpack_bytes(tmp_path, "a.tar.gz", tar_of([("a", b"first"), ("a", b"second")]))
    assert (s / "a").read_bytes() == b"second"


@pytest.mark.parametrize("target", ["/etc/passwd", "", "C:/Windows", "C:\\x", "C:"])
def test_absolute_or_empty_link_targets_are_refused(tmp_path, writer, target):
    msg = refused(tmp_path, "a.tar.gz", tar_of([("l", ("sym", target))]))
    assert msg.startswith("a.tar.gz: refusing link l -> ") and "(absolute or empty target)" in msg


def test_links_are_kept_when_they_stay_inside(tmp_path, writer):
    s = unpack_bytes(tmp_path, "a.tar.gz", tar_of([("lib/libx.so.1.2", b"elf"), ("lib/libx.so.1", ("sym", "libx.so.1.2")),
                                                   ("lib/libx.so", ("sym", "libx.so.1")), ("bin/x", ("sym", "../lib/libx.so"))]))
    assert os.readlink(s / "lib" / "libx.so") == "libx.so.1"
    assert (s / "bin" / "x").read_bytes() == b"elf"


def test_link_checks(tmp_path):
    root = tmp_path / "r"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f").write_bytes(b"1")
    os.symlink("a", root / "dirlink")
    os.symlink("../a/f", root / "a" / "self")  # inside, through no link
    unpack.check_links(str(root), "x.zip")
    os.symlink("dirlink/f", root / "via")  # through another link
    with pytest.raises(ArchiveError) as e:
        unpack.check_links(str(root), "x.zip")
    assert str(e.value) == "x.zip: refusing link via -> dirlink/f (resolves through the link dirlink)"
    os.remove(root / "via")
    os.symlink("../../x", root / "a" / "up")
    with pytest.raises(ArchiveError) as e:
        unpack.check_links(str(root), "x.zip")
    assert str(e.value) == "x.zip: refusing link a/up -> ../../x (points outside the archive)"
    os.remove(root / "a" / "up")
    os.symlink("/etc", root / "abs")
    with pytest.raises(ArchiveError) as e:
        unpack.check_links(str(root), "x.zip")
    assert str(e.value) == "x.zip: refusing link abs -> /etc (absolute target)"
    os.remove(root / "abs")
    os.symlink("C:x", root / "drive")  # a Windows drive path, relative as POSIX reads it
    with pytest.raises(ArchiveError) as e:
        unpack.check_links(str(root), "x.zip")
    assert str(e.value) == "x.zip: refusing link drive -> C:x (absolute target)"


def test_hard_links_copy_an_earlier_file_only(tmp_path, writer):
    s = unpack_bytes(tmp_path, "a.tar.gz", tar_of([("bin/llama-server", b"elf"), ("bin/alias", ("hard", "bin/llama-server"))]))
    assert (s / "bin" / "alias").read_bytes() == b"elf"
    assert os.stat(s / "bin" / "alias").st_ino != os.stat(s / "bin" / "llama-server").st_ino
    msg = refused(tmp_path, "b.tar.gz", tar_of([("alias", ("hard", "nothing"))]))
    assert msg == "b.tar.gz: refusing hard link alias -> nothing (not a file written earlier)"
    msg = refused(tmp_path, "c.tar.gz", tar_of([("d", None), ("alias", ("hard", "d"))]))
    assert "refusing hard link alias -> d" in msg


def test_special_files_are_refused(tmp_path, writer):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        info = tarfile.TarInfo("fifo")
        info.type = tarfile.FIFOTYPE
        t.addfile(info)
    assert refused(tmp_path, "a.tar.gz", buf.getvalue()) == "a.tar.gz: refusing special file fifo"
    assert refused(tmp_path, "a.zip", zip_entry("dev", stat.S_IFCHR | 0o644, b"")) == "a.zip: refusing special file dev"


def test_zip_from_a_non_unix_system_ignores_its_attributes(tmp_path, writer):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        info = zipfile.ZipInfo("llama-server.exe")
        info.create_system = 0  # MS-DOS: external_attr holds DOS flags, not a Unix mode
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(info, b"MZ")
    s = unpack_bytes(tmp_path, "a.zip", buf.getvalue())
    assert not os.path.islink(s / "llama-server.exe") and (s / "llama-server.exe").read_bytes() == b"MZ"


def test_zip_link_targets_are_small(tmp_path, writer):
    msg = refused(tmp_path, "a.zip", zip_of([("l", ("sym", "x" * 4097))]))
    assert msg == "a.zip: refusing link l (target of 4097 bytes)"
    s = unpack_bytes(tmp_path, "b.zip", zip_of([("t/" + "x" * 200, b"1"), ("l", ("sym", "t/" + "x" * 200))]))
    assert os.path.islink(s / "l")


# ---- caps -----------------------------------------------------------------------------------------------

def test_running_size_cap_counts_every_file(tmp_path, writer):
    data = tar_of([("a", b"x" * 600), ("b", b"y" * 600)])
    msg = refused(tmp_path, "a.tar.gz", data, Caps(max_bytes=1000))
    assert msg == "a.tar.gz: unpacks to more than 1000 B (at b, 600 B); refusing before writing it " \
                  "(cap PICK_BACKEND_MAX_UNPACKED)"
    unpack_bytes(tmp_path, "ok.tar.gz", data, Caps(max_bytes=1200))  # exactly at the cap is allowed


def test_declared_size_cap_of_a_zip_is_checked_before_writing(tmp_path, writer):
    data = zip_of([("a", b"x" * 600), ("b", b"y" * 600)])
    msg = refused(tmp_path, "a.zip", data, Caps(max_bytes=1000))
    assert msg == "a.zip: declares 1.2 KiB unpacked, more than the cap of 1000 B; refusing before writing " \
                  "(PICK_BACKEND_MAX_UNPACKED)"
    assert not (tmp_path / "staging" / "a").exists()
    unpack_bytes(tmp_path, "ok.zip", data, Caps(max_bytes=1200))


def test_entry_cap(tmp_path, writer):
    zdata = zip_of([(f"f{i}", b"") for i in range(4)])
    assert refused(tmp_path, "a.zip", zdata, Caps(max_entries=3)) == \
        "a.zip: 4 entries, more than 3; refusing (PICK_BACKEND_MAX_ENTRIES)"
    unpack_bytes(tmp_path, "ok.zip", zdata, Caps(max_entries=4))
    tdata = tar_of([(f"f{i}", b"") for i in range(4)])
    assert refused(tmp_path, "a.tar.gz", tdata, Caps(max_entries=3)) == \
        "a.tar.gz: more than 3 entries; refusing (cap PICK_BACKEND_MAX_ENTRIES)"


def test_a_file_longer_than_declared_still_counts(tmp_path, writer):
    tree = unpack.Tree(str(tmp_path / "s"), "a.zip", Caps(max_bytes=100))
    try:
        with pytest.raises(ArchiveError) as e:
            tree.file("x", io.BytesIO(b"z" * 150), 10, 0o644)
        assert "unpacks to more than 100 B (at x)" in str(e.value)
    finally:
        tree.close()
    tree = unpack.Tree(str(tmp_path / "t"), "a.zip", Caps(max_bytes=100))
    tree.file("y", io.BytesIO(b"z" * 40), 50, 0o644)  # shorter than declared: what was written counts
    tree.file("w", io.BytesIO(b"z" * 60), 60, 0o644)
    assert tree.total == 100
    tree.close()


def test_caps_from_the_environment():
    c = Caps.from_env({"PICK_BACKEND_MAX_UNPACKED": "2048", "PICK_BACKEND_MAX_ENTRIES": "9"})
    assert (c.max_bytes, c.max_entries) == (2048, 9)
    d = Caps.from_env({})
    assert (d.max_bytes, d.max_entries) == (32 << 30, 200_000)


# ---- modes and broken archives ------------------------------------------------------------------------

def test_files_are_written_without_group_or_other_write(tmp_path, writer):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, mode in (("exe", 0o777), ("data", 0o666)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = 1, mode
            t.addfile(info, io.BytesIO(b"x"))
    old = os.umask(0)
    try:
        s = unpack_bytes(tmp_path, "a.tar.gz", buf.getvalue())
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(s / "exe").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(s / "data").st_mode) == 0o644


@pytest.mark.parametrize("name, data, why", [
    ("a.tar.gz", b"\x1f\x8b\x08\x00garbage-garbage", "not a readable archive"),
    ("a.tar.gz", b"plain text, not gzip", "not a readable archive"),
    ("a.tar.xz", b"\xfd7zXZ\x00garbage", "not a readable archive (LZMAError"),
    ("a.zip", b"PK\x03\x04garbage", "not a readable archive (BadZipFile"),
    ("a.tar.xz", lzma.compress(b"not a tar at all" * 100), "not a readable archive"),
])
@pytest.mark.parametrize("decoder", ["isal", "stdlib"])
def test_a_broken_archive_is_named_not_a_traceback(tmp_path, monkeypatch, name, data, why, decoder):
    if decoder == "isal":
        pytest.importorskip("isal")
    else:
        monkeypatch.setitem(sys.modules, "isal", None)  # the standard library's gzip, as without .[fast]
    msg = refused(tmp_path, name, data)
    assert msg.startswith(f"{name}: {why}"), msg


def test_a_truncated_tar_gz_is_named(tmp_path):
    data = tar_of([("a", os.urandom(50_000))])
    msg = refused(tmp_path, "a.tar.gz", data[: len(data) // 2])
    assert msg.startswith("a.tar.gz: not a readable archive ("), msg


def test_a_broken_7z_is_named(tmp_path):
    pytest.importorskip("py7zr")
    msg = refused(tmp_path, "a.7z", b"7z\xbc\xaf\x27\x1c\x00\x04" + b"\0" * 40)
    assert msg.startswith("a.7z: not a readable archive ("), msg


def test_7z_entries_are_written_with_the_same_checks(tmp_path, writer):
    py7zr = pytest.importorskip("py7zr")
    src = tmp_path / "src"
    (src / "bin").mkdir(parents=True)
    (src / "bin" / "llama-server.exe").write_bytes(b"MZ" * 1000)
    (src / "empty.txt").write_bytes(b"")
    buf = tmp_path / "a.7z"
    with py7zr.SevenZipFile(buf, "w") as z:
        z.write(str(src / "bin"), "bin")
        z.write(str(src / "bin" / "llama-server.exe"), "bin/llama-server.exe")
        z.write(str(src / "empty.txt"), "empty.txt")
    s = unpack_bytes(tmp_path, "a.7z", buf.read_bytes())
    assert (s / "bin" / "llama-server.exe").read_bytes() == b"MZ" * 1000
    assert (s / "empty.txt").read_bytes() == b""
    msg = refused(tmp_path, "b.7z", buf.read_bytes(), Caps(max_bytes=1000))
    assert "declares 2.0 KiB unpacked" in msg
    unpack_bytes(tmp_path, "d.7z", buf.read_bytes(), Caps(max_bytes=2000))  # the empty file and the directory: 0
    msg = refused(tmp_path, "c.7z", buf.read_bytes(), Caps(max_entries=2))
    assert "more than 2 entries" in msg


# ---- wrapper directories, binaries, own files --------------------------------------------------------

def _tree(root, files):
    for rel in files:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")


def test_a_single_wrapper_directory_is_stripped(tmp_path):
    s = tmp_path / "s"
    _tree(s, ["therock-dist/lib/libamdhip64.so", "therock-dist/bin/x"])
    assert unpack.strip_wrapper(str(s), "lib") is True
    assert sorted(os.listdir(s)) == ["bin", "lib"] and not (tmp_path / "s.unwrap").exists()


@pytest.mark.parametrize("layout", [["lib/libamdhip64.so"], ["a/lib/x", "b/lib/x"], ["w/bin/x"], ["w"]])
def test_no_stripping_when_there_is_no_single_wrapper_holding_it(tmp_path, layout):
    s = tmp_path / "s"
    _tree(s, layout)
    before = sorted(str(p.relative_to(s)) for p in s.rglob("*"))
    assert unpack.strip_wrapper(str(s), "lib") is False
    assert sorted(str(p.relative_to(s)) for p in s.rglob("*")) == before


def test_a_wrapper_that_is_a_link_is_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    _tree(elsewhere, ["lib/libamdhip64.so"])
    s = tmp_path / "s"
    s.mkdir()
    os.symlink(str(elsewhere), s / "therock-dist")
    assert unpack.strip_wrapper(str(s), "lib") is False
    assert os.path.islink(s / "therock-dist") and (elsewhere / "lib" / "libamdhip64.so").exists()


def test_find_binary(tmp_path):
    r = tmp_path / "r"
    _tree(r, ["z/llama-server", "a/llama-server", "b/llama-server.exe"])
    assert unpack.find_binary(str(r), "llama-server", "linux") == os.path.join("a", "llama-server")
    assert unpack.find_binary(str(r), "llama-server", "windows") == os.path.join("a", "llama-server")
    os.remove(r / "a" / "llama-server")
    os.symlink("../z/llama-server", r / "a" / "llama-server")  # a link is not the binary
    assert unpack.find_binary(str(r), "llama-server", "linux") == os.path.join("z", "llama-server")
    assert os.stat(r / "z" / "llama-server").st_mode & 0o111  # made executable on the way
    v = tmp_path / "v"  # a link named like the binary next to the real .exe: the .exe is found
    _tree(v, ["bin/llama-server.exe"])
    os.symlink("llama-server.exe", v / "bin" / "llama-server")
    assert unpack.find_binary(str(v), "llama-server", "windows") == os.path.join("bin", "llama-server.exe")
    w = tmp_path / "w"
    _tree(w, ["bin/llama-server.exe"])
    assert unpack.find_binary(str(w), "llama-server", "windows") == os.path.join("bin", "llama-server.exe")
    with pytest.raises(ArchiveError) as e:
        unpack.find_binary(str(w), "llama-server", "linux")
    assert str(e.value) == "the archive does not contain llama-server"
    os.mkdir(w / "llama-server")  # a directory of that name is not it either
    with pytest.raises(ArchiveError):
        unpack.find_binary(str(w), "llama-server", "linux")


def test_own_files_replace_whatever_the_archive_put_there(tmp_path):
    s = tmp_path / "s"
    _tree(s, ["llama-server"])
    os.symlink("llama-server", s / "version.txt")
    (s / "install.json").mkdir()
    (s / "install.json" / "x").write_bytes(b"1")
    (s / "method.txt").write_bytes(b"old")
    for name in ("version.txt", "install.json", "method.txt"):
        unpack.write_own(str(s), name, f"{name}\n")
        assert not os.path.islink(s / name) and (s / name).read_text() == f"{name}\n"
    assert (s / "llama-server").read_bytes() == b"x"  # the link's target is untouched


def test_remove_tree(tmp_path):
    _tree(tmp_path / "d", ["a/b"])
    (tmp_path / "f").write_bytes(b"1")
    os.symlink(str(tmp_path / "d"), tmp_path / "l")
    unpack.remove_tree(str(tmp_path / "l"))
    assert (tmp_path / "d" / "a" / "b").exists() and not os.path.lexists(tmp_path / "l")
    unpack.remove_tree(str(tmp_path / "f"))
    unpack.remove_tree(str(tmp_path / "d"))
    unpack.remove_tree(str(tmp_path / "nothing"))
    assert os.listdir(tmp_path) == []


# ---- swap and repair --------------------------------------------------------------------------------

def _install(p, text):
    p.mkdir(parents=True)
    (p / "version.txt").write_text(text)


def test_swap_commit_and_rollback(tmp_path):
    dest, staging = tmp_path / "vulkan", tmp_path / "vulkan.staging"
    _install(dest, "old")
    _install(staging, "new")
    s = unpack.Swap(str(staging), str(dest))
    s.run()
    assert (dest / "version.txt").read_text() == "new" and (tmp_path / "vulkan.old" / "version.txt").read_text() == "old"
    s.rollback()
    assert (dest / "version.txt").read_text() == "old" and not os.path.lexists(tmp_path / "vulkan.old")
    s.rollback()  # twice is harmless
    assert (dest / "version.txt").read_text() == "old"

    _install(staging, "new")
    s = unpack.Swap(str(staging), str(dest))
    s.run()
    s.commit()
    assert (dest / "version.txt").read_text() == "new" and not os.path.lexists(tmp_path / "vulkan.old")
    s.commit()
    assert sorted(os.listdir(tmp_path)) == ["vulkan"]


def test_swap_into_an_empty_place_rolls_back_to_nothing(tmp_path):
    dest, staging = tmp_path / "cpu", tmp_path / "cpu.staging"
    _install(staging, "new")
    (tmp_path / "cpu.old").mkdir()  # a leftover is cleared first
    s = unpack.Swap(str(staging), str(dest))
    s.run()
    assert (dest / "version.txt").read_text() == "new" and not s.had_old
    s.rollback()
    assert os.listdir(tmp_path) == []


def test_a_failed_rename_puts_the_old_install_back(tmp_path):
    dest = tmp_path / "vulkan"
    _install(dest, "old")
    s = unpack.Swap(str(tmp_path / "missing.staging"), str(dest))
    with pytest.raises(FileNotFoundError):
        s.run()
    assert (dest / "version.txt").read_text() == "old" and not os.path.lexists(tmp_path / "vulkan.old")
    s.rollback()
    assert (dest / "version.txt").read_text() == "old"


def test_repair_finishes_or_undoes_a_crash(tmp_path):
    dest = tmp_path / "vulkan"
    _install(tmp_path / "vulkan.old", "old")  # killed between the two renames
    assert unpack.needs_repair(str(dest))
    assert unpack.repair(str(dest)) == [f"restored {dest} from {dest}.old"]
    assert (dest / "version.txt").read_text() == "old" and not unpack.needs_repair(str(dest))

    _install(tmp_path / "vulkan.old", "older")  # killed before the replaced install was removed
    for junk in (".staging", ".staging.unwrap", ".trash"):
        _install(tmp_path / f"vulkan{junk}", "half")
    (tmp_path / ".vulkan.llama.tar.gz.partial").write_bytes(b"12")
    (tmp_path / ".cpu.llama.zip.partial").write_bytes(b"12")  # another backend's download: not ours
    assert unpack.needs_repair(str(dest))
    done = unpack.repair(str(dest))
    assert done == [f"removed {dest}.old", f"removed {dest}.staging", f"removed {dest}.staging.unwrap",
                    f"removed {dest}.trash", f"removed {tmp_path / '.vulkan.llama.tar.gz.partial'}"]
    assert sorted(os.listdir(tmp_path)) == [".cpu.llama.zip.partial", "vulkan"]
    assert (dest / "version.txt").read_text() == "old"
    assert unpack.repair(str(dest)) == [] and not unpack.needs_repair(str(dest))
    assert not unpack.needs_repair(str(tmp_path / "nothing" / "vulkan"))


@pytest.mark.parametrize("leftover", [".old", ".staging", ".staging.unwrap", ".trash"])
def test_each_leftover_needs_repair(tmp_path, leftover):
    (tmp_path / f"vulkan{leftover}").mkdir()
    assert unpack.needs_repair(str(tmp_path / "vulkan"))


def test_repair_cache_repairs_each_backend_and_leaves_a_held_one(tmp_path):
    base = tmp_path / "bin" / "llamacpp"
    _install(base / "vulkan", "v")
    _install(base / "vulkan.staging", "half")
    _install(base / "rocm-stable.old", "old")
    (base / ".cpu.llama.zip.partial").write_bytes(b"1")
    (base / "cpu.lock").write_bytes(b"")
    _install(base / "cuda.trash", "t")
    done = unpack.repair_cache(str(tmp_path))
    assert sorted(done) == sorted([f"removed {base / 'vulkan.staging'}",
                                   f"restored {base / 'rocm-stable'} from {base / 'rocm-stable.old'}",
                                   f"removed {base / '.cpu.llama.zip.partial'}", f"removed {base / 'cuda.trash'}"])
    assert unpack.repair_cache(str(tmp_path)) == []
    # an install running now holds the lock: its staging is left alone
    _install(base / "vulkan.staging", "half")
    with unpack.lock(str(base / "vulkan.lock")):
        assert unpack.repair_cache(str(tmp_path)) == []
    assert (base / "vulkan.staging").exists()
    assert unpack.repair_cache(str(tmp_path), only=str(base / "vulkan")) == [f"removed {base / 'vulkan.staging'}"]
    assert unpack.repair_cache(str(tmp_path / "none")) == []
    # a download's leftover is found through its backend's lock: no lock is made for anything else
    assert sorted(os.listdir(base)) == ["cpu.lock", "cuda.lock", "rocm-stable", "rocm-stable.lock", "vulkan",
                                        "vulkan.lock"]


def test_repair_cache_goes_on_past_a_group_it_cannot_read(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "0-a-file").write_bytes(b"x")  # sorts before the recipe directories
    _install(tmp_path / "bin" / "llamacpp" / "vulkan.staging", "half")
    assert unpack.repair_cache(str(tmp_path)) == [f"removed {tmp_path / 'bin' / 'llamacpp' / 'vulkan.staging'}"]


# ---- from the mutation sample's survivors ----------------------------------------------------------

def test_directories_and_links_cost_nothing_against_the_size_cap(tmp_path, writer):
    data = tar_of([("bin", None), ("lib", None), ("bin/a", b"x" * 600), ("lib/b", b"y" * 600),
                   ("share", None), ("lib/c", ("sym", "b"))])  # after the files, at the cap already
    unpack_bytes(tmp_path, "a.tar.gz", data, Caps(max_bytes=1200))  # exactly the files' bytes


def test_a_link_target_with_an_empty_component_cannot_climb_out(tmp_path):
    root = tmp_path / "r"
    (root / "a").mkdir(parents=True)
    os.symlink("a//../../x", root / "l")  # a, then two levels up: one above the archive
    with pytest.raises(ArchiveError) as e:
        unpack.check_links(str(root), "x.zip")
    assert "points outside the archive" in str(e.value)


def test_a_zip_link_target_that_is_not_utf8_stays_inside(tmp_path, writer):
    s = unpack_bytes(tmp_path, "a.zip", zip_entry("lib/libx.so", stat.S_IFLNK | 0o777, b"libx\xff.so.1"))
    assert os.readlink(s / "lib" / "libx.so") == "libx\ufffd.so.1"  # the bad byte replaced, not an error


def test_the_refusal_names_the_component_that_is_in_the_way(tmp_path, writer):
    msg = refused(tmp_path, "a.tar.gz", tar_of([("a/b", b"file"), ("a/b/c/x", b"1")]))
    assert msg in ("a.tar.gz: refusing a/b/c/x: a/b is not a directory", "a.tar.gz: refusing a/b/c/x: a/b is a file")


def test_made_directories_and_7z_files_get_plain_modes(tmp_path, writer):
    old = os.umask(0o022)
    try:
        s = unpack_bytes(tmp_path, "a.tar.gz", tar_of([("x/y/z", b"1")]))
        assert stat.S_IMODE(os.stat(s / "x").st_mode) == 0o755 and stat.S_IMODE(os.stat(s / "x" / "y").st_mode) == 0o755
        py7zr = pytest.importorskip("py7zr")
        src = tmp_path / "src.exe"
        src.write_bytes(b"MZ")
        arc = tmp_path / "b.7z"
        with py7zr.SevenZipFile(arc, "w") as z:
            z.write(str(src), "bin/llama-server.exe")
        s = unpack_bytes(tmp_path, "b.7z", arc.read_bytes())
        assert stat.S_IMODE(os.stat(s / "bin" / "llama-server.exe").st_mode) == 0o755
    finally:
        os.umask(old)


def test_repair_cache_goes_on_past_a_backend_an_install_holds(tmp_path):
    base = tmp_path / "bin" / "llamacpp"
    for name in ("cpu.staging", "vulkan.staging", "zz.staging"):
        _install(base / name, "half")
    with unpack.lock(str(base / "cpu.lock")):  # sorts first
        done = unpack.repair_cache(str(tmp_path))
    assert sorted(done) == [f"removed {base / 'vulkan.staging'}", f"removed {base / 'zz.staging'}"]
    assert (base / "cpu.staging").exists()


# ---- deep trees ------------------------------------------------------------------------------------

def deep_dir(base, levels):
    """A tree ``levels`` directories deep, made one level at a time (relative to a dir fd, so no
    path gets long), with a file at the bottom."""
    fd = os.open(base, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


def test_an_entry_deeper_than_the_cap_is_refused_before_writing(tmp_path):
    name = "/".join(["d"] * unpack.MAX_DEPTH) + "/f"  # one part more than the cap
    src = tmp_path / "deep.tar.gz"
    src.write_bytes(tar_of([("llama-server", b"x"), (name, b"y")]))
    staging = tmp_path / "s"
    with pytest.raises(ArchiveError, match=f"levels deep \\(at most {unpack.MAX_DEPTH} parts\\)"):
        unpack.extract(str(src), str(staging))
    assert not (staging / "d").exists()
    ok = tmp_path / "ok.tar.gz"
    ok.write_bytes(tar_of([("/".join(["d"] * (unpack.MAX_DEPTH - 1)) + "/f", b"y")]))
    unpack.extract(str(ok), str(tmp_path / "s2"))  # at the cap: fine


def test_a_tree_deeper_than_the_recursion_limit_is_walked_and_removed(tmp_path):
    levels = sys.getrecursionlimit() + 200
    root = tmp_path / "x.staging"
    root.mkdir()
    deep_dir(str(root), levels)
    assert sum(1 for _ in unpack.walk(str(root))) == levels + 1
    unpack.remove_tree(str(root))
    assert not root.exists()


def test_status_and_install_step_past_a_deep_leftover(tmp_path, cli):
    from conftest import machine

    leftover = tmp_path / "bin" / "llamacpp" / "vulkan.staging"
    leftover.mkdir(parents=True)
    deep_dir(str(leftover), sys.getrecursionlimit() + 200)
    r = cli("status", "--json", "--cache-dir", str(tmp_path), "--root", machine("linux-ubuntu24.04-strix-halo"))
    assert r.rc == 0, r.err
    assert not leftover.exists()


def test_a_link_already_in_the_tree_is_never_followed(tmp_path, writer):
    # whatever put it there, a link inside the tree is not a directory to write through
    root, outside = tmp_path / "staging", tmp_path / "outside"
    (root / "a").mkdir(parents=True)
    outside.mkdir()
    os.symlink(outside, root / "a" / "lib")
    t = unpack.Tree(str(root), "llama.zip")
    fds = _open_fds()
    with pytest.raises(ArchiveError) as e:
        t.file("a/lib/libggml.so", io.BytesIO(b"x"), 1, 0o644)
    assert str(e.value) == "llama.zip: refusing a/lib/libggml.so: a/lib is a link"
    assert os.listdir(outside) == []
    assert _open_fds() == fds  # the refusal closes the directories it had opened on the way


def test_doubled_and_dot_separators_name_the_same_file():
    # archivers on Windows write "bin//llama-server.exe" or "./bin/x": the same file, and the depth
    # cap counts real parts only
    assert unpack._check_name("llama-b1//bin///llama-server", "a.zip") == "llama-b1/bin/llama-server"
    assert unpack._check_name("./bin/./x", "a.zip") == "bin/x"
    deep = "/".join(["d"] * unpack.MAX_DEPTH)
    assert unpack._check_name(deep.replace("/", "//"), "a.zip") == deep


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts this process's descriptors in /proc")
def test_hard_links_leave_no_descriptor_open(tmp_path, writer):
    # each hard link is copied from its target through a descriptor; a leak of one per link would end
    # a large build's unpacking in "Too many open files"
    entries = [("bin/libggml.so", b"\x7fELF" + b"x" * 100)] + [(f"bin/libggml.so.{i}", ("hard", "bin/libggml.so"))
                                                               for i in range(50)]
    archive = tmp_path / "b.tar.gz"
    archive.write_bytes(tar_of(entries))
    before = len(os.listdir("/proc/self/fd"))
    unpack.extract(str(archive), str(tmp_path / "s"))
    assert len(os.listdir("/proc/self/fd")) == before
    assert (tmp_path / "s" / "bin" / "libggml.so.49").read_bytes().startswith(b"\x7fELF")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts this process's descriptors in /proc")
def test_directory_entries_leave_no_descriptor_open(tmp_path, writer):
    # a build lists its directories as entries of their own (tar does): each is opened to be made,
    # and closed again, or a tree of thousands of directories ends in "Too many open files"
    entries = [(f"llama-b1/lib/d{i}", None) for i in range(50)] + [("llama-b1/lib/d0/x.so", b"x")]
    archive = tmp_path / "d.tar.gz"
    archive.write_bytes(tar_of(entries))
    before = len(os.listdir("/proc/self/fd"))
    unpack.extract(str(archive), str(tmp_path / "s"))
    assert len(os.listdir("/proc/self/fd")) == before
    assert (tmp_path / "s" / "llama-b1" / "lib" / "d49").is_dir()


def test_the_cache_repair_leaves_a_users_dot_files_alone(tmp_path):
    # ".notes.old" beside the builds is the user's, not a crash's leftover: no lock is taken for it
    # (no ".notes.lock" appears) and it stays
    d = tmp_path / "bin" / "llamacpp"
    d.mkdir(parents=True)
    (d / ".notes.old").write_text("mine\n")
    assert unpack.repair_cache(str(tmp_path)) == []
    assert sorted(os.listdir(d)) == [".notes.old"]


def test_a_cache_directory_that_cannot_be_listed_has_no_partial_downloads(tmp_path):
    # status repairs every install it can see; one whose directory vanished or cannot be read is
    # skipped, never a crash
    assert unpack._partials(str(tmp_path / "gone" / "vulkan")) == []
    assert unpack.repair(str(tmp_path / "gone" / "vulkan")) == []


def _open_fds():
    """This process's open descriptors (Linux), or None where they cannot be counted."""
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None


def test_a_hard_link_to_a_directory_is_refused_and_leaves_no_descriptor(tmp_path, writer):
    archive = tmp_path / "h.tar.gz"
    archive.write_bytes(tar_of([("bin/d", None), ("bin/x", ("hard", "bin/d"))]))
    fds = _open_fds()
    with pytest.raises(ArchiveError) as e:
        unpack.extract(str(archive), str(tmp_path / "s"))
    assert "refusing hard link bin/x -> bin/d (not a regular file)" in str(e.value)
    assert _open_fds() == fds
