#!/usr/bin/env python3
"""Build the real llama.cpp the tests hold pick-backend's numbers to (tests/real_engine.py), on any
machine: llama.cpp build 11312 (commit 0c1e57098bba), CPU only, x86-64 with AVX2.

    python3 tools/build_llama_cpp.py              # about 20 minutes on 2 cores, once
    python3 tools/build_llama_cpp.py --dry-run    # what it would run

It fetches llama.cpp's source as the project's reference build was made: PyPI's source
distribution of llama-cpp-python 0.3.36 (its `vendor/llama.cpp`; llama.cpp's own repository is too
big to clone for this), checked against its SHA-256, and builds llama-server, llama-bench,
llama-cli and llama-fit-params with the reference's CMake flags into
~/.cache/pick-backend/llama.cpp-b11312/bin (`--dest` for another place), where the tests find it
(or set PICK_BACKEND_LLAMA_CPP to the directory).  It needs cmake, a C++17 compiler and pip; with
`--source FILE` it builds from a tarball of the same tree instead of downloading (a directory
`llama.cpp/` or `llama_cpp_python-0.3.36/vendor/llama.cpp/` inside).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_pyz import sha256_of  # noqa: E402  (beside this file)

BUILD, COMMIT = "11312", "0c1e570"
SDIST = "llama_cpp_python-0.3.36.tar.gz"
SDIST_PIN = "llama-cpp-python==0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"  # pypi.org/simple/llama-cpp-python/
TOOLS = ("llama-server", "llama-bench", "llama-cli", "llama-fit-params")
# the reference build's flags (../shared/llama.cpp/README.md): CPU only, AVX2/FMA/F16C/BMI2 without
# -march=native (the binaries run on any such x86-64), static, no network code, no web UI download
FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
         "-DGGML_F16C=ON", "-DGGML_BMI2=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DBUILD_SHARED_LIBS=OFF",
         "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_OPENSSL=OFF",
         f"-DLLAMA_BUILD_NUMBER={BUILD}", f"-DLLAMA_BUILD_COMMIT={COMMIT}")
VERSION = re.compile(r"build (\d+), commit (\w+)")


class Refused(Exception):
    pass


def default_dest() -> str:
    """Where the build goes and where the tests look for it (tests/real_engine.py)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pick-backend", f"llama.cpp-b{BUILD}")


def built(dest: str) -> bool:
    """Whether ``dest`` already holds this build: every tool, and llama-server says build 11312."""
    if not all(os.access(os.path.join(dest, "bin", t), os.X_OK) for t in TOOLS):
        return False
    try:
        out = subprocess.run([os.path.join(dest, "bin", "llama-server"), "--version"], capture_output=True,
                             text=True, timeout=60)
    except OSError:
        return False
    m = VERSION.search(out.stdout + out.stderr)
    return bool(m) and m[1] == BUILD


def configure_cmd(src: str, build: str, generator: str | None) -> list[str]:
    return ["cmake", "-S", src, "-B", build, *(["-G", generator] if generator else []), *FLAGS]


def build_cmd(build: str, jobs: int) -> list[str]:
    return ["cmake", "--build", build, "-j", str(jobs), "--target", *TOOLS]


def download_cmd(work: str) -> list[str]:
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", SDIST_PIN, "-d", work]


def missing_tools() -> list[str]:
    need = {"cmake": ["cmake"], "a C++ compiler (g++ or clang++)": ["c++", "g++", "clang++"],
            "make or ninja": ["make", "ninja"]}
    return [what for what, names in need.items() if not any(shutil.which(n) for n in names)]


def check_machine() -> None:
    arch = platform.machine().lower()
    if arch not in ("x86_64", "amd64"):
        raise Refused(f"the tests' reference build is x86-64 with AVX2 (their expected numbers come from it); this "
                      f"machine is {arch}")
    miss = missing_tools()
    if miss:
        raise Refused(f"missing {', '.join(miss)} (Debian/Ubuntu: apt-get install cmake g++ make)")


def source_root(tar: tarfile.TarFile) -> str:
    """The llama.cpp directory inside a tarball: the sdist's vendor copy, or a tree of its own."""
    for n in tar.getnames():
        m = re.match(r"^((?:[^/]+/vendor/)?llama\.cpp)/CMakeLists\.txt$", n)
        if m:
            return m[1]
    raise Refused(f"{tar.name}: no llama.cpp/CMakeLists.txt inside")


def unpack(tarball: str, work: str) -> str:
    with tarfile.open(tarball) as t:
        top = source_root(t)
        members = [m for m in t.getmembers() if m.name == top or m.name.startswith(top + "/")]
        if hasattr(tarfile, "data_filter"):
            t.extractall(work, members, filter="data")  # no links out, no device files, no absolute paths
        else:
            bad = [m.name for m in members if m.name.startswith("/") or ".." in m.name.split("/") or m.issym() or m.islnk()]
            if bad:
                raise Refused(f"{tarball}: unsafe entries {bad[:3]}")
            t.extractall(work, members)
    return os.path.join(work, top)


def fetch(work: str, source: str | None) -> str:
    if source:
        return source
    path = os.path.join(work, SDIST)
    if not (os.path.isfile(path) and sha256_of(path) == SDIST_SHA256):
        import importlib.util

        if importlib.util.find_spec("pip") is None:
            raise Refused(f"{sys.executable} has no pip to fetch {SDIST_PIN} with: run this with the tests' "
                          "virtual environment's python, or give --source")
        run(download_cmd(work))
    got = sha256_of(path)
    if got != SDIST_SHA256:
        raise Refused(f"{path}: SHA-256 {got}, not {SDIST_SHA256} (PyPI's)")
    return path


def run(cmd: list[str], **kw) -> None:
    print("+", shlex.join(cmd), flush=True)
    if subprocess.run(cmd, **kw).returncode != 0:
        raise Refused(f"{cmd[0]} {cmd[1] if len(cmd) > 1 else ''} failed (above)")


def install(build: str, dest: str) -> None:
    """Copy the tools into ``dest``/bin, stripped, replacing an older build whole."""
    os.makedirs(dest, exist_ok=True)
    stage = tempfile.mkdtemp(prefix=".bin.", dir=dest)
    try:
        for t in TOOLS:
            shutil.copy2(os.path.join(build, "bin", t), os.path.join(stage, t))
            if shutil.which("strip"):
                subprocess.run(["strip", os.path.join(stage, t)], check=False)
        os.chmod(stage, 0o755)  # mkdtemp's 0700 would keep the tools from the machine's other users
        old = os.path.join(dest, "bin")
        if os.path.isdir(old):
            shutil.rmtree(old)
        os.rename(stage, old)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", default=default_dest(), help="where bin/ goes (default: %(default)s)")
    ap.add_argument("--source", help="a tarball of llama.cpp's tree at that commit instead of PyPI's sdist")
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 2, help="parallel compile jobs (default: %(default)s)")
    ap.add_argument("--work", help="where the source is unpacked and built (default: DEST/work; kept for a rebuild)")
    ap.add_argument("--force", action="store_true", help="build even where DEST already holds this build")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    a = ap.parse_args(argv)
    dest = os.path.abspath(a.dest)
    work = os.path.abspath(a.work or os.path.join(dest, "work"))
    if a.jobs < 1:
        ap.error("--jobs must be 1 or more")
    if not a.force and built(dest):
        print(f"llama.cpp b{BUILD} is already at {dest}/bin; the tests use it (--force builds again)")
        return 0
    src = os.path.join(work, "llama_cpp_python-0.3.36", "vendor", "llama.cpp") if not a.source else os.path.join(work, "llama.cpp")
    build = os.path.join(work, "build")
    gen = "Ninja" if shutil.which("ninja") else None
    if a.dry_run:
        print("#", "unpack " + (a.source or shlex.join(download_cmd(work)) + f"  (sha256 {SDIST_SHA256})"))
        for cmd in (configure_cmd(src, build, gen), build_cmd(build, a.jobs)):
            print(shlex.join(cmd))
        print(f"# strip and copy {', '.join(TOOLS)} into {dest}/bin")
        return 0
    try:
        check_machine()
        os.makedirs(work, exist_ok=True)
        src = unpack(fetch(work, a.source), work)
        run(configure_cmd(src, build, gen))
        run(build_cmd(build, a.jobs))
        install(build, dest)
    except (Refused, OSError, tarfile.TarError) as e:
        print(f"build_llama_cpp: {e}", file=sys.stderr)
        return 1
    if not built(dest):
        print(f"build_llama_cpp: {dest}/bin/llama-server does not say build {BUILD}", file=sys.stderr)
        return 1
    print(f"llama.cpp b{BUILD} built into {dest}/bin; the tests find it there "
          f"(python -m pytest -q tests/test_real_engine.py). {work} can go.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
