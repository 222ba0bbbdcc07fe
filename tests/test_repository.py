"""The repository as a fresh clone gets it: only its own files, and every path it names is there."""

from __future__ import annotations

import os
import re
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
    ignored = _git("check-ignore", "--no-index", ".coverage", ".coverage.host.1234", os.path.join("tests", "__pycache__", "x.pyc"))
    assert len(ignored.splitlines()) == 3, ignored


# ------------------------------------------------------------------------------------------------
# every path the repository names is in it

TOPS = (".ci", "benchmarks", "catalogs-src", "deploy", "docs", "fixtures", "probes", "selector", "tests", "tools")
PATH = re.compile(r"(?<![\w./@:-])((?:\.\./)*(?:%s)/[\w./-]*[\w-])" % "|".join(re.escape(t) for t in TOPS))
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")  # a Markdown link's target
# Paths of other repositories, cited with them: the repository must be named in the same file.
EXTERNAL = {
    "docs/dev/backends-reference.md": "lemonade-sdk/lemonade",
    "docs/tools/gen_backend_boilerplate.py": "lemonade-sdk/lemonade",
    "docs/content/features/vllm-cpp.md": "mudler/LocalAI",
    "docs/therock-eval-results.md": "noamsto/nix-amd-ai",
    "docs/community-hardware/m4-pro-48gb.md": "TheTom/turboquant_plus",
    "docs/drivers": "Mesa",
    "tools/server/server.cpp": "llama.cpp",
    "tools/llama-bench/llama-bench.cpp": "llama.cpp",
    "tools/llama-bench": "llama.cpp",
    "tools/fit-params": "llama.cpp",
}
# Paths a tool writes, not the repository: named so a user finds them.
WRITTEN = {"catalogs-src/llama-bench/read-added.json": "tools/add_bench.py --write",
           "benchmarks/results": "benchmarks/bench.py"}
# Where a file outside the repository would be cited: never.  (Where a test finds a llama.cpp build,
# ../shared/llama.cpp or PICK_BACKEND_LLAMA_CPP, is configuration and is allowed.)
# Verbatim copies of other repositories' files (their links point into those repositories).
COPIES = {"catalogs-src/lemonade/backends-reference.md", "catalogs-src/localai/index.yaml",
          "catalogs-src/lemonade-models/server_models.json", "tests/test_repository.py"}  # this file: its own examples
OUTSIDE = re.compile(r"shared/reference|hardware-facts|peers\.md|/work/|\.\./shared/(?!llama\.cpp)")


def _text_files():
    for rel in _git("ls-files").splitlines():
        if "/fs/" in rel or rel.startswith("tests/data/") or rel.endswith((".gguf", ".png")) or rel in COPIES:
            continue  # machine captures and recorded output are data, not citations
        try:
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                yield rel, f.read()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue


def _missing(rel: str, text: str) -> list[str]:
    out = []
    here = os.path.dirname(rel)
    for m in PATH.finditer(text):
        p = m.group(1).rstrip(".")
        if text[m.end():m.end() + 1] in ("*", "{", "<"):
            continue  # a pattern (read-*.json, guide-{name}.json), not a path
        if p in WRITTEN or (p in EXTERNAL and EXTERNAL[p] in text) or re.search(r"/[A-Z]+(\.|/|$)", p):
            continue  # another repository's file, a tool's output, or a placeholder (selector/catalogs/NAME.json)
        base = here if p.startswith("../") else ""
        if not os.path.exists(os.path.normpath(os.path.join(ROOT, base, p))):
            out.append(p)
    if rel.endswith(".md"):
        for m in LINK.finditer(text):
            target = m.group(1)
            if "://" in target or target.startswith("mailto:"):
                continue
            if not os.path.exists(os.path.normpath(os.path.join(ROOT, here, target))):
                out.append(target)
    for m in OUTSIDE.finditer(text):
        out.append(text[m.start():text.find("\n", m.start())][:60])
    if "DESIGN.md" in text and not rel.startswith("docs/"):
        out += [text[max(0, m.start() - 5):m.end()] for m in re.finditer(r"(?<!docs/)DESIGN\.md", text)]
    return out


@needs_git
def test_every_path_the_repository_names_is_in_it():
    bad = {rel: miss for rel, text in _text_files() if (miss := _missing(rel, text))}
    assert not bad, bad


def test_the_path_check_finds_what_it_should():
    # the check itself: a stale module, a file outside the repository, a link to nothing, DESIGN.md elsewhere
    assert _missing("README.md", "see selector/engine.py") == ["selector/engine.py"]
    assert _missing("docs/x.md", "[a](nowhere.md) and [b](json.md) and [c](../deploy/ansible/README.md)") == ["nowhere.md"]
    assert _missing("probes/tables/x.json", "see shared/reference/hardware-facts.md 1.1")
    assert _missing("tests/x.py", "the way DESIGN.md promises") and not _missing("tests/x.py", "docs/DESIGN.md says")
    assert not _missing("tests/x.py", "the build in ../shared/llama.cpp/bin")
    assert not _missing("x.json", "lemonade-sdk/lemonade docs/dev/backends-reference.md")
    assert _missing("x.json", "docs/dev/backends-reference.md") == ["docs/dev/backends-reference.md"]
