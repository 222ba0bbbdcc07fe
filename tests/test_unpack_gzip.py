"""A .tar.gz unpacks the same through ISA-L (python-isal, the fast path when installed) and through
the standard library (the fallback): same files, same bytes, same refusals."""

import io
import os
import stat
import sys
import tarfile

import pytest

from selector.install import unpack


def _tgz(path, entries):
    with tarfile.open(path, "w:gz") as t:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            t.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("decoder", ["isal", "stdlib"])
def test_tar_gz_unpacks_through_either_decoder(tmp_path, monkeypatch, decoder):
    if decoder == "isal":
        pytest.importorskip("isal")
    else:
        monkeypatch.setitem(sys.modules, "isal", None)  # import isal -> ImportError: the fallback
    blob = os.urandom(300_000)
    _tgz(tmp_path / "a.tar.gz", [("bin/llama-server", b"#!/bin/sh\n"), ("lib/libggml.so", blob)])
    unpack.extract(str(tmp_path / "a.tar.gz"), str(tmp_path / "out"))
    assert (tmp_path / "out" / "lib" / "libggml.so").read_bytes() == blob
    _tgz(tmp_path / "evil.tar.gz", [("../escape", b"x")])
    with pytest.raises(unpack.ArchiveError):
        unpack.extract(str(tmp_path / "evil.tar.gz"), str(tmp_path / "out2"))
    assert not (tmp_path / "escape").exists()


@pytest.mark.parametrize("name", ["..\\escape.txt", "bin\\..\\..\\escape.txt", "C:\\escape.txt", "\\escape.txt"])
def test_windows_separators_in_a_zip_cannot_climb_out(tmp_path, name):
    # zips written on Windows may use backslashes; unpacked on Windows they would be path separators
    import zipfile

    def regular(n):
        info = zipfile.ZipInfo(n)
        info.external_attr = 0o100644 << 16  # a regular file, as Windows zip tools also record
        return info

    with zipfile.ZipFile(tmp_path / "w.zip", "w") as z:
        z.writestr(regular("llama-server.exe"), b"MZ")
        z.writestr(regular(name), b"x")
    with pytest.raises(unpack.ArchiveError, match="absolute path|climbs out"):
        unpack.extract(str(tmp_path / "w.zip"), str(tmp_path / "out"))
    assert not (tmp_path / "escape.txt").exists()


@pytest.mark.parametrize("mode,want", [(0o644, 0o755), (0o600, 0o755), (0o000, 0o755)])
def test_a_binary_without_modes_becomes_executable_and_never_writable_by_others(tmp_path, mode, want):
    # Lemonade chmods the binaries after unpacking; the result is rwxr-xr-x, never group/world-writable
    p = tmp_path / "llama-server"
    p.write_bytes(b"#!/bin/sh\n")
    os.chmod(p, mode)
    unpack.make_executable(str(tmp_path), "llama-server")
    assert stat.S_IMODE(os.stat(p).st_mode) == want  # no setuid, setgid or sticky bit either
    os.chmod(p, 0o700)  # already executable: left as the archive had it
    unpack.make_executable(str(tmp_path), "llama-server")
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o700
