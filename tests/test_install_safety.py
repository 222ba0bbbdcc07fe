"""Installs that cannot be turned against the user: hostile archives, hostile or broken servers,
faults of the machine, and kill -9 at every step, each through the real CLI against servers on
127.0.0.1 (test_install.Server).  Every test here fails when the defence it names is removed."""

import contextlib
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import time
import zipfile

import pytest

from conftest import machine, run_cli
from test_install import (NIGHTLY_TAG, PINS, SCRIPT, STABLE_TAG, STRIX, VULKAN_ASSET, VULKAN_TAG, Server, env_for,
                          install, leftovers, llama_tar, make_tar, old_install, snapshot, srv)  # noqa: F401

NIGHTLY_ASSET = f"llama-{NIGHTLY_TAG}-ubuntu-rocm-gfx1151-x64.zip"
STABLE_ASSET = f"llama-{STABLE_TAG}-bin-ubuntu-rocm-7.14-x64.tar.gz"
RUNTIME_PATH = "/therock/therock-dist-linux-gfx1151-7.14.0.tar.gz"
DL = f"/dl/ggml-org/llama.cpp/{VULKAN_TAG}/{VULKAN_ASSET}"
API = f"/repos/ggml-org/llama.cpp/releases/tags/{VULKAN_TAG}"
RUNTIME_TAR = make_tar([("lib", None), ("lib/libamdhip64.so", b"\x7fELF"), ("bin", None)])


def zip_of(entries, compress=zipfile.ZIP_STORED):
    """entries: (name, bytes, mode) or (name, ("symlink", target))"""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compress) as z:
        for name, data, *rest in entries:
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.compress_type = compress
            if isinstance(data, tuple):
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                z.writestr(info, data[1])
            else:
                info.external_attr = ((rest[0] if rest else 0o644) | stat.S_IFREG) << 16
                z.writestr(info, data)
    return buf.getvalue()


def nightly(srv, cache, data, *args, env=None):
    srv.release("lemonade-sdk/llamacpp-rocm", NIGHTLY_TAG, {NIGHTLY_ASSET: data})
    e = env_for(srv)
    e.update(env or {})
    return run_cli("--root", STRIX, "install", "llamacpp", "--backend", "rocm", "--channel", "nightly",
                   "--cache-dir", str(cache), *args, env=e)


def vulkan(srv, cache, *args, env=None, data=None):
    if (("ggml-org/llama.cpp", VULKAN_TAG)) not in srv.releases:
        srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: data if data is not None else llama_tar()})
    e = env_for(srv)
    e.update(env or {})
    return run_cli("--root", STRIX, "install", "llamacpp", "--cache-dir", str(cache), *args, env=e)


def rocm_release(srv, runtime=RUNTIME_TAR):
    srv.release("lemonade-sdk/llama.cpp", STABLE_TAG, {STABLE_ASSET: llama_tar(STABLE_TAG)})
    srv.files[RUNTIME_PATH] = runtime


def rocm(srv, cache, *args, env=None):
    e = env_for(srv)
    e.update(env or {})
    return run_cli("--root", STRIX, "install", "llamacpp", "--backend", "rocm", "--allow-unverified", "runtime",
                   "--cache-dir", str(cache), *args, env=e)


def status(cache):
    r = run_cli("status", "--json", "--cache-dir", str(cache))
    assert r.rc == 0, r.err
    return {row["dir"]: row for row in r.json()["backends"]}


# ------------------------------------------------------------------------------------------------
# archives: links resolved against the real tree, never followed when writing


@pytest.mark.parametrize("fmt", ["zip", "tar"])
def test_link_chain_through_a_dot_link_cannot_write_outside(srv, tmp_path, fmt):
    # a -> . makes a/a/a/a the staging dir itself; esc -> ../../../.. reads as "inside" by its text
    # but from the real staging dir it is tmp_path; then a file is written through it
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    entries = [("llama-server", SCRIPT, 0o755), ("a", ("symlink", ".")),
               ("a/a/a/a/esc", ("symlink", "../../../..")), ("a/a/a/a/esc/victim.txt", b"pwned")]
    data = zip_of(entries) if fmt == "zip" else make_tar(entries)
    cache = tmp_path / "c"
    if fmt == "zip":
        r = nightly(srv, cache, data)
    else:
        r = vulkan(srv, cache, data=data)
    assert r.rc == 4, r.err
    assert "refusing" in r.err
    assert victim.read_text() == "original"
    assert not (tmp_path / "esc").exists()
    assert leftovers(cache) == []


def test_link_resolving_through_a_later_link_is_refused(srv, tmp_path):
    # x -> a/.. is the staging dir by its text; once a -> . exists it is the directory above
    data = make_tar([("llama-server", SCRIPT, 0o755), ("x", ("symlink", "a/..")), ("a", ("symlink", "."))])
    cache = tmp_path / "c"
    r = vulkan(srv, cache, data=data)
    assert r.rc == 4 and "resolves through the link a" in r.err
    assert not (cache / "bin" / "llamacpp" / "vulkan").exists()


def test_link_created_through_an_outward_link_is_never_placed_outside(srv, tmp_path):
    # d points out of the tree; a second link named d/planted would land outside if d were followed
    data = make_tar([("llama-server", SCRIPT, 0o755), ("d", ("symlink", "../../../..")),
                     ("d/planted", ("symlink", "llama-server"))])
    cache = tmp_path / "c"
    r = vulkan(srv, cache, data=data)
    assert r.rc == 4 and "refusing" in r.err
    assert not os.path.lexists(tmp_path / "planted")


def test_links_onto_the_tools_own_files_do_not_redirect_them(srv, tmp_path):
    data = make_tar([("llama-server", SCRIPT, 0o755), ("install.json", ("symlink", "llama-server")),
                     ("version.txt", ("symlink", "llama-server"))])
    cache = tmp_path / "c"
    r = vulkan(srv, cache, data=data)
    assert r.rc == 0, r.err
    d = cache / "bin" / "llamacpp" / "vulkan"
    assert (d / "llama-server").read_bytes() == SCRIPT  # the checked binary is not overwritten
    assert not os.path.islink(d / "install.json") and not os.path.islink(d / "version.txt")
    assert json.loads((d / "install.json").read_text())["binary"] == "llama-server"
    assert (d / "version.txt").read_text().strip() == VULKAN_TAG


def test_zip_bomb_refused_by_declared_size_before_writing(srv, tmp_path):
    data = zip_of([("llama-server", SCRIPT, 0o755), ("zeros.bin", b"\0" * 5_000_000)], zipfile.ZIP_DEFLATED)
    assert len(data) < 100_000
    cache = tmp_path / "c"
    r = nightly(srv, cache, data, env={"PICK_BACKEND_MAX_UNPACKED": "1000000"})
    assert r.rc == 4 and "declares" in r.err and "PICK_BACKEND_MAX_UNPACKED" in r.err
    assert leftovers(cache) == []


def test_tar_bomb_refused_by_running_size(srv, tmp_path):
    entries = [("llama-server", SCRIPT, 0o755)] + [(f"z{i}.bin", b"\0" * 400_000) for i in range(5)]
    r = vulkan(srv, tmp_path / "c", data=make_tar(entries), env={"PICK_BACKEND_MAX_UNPACKED": "1000000"})
    assert r.rc == 4 and "unpacks to more than" in r.err and "refusing before writing it" in r.err


def test_entry_count_cap(srv, tmp_path):
    entries = [("llama-server", SCRIPT, 0o755)] + [(f"f{i}", b"x") for i in range(10)]
    r = vulkan(srv, tmp_path / "c", data=make_tar(entries), env={"PICK_BACKEND_MAX_ENTRIES": "5"})
    assert r.rc == 4 and "more than 5 entries" in r.err


def test_binary_without_modes_is_made_executable(srv, tmp_path):
    cache = tmp_path / "c"
    r = vulkan(srv, cache, data=make_tar([("llama-server", SCRIPT, 0o644)]))
    assert r.rc == 0, r.err
    assert os.access(cache / "bin" / "llamacpp" / "vulkan" / "llama-server", os.X_OK)


def test_therock_wrapper_directory_is_stripped(srv, tmp_path):
    rocm_release(srv, make_tar([("therock-dist", None), ("therock-dist/lib", None),
                                ("therock-dist/lib/libamdhip64.so", b"\x7fELF")]))
    cache = tmp_path / "c"
    r = rocm(srv, cache)
    assert r.rc == 0, r.err
    rt = cache / "bin" / "therock" / "gfx1151-7.14.0"
    assert (rt / "lib" / "libamdhip64.so").exists() and not (rt / "therock-dist").exists()


# ------------------------------------------------------------------------------------------------
# the network


def test_body_longer_than_declared_stops_reading(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    srv.script[DL] = [("endless",)]
    t0 = time.monotonic()
    r = vulkan(srv, tmp_path / "c", env={"PICK_BACKEND_TIMEOUT": "20"})
    assert r.rc == 4 and "sent more than" in r.err and "stopped reading" in r.err
    assert time.monotonic() - t0 < 15


def test_stalled_server_ends_at_read_timeout(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    srv.script[DL] = [("stall", 30)] * 10
    t0 = time.monotonic()
    r = vulkan(srv, tmp_path / "c", env={"PICK_BACKEND_READ_TIMEOUT": "0.5"})
    assert r.rc == 4 and "failed after" in r.err, r.err
    assert time.monotonic() - t0 < 20


def test_overall_deadline_flag(srv, tmp_path):
    # a transfer fast enough for the speed floor but far too long for the deadline, in one attempt
    data = make_tar([("llama-server", SCRIPT, 0o755), ("lib.so", os.urandom(200_000))])
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: data})
    srv.script[DL] = [("trickle", 400, 0.05)]  # 8 kB/s: 25 s for the whole file
    t0 = time.monotonic()
    r = vulkan(srv, tmp_path / "c", "--timeout", "2")
    assert r.rc == 4 and "overall deadline of 2 s" in r.err, r.err
    assert time.monotonic() - t0 < 10


def test_stalls_end_at_the_deadline(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    srv.script[DL] = [("stall", 30)] * 20
    t0 = time.monotonic()
    r = vulkan(srv, tmp_path / "c", env={"PICK_BACKEND_READ_TIMEOUT": "1", "PICK_BACKEND_TIMEOUT": "2"})
    assert r.rc == 4 and "overall deadline of 2 s" in r.err, r.err
    assert time.monotonic() - t0 < 10


def test_slow_server_aborts_at_the_speed_floor(srv, tmp_path):
    data = make_tar([("llama-server", SCRIPT, 0o755), ("lib.so", os.urandom(200_000))])
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: data})
    srv.script[DL] = [("trickle", 200, 0.05)] * 100  # 4 kB/s
    r = vulkan(srv, tmp_path / "c", env={"PICK_BACKEND_MIN_SPEED": "50000", "PICK_BACKEND_SPEED_WINDOW": "0.5",
                                         "PICK_BACKEND_TIMEOUT": "4"})
    assert r.rc == 4 and "slower than 50000 B/s" in r.err, r.err


def test_retry_after_is_honoured_and_said_in_a_plain_line(srv, tmp_path):
    srv.script[DL] = [("status", 503, {"Retry-After": "2"})]
    t0 = time.monotonic()
    r = vulkan(srv, tmp_path / "c")
    assert r.rc == 0, r.err
    assert time.monotonic() - t0 >= 1.8
    assert "retrying in 2 s: HTTP 503" in r.err


def test_retry_after_past_the_deadline_fails_at_once(srv, tmp_path):
    srv.script[DL] = [("status", 429, {"Retry-After": "600"})]
    t0 = time.monotonic()
    r = vulkan(srv, tmp_path / "c", "--timeout", "30")
    assert r.rc == 4 and "would pass the overall deadline" in r.err
    assert time.monotonic() - t0 < 15


def test_rate_limit_says_when_it_resets_and_mentions_the_token_only_when_unset(srv, tmp_path):
    reset = str(int(time.time()) + 3600)
    hdr = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}
    srv.script[API] = [("status", 403, hdr)]
    r = vulkan(srv, tmp_path / "c")
    assert r.rc == 4 and "rate limit" in r.err and "resets at" in r.err
    assert time.strftime("%H:%M", time.gmtime(int(reset))) in r.err
    assert "set GITHUB_TOKEN" in r.err
    srv.script[API] = [("status", 403, hdr)]
    r = vulkan(srv, tmp_path / "c", env={"GITHUB_TOKEN": "tok"})
    assert r.rc == 4 and "GITHUB_TOKEN is set" in r.err and "set GITHUB_TOKEN to" not in r.err


def test_rate_limit_resetting_soon_is_waited_for(srv, tmp_path):
    srv.script[API] = [("status", 429, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 2)})]
    r = vulkan(srv, tmp_path / "c")
    assert r.rc == 0, r.err
    assert "waiting" in r.err and "rate limit" in r.err


def test_token_goes_to_the_mirror_only_when_asked_and_never_across_a_redirect(srv, tmp_path):
    other = Server()
    try:
        other.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
        srv.script[API] = [("redirect", other.url + API)]
        r = vulkan(srv, tmp_path / "c", env={"GITHUB_TOKEN": "gh-secret", "PICK_BACKEND_MIRROR_TOKEN": "mirror-secret"})
        assert r.rc == 0, r.err
        assert (API, "Bearer mirror-secret") in srv.auth
        assert [a for _, a in other.auth] == [None] * len(other.auth) and other.auth  # the redirect target: nothing
        assert all("gh-secret" not in (a or "") for _, a in srv.auth)  # GITHUB_TOKEN never over http
    finally:
        other.close()
    srv.auth.clear()
    r = vulkan(srv, tmp_path / "c2", env={"GITHUB_TOKEN": "gh-secret"})
    assert r.rc == 0, r.err
    assert [a for _, a in srv.auth] == [None] * len(srv.auth)  # a mirror without the explicit variable: nothing


def test_token_scope_rules():
    from selector.install.github import token_for

    env = {"GITHUB_TOKEN": "t", "PICK_BACKEND_MIRROR_TOKEN": "m", "PICK_BACKEND_GITHUB_API": "http://mirror.example"}
    assert token_for("https://api.github.com/repos/a/b", env) == "t"
    assert token_for("http://api.github.com/repos/a/b", env) is None
    assert token_for("https://objects.githubusercontent.com/x", env) is None
    assert token_for("http://mirror.example/repos/a/b", env) is None  # plain http to a non-loopback mirror
    env["PICK_BACKEND_GITHUB_API"] = "https://mirror.example"
    assert token_for("https://mirror.example/repos/a/b", env) == "m"


def test_unverified_is_allowed_per_kind(srv, tmp_path):
    srv.release("lemonade-sdk/llama.cpp", STABLE_TAG, {STABLE_ASSET: llama_tar(STABLE_TAG)}, digest=None)
    srv.files[RUNTIME_PATH] = RUNTIME_TAR
    cache = tmp_path / "c"
    r = rocm(srv, cache)  # --allow-unverified runtime does not accept the unverified backend
    assert r.rc == 4 and STABLE_ASSET in r.err and "--allow-unverified backend" in r.err
    assert not (cache / "bin").exists() or snapshot(cache / "bin") == {} or leftovers(cache) == []
    assert not (cache / "bin" / "therock" / "gfx1151-7.14.0").exists()
    r = rocm(srv, cache, "--allow-unverified", "backend")
    assert r.rc == 0, r.err


def test_a_retry_that_made_progress_does_not_use_up_an_attempt(srv, tmp_path):
    data = make_tar([("llama-server", SCRIPT, 0o755), ("lib.so", os.urandom(600_000))])
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: data})
    srv.script[DL] = [("drop", 60_000)] * 7  # more drops than attempts, each one after new bytes
    r = vulkan(srv, tmp_path / "c")
    assert r.rc == 0, r.err
    assert len(srv.downloads(VULKAN_ASSET)) == 8
    assert r.err.count("retrying in 0 s: connection dropped") == 7


def test_asset_names_from_the_api_are_names_not_paths(srv, tmp_path):
    # sd-cpp's macOS asset is a wildcard (sd-<tag>-bin-Darwin-macOS-*-arm64.zip) resolved from the
    # release's asset list; a '*' also matches '/', so a hostile list could smuggle a path in
    tag = PINS["sd-cpp"]["metal"]
    short = tag.split("-", 1)[0] + "-" + tag.rsplit("-", 1)[1]
    evil = f"sd-{short}-bin-Darwin-macOS-../../../../evil-arm64.zip"
    srv.release("leejet/stable-diffusion.cpp", tag, {evil: make_tar([("sd-server", SCRIPT, 0o755)])})
    r = run_cli("--root", machine("macos14-m3max"), "install", "sd-cpp", "--cache-dir", str(tmp_path / "c"),
                env=env_for(srv))
    assert r.rc == 4 and "not a plain file name" in r.err, r.err
    assert not any(p.startswith("/dl/") for p, _ in srv.log)
    assert not (tmp_path / "evil-arm64.zip").exists()


def test_overlapping_installs_against_a_slow_server_wait_and_say_so(srv, tmp_path):
    data = make_tar([("llama-server", SCRIPT, 0o755), ("lib.so", os.urandom(300_000))])
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: data})
    srv.script[DL] = [("trickle", 30_000, 0.1)]
    cache = tmp_path / "c"
    env = dict(os.environ, **env_for(srv))
    env.pop("PICK_BACKEND_ROOT", None)
    cmd = [sys.executable, "-m", "selector", "--root", STRIX, "install", "llamacpp", "--cache-dir", str(cache), "--json"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    deadline = time.monotonic() + 20
    while not srv.downloads(VULKAN_ASSET) and time.monotonic() < deadline:
        time.sleep(0.05)
    second = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    (o1, e1), (o2, e2) = first.communicate(timeout=60), second.communicate(timeout=60)
    assert (first.returncode, second.returncode) == (0, 0), (e1, e2)
    assert "waiting for another install of llamacpp/vulkan" in e2
    assert json.loads(o2)["artifacts"][0]["action"] == "present"
    assert len(srv.downloads(VULKAN_ASSET)) == 1


# ------------------------------------------------------------------------------------------------
# faults: exit 4 (or 5) naming the path and the step, never a traceback


def test_cache_path_that_is_a_file(srv, tmp_path):
    cache = tmp_path / "c"
    cache.write_text("not a directory")
    r = vulkan(srv, cache)  # --cache-dir itself is a file: bad input, said before anything starts
    assert r.rc == 5 and str(cache) in r.err and "Traceback" not in r.err
    r = vulkan(srv, cache / "lemonade")  # a file on the way: the install's own step fails, named
    assert r.rc == 4 and "creating the cache directory failed" in r.err and str(cache) in r.err
    assert "Traceback" not in r.err


@pytest.mark.parametrize("value", ["ftp://mirror.example", "api.github.com", "http://", "https://h:port/"])
def test_malformed_api_url_is_bad_input(srv, tmp_path, value):
    r = vulkan(srv, tmp_path / "c", env={"PICK_BACKEND_GITHUB_API": value})
    assert r.rc == 5 and "PICK_BACKEND_GITHUB_API" in r.err and "Traceback" not in r.err


def test_download_redirect_loop(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    srv.script[DL] = [("redirect", srv.url + DL)] * 100
    r = vulkan(srv, tmp_path / "c")
    assert r.rc == 4 and "redirect" in r.err and "Traceback" not in r.err


def test_api_redirect_loop(srv, tmp_path):
    srv.script[API] = [("redirect", srv.url + API)] * 100
    r = vulkan(srv, tmp_path / "c")
    assert r.rc == 4 and "redirect loop" in r.err


def test_json_failure_prints_an_error_object(srv, tmp_path):
    r = run_cli("--root", STRIX, "install", "llamacpp", "--json", "--cache-dir", str(tmp_path / "c"), env=env_for(srv))
    assert r.rc == 4
    out = r.json()
    assert out["exit"] == 4 and "not found" in out["error"]
    assert "not found" in r.err


@contextlib.contextmanager
def mounted_tmpfs(path, size):
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root on Linux to mount a small tmpfs")
    path.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "none", str(path)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextlib.contextmanager
def read_only(path):
    """``path`` read-only for the CLI: a read-only bind mount as root, file modes otherwise."""
    if os.geteuid() != 0:
        modes = []
        for dirpath, dirnames, filenames in os.walk(path):
            for n in [dirpath] + [os.path.join(dirpath, f) for f in dirnames + filenames]:
                if not os.path.islink(n):
                    modes.append((n, os.stat(n).st_mode))
                    os.chmod(n, os.stat(n).st_mode & ~0o222)
        try:
            yield
        finally:
            for n, m in reversed(modes):
                os.chmod(n, m)
        return
    if subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True).returncode:
        pytest.skip("cannot bind-mount here")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True).returncode:
            pytest.skip("cannot remount read-only here")
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_read_only_cache_that_holds_the_version_is_already_installed(srv, tmp_path):
    cache = tmp_path / "c"
    assert vulkan(srv, cache).rc == 0
    with read_only(cache):
        r = vulkan(srv, cache)
        assert r.rc == 0 and "already installed" in r.out, r.err
        r = vulkan(srv, cache, "--reinstall")
        assert r.rc == 4 and "Traceback" not in r.err
        assert "taking the lock failed" in r.err and str(cache) in r.err
        st = run_cli("status", "--cache-dir", str(cache))
        assert st.rc == 0 and "installed" in st.out
        u = run_cli("uninstall", "llamacpp", "vulkan", "--cache-dir", str(cache))
        assert u.rc == 4 and "uninstall of llamacpp vulkan failed" in u.err and "Traceback" not in u.err
    assert (cache / "bin" / "llamacpp" / "vulkan" / "version.txt").exists()


def test_not_enough_free_space_is_refused_before_downloading(srv, tmp_path):
    data = make_tar([("llama-server", SCRIPT, 0o755), ("lib.so", os.urandom(600_000))])
    with mounted_tmpfs(tmp_path / "small", "1m") as small:
        r = vulkan(srv, small / "c", data=data)
        assert r.rc == 4 and "not enough free space" in r.err and str(small) in r.err
        assert srv.downloads(VULKAN_ASSET) == []


def test_disk_filling_during_unpack(srv, tmp_path):
    data = make_tar([("llama-server", SCRIPT, 0o755), ("zeros.bin", b"\0" * 3_000_000)])
    with mounted_tmpfs(tmp_path / "small", "1m") as small:
        cache = small / "c"
        before = old_install(cache)
        r = vulkan(srv, cache, data=data)
        assert r.rc == 4 and "unpacking into" in r.err and "No space left" in r.err, r.err
        assert str(cache) in r.err and "Traceback" not in r.err
        assert snapshot(cache) == before


def test_corrupt_7z_and_a_good_one(srv, tmp_path):
    py7zr = pytest.importorskip("py7zr")
    from test_install import CUDA_TAG

    asset = f"llama-{CUDA_TAG}-windows-cuda-sm_89-x64.7z"
    args = ("--force", "--os", "windows", "--sm", "sm_89", "--backend", "cuda")
    srv.release("lemonade-sdk/llama.cpp", CUDA_TAG, {asset: b"7z\xbc\xaf\x27\x1c" + os.urandom(200)})
    r = run_cli("--root", STRIX, "install", "llamacpp", "--cache-dir", str(tmp_path / "c"), *args, env=env_for(srv))
    assert r.rc == 4 and "not a readable archive" in r.err and "Traceback" not in r.err
    buf = io.BytesIO()
    with py7zr.SevenZipFile(buf, "w") as z:
        z.writestr(b"MZ fake", "bin/llama-server.exe")
        z.writestr(b"dll", "bin/ggml.dll")
    srv.release("lemonade-sdk/llama.cpp", CUDA_TAG, {asset: buf.getvalue()})
    cache = tmp_path / "c2"
    r = run_cli("--root", STRIX, "install", "llamacpp", "--cache-dir", str(cache), *args, env=env_for(srv))
    assert r.rc == 0, r.err
    assert (cache / "bin" / "llamacpp" / "cuda" / "bin" / "llama-server.exe").read_bytes() == b"MZ fake"


# ------------------------------------------------------------------------------------------------
# crash consistency, repair, completeness

STEPS = ["downloaded", "unpacked", "staged", "runtime-old-moved", "runtime-swapped", "backend-old-moved",
         "backend-swapped", "committed"]


@pytest.mark.parametrize("step", STEPS)
def test_kill_9_at_each_step_leaves_old_or_new(srv, tmp_path, step):
    rocm_release(srv)
    cache = tmp_path / "c"
    old_install(cache, "rocm-stable", "b1000")
    rt = cache / "bin" / "therock" / "gfx1151-7.14.0"
    rt.mkdir(parents=True)
    (rt / "version.txt").write_text("7.14.0\n")  # an earlier runtime install that lost its lib/
    (rt / "install.json").write_text(json.dumps({"kind": "runtime", "expect": "lib"}))
    r = rocm(srv, cache, env={"PICK_BACKEND_TEST_KILL_AT": step})
    assert r.rc == -9, (r.rc, r.err)
    rows = status(cache)  # status repairs what the kill left
    assert leftovers(cache) == []
    row = rows["rocm-stable"]
    if row["version"] == STABLE_TAG:  # the new state: then its runtime is there too
        assert row["state"] == "installed"
        assert (rt / "lib" / "libamdhip64.so").exists()
    else:
        assert row["version"] == "b1000"
        assert (cache / "bin" / "llamacpp" / "rocm-stable" / "llama-server").read_bytes() == b"#!/bin/sh\necho old\n"
    r = rocm(srv, cache)
    assert r.rc == 0, r.err
    assert status(cache)["rocm-stable"]["state"] == "installed"


def test_uninstall_and_status_repair_an_interrupted_swap(srv, tmp_path):
    cache = tmp_path / "c"
    old_install(cache)
    d = cache / "bin" / "llamacpp" / "vulkan"
    os.rename(d, str(d) + ".old")  # killed between the two renames of a swap
    (cache / "bin" / "llamacpp" / "vulkan.staging").mkdir()
    assert status(cache)["vulkan"]["version"] == "b1000"
    assert leftovers(cache) == []
    os.rename(d, str(d) + ".old")
    r = run_cli("uninstall", "llamacpp", "vulkan", "--cache-dir", str(cache))
    assert r.rc == 0 and "removed" in r.out
    assert sorted(os.listdir(cache / "bin" / "llamacpp")) == ["vulkan.lock"]


def test_deleted_binary_reads_as_update_required_and_install_repairs_it(srv, tmp_path):
    cache = tmp_path / "c"
    assert vulkan(srv, cache).rc == 0
    binary = cache / "bin" / "llamacpp" / "vulkan" / f"llama-{VULKAN_TAG}" / "llama-server"
    binary.unlink()
    assert status(cache)["vulkan"]["state"] == "update_required"
    r = vulkan(srv, cache)
    assert r.rc == 0 and "installed llamacpp vulkan" in r.out
    assert binary.exists() and len(srv.downloads(VULKAN_ASSET)) == 2


def test_rocm_without_its_runtime_is_not_installed(srv, tmp_path):
    rocm_release(srv)
    cache = tmp_path / "c"
    assert rocm(srv, cache).rc == 0
    assert status(cache)["rocm-stable"]["state"] == "installed"
    shutil.rmtree(cache / "bin" / "therock" / "gfx1151-7.14.0" / "lib")
    assert status(cache)["rocm-stable"]["state"] == "update_required"
    assert rocm(srv, cache).rc == 0
    assert status(cache)["rocm-stable"]["state"] == "installed"


# ------------------------------------------------------------------------------------------------
# --from-file and the verify hook


def test_from_file_checks_the_release_digest_and_downloads_nothing(srv, tmp_path):
    data = llama_tar()
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: data})
    f = tmp_path / VULKAN_ASSET
    f.write_bytes(llama_tar(mode="w:gz")[:-10] + b"corrupted!")
    cache = tmp_path / "c"
    r = vulkan(srv, cache, "--from-file", str(f))
    assert r.rc == 4 and "SHA-256 mismatch" in r.err
    f.write_bytes(data)
    r = vulkan(srv, cache, "--from-file", str(f), "--json")
    assert r.rc == 0, r.err
    assert r.json()["artifacts"][0]["verified"] is True
    assert srv.downloads(VULKAN_ASSET) == []
    assert f.exists()  # the user's file stays


def test_from_file_offline_needs_a_pin_or_explicit_unverified(tmp_path):
    f = tmp_path / VULKAN_ASSET
    f.write_bytes(llama_tar())
    env = {"PICK_BACKEND_GITHUB_API": "http://127.0.0.1:9", "PICK_BACKEND_RETRY_BASE": "0", "GITHUB_TOKEN": ""}
    args = ("--root", STRIX, "install", "llamacpp", "--cache-dir", str(tmp_path / "c"), "--from-file", str(f))
    r = run_cli(*args, env=env)
    assert r.rc == 4 and "--allow-unverified backend" in r.err
    r = run_cli(*args, "--allow-unverified", "backend", "--json", env=env)
    assert r.rc == 0, r.err
    assert r.json()["artifacts"][0]["verified"] is False
    other = tmp_path / "something-else.tar.gz"
    other.write_bytes(b"x")
    r = run_cli(*args[:-1], str(other), env=env)
    assert r.rc == 2 and VULKAN_ASSET in r.err


def test_from_file_accepted_unverified_asks_no_api(tmp_path):
    """Offline behind a black hole (a port that takes the connection and never answers), an install
    the user accepted unverified does not wait on the API at all."""
    import socket

    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(8)  # connections are queued, never accepted, never answered
    f = tmp_path / VULKAN_ASSET
    f.write_bytes(llama_tar())
    env = {"PICK_BACKEND_GITHUB_API": f"http://127.0.0.1:{hole.getsockname()[1]}", "GITHUB_TOKEN": "",
           "PICK_BACKEND_READ_TIMEOUT": "20", "PICK_BACKEND_RETRY_BASE": "0"}
    started = time.monotonic()
    r = run_cli("--root", STRIX, "install", "llamacpp", "--cache-dir", str(tmp_path / "c"), "--from-file", str(f),
                "--allow-unverified", "backend", "--json", env=env)
    hole.close()
    assert r.rc == 0, r.err
    assert time.monotonic() - started < 15 and "the releases API was not asked" in r.err
    assert r.json()["artifacts"][0]["verified"] is False


def test_verify_hook_runs_on_the_staging_tree_before_the_swap(srv, tmp_path, monkeypatch):
    from selector.catalog import load, load_pins
    from selector.engine import Device
    from selector.install import installer, resolve

    monkeypatch.setenv("PICK_BACKEND_GITHUB_API", srv.url)
    monkeypatch.setenv("GITHUB_TOKEN", "")
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    cache = tmp_path / "c"
    before = old_install(cache)
    cat = load("lemonade")
    plan = resolve.plan(resolve.load_assets("lemonade"), cat.recipes["llamacpp"], "vulkan", "stable",
                        Device("amd_gpu", "gfx1151"), "linux", "x86_64", load_pins("lemonade"))
    seen = []

    def verify(staging):
        seen.append(sorted(os.listdir(staging)))
        return False, 6, "llama-server --version did not answer"

    with pytest.raises(installer.InstallError) as e:
        installer.install(plan, str(cache), "linux", verify=verify)
    assert e.value.exit_code == 6 and "did not answer" in str(e.value)
    assert seen and "version.txt" in seen[0] and "install.json" in seen[0]
    assert snapshot(cache) == before


def test_7z_with_a_link_is_refused(srv, tmp_path):
    py7zr = pytest.importorskip("py7zr")
    from test_install import CUDA_TAG

    asset = f"llama-{CUDA_TAG}-windows-cuda-sm_89-x64.7z"
    (tmp_path / "outside").write_text("x")
    os.symlink("outside", tmp_path / "lnk")
    (tmp_path / "llama-server.exe").write_bytes(b"MZ fake")
    with py7zr.SevenZipFile(tmp_path / "a.7z", "w") as z:
        z.write(tmp_path / "llama-server.exe", "llama-server.exe")
        z.write(tmp_path / "lnk", "lnk")
    srv.release("lemonade-sdk/llama.cpp", CUDA_TAG, {asset: (tmp_path / "a.7z").read_bytes()})
    cache = tmp_path / "c"
    r = run_cli("--root", STRIX, "install", "llamacpp", "--cache-dir", str(cache), "--force", "--os", "windows",
                "--sm", "sm_89", "--backend", "cuda", env=env_for(srv))
    assert r.rc == 4 and "refusing link lnk" in r.err, r.err
    assert not (cache / "bin" / "llamacpp" / "cuda").exists()


@pytest.mark.skipif(os.name == "nt", reason="symbolic links")
@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_a_link_planted_at_the_lock_is_refused_and_its_target_never_created(srv, tmp_path, command):
    cache = tmp_path / "c"
    r = vulkan(srv, cache)
    assert r.rc == 0, r.err
    dest = cache / "bin" / "llamacpp" / "vulkan"
    lock = str(dest) + ".lock"
    if os.path.lexists(lock):
        os.remove(lock)
    target = tmp_path / "elsewhere" / "created-by-the-lock"
    target.parent.mkdir()
    os.symlink(str(target), lock)
    if command == "install":
        r = vulkan(srv, cache, "--reinstall")
    else:
        r = run_cli("uninstall", "llamacpp", "vulkan", "--cache-dir", str(cache))
    assert r.rc == 4, r.err
    assert "a symbolic link where the lock file belongs" in r.err and "vulkan.lock" in r.err
    assert not os.path.lexists(target)
    assert os.path.isdir(dest)  # the previous install is untouched


def _declaring(data: bytes, name: str, size: int) -> bytes:
    """The zip ``data`` with the central directory entry of ``name`` declaring ``size`` bytes
    unpacked (a bomb's index: what a reader sees before it inflates anything)."""
    import struct

    out = bytearray(data)
    i = out.find(b"PK\x01\x02")
    while i != -1:
        n = struct.unpack_from("<H", out, i + 28)[0]
        if bytes(out[i + 46:i + 46 + n]).decode() == name:
            struct.pack_into("<I", out, i + 24, size)
        i = out.find(b"PK\x01\x02", i + 4)
    return bytes(out)


def test_an_archive_declaring_over_twenty_times_its_size_is_refused_before_writing(srv, tmp_path):
    # 1 MiB of zeros deflates to about 1 KiB; the index then claims 600 MiB: far past max(20 x size,
    # 512 MiB), and far under the 32 GiB cap, so the ratio is what refuses it
    data = zip_of([("llama-server", SCRIPT, 0o755), ("zeros.bin", b"\0" * (1 << 20))], zipfile.ZIP_DEFLATED)
    bomb = _declaring(data, "zeros.bin", 600 * 1024 * 1024)
    cache = tmp_path / "c"
    r = nightly(srv, cache, bomb)
    assert r.rc == 4, r.err
    assert "declares 600.0 MiB unpacked from" in r.err and "more than 20 times its size" in r.err
    assert "refusing before writing" in r.err and leftovers(cache) == []
    # the same archive with an honest index installs (1 MiB from a few KiB is under the 512 MiB floor)
    r = nightly(srv, tmp_path / "ok", data)
    assert r.rc == 0, r.err


def test_uninstall_waits_for_an_install_and_says_so(tmp_path):
    """uninstall takes the install's lock: while another process holds it, it says so and waits."""
    d = tmp_path / "bin" / "llamacpp" / "vulkan"
    d.mkdir(parents=True)
    (d / "version.txt").write_text("b1\n")
    held = subprocess.Popen([sys.executable, "-c", f"import sys, time; sys.path.insert(0, {os.getcwd()!r})\n"
                             "from selector.install.unpack import lock\n"
                             f"with lock({str(d) + '.lock'!r}):\n    print('held', flush=True); time.sleep(2)"],
                            stdout=subprocess.PIPE, text=True)
    assert held.stdout.readline().strip() == "held"
    r = run_cli("uninstall", "llamacpp", "vulkan", "--cache-dir", str(tmp_path))
    held.wait(10)
    assert r.rc == 0, r.err
    assert "waiting for another install of llamacpp/vulkan" in r.err
    assert not d.exists()


def test_dry_run_offline_says_the_digest_is_unknown_not_none(tmp_path):
    env = {"PICK_BACKEND_GITHUB_API": "http://127.0.0.1:9", "GITHUB_TOKEN": "", "PICK_BACKEND_RETRY_BASE": "0"}
    r = run_cli("--root", STRIX, "install", "llamacpp", "--dry-run", "--cache-dir", str(tmp_path), env=env)
    assert r.rc == 0, r.err
    assert "digest       unknown (the releases API could not be asked" in r.out
    assert "none published" not in r.out and "retrying" not in r.err
