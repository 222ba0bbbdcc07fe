"""GitHub Releases API client: ``GET {api}/repos/{owner}/{repo}/releases/tags/{tag}``.

The API base comes from ``PICK_BACKEND_GITHUB_API`` (default https://api.github.com) so that mirrors
and tests can replace it.  Token scope (``token_for``): ``GITHUB_TOKEN`` goes only to
https://api.github.com; a mirror gets ``PICK_BACKEND_MIRROR_TOKEN`` only (over https, or plain http to
a loopback address); nothing goes to a host a redirect leads to, nor to download hosts.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
from urllib.parse import urlsplit

import requests

from selector.install.download import DownloadError, get_json

DEFAULT_API = "https://api.github.com"
API_ENV = "PICK_BACKEND_GITHUB_API"
MIRROR_TOKEN_ENV = "PICK_BACKEND_MIRROR_TOKEN"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def api_base(env=None) -> str:
    """The API base URL; a malformed ``PICK_BACKEND_GITHUB_API`` is bad input (exit 5)."""
    env = os.environ if env is None else env
    raw = env.get(API_ENV) or DEFAULT_API
    try:
        u = urlsplit(raw)
        u.port  # noqa: B018 - raises ValueError on a bad port
        ok = u.scheme in ("http", "https") and bool(u.hostname) and not any(c.isspace() for c in raw) \
            and not u.query and not u.fragment
    except ValueError:
        ok = False
    if not ok:
        from probes.inputs import InputError

        raise InputError(API_ENV, f"{raw!r} is not an http(s) URL (e.g. https://api.github.com or a mirror's "
                                  "http://host:port)")
    return raw.rstrip("/")


def _origin(url: str):
    u = urlsplit(url)
    return (u.scheme, (u.hostname or "").lower(), u.port or (443 if u.scheme == "https" else 80))


def token_for(url: str, env=None) -> str | None:
    """The token that may go with a request to ``url``, or None."""
    env = os.environ if env is None else env
    o = _origin(url)
    if env.get("GITHUB_TOKEN") and o == ("https", "api.github.com", 443):
        return env["GITHUB_TOKEN"]
    mirror = env.get(MIRROR_TOKEN_ENV)
    if mirror and env.get(API_ENV) and o == _origin(api_base(env)):
        if o[0] == "https" or o[1] in LOOPBACK:
            return mirror
    return None


def headers_for(env=None):
    def h(url):
        t = token_for(url, env)
        return {"Authorization": f"Bearer {t}"} if t else {}
    return h


def check_asset_name(name, repo, tag) -> str:
    """Asset names from the API are file names, never paths."""
    # ("." and ".." start with a dot)
    if not isinstance(name, str) or not name or "/" in name or "\\" in name \
            or "\0" in name or ".." in name or name.startswith(".") or ":" in name:
        raise DownloadError(f"release {tag} of {repo} names an asset {name!r}, which is not a plain file name; "
                            "refusing it")
    return name


def _user_agent() -> str:
    try:
        from importlib.metadata import version

        return f"pick-backend/{version('pick-backend')}"
    except Exception:
        return "pick-backend"


def api_session(env=None) -> requests.Session:
    """A session for the API (``env`` is accepted for symmetry; tokens are added per request by
    ``headers_for``, never to the session)."""
    s = requests.Session()
    s.headers.update({"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
                      "User-Agent": _user_agent()})
    return s


def download_session() -> requests.Session:
    s = requests.Session()
    s.headers.update({"User-Agent": _user_agent(), "Accept": "application/octet-stream"})
    return s


def release(session, repo: str, tag: str, env=None, attempts: int | None = None, limits=None, progress=None) -> dict:
    env = os.environ if env is None else env
    url = f"{api_base(env)}/repos/{repo}/releases/tags/{tag}"
    data = get_json(session, url, f"release {tag} of {repo}", limits=limits, headers_for=headers_for(env),
                    token_set=bool(env.get("GITHUB_TOKEN") or env.get(MIRROR_TOKEN_ENV)), progress=progress,
                    **({"attempts": attempts} if attempts else {}))
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
    check_asset_name(a["name"], repo, tag)  # '*' matches '/' too: the name chosen must be a plain name
    if not isinstance(a.get("browser_download_url"), str):
        raise DownloadError(f"asset {a['name']} of {repo} {tag} has no browser_download_url")
    return a
