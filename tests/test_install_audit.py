"""Faults an audit found after the install-safety work: a hostile API that answers without end, a
rate-limit answer whose reset is already past, and plans (dry runs) that ignore the network limits.
Each test drives the real CLI against servers on 127.0.0.1 (test_install.Server)."""

import gzip
import io
import json
import stat
import tarfile
import time
import zipfile

import pytest

from conftest import machine, run_cli
from test_install import (NIGHTLY_TAG, SCRIPT, STRIX, VULKAN_ASSET, VULKAN_TAG, Server, env_for, leftovers,  # noqa: F401
                          llama_tar, srv)
from test_install_safety import nightly

API = f"/repos/ggml-org/llama.cpp/releases/tags/{VULKAN_TAG}"


def vulkan(srv, cache, *args, env=None):
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    e = env_for(srv)
    e.update(env or {})
    return run_cli("--root", STRIX, "install", "llamacpp", "--cache-dir", str(cache), *args, env=e)


def test_rate_limit_whose_reset_has_passed_is_not_retried_without_end(srv, tmp_path):
    # a proxy or a clock skew: "limit used up, resets at <a time already past>", on every answer
    hdr = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) - 60)}
    srv.script[API] = [("status", 403, hdr)] * 10_000
    t0 = time.monotonic()
    r = vulkan(srv, tmp_path / "c", "--timeout", "20")
    asked = sum(1 for p, _ in srv.log if p == API)
    assert r.rc == 4, r.err
    assert "rate limit" in r.err
    assert asked <= 10, f"asked the API {asked} times"
    assert time.monotonic() - t0 < 15


class EndlessApi(Server):
    """The API answers 200 and then JSON without end: ("endless_api", seconds_between_blocks, block_size)."""

    def handle(self, h):
        actions = self.script.get(h.path)
        if actions and isinstance(actions[0], tuple) and actions[0][0] == "endless_api":
            _, every, size = actions.pop(0)
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.end_headers()
            h.close_connection = True
            h.wfile.write(b'{"assets": [], "body": "')
            t_end = time.monotonic() + 60
            while time.monotonic() < t_end:  # bounded, so that a client reading to the end still ends
                h.wfile.write(b"a" * size)
                h.wfile.flush()
                time.sleep(every)
            return
        if actions and actions[0] == "gzip":  # as api.github.com answers: Content-Encoding: gzip
            actions.pop(0)
            rel = self.releases[("ggml-org/llama.cpp", VULKAN_TAG)]
            body = gzip.compress(json.dumps({"tag_name": VULKAN_TAG, "assets": [
                {"name": n, "size": len(data), "digest": d,
                 "browser_download_url": f"{self.url}/dl/ggml-org/llama.cpp/{VULKAN_TAG}/{n}"}
                for n, (data, d) in rel.items()]}).encode())
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Encoding", "gzip")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        return super().handle(h)


@pytest.fixture
def endless():
    s = EndlessApi()
    yield s
    s.close()


def test_an_api_answer_without_end_is_cut_at_a_cap(endless, tmp_path):
    endless.script[API] = [("endless_api", 0, 1 << 20)]
    t0 = time.monotonic()
    r = vulkan(endless, tmp_path / "c", "--json")
    assert r.rc == 4, r.err
    assert "MiB" in r.err and API in r.err  # names the cap and the URL
    assert r.json()["exit"] == 4
    assert time.monotonic() - t0 < 30


def test_an_api_answer_trickling_forever_ends_at_the_deadline(endless, tmp_path):
    endless.script[API] = [("endless_api", 0.2, 16)]  # never idle long enough for the read timeout
    t0 = time.monotonic()
    r = vulkan(endless, tmp_path / "c", "--timeout", "3")
    assert r.rc == 4, r.err
    assert "deadline" in r.err
    assert time.monotonic() - t0 < 20


def test_a_gzip_encoded_api_answer_is_read(endless, tmp_path):
    endless.script[API] = ["gzip"]
    r = vulkan(endless, tmp_path / "c", "--json")
    assert r.rc == 0, r.err
    assert r.json()["artifacts"][0]["verified"] is True


def test_an_api_answer_that_stalls_mid_body_is_retried(endless, tmp_path):
    endless.script[API] = [("endless_api", 30, 16)] * 2  # two answers stall after a few bytes; the third is whole
    r = vulkan(endless, tmp_path / "c", env={"PICK_BACKEND_READ_TIMEOUT": "1"})
    assert r.rc == 0, r.err
    assert r.err.count("retrying in") == 2 and "Timeout" in r.err


def test_dry_run_keeps_the_network_limits(endless, tmp_path):
    endless.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    e = env_for(endless)
    args = ("--root", STRIX, "install", "llamacpp", "--dry-run", "--json", "--cache-dir", str(tmp_path / "c"))
    endless.script[API] = [("endless_api", 0.2, 16)] * 2
    t0 = time.monotonic()
    r = run_cli(*args, "--timeout", "3", env=e)
    assert r.rc == 0, r.err  # a plan, not a download: the API's failure is a warning
    assert any("deadline" in w for w in r.json()["warnings"])
    assert time.monotonic() - t0 < 20
    e["PICK_BACKEND_TIMEOUT"] = "abc"
    r = run_cli(*args, env=e)
    assert r.rc == 5 and "PICK_BACKEND_TIMEOUT" in r.err
    assert r.json() == {"error": r.json()["error"], "exit": 5}


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_deadline_that_is_not_a_number_is_refused(value, tmp_path):
    # a nan deadline compares false with everything: it would switch the deadline off
    args = ("--root", STRIX, "install", "llamacpp", "--dry-run", "--json", "--cache-dir", str(tmp_path / "c"))
    r = run_cli(*args, "--timeout", value)
    assert r.rc == 2 and "--timeout" in r.err and r.json()["exit"] == 2
    r = run_cli(*args, env={"PICK_BACKEND_TIMEOUT": value, "PICK_BACKEND_GITHUB_API": "http://127.0.0.1:9"})
    assert r.rc == 5 and "PICK_BACKEND_TIMEOUT" in r.err and r.json()["exit"] == 5
    r = run_cli("--root", STRIX, "verify", "llamacpp", "--timeout", value, "--cache-dir", str(tmp_path / "c"))
    assert r.rc == 2 and "--timeout" in r.err


def _complete(words):
    env = {"_PICK_BACKEND_COMPLETE": "bash_complete", "COMP_WORDS": " ".join(words), "COMP_CWORD": str(len(words) - 1)}
    r = run_cli(env=env)
    assert r.rc == 0, r.err
    return [x.split(",", 1) for x in r.out.splitlines() if "," in x]


@pytest.mark.parametrize("cmd", ["install", "uninstall", "verify"])
def test_completion_of_the_install_commands(cmd):
    assert ["plain", "llamacpp"] in _complete(["pick-backend", cmd, "lla"])
    after = ["llamacpp", "--backend"] if cmd != "uninstall" else ["llamacpp"]
    assert _complete(["pick-backend", cmd, *after, "vu"]) == [["plain", "vulkan"]]


def test_catalog_completion_offers_names_and_files_not_object_reprs():
    items = _complete(["pick-backend", "install", "--catalog", "l"])
    assert ["plain", "lemonade"] in items and ["plain", "localai"] in items
    assert ["file", "l"] in items
    assert not any("object at" in v for _, v in items)


def test_install_json_when_the_pick_is_the_system_llama_server(tmp_path):
    import jsonschema
    from test_json_contract import schema

    pi5 = machine("linux-raspberrypi-pi5-arm64")  # llama-server on PATH
    for extra in ((), ("--dry-run",)):
        r = run_cli("--root", pi5, "install", "llamacpp", "--prefer-system", "--json", "--cache-dir",
                    str(tmp_path / "c"), *extra)
        assert r.rc == 0, r.err
        doc = r.json()  # one JSON document, not a sentence
        jsonschema.validate(doc, schema("install"))
        assert doc["backend"] == "system" and doc["state"] == "system" and doc["artifacts"] == []
        assert doc["path"].endswith("llama-server")
    assert not (tmp_path / "c").exists()


# ------------------------------------------------------------------------------------------------
# archive defences no test pinned (each test fails when its defence is deleted)


def _zip_with(name, data, mode, compress=zipfile.ZIP_DEFLATED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compress) as z:
        z.writestr(_unix_info("llama-server", stat.S_IFREG | 0o755), SCRIPT)
        z.writestr(_unix_info(name, mode), data)
    return buf.getvalue()


def _unix_info(name, mode):
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = mode << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def test_zip_link_with_a_huge_target_is_refused_before_it_is_read(srv, tmp_path):
    # a link entry is read into memory to learn its target: 64 MiB of one letter deflate to 64 KiB
    data = _zip_with("big-link", b"a" * (64 << 20), stat.S_IFLNK | 0o777)
    r = nightly(srv, tmp_path / "c", data)
    assert r.rc == 4 and "refusing link big-link" in r.err, r.err
    assert leftovers(tmp_path / "c") == []


@pytest.mark.parametrize("kind", [stat.S_IFIFO, stat.S_IFCHR, stat.S_IFSOCK])
def test_zip_special_file_is_refused(srv, tmp_path, kind):
    r = nightly(srv, tmp_path / "c", _zip_with("dev/thing", b"", kind | 0o644))
    assert r.rc == 4 and "refusing special file dev/thing" in r.err, r.err
    assert not (tmp_path / "c" / "bin" / "llamacpp" / "rocm-nightly").exists()


@pytest.mark.parametrize("kind", [tarfile.FIFOTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE])
def test_tar_special_file_is_refused(srv, tmp_path, kind):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        info = tarfile.TarInfo("llama-server")
        info.size, info.mode = len(SCRIPT), 0o755
        t.addfile(info, io.BytesIO(SCRIPT))
        dev = tarfile.TarInfo("dev/thing")
        dev.type = kind
        t.addfile(dev)
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: buf.getvalue()})
    r = run_cli("--root", STRIX, "install", "llamacpp", "--cache-dir", str(tmp_path / "c"), env=env_for(srv))
    assert r.rc == 4 and "refusing special file dev/thing" in r.err, r.err


def test_an_archive_directory_named_like_the_tools_own_file_is_replaced(srv, tmp_path):
    data = _zip_with("version.txt/x", b"archive's", stat.S_IFREG | 0o644)
    r = nightly(srv, tmp_path / "c", data)
    assert r.rc == 0, r.err
    d = tmp_path / "c" / "bin" / "llamacpp" / "rocm-nightly"
    assert (d / "version.txt").is_file() and (d / "version.txt").read_text().strip() == NIGHTLY_TAG


# ------------------------------------------------------------------------------------------------
# installer defences no test pinned


def test_a_declared_size_over_the_download_cap_is_refused_before_any_request(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: llama_tar()})
    e = env_for(srv)
    e["PICK_BACKEND_MAX_DOWNLOAD"] = "100"
    r = run_cli("--root", STRIX, "install", "llamacpp", "--cache-dir", str(tmp_path / "c"), env=e)
    assert r.rc == 4 and "PICK_BACKEND_MAX_DOWNLOAD" in r.err and VULKAN_ASSET in r.err, r.err
    assert srv.downloads(VULKAN_ASSET) == []


def test_a_failed_backend_swap_rolls_back_the_runtime_swapped_before_it(srv, tmp_path, monkeypatch):
    """Both or neither: the runtime is swapped in first; when the backend's swap then fails, the old
    runtime and the old backend are back, and nothing half-made is left."""
    from test_install import old_install, snapshot
    from test_install_safety import RUNTIME_PATH, RUNTIME_TAR, STABLE_ASSET, STABLE_TAG

    from selector.catalog import load, load_pins
    from selector.engine import Device
    from selector.install import installer, resolve, unpack

    monkeypatch.setenv("PICK_BACKEND_GITHUB_API", srv.url)
    monkeypatch.setenv("PICK_BACKEND_THEROCK_URL", f"{srv.url}/therock")
    monkeypatch.setenv("PICK_BACKEND_RETRY_BASE", "0")
    srv.release("lemonade-sdk/llama.cpp", STABLE_TAG, {STABLE_ASSET: llama_tar(STABLE_TAG)})
    srv.files[RUNTIME_PATH] = RUNTIME_TAR
    cache = tmp_path / "c"
    old_install(cache, "rocm-stable")
    rt = cache / "bin" / "therock" / "gfx1151-7.14.0"
    rt.mkdir(parents=True)
    (rt / "version.txt").write_text("7.13.0\n")  # an older runtime: replaced by this install
    before = snapshot(cache)
    cat = load("lemonade")
    plan = resolve.plan(resolve.load_assets("lemonade"), cat.recipes["llamacpp"], "rocm", "stable",
                        Device("amd_gpu", "gfx1151"), "linux", "x86_64", load_pins("lemonade"))
    assert [a.kind for a in plan.artifacts] == ["backend", "runtime"]
    real_run = unpack.Swap.run

    def run(self):
        if self.kind == "backend":
            assert (rt / "lib").is_dir()  # the new runtime is in place: its swap ran first
            raise OSError(18, "Invalid cross-device link", self.dest)
        return real_run(self)

    monkeypatch.setattr(unpack.Swap, "run", run)
    with pytest.raises(installer.InstallError, match="moving the new backend into place"):
        installer.install(plan, str(cache), "linux", allow_unverified=("runtime",))
    assert snapshot(cache) == before


@pytest.mark.parametrize("value", ["abc", "-3", "nan"])
def test_a_malformed_retry_base_is_bad_input(srv, tmp_path, value):
    srv.script[API] = [503]  # one retry, so the backoff is computed
    r = vulkan(srv, tmp_path / "c", "--json", env={"PICK_BACKEND_RETRY_BASE": value})
    assert r.rc == 5 and "PICK_BACKEND_RETRY_BASE" in r.err, r.err
    assert r.json()["exit"] == 5
