"""tools/build_llama_cpp.py and how the tests find the real llama.cpp (tests/real_engine.py), without
building it (twenty minutes): the source it fetches, the CMake line, the cache it builds into, the
detection of a build already there, and the line a run without one ends with."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
import build_llama_cpp as B  # noqa: E402
import real_engine  # noqa: E402

# the reference build's flags, as ../shared/llama.cpp/README.md lists them ("How they were built")
REFERENCE = ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
             "-DGGML_F16C=ON", "-DGGML_BMI2=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
             "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
             "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_NUMBER=11312"]


def test_the_cmake_line_is_the_reference_builds():
    cmd = B.configure_cmd("SRC", "BUILD", None)
    assert cmd[:5] == ["cmake", "-S", "SRC", "-B", "BUILD"]
    assert set(REFERENCE) <= set(cmd)
    assert "-DLLAMA_BUILD_COMMIT=0c1e570" in cmd  # the shallow copy cannot say it; --version prints it
    assert B.build_cmd("BUILD", 2)[-5:] == ["--target", "llama-server", "llama-bench", "llama-cli", "llama-fit-params"]


def test_the_source_is_pypis_llama_cpp_python_0_3_36(capsys, tmp_path):
    assert B.main(["--dest", str(tmp_path / "d"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36" in out
    assert B.SDIST_SHA256 in out and "-j" in out
    assert not (tmp_path / "d").exists()  # a dry run writes nothing


def _fake_build(dest, build="11312", tools=B.TOOLS):
    b = dest / "bin"
    b.mkdir(parents=True)
    for t in tools:
        (b / t).write_text(f"#!/bin/sh\necho 'version: 0.5.0-dev (build {build}, commit 0c1e570)' >&2\n")
        (b / t).chmod(0o755)
    return dest


def test_a_build_already_in_the_cache_is_kept(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    dest = _fake_build(tmp_path / "pick-backend" / "llama.cpp-b11312")
    assert B.default_dest() == str(dest)
    assert B.main([]) == 0
    assert "already at" in capsys.readouterr().out


@pytest.mark.parametrize("build,tools", [("10000", B.TOOLS), ("11312", B.TOOLS[:2])])
def test_another_build_or_a_partial_one_is_not_this_build(tmp_path, build, tools):
    assert not B.built(str(_fake_build(tmp_path / "d", build, tools)))


def test_the_tests_find_the_build_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(real_engine, "SHARED", str(tmp_path / "no-shared"))
    monkeypatch.delenv("PICK_BACKEND_LLAMA_CPP", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert real_engine._home() == ""  # nothing anywhere: the skip reason names both places and the command
    dest = _fake_build(tmp_path / "xdg" / "pick-backend" / "llama.cpp-b11312")
    assert real_engine._home() == str(dest)
    monkeypatch.setenv("PICK_BACKEND_LLAMA_CPP", str(tmp_path / "mine"))
    assert real_engine._home() == str(tmp_path / "mine")  # the variable first


def _tarball(path, names):
    with tarfile.open(path, "w:gz") as t:
        for n in names:
            data = b"x"
            info = tarfile.TarInfo(n)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return str(path)


def test_the_source_tree_is_found_in_the_sdist_or_a_tarball_of_its_own(tmp_path):
    sdist = _tarball(tmp_path / "a.tar.gz", ["llama_cpp_python-0.3.36/setup.py",
                                             "llama_cpp_python-0.3.36/vendor/llama.cpp/CMakeLists.txt",
                                             "llama_cpp_python-0.3.36/vendor/llama.cpp/src/llama.cpp"])
    src = B.unpack(sdist, str(tmp_path / "w1"))
    assert src.endswith("llama_cpp_python-0.3.36/vendor/llama.cpp") and os.path.isfile(os.path.join(src, "src", "llama.cpp"))
    assert not (tmp_path / "w1" / "llama_cpp_python-0.3.36" / "setup.py").exists()  # only the tree it builds
    own = _tarball(tmp_path / "b.tar.gz", ["llama.cpp/CMakeLists.txt"])
    assert B.unpack(own, str(tmp_path / "w2")).endswith(os.sep + "llama.cpp")
    with pytest.raises(B.Refused, match="no llama.cpp/CMakeLists.txt"):
        B.unpack(_tarball(tmp_path / "c.tar.gz", ["other/CMakeLists.txt"]), str(tmp_path / "w3"))


def test_an_entry_leaving_the_tree_is_refused(tmp_path):
    bad = _tarball(tmp_path / "bad.tar.gz", ["llama.cpp/CMakeLists.txt", "llama.cpp/../../escaped"])
    with pytest.raises((B.Refused, tarfile.TarError)):  # main says it and exits 1
        B.unpack(bad, str(tmp_path / "w" / "x"))
    assert not list(tmp_path.rglob("escaped"))


def test_what_it_cannot_build_on_is_said(monkeypatch):
    monkeypatch.setattr(B.platform, "machine", lambda: "aarch64")
    with pytest.raises(B.Refused, match="x86-64 with AVX2.*aarch64"):
        B.check_machine()
    monkeypatch.setattr(B.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(B.shutil, "which", lambda name: None)
    with pytest.raises(B.Refused, match="missing cmake, a C\\+\\+ compiler"):
        B.check_machine()


def test_a_run_without_the_engine_ends_with_one_line_that_counts_the_skips(tmp_path):
    env = dict(os.environ, PICK_BACKEND_LLAMA_CPP=str(tmp_path / "none"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_real_engine.py"],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    lines = proc.stdout.strip().splitlines()
    total = int(re.search(r"(\d+) skipped", lines[-1])[1])
    said = [ln for ln in lines if "real-engine test" in ln]
    assert len(said) == 1 and said[0].startswith(f"{total} real-engine tests skipped: no llama.cpp build at ")
