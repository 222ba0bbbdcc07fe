"""The repository as a fresh clone gets it: only its own files, and every path it names is there."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import ROOT


def _git(*args) -> str:
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True).stdout


needs_git = pytest.mark.skipif(shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")),
                               reason="not a git checkout")


@needs_git
def test_no_tool_output_is_committed_and_none_would_be():
    # a test run writes .coverage (tools/mutate.py's map, pytest-cov); a clone must not carry one
    tracked = _git("ls-files").splitlines()
    leftovers = [p for p in tracked if os.path.basename(p).startswith(".coverage")
                 or "__pycache__" in p.split("/") or p.endswith(".pyc")]
    assert not leftovers, leftovers
    ignored = _git("check-ignore", "--no-index", ".coverage", ".coverage.host.1234", "tests/__pycache__/x.pyc")
    assert len(ignored.splitlines()) == 3, ignored
