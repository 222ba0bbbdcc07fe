"""GitHub Releases API client: ``GET {api}/repos/{owner}/{repo}/releases/tags/{tag}``.

The API base comes from ``PICK_BACKEND_GITHUB_API`` (default https://api.github.com) so that mirrors
and tests can replace it; ``GITHUB_TOKEN`` is sent to the API (never to download hosts) when set.
"""

from __future__ import annotations

import difflib
import fnmatch
import os

import requests

from selector.install.download import DownloadError, get_json

DEFAULT_API = "https://api.github.com"
API_ENV = "PICK_BACKEND_GITHUB_API"


def api_base(env=None) -> str:
    env = os.environ if env is None else env
    return (env.get(API_ENV) or DEFAULT_API).rstrip("/")


def _user_agent() -> str:
    try:
        from importlib.metadata import version

        return f"pick-backend/{version('pick-backend')}"
    except Exception:
        return "pick-backend"


def api_session(env=None) -> requests.Session:
    env = os.environ if env is None else env
    s = requests.Session()
    s.headers.update({"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
                      "User-Agent": _user_agent()})
    if env.get("GITHUB_TOKEN"):
        s.headers["Authorization"] = f"Bearer {env['GITHUB_TOKEN']}"
    return s


def download_session() -> requests.Session:
    s = requests.Session()
    s.headers.update({"User-Agent": _user_agent(), "Accept": "application/octet-stream"})
    return s


def release(session, repo: str, tag: str, env=None, attempts: int | None = None) -> dict:
    url = f"{api_base(env)}/repos/{repo}/releases/tags/{tag}"
    data = get_json(session, url, f"release {tag} of {repo}", **({"attempts": attempts} if attempts else {}))
    if not isinstance(data, dict) or not isinstance(data.get("assets"), list):
        raise DownloadError(f"{url}: the answer has no 'assets' list")
    return data


def find_asset(rel: dict, pattern: str, repo: str, tag: str) -> dict:
    """The asset named ``pattern`` (or the one asset matching it when it holds '*')."""
    assets = [a for a in rel["assets"] if isinstance(a, dict) and isinstance(a.get("name"), str)]
    names = [a["name"] for a in assets]
    if "*" in pattern:
        hits = [a for a in assets if fnmatch.fnmatchcase(a["name"], pattern)]
        if len(hits) > 1:
            raise DownloadError(f"{len(hits)} assets of {repo} {tag} match {pattern}: "
                                f"{', '.join(a['name'] for a in hits)}; the asset rule must name one")
    else:
        hits = [a for a in assets if a["name"] == pattern]
    if not hits and "*" in pattern:  # a wildcard rule that matches nothing: name it and what was there
        seen = ", ".join(sorted(names)) if names else "none"
        raise DownloadError(f"release {tag} of {repo} has no asset matching {pattern}; its assets: {seen}")
    if not hits and pattern.endswith(".tar.gz") and f"{pattern[:-7]}.partcount" in names:
        raise DownloadError(f"release {tag} of {repo} publishes {pattern} as split parts ({pattern[:-7]}.partNN-of-MM"
                            ".tar.gz); pick-backend does not join split archives yet")
    if not hits:
        close = difflib.get_close_matches(pattern, names, n=3, cutoff=0.6)
        hint = f"; close: {', '.join(close)}" if close else (f"; it has: {', '.join(names[:8])}" if names else "")
        raise DownloadError(f"release {tag} of {repo} has no asset {pattern}{hint}")
    a = hits[0]
    if not isinstance(a.get("browser_download_url"), str):
        raise DownloadError(f"asset {a['name']} of {repo} {tag} has no browser_download_url")
    return a
