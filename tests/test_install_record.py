"""What `install` writes down and reports (docs/install.md "install.json"; docs/json.md "install"):
the record a later `status`, `verify` or Lemonade reads, and the --json artifacts a script reads.
Every expected value comes from the release the test serves (its tag, asset, URL and bytes)."""

import calendar
import hashlib
import json
import os
import time

from conftest import run_cli
from test_install import (STABLE_TAG, STRIX, VULKAN_ASSET, VULKAN_TAG, env_for, install, llama_tar, make_tar,  # noqa: F401
                          srv)

STABLE_ASSET = f"llama-{STABLE_TAG}-bin-ubuntu-rocm-7.14-x64.tar.gz"
RUNTIME = "therock-dist-linux-gfx1151-7.14.0.tar.gz"


def record(cache, dest):
    return json.loads((cache / "bin" / dest / "install.json").read_text())


def sha(data):
    return hashlib.sha256(data).hexdigest()


def test_the_record_of_a_download_names_its_source_and_digest(srv, tmp_path):
    data = llama_tar()
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: data})
    cache = tmp_path / "c"
    t0 = time.time()
    r = install(srv, cache, "--json")
    assert r.rc == 0, r.err
    rec = record(cache, "llamacpp/vulkan")
    url = f"{srv.url}/dl/ggml-org/llama.cpp/{VULKAN_TAG}/{VULKAN_ASSET}"
    assert {k: rec[k] for k in ("installed_by", "kind", "version", "repository", "tag", "asset", "url", "sha256",
                                "verified", "digest_source", "from_file", "binary")} == {
        "installed_by": "pick-backend", "kind": "backend", "version": VULKAN_TAG, "repository": "ggml-org/llama.cpp",
        "tag": VULKAN_TAG, "asset": VULKAN_ASSET, "url": url, "sha256": sha(data), "verified": True,
        "digest_source": "api", "from_file": None, "binary": f"llama-{VULKAN_TAG}/llama-server"}
    assert "runtime" not in rec and "expect" not in rec
    when = calendar.timegm(time.strptime(rec["installed_at"], "%Y-%m-%dT%H:%M:%SZ"))
    assert t0 - 2 <= when <= time.time() + 1
    assert not (cache / "bin" / "llamacpp" / "vulkan" / "method.txt").exists()

    [a] = r.json()["artifacts"]
    assert {k: a[k] for k in ("kind", "action", "repository", "tag", "asset", "url", "size", "digest",
                              "digest_source", "destination", "version", "sha256", "verified", "binary", "path")} == {
        "kind": "backend", "action": "installed", "repository": "ggml-org/llama.cpp", "tag": VULKAN_TAG,
        "asset": VULKAN_ASSET, "url": url, "size": len(data), "digest": f"sha256:{sha(data)}", "digest_source": "api",
        "destination": "llamacpp/vulkan", "version": VULKAN_TAG, "sha256": sha(data), "verified": True,
        "binary": f"llama-{VULKAN_TAG}/llama-server", "path": str(cache / "bin" / "llamacpp" / "vulkan")}

    # installed already: the same facts, read back from the record, action "present"
    again = install(srv, cache, "--json")
    assert again.rc == 0, again.err
    [p] = again.json()["artifacts"]
    assert p["action"] == "present" and p["sha256"] == sha(data) and p["verified"] is True
    assert p["binary"] == a["binary"] and p["url"] == url and p["path"] == a["path"]


def test_a_rocm_build_records_the_runtime_it_was_installed_with(srv, tmp_path):
    build = llama_tar(STABLE_TAG)
    runtime = make_tar([("lib", None), ("lib/libamdhip64.so", b"\x7fELF"), ("bin", None)])
    srv.release("lemonade-sdk/llama.cpp", STABLE_TAG, {STABLE_ASSET: build})
    srv.files[f"/therock/{RUNTIME}"] = runtime
    cache = tmp_path / "c"
    r = install(srv, cache, "--backend", "rocm", "--allow-unverified", "runtime", "--json")
    assert r.rc == 0, r.err
    rec = record(cache, "llamacpp/rocm-stable")
    assert (rec["runtime"], rec["runtime_version"], rec["runtime_expect"]) == ("therock/gfx1151-7.14.0", "7.14.0", "lib")
    rt = record(cache, "therock/gfx1151-7.14.0")
    assert {k: rt[k] for k in ("kind", "version", "repository", "tag", "asset", "url", "sha256", "verified",
                               "digest_source", "expect")} == {
        "kind": "runtime", "version": "7.14.0", "repository": None, "tag": None, "asset": RUNTIME,
        "url": f"{srv.url}/therock/{RUNTIME}", "sha256": sha(runtime), "verified": False, "digest_source": None,
        "expect": "lib"}
    assert "binary" not in rt and "runtime" not in rt
    arts = {a["kind"]: a for a in r.json()["artifacts"]}
    assert arts["runtime"]["digest"] is None and arts["runtime"]["size"] is None
    assert arts["runtime"]["path"] == str(cache / "bin" / "therock" / "gfx1151-7.14.0")


def test_the_record_of_a_local_archive_names_the_file(srv, tmp_path, monkeypatch):
    data = llama_tar()
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: data})
    f = tmp_path / "downloads" / VULKAN_ASSET
    f.parent.mkdir()
    f.write_bytes(data)
    cache = tmp_path / "c"
    monkeypatch.chdir(tmp_path)  # a relative path on the command line is recorded absolute
    r = run_cli("--root", STRIX, "install", "llamacpp", "--cache-dir", str(cache), "--from-file",
                os.path.join("downloads", VULKAN_ASSET), env=env_for(srv))
    assert r.rc == 0, r.err
    rec = record(cache, "llamacpp/vulkan")
    assert rec["from_file"] == str(f) and rec["sha256"] == sha(data) and rec["verified"] is True
    assert rec["digest_source"] == "api" and rec["url"].endswith(f"/{VULKAN_ASSET}")


def test_an_unverified_backend_is_recorded_as_such(srv, tmp_path):
    data = llama_tar()
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: data}, digest=None)
    cache = tmp_path / "c"
    r = install(srv, cache, "--allow-unverified", "backend", "--json")
    assert r.rc == 0, r.err
    rec = record(cache, "llamacpp/vulkan")
    assert rec["verified"] is False and rec["digest_source"] is None and rec["sha256"] == sha(data)
    [a] = r.json()["artifacts"]
    assert a["verified"] is False and a["digest"] is None
    # `all` allows every kind: a ROCm build and its runtime, neither with a digest
    srv.release("lemonade-sdk/llama.cpp", STABLE_TAG, {STABLE_ASSET: llama_tar(STABLE_TAG)}, digest=None)
    srv.files[f"/therock/{RUNTIME}"] = make_tar([("lib", None), ("lib/libamdhip64.so", b"\x7fELF")])
    r = install(srv, tmp_path / "c2", "--backend", "rocm", "--allow-unverified", "runtime")
    assert r.rc == 4 and "--allow-unverified backend" in r.err
    r = install(srv, tmp_path / "c2", "--backend", "rocm", "--allow-unverified", "all", "--json")
    assert r.rc == 0, r.err
    assert sorted((a["kind"], a["verified"]) for a in r.json()["artifacts"]) == [("backend", False), ("runtime", False)]
