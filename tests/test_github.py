"""The GitHub releases client (selector/install/github.py): the API base a mirror sets, which token
goes where, and how a release's asset list is read (names, wildcards, split parts, near misses)."""

import pytest

from probes.inputs import InputError
from selector.install import github
from selector.install.download import DownloadError

API = "PICK_BACKEND_GITHUB_API"


def test_api_base_default_and_mirror():
    assert github.api_base({}) == "https://api.github.com"
    assert github.api_base({API: ""}) == "https://api.github.com"
    assert github.api_base({API: "http://127.0.0.1:8080/"}) == "http://127.0.0.1:8080"
    assert github.api_base({API: "https://ghe.example/api/v3"}) == "https://ghe.example/api/v3"


@pytest.mark.parametrize("raw", ["ftp://m.example", "m.example", "http://", "https://h:port/", "https://h:99999/",
                                 "https://h/ x", "https://h/?q=1", "https://h/#f"])
def test_api_base_that_is_not_an_http_url_is_bad_input(raw):
    with pytest.raises(InputError) as e:
        github.api_base({API: raw})
    assert e.value.path == API and repr(raw) in str(e.value)


def test_github_token_only_to_the_real_api_over_https():
    env = {"GITHUB_TOKEN": "t"}
    assert github.token_for("https://api.github.com/repos/a/b", env) == "t"
    assert github.token_for("https://API.github.com:443/x", env) == "t"
    for url in ("http://api.github.com/x", "https://api.github.com:8443/x", "https://objects.githubusercontent.com/x",
                "https://api.github.com.evil.example/x", "https://github.com/x"):
        assert github.token_for(url, env) is None, url
    assert github.token_for("https://api.github.com/x", {}) is None


def test_mirror_token_only_to_the_mirror_the_user_set():
    mirror = {"PICK_BACKEND_MIRROR_TOKEN": "m", "GITHUB_TOKEN": "t"}
    # https mirror: its own origin, port included
    env = dict(mirror, **{API: "https://mirror.example:8443/gh"})
    assert github.token_for("https://mirror.example:8443/gh/repos/a", env) == "m"
    assert github.token_for("https://mirror.example/gh/repos/a", env) is None
    assert github.token_for("https://other.example:8443/x", env) is None
    # plain http only on loopback
    for host in ("127.0.0.1", "localhost"):
        env = dict(mirror, **{API: f"http://{host}:9000"})
        assert github.token_for(f"http://{host}:9000/repos/a", env) == "m"
    env = dict(mirror, **{API: "http://[::1]:9000"})
    assert github.token_for("http://[::1]:9000/repos/a", env) == "m"
    env = dict(mirror, **{API: "http://mirror.example"})
    assert github.token_for("http://mirror.example/repos/a", env) is None
    # without the mirror variable, the mirror gets nothing, and the real API only GITHUB_TOKEN
    env = {"GITHUB_TOKEN": "t", API: "https://mirror.example"}
    assert github.token_for("https://mirror.example/repos/a", env) is None
    env = {"PICK_BACKEND_MIRROR_TOKEN": "m"}
    assert github.token_for("https://api.github.com/repos/a", env) is None


def test_headers_carry_the_token_as_a_bearer():
    h = github.headers_for({"GITHUB_TOKEN": "t"})
    assert h("https://api.github.com/x") == {"Authorization": "Bearer t"}
    assert h("https://example.com/x") == {}


def test_sessions_say_who_asks_and_what_they_accept():
    from importlib.metadata import version

    api = github.api_session({})
    assert api.headers["Accept"] == "application/vnd.github+json"
    assert api.headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert api.headers["User-Agent"] == f"pick-backend/{version('pick-backend')}"
    dl = github.download_session()
    assert dl.headers["Accept"] == "application/octet-stream" and dl.headers["User-Agent"] == api.headers["User-Agent"]
    assert "Authorization" not in dl.headers


def test_user_agent_without_installed_metadata(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "version", missing)  # run from a source tree, not installed
    assert github.api_session({}).headers["User-Agent"] == "pick-backend"


@pytest.mark.parametrize("name", ["", ".", "..", "a/b.zip", "a\\b.zip", "x\0.zip", "a..b.zip", ".hidden.zip",
                                  "C:x.zip", None, 7])
def test_asset_names_are_plain_file_names(name):
    with pytest.raises(DownloadError) as e:
        github.check_asset_name(name, "o/r", "b1")
    assert "release b1 of o/r" in str(e.value) and "not a plain file name" in str(e.value)


def test_a_plain_asset_name_is_kept():
    assert github.check_asset_name("llama-b1-bin-ubuntu-x64.tar.gz", "o/r", "b1") == "llama-b1-bin-ubuntu-x64.tar.gz"


def _rel(*names, url=True):
    return {"assets": [{"name": n, **({"browser_download_url": f"https://dl.example/{n}"} if url else {})}
                       for n in names]}


def test_find_asset_by_name_and_by_wildcard():
    rel = _rel("llama-b1-bin-ubuntu-x64.zip", "llama-b1-bin-ubuntu-vulkan-x64.tar.gz", "sd-b1-Darwin-macOS-15.0-arm64.zip")
    assert github.find_asset(rel, "llama-b1-bin-ubuntu-vulkan-x64.tar.gz", "o/r", "b1")["name"] \
        == "llama-b1-bin-ubuntu-vulkan-x64.tar.gz"
    assert github.find_asset(rel, "sd-b1-Darwin-macOS-*-arm64.zip", "o/r", "b1")["name"] == "sd-b1-Darwin-macOS-15.0-arm64.zip"
    # a name without '*' is matched as written, not as a pattern
    with pytest.raises(DownloadError):
        github.find_asset(_rel("a1.zip"), "a?.zip", "o/r", "b1")


def test_wildcard_matching_several_or_none_names_them():
    rel = _rel("sd-Darwin-macOS-14-arm64.zip", "sd-Darwin-macOS-15-arm64.zip")
    with pytest.raises(DownloadError) as e:
        github.find_asset(rel, "sd-Darwin-macOS-*-arm64.zip", "o/r", "b1")
    assert str(e.value).startswith("2 assets of o/r b1 match sd-Darwin-macOS-*-arm64.zip")
    assert "sd-Darwin-macOS-14-arm64.zip, sd-Darwin-macOS-15-arm64.zip" in str(e.value)
    with pytest.raises(DownloadError) as e:
        github.find_asset(rel, "sd-Linux-*.zip", "o/r", "b1")
    assert "no asset matching sd-Linux-*.zip; its assets: sd-Darwin-macOS-14-arm64.zip, sd-Darwin-macOS-15" in str(e.value)
    with pytest.raises(DownloadError) as e:
        github.find_asset(_rel(), "sd-*.zip", "o/r", "b1")
    assert "its assets: none" in str(e.value)


def test_missing_asset_suggests_close_names_or_lists_what_is_there():
    rel = _rel("llama-b1-bin-ubuntu-vulkan-x64.tar.gz", "llama-b1-bin-win-cuda-12.4-x64.zip")
    with pytest.raises(DownloadError) as e:
        github.find_asset(rel, "llama-b1-bin-ubuntu-vulkan-x64.zip", "o/r", "b1")
    assert "has no asset llama-b1-bin-ubuntu-vulkan-x64.zip; close: llama-b1-bin-ubuntu-vulkan-x64.tar.gz" in str(e.value)
    four = _rel(*(f"llama-b1-bin-ubuntu-vulkan-x6{i}.tar.gz" for i in range(4)))
    with pytest.raises(DownloadError) as e:
        github.find_asset(four, "llama-b1-bin-ubuntu-vulkan-x64.zip", "o/r", "b1")
    assert len(str(e.value).split("; close: ")[1].split(", ")) == 3  # the three closest, not every near name
    with pytest.raises(DownloadError) as e:
        github.find_asset(rel, "zzz", "o/r", "b1")
    assert "; it has: llama-b1-bin-ubuntu-vulkan-x64.tar.gz, llama-b1-bin-win-cuda-12.4-x64.zip" in str(e.value)
    with pytest.raises(DownloadError) as e:
        github.find_asset(_rel(), "zzz", "o/r", "b1")
    assert str(e.value) == "release b1 of o/r has no asset zzz"


def test_split_part_release_is_named_as_such():
    rel = _rel("therock-gfx1151.partcount", "therock-gfx1151.part01-of-02.tar.gz", "therock-gfx1151.part02-of-02.tar.gz")
    with pytest.raises(DownloadError) as e:
        github.find_asset(rel, "therock-gfx1151.tar.gz", "o/r", "b1")
    assert "split parts (therock-gfx1151.partNN-of-MM.tar.gz)" in str(e.value)


def test_assets_that_are_not_objects_or_lack_a_url_are_refused():
    rel = {"assets": ["x.zip", {"name": 5}, {"name": "x.zip", "browser_download_url": None}]}
    with pytest.raises(DownloadError) as e:
        github.find_asset(rel, "x.zip", "o/r", "b1")
    assert str(e.value) == "asset x.zip of o/r b1 has no browser_download_url"
    # a wildcard can match a '/', so the chosen name is checked as a name
    with pytest.raises(DownloadError) as e:
        github.find_asset(_rel("a/../b.zip"), "a*.zip", "o/r", "b1")
    assert "not a plain file name" in str(e.value)


def test_release_answer_without_an_asset_list_is_refused(monkeypatch):
    monkeypatch.setattr(github, "get_json", lambda *a, **k: {"message": "Moved"})
    with pytest.raises(DownloadError) as e:
        github.release(None, "o/r", "b1", env={API: "http://127.0.0.1:1"})
    assert str(e.value) == "http://127.0.0.1:1/repos/o/r/releases/tags/b1: the answer has no 'assets' list"
    seen = {}

    def fake(session, url, what, **kw):
        seen.update(kw, url=url, what=what)
        return {"assets": []}
    monkeypatch.setattr(github, "get_json", fake)
    assert github.release(None, "o/r", "b1", env={"GITHUB_TOKEN": "t"}, attempts=2) == {"assets": []}
    assert seen["url"] == "https://api.github.com/repos/o/r/releases/tags/b1" and seen["what"] == "release b1 of o/r"
    assert seen["attempts"] == 2 and seen["token_set"] is True
    assert seen["headers_for"]("https://api.github.com/x") == {"Authorization": "Bearer t"}
    seen.clear()
    github.release(None, "o/r", "b1", env={})
    assert "attempts" not in seen and seen["token_set"] is False
