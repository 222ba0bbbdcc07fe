"""`install --verify`: the new build's device check runs from the staging directory, before the swap.
A failing check keeps the previous install (exit with the check's code) unless --keep-unverified.
The archive server is test_install's (127.0.0.1); the builds print outputs from test_verify's reports."""

import json

import pytest

from conftest import machine, run_cli
from test_install import VULKAN_ASSET, VULKAN_TAG, Server, env_for, leftovers, make_tar, old_install, snapshot
from test_verify import R, script

STRIX = machine("linux-ubuntu24.04-strix-halo")  # llamacpp picks vulkan on the gfx1151


@pytest.fixture
def srv():
    s = Server()
    yield s
    s.close()


def release_with(srv, text):
    tar = make_tar([(f"llama-{VULKAN_TAG}", None),
                    (f"llama-{VULKAN_TAG}/llama-server", text.encode(), 0o755)])
    srv.release("ggml-org/llama.cpp", VULKAN_TAG, {VULKAN_ASSET: tar})


def install(srv, cache, *args):
    return run_cli("--root", STRIX, "install", "llamacpp", "--cache-dir", str(cache), "--verify", *args,
                   env=env_for(srv))


def test_a_build_that_sees_only_llvmpipe_does_not_replace_the_old_one(srv, tmp_path):
    release_with(srv, script(R.LLVMPIPE_OUT))
    before = old_install(tmp_path)
    r = install(srv, tmp_path)
    assert r.rc == 3, (r.out, r.err)
    assert "other device" in r.err and "previous install is untouched" in r.err
    assert snapshot(tmp_path) == before  # the b1000 build is still there, byte for byte
    assert leftovers(tmp_path) == []


def test_a_build_that_does_not_start_exits_4_and_json_says_why(srv, tmp_path):
    release_with(srv, script(stderr=R.HIPBLAS_ERR, rc=127))
    before = old_install(tmp_path)
    r = install(srv, tmp_path, "--json")
    assert r.rc == 4
    out = r.json()
    assert out["state"] == "verify_failed" and out["verify"]["verdict"] == "does_not_start"
    assert out["verify"]["path"].endswith(".staging")  # it ran from the staging directory
    assert snapshot(tmp_path) == before and leftovers(tmp_path) == []


def test_keep_unverified_installs_anyway(srv, tmp_path):
    release_with(srv, script(R.LLVMPIPE_OUT))
    old_install(tmp_path)
    r = install(srv, tmp_path, "--keep-unverified")
    assert r.rc == 0, r.err
    assert "other device" in r.out and "--keep-unverified" in r.err
    d = tmp_path / "bin" / "llamacpp" / "vulkan"
    assert (d / "version.txt").read_text().strip() == VULKAN_TAG


def test_a_verified_build_is_installed_and_reported(srv, tmp_path):
    release_with(srv, script(R.RADV_STRIX_OUT, R.RADV_STRIX_ERR))
    old_install(tmp_path)
    r = install(srv, tmp_path, "--json")
    assert r.rc == 0, r.err
    out = r.json()
    assert out["state"] == "installed" and out["verify"]["verdict"] == "verified"
    d = tmp_path / "bin" / "llamacpp" / "vulkan"
    assert (d / "version.txt").read_text().strip() == VULKAN_TAG
    assert json.loads((d / "install.json").read_text())["binary"] == f"llama-{VULKAN_TAG}/llama-server"
    # already installed: --verify checks what is there
    again = install(srv, tmp_path)
    assert again.rc == 0 and "already installed" in again.out and "verified" in again.out
