"""`install` / `status` / `uninstall` against a real HTTP server on 127.0.0.1 that imitates the GitHub
releases API and serves archives the tests build.  Machines are the captures in fixtures/machines."""

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler

import pytest

from conftest import machine, run_cli
from servers import TestServer

STRIX = machine("linux-ubuntu24.04-strix-halo")  # gfx1151: llamacpp picks vulkan, rocm supported
RTX4090 = machine("linux-ubuntu24.04-rtx4090")  # sm_89: llamacpp picks cuda

# pins and asset names as Lemonade publishes them (lemonade-behaviour.md section 5)
PINS = json.load(open(os.path.join(os.path.dirname(__file__), "..", "selector", "catalogs", "lemonade-versions.json")))
VULKAN_TAG = PINS["llamacpp"]["vulkan"]
VULKAN_ASSET = f"llama-{VULKAN_TAG}-bin-ubuntu-vulkan-x64.tar.gz"
NIGHTLY_TAG = PINS["llamacpp"]["rocm-nightly"]
STABLE_TAG = PINS["llamacpp"]["rocm-stable"]
CUDA_TAG = PINS["llamacpp"]["cuda"]
SCRIPT = b"#!/bin/sh\necho llama-server fake\n"


# ------------------------------------------------------------------------------------------------
# archives


def make_tar(entries, mode="w:gz"):
    """entries: list of (name, bytes | None for a dir, file mode) or (name, ("symlink", target))"""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as t:
        for name, data, *rest in entries:
            info = tarfile.TarInfo(name)
            if isinstance(data, tuple):
                info.type, info.linkname = tarfile.SYMTYPE, data[1]
                t.addfile(info)
            elif data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                t.addfile(info)
            else:
                info.size, info.mode = len(data), (rest[0] if rest else 0o644)
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_zip(entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data, *rest in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = ((rest[0] if rest else 0o644) | 0o100000) << 16
            z.writestr(info, data)
    return buf.getvalue()


def llama_tar(tag=VULKAN_TAG, mode="w:gz"):
    return make_tar([(f"llama-{tag}", None), (f"llama-{tag}/llama-server", SCRIPT, 0o755),
                     (f"llama-{tag}/libggml.so", b"\x7fELF fake")], mode)


# ------------------------------------------------------------------------------------------------
# the server


class Server:
    """GET /repos/<owner>/<repo>/releases/tags/<tag>  -> release JSON (name, size, digest, url)
       GET /dl/<owner>/<repo>/<tag>/<asset>          -> the bytes (Range honoured)
       GET /therock/<file>                            -> TheRock runtime tarballs"""

    def __init__(self):
        self.releases = {}  # (repo, tag) -> {name: (bytes, digest or None)}
        self.files = {}  # url path -> bytes
        self.script = {}  # url path -> list of actions for successive requests: int status | ("drop", n) |
        #   ("status", code, {headers}) | ("redirect", url) | ("stall", s) | ("trickle", bytes, every_s) |
        #   ("endless",): the declared headers, then bytes without end
        self.log = []  # (path, Range header)
        self.auth = []  # (path, Authorization header or None)
        server = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                server.log.append((self.path, self.headers.get("Range")))
                server.auth.append((self.path, self.headers.get("Authorization")))
                try:
                    server.handle(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = TestServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def release(self, repo, tag, assets, digest=True):
        """assets: {name: bytes}; digest True = the right sha256, a string = that digest, None = none"""
        rel = {}
        for name, data in assets.items():
            d = f"sha256:{hashlib.sha256(data).hexdigest()}" if digest is True else digest
            rel[name] = (data, d)
            self.files[f"/dl/{repo}/{tag}/{name}"] = data
        self.releases[(repo, tag)] = rel

    def downloads(self, name):
        return [(p, r) for p, r in self.log if p.startswith("/dl/") and p.endswith("/" + name)]

    def handle(self, h):
        path = h.path
        actions = self.script.get(path)
        action = actions.pop(0) if actions else None
        if isinstance(action, tuple) and action[0] == "status":
            h.send_response(action[1])
            for k, v in action[2].items():
                h.send_header(k, v)
            h.send_header("Content-Length", "2")
            h.end_headers()
            h.wfile.write(b"{}")
            return
        if isinstance(action, tuple) and action[0] == "redirect":
            h.send_response(302)
            h.send_header("Location", action[1])
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if isinstance(action, int):
            return self._send(h, action, b"scripted failure")
        if path.startswith("/repos/") and "/releases/tags/" in path:
            head, tag = path[len("/repos/"):].split("/releases/tags/")
            rel = self.releases.get((head, tag))
            if rel is None:
                return self._send(h, 404, b'{"message": "Not Found"}', "application/json")
            body = {"tag_name": tag, "assets": [
                {"name": n, "size": len(data), "digest": d,
                 "browser_download_url": f"{self.url}/dl/{head}/{tag}/{n}"} for n, (data, d) in rel.items()]}
            return self._send(h, 200, json.dumps(body).encode(), "application/json")
        data = self.files.get(path)
        if data is None:
            return self._send(h, 404, b"not found")
        start = 0
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start = int(rng[6:].split("-")[0])
        body = data[start:]
        if isinstance(action, tuple) and action[0] == "endless":  # no Content-Length: until the client hangs up
            h.send_response(200)
            h.end_headers()
            h.close_connection = True
            block = b"\0" * 65536
            for _ in range(200_000):  # 13 GB at most: a client that reads to the end never finishes
                h.wfile.write(block)
            return
        h.send_response(206 if start else 200)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Accept-Ranges", "bytes")
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.end_headers()
        if isinstance(action, tuple) and action[0] == "drop":
            h.wfile.write(body[:action[1]])
            h.wfile.flush()
            h.close_connection = True
            return
        if isinstance(action, tuple) and action[0] == "stall":
            h.wfile.flush()
            time.sleep(action[1])
            h.close_connection = True
            return
        if isinstance(action, tuple) and action[0] == "trickle":
            for i in range(0, len(body), action[1]):
                h.wfile.write(body[i:i + action[1]])
                h.wfile.flush()
                time.sleep(action[2])
            return
        h.wfile.write(body)

    @staticmethod
    def _send(h, code, body, ctype="text/plain"):
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def srv():
    s = Server()
    yield s
    s.close()


def env_for(srv):
    return {"PICK_BACKEND_GITHUB_API": srv.url, "PICK_BACKEND_RETRY_BASE": "0",
            "PICK_BACKEND_THEROCK_URL": f"{srv.url}/therock", "GITHUB_TOKEN": ""}


def install(srv, cache, *args, root=STRIX):
    return run_cli("--root", root, "install", "llamacpp", "--cache-dir", str(cache), *args, env=env_for(srv))


def snapshot(cache):
    """Every path in the cache with its content (lock files aside: they stay by design)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(cache):
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not f.endswith(".lock"):
                out[os.path.relpath(p, cache)] = open(p, "rb").read()
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), cache) + "/"] = None
    return out


def leftovers(cache):
    return [k for k in snapshot(cache) if ".partial" in k or ".staging" in k or ".old" in k]


def old_install(cache, dirname="vulkan", version="b1000"):
    d = cache / "bin" / "llamacpp" / dirname
    d.mkdir(parents=True)
    (d / "version.txt").write_text(version + "\n")
    (d / "llama-server").write_bytes(b"#!/bin/sh\necho old\n")
    os.chmod(d / "llama-server", 0o755)
    return snapshot(cache)


# ------------------------------------------------------------------------------------------------
# happy paths


def test_install_pick_tar_gz_then_status_and_pick_show_installed(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    cache = tmp_path / "cache"
    r = install(srv, cache, "--json")
    assert r.rc == 0, r.err
    res = r.json()
    assert res["backend"] == "vulkan" and res["artifacts"][0]["action"] == "installed"
    assert res["artifacts"][0]["verified"] is True
    d = cache / "bin" / "llamacpp" / "vulkan"
    assert (d / "version.txt").read_text().strip() == VULKAN_TAG
    assert os.access(d / f"llama-{VULKAN_TAG}" / "llama-server", os.X_OK)
    assert json.loads((d / "install.json").read_text())["verified"] is True
    assert leftovers(cache) == []

    st = run_cli("status", "--json", "--cache-dir", str(cache))
    assert st.rc == 0
    [row] = st.json()["backends"]
    assert (row["recipe"], row["dir"], row["version"], row["pinned"], row["state"]) == \
        ("llamacpp", "vulkan", VULKAN_TAG, VULKAN_TAG, "installed")

    pick = run_cli("--root", STRIX, "llamacpp", "--cache-dir", str(cache), "--json")
    assert pick.json()["recipes"]["llamacpp"]["state"] == "installed"

    again = install(srv, cache)  # already there: nothing downloaded
    assert again.rc == 0 and "already installed" in again.out
    assert len(srv.downloads(VULKAN_ASSET)) == 1


def test_install_zip_nightly_family_asset(srv, tmp_path):
    # gfx1151 has no family in rocm_asset_families: its asset carries the target verbatim
    asset = f"llama-{NIGHTLY_TAG}-ubuntu-rocm-gfx1151-x64.zip"
    srv.release("lemonade-sdk/llamacpp-rocm", NIGHTLY_TAG,
                {asset: make_zip([("llama-server", SCRIPT, 0o755), ("librocm.so", b"x")])})
    cache = tmp_path / "c"
    r = install(srv, cache, "--backend", "rocm", "--channel", "nightly")
    assert r.rc == 0, r.err
    d = cache / "bin" / "llamacpp" / "rocm-nightly"
    assert (d / "version.txt").read_text().strip() == NIGHTLY_TAG
    assert os.access(d / "llama-server", os.X_OK)


def test_cuda_asset_carries_sm_and_tar_xz_installs(srv, tmp_path):
    asset = f"llama-{CUDA_TAG}-ubuntu-cuda-sm_89-x64.tar.xz"
    srv.release("lemonade-sdk/llama.cpp", CUDA_TAG, {asset: llama_tar(CUDA_TAG, "w:xz")})
    r = install(srv, tmp_path / "c", "--json", root=RTX4090)
    assert r.rc == 0, r.err
    assert r.json()["artifacts"][0]["asset"] == asset


def test_rocm_stable_installs_build_and_therock_runtime_or_neither(srv, tmp_path):
    asset = f"llama-{STABLE_TAG}-bin-ubuntu-rocm-7.14-x64.tar.gz"
    srv.release("lemonade-sdk/llama.cpp", STABLE_TAG, {asset: llama_tar(STABLE_TAG)})
    runtime = make_tar([("lib", None), ("lib/libamdhip64.so", b"\x7fELF"), ("bin", None)])
    srv.files["/therock/therock-dist-linux-gfx1151-7.14.0.tar.gz"] = runtime
    cache = tmp_path / "c"

    # AMD publishes no digest for the runtime: refused unless asked, and then nothing is installed
    r = install(srv, cache, "--backend", "rocm")
    assert r.rc == 4 and "--allow-unverified" in r.err
    assert not (cache / "bin" / "llamacpp" / "rocm-stable").exists()
    assert not (cache / "bin" / "therock" / "gfx1151-7.14.0").exists()

    r = install(srv, cache, "--backend", "rocm", "--allow-unverified", "runtime", "--json")
    assert r.rc == 0, r.err
    kinds = {a["kind"]: a for a in r.json()["artifacts"]}
    assert kinds["backend"]["verified"] is True and kinds["runtime"]["verified"] is False
    assert (cache / "bin" / "llamacpp" / "rocm-stable" / "version.txt").read_text().strip() == STABLE_TAG
    rt = cache / "bin" / "therock" / "gfx1151-7.14.0"
    assert (rt / "version.txt").read_text().strip() == "7.14.0"
    assert (rt / "method.txt").read_text().strip() == "tarball"
    assert (rt / "lib" / "libamdhip64.so").exists()

    # installed wins: vulkan comes first on this machine, but rocm is installed now
    pick = run_cli("--root", STRIX, "llamacpp", "--cache-dir", str(cache), "--json").json()["recipes"]["llamacpp"]
    assert pick["backend"] == "rocm" and pick["state"] == "installed"
    assert "installed" in pick["reason"]


# ------------------------------------------------------------------------------------------------
# download failures


def test_wrong_digest_retries_once_then_exit_4_with_both_hashes(srv, tmp_path):
    data = llama_tar()
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: data}, digest="sha256:" + "0" * 64)
    cache = tmp_path / "c"
    before = old_install(cache)
    r = install(srv, cache)
    assert r.rc == 4
    assert "0" * 64 in r.err and hashlib.sha256(data).hexdigest() in r.err
    assert len(srv.downloads(VULKAN_ASSET)) == 2  # deleted and fetched once more
    assert snapshot(cache) == before


def test_500_then_success(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    path = f"/dl/ggml-org/llama.cpp/{VULKAN_TAG}/{VULKAN_ASSET}"
    srv.script[path] = [500, 503]
    r = install(srv, tmp_path / "c")
    assert r.rc == 0, r.err
    assert len(srv.downloads(VULKAN_ASSET)) == 3


def test_404_is_not_retried(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    srv.script[f"/dl/ggml-org/llama.cpp/{VULKAN_TAG}/{VULKAN_ASSET}"] = [404]
    cache = tmp_path / "c"
    r = install(srv, cache)
    assert r.rc == 4 and "404" in r.err and "untouched" in r.err
    assert len(srv.downloads(VULKAN_ASSET)) == 1
    assert leftovers(cache) == []


def test_missing_release_says_which(srv, tmp_path):
    r = install(srv, tmp_path / "c")
    assert r.rc == 4
    assert f"release {VULKAN_TAG} of ggml-org/llama.cpp not found" in r.err


def test_dropped_connection_resumes_with_range(srv, tmp_path):
    data = make_tar([("llama-server", SCRIPT, 0o755), ("libggml.so", os.urandom(400_000))])
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: data})
    srv.script[f"/dl/ggml-org/llama.cpp/{VULKAN_TAG}/{VULKAN_ASSET}"] = [("drop", 200_000)]
    cache = tmp_path / "c"
    r = install(srv, cache)
    assert r.rc == 0, r.err
    (_, first), (_, second) = srv.downloads(VULKAN_ASSET)
    assert first is None
    start = int(second.removeprefix("bytes=").rstrip("-"))
    assert 0 < start <= 200_000  # asked only for the rest
    assert (cache / "bin" / "llamacpp" / "vulkan" / "version.txt").read_text().strip() == VULKAN_TAG


# ------------------------------------------------------------------------------------------------
# hostile or broken archives: exit 4, cache as it was


@pytest.mark.parametrize("archive,words", [
    (lambda: make_tar([("llama-server", SCRIPT, 0o755), ("../../evil.sh", SCRIPT, 0o755)]), "'..'"),
    (lambda: make_tar([("llama-server", SCRIPT, 0o755), ("/tmp/evil.sh", SCRIPT, 0o755)]), "absolute"),
    (lambda: make_tar([("llama-server", SCRIPT, 0o755), ("lib", ("symlink", "../../../../etc"))]), "outside"),
    (lambda: make_tar([("llama-b1/libggml.so", b"x")]), "does not contain llama-server"),
    (lambda: b"this is not a tarball", "not a readable archive"),
    # a gzip header, then a broken deflate stream: each gzip decoder (ISA-L, zlib) raises its own error
    (lambda: b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 64, "not a readable archive"),
    (lambda: make_tar([("llama-server", SCRIPT, 0o755), ("lib.so", os.urandom(200_000))])[:50_000],
     "not a readable archive"),
])
def test_bad_archive_keeps_old_install(srv, tmp_path, archive, words):
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: archive()})
    cache = tmp_path / "c"
    before = old_install(cache)
    r = install(srv, cache)
    assert r.rc == 4, r.err
    assert words in r.err and "untouched" in r.err
    assert snapshot(cache) == before
    assert not (tmp_path / "evil.sh").exists()


def test_zip_slip_refused(srv, tmp_path):
    asset = f"llama-{NIGHTLY_TAG}-ubuntu-rocm-gfx1151-x64.zip"
    srv.release("lemonade-sdk/llamacpp-rocm", NIGHTLY_TAG,
                {asset: make_zip([("llama-server", SCRIPT, 0o755), ("../../../escaped.txt", b"x")])})
    cache = tmp_path / "deep" / "c"
    r = install(srv, cache, "--backend", "rocm", "--channel", "nightly")
    assert r.rc == 4 and "'..'" in r.err
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "deep" / "escaped.txt").exists()
    assert not (cache / "bin" / "llamacpp" / "rocm-nightly").exists()
    assert leftovers(cache) == []


def test_7z_is_a_clear_unsupported_archive(srv, tmp_path):
    try:
        import py7zr  # noqa: F401
        pytest.skip("py7zr is installed")
    except ImportError:
        pass
    asset = f"llama-{CUDA_TAG}-windows-cuda-sm_89-x64.7z"
    srv.release("lemonade-sdk/llama.cpp", CUDA_TAG, {asset: b"7z\xbc\xaf\x27\x1c fake"})
    r = install(srv, tmp_path / "c", "--force", "--os", "windows", "--sm", "sm_89", "--backend", "cuda")
    assert r.rc == 4 and "unsupported archive" in r.err


# ------------------------------------------------------------------------------------------------
# concurrency, dry run, exit codes


def test_two_concurrent_installs_download_once_and_agree(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    cache = tmp_path / "c"
    env = dict(os.environ, **env_for(srv))
    env.pop("PICK_BACKEND_ROOT", None)
    cmd = [sys.executable, "-m", "selector", "--root", STRIX, "install", "llamacpp", "--cache-dir", str(cache), "--json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    actions = sorted(json.loads(o)["artifacts"][0]["action"] for o, _ in outs)
    assert actions == ["installed", "present"]
    assert len(srv.downloads(VULKAN_ASSET)) == 1
    assert (cache / "bin" / "llamacpp" / "vulkan" / "version.txt").read_text().strip() == VULKAN_TAG
    assert leftovers(cache) == []


def test_dry_run_names_the_nightly_family_asset_and_touches_nothing(srv, tmp_path):
    asset = f"llama-{NIGHTLY_TAG}-ubuntu-rocm-gfx120X-x64.zip"
    srv.release("lemonade-sdk/llamacpp-rocm", NIGHTLY_TAG, {asset: b"zipbytes"})
    cache = tmp_path / "c"
    r = run_cli("--root", STRIX, "install", "--dry-run", "llamacpp", "--backend", "rocm", "--force", "--gfx", "gfx1201",
                "--channel", "nightly", "--os", "linux", "--cache-dir", str(cache), env=env_for(srv))
    assert r.rc == 0, r.err
    for word in ("lemonade-sdk/llamacpp-rocm", NIGHTLY_TAG, asset, f"{srv.url}/dl/", "8 B",
                 "sha256:" + hashlib.sha256(b"zipbytes").hexdigest(), str(cache / "bin" / "llamacpp" / "rocm-nightly")):
        assert word in r.out
    assert not cache.exists()
    assert srv.downloads(asset) == []


def test_unsupported_backend_exit_3_and_force_with_target(srv, tmp_path):
    r = install(srv, tmp_path / "c", "--backend", "cuda")
    assert r.rc == 3 and "unsupported" in r.err and "No NVIDIA GPU" in r.err
    r = install(srv, tmp_path / "c", "--backend", "cuda", "--force", "--sm", "sm_89", "--dry-run", "--json")
    assert r.rc == 0, r.err
    assert r.json()["artifacts"][0]["asset"] == f"llama-{CUDA_TAG}-ubuntu-cuda-sm_89-x64.tar.xz"


def test_no_install_rule_and_bad_input(srv, tmp_path):
    r = run_cli("--root", STRIX, "install", "llamacpp-hrx", "--cache-dir", str(tmp_path), env=env_for(srv))
    assert r.rc == 3 and "no install rule for llamacpp-hrx hrx" in r.err
    r = install(srv, tmp_path, "--force", "--gfx", "radeon")
    assert r.rc == 2 and "gfx target" in r.err
    r = run_cli("install", "llamacp", "--cache-dir", str(tmp_path), env=env_for(srv))
    assert r.rc == 2 and "llamacpp" in r.err


def test_uninstall(srv, tmp_path):
    cache = tmp_path / "c"
    old_install(cache)
    r = run_cli("uninstall", "llamacpp", "vulkan", "--cache-dir", str(cache))
    assert r.rc == 0 and "removed" in r.out
    assert not (cache / "bin" / "llamacpp" / "vulkan").exists()
    r = run_cli("uninstall", "llamacpp", "vulkann", "--cache-dir", str(cache))
    assert r.rc == 2 and "vulkan" in r.err
    assert run_cli("status", "--json", "--cache-dir", str(cache)).json()["backends"] == []


def test_ctrl_c_mid_download_leaves_old_install_and_no_partial(srv, tmp_path, monkeypatch):
    """KeyboardInterrupt while bytes arrive: the previous install stays, nothing half-written stays."""
    from selector.catalog import load, load_pins
    from selector.engine import Device
    from selector.install import installer, resolve

    monkeypatch.setenv("PICK_BACKEND_GITHUB_API", srv.url)
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    cache = tmp_path / "c"
    before = old_install(cache)
    cat = load("lemonade")
    plan = resolve.plan(resolve.load_assets("lemonade"), cat.recipes["llamacpp"], "vulkan", "stable",
                        Device("amd_gpu", "gfx1151"), "linux", "x86_64", load_pins("lemonade"))

    class Interrupting:
        def new(self, label):
            pass

        def start(self, total, done):
            pass

        def advance(self, n):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        installer.install(plan, str(cache), "linux", progress=Interrupting())
    assert snapshot(cache) == before


def test_pick_path_does_not_import_requests():
    code = ("import sys; from selector.cli import main\n"
            "try:\n    main(['--root', %r, 'llamacpp', '--json'])\nexcept SystemExit: pass\n"
            "sys.stderr.write('REQUESTS=%%s' %% ('requests' in sys.modules))" % STRIX)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "REQUESTS=False" in p.stderr
