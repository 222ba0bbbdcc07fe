"""Faults an audit found after the install-safety work: a hostile API that answers without end, a
rate-limit answer whose reset is already past, and plans (dry runs) that ignore the network limits.
Each test drives the real CLI against servers on 127.0.0.1 (test_install.Server)."""

import time

from conftest import run_cli
from test_install import STRIX, VULKAN_ASSET, VULKAN_TAG, env_for, llama_tar, srv  # noqa: F401

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
