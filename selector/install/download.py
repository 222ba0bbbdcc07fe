"""Streaming downloads: ``.partial`` files, Range resume, retries, deadlines, SHA-256 while downloading.

Retried: connection errors, timeouts, a connection dropped mid-file (resumed with a Range request
when the server answers 206), a transfer slower than the minimum speed, HTTP 408, 429 and 5xx.
Never retried: any other 4xx.  An attempt that received bytes does not count against the
attempts; the overall deadline bounds everything.  The backoff doubles from
``PICK_BACKEND_RETRY_BASE`` seconds (default 1, at most 60); a ``Retry-After`` answer is honoured.
Limits and their environment variables are in ``Limits`` and docs/install.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

import requests

from selector.install import env_number

ATTEMPTS = 5
MAX_TRIES = 50  # attempts that made progress included: a server that drops every few bytes ends here
RETRY_BASE_ENV = "PICK_BACKEND_RETRY_BASE"
CHUNK = 1 << 20
MAX_API_BODY = 16 << 20  # a release's JSON is tens of KiB; a hostile API must not fill memory
RATE_WAIT_MAX = 60.0  # wait for a GitHub rate-limit reset at most this long, else fail and say when


class DownloadError(Exception):
    """The file could not be fetched (exit 4)."""


class ChecksumError(DownloadError):
    def __init__(self, url, expected, actual):
        self.expected, self.actual = expected, actual
        super().__init__(f"SHA-256 mismatch for {url}: expected {expected}, got sha256:{actual} "
                         "(the download is corrupt or the release changed; nothing was installed)")


class _Slow(Exception):
    pass


class Limits:
    """Network limits of one command (docs/install.md, "Limits")."""

    ENV = {
        "connect": "PICK_BACKEND_CONNECT_TIMEOUT",
        "read": "PICK_BACKEND_READ_TIMEOUT",
        "deadline": "PICK_BACKEND_TIMEOUT",
        "min_speed": "PICK_BACKEND_MIN_SPEED",
        "speed_window": "PICK_BACKEND_SPEED_WINDOW",
        "max_download": "PICK_BACKEND_MAX_DOWNLOAD",
    }

    def __init__(self, connect=15.0, read=30.0, deadline=3600.0, min_speed=1024.0, speed_window=30.0,
                 max_download=16 << 30):
        self.connect, self.read, self.deadline = connect, read, deadline
        self.min_speed, self.speed_window, self.max_download = min_speed, speed_window, max_download
        self.started = time.monotonic()

    @classmethod
    def from_env(cls, env=None, deadline: float | None = None) -> Limits:
        env = os.environ if env is None else env
        d = cls()
        return cls(connect=env_number(env, cls.ENV["connect"], d.connect), read=env_number(env, cls.ENV["read"], d.read),
                    deadline=deadline or env_number(env, cls.ENV["deadline"], d.deadline),
                    min_speed=env_number(env, cls.ENV["min_speed"], d.min_speed),
                    speed_window=env_number(env, cls.ENV["speed_window"], d.speed_window),
                    max_download=env_number(env, cls.ENV["max_download"], d.max_download, int))

    @property
    def timeout(self):
        """(connect, read) for one request, each capped at the time left before the deadline: a
        server that stalls must not hold the command past --timeout."""
        left = max(0.1, self.remaining())
        return (min(self.connect, left), min(self.read, left))

    def remaining(self) -> float:
        return self.deadline - (time.monotonic() - self.started)

    def check(self, what: str) -> None:
        if self.remaining() <= 0:
            raise DownloadError(f"{what}: gave up at the overall deadline of {self.deadline:g} s "
                                f"(--timeout or {self.ENV['deadline']} changes it)")


def say(progress, msg: str) -> None:
    """A plain line on stderr (through the progress bar's console when one is drawn)."""
    if progress is not None and getattr(progress, "say", None):
        progress.say(msg)
    else:
        sys.stderr.write(f"pick-backend: {msg}\n")
        sys.stderr.flush()


def retryable_status(code: int) -> bool:
    return code in (408, 429) or 500 <= code <= 599


def backoff(attempt: int, env=None) -> float:
    env = os.environ if env is None else env
    raw = env.get(RETRY_BASE_ENV) or "1"
    try:
        base = float(raw)
        if not 0 <= base < float("inf"):  # nan, inf and negatives too
            raise ValueError
    except ValueError:
        from probes.inputs import InputError

        raise InputError(RETRY_BASE_ENV, f"must be a number of seconds, 0 or more, not {raw!r}") from None
    return min(60.0, base * (2 ** attempt))


def retry_after(r) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), else None."""
    v = r.headers.get("Retry-After")
    if not v:
        return None
    v = v.strip()
    if v.isdecimal():
        return float(v)
    try:
        from email.utils import parsedate_to_datetime

        return max(0.0, parsedate_to_datetime(v).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def rate_limit(r, token_set: bool) -> tuple[float, str] | None:
    """(seconds until reset, message) when GitHub says the rate limit is used up."""
    if r.status_code not in (403, 429) or r.headers.get("X-RateLimit-Remaining") != "0":
        return None
    try:
        reset = float(r.headers.get("X-RateLimit-Reset", ""))
    except ValueError:
        reset = time.time() + 3600
    wait = max(0.0, reset - time.time())
    when = time.strftime("%H:%M:%S UTC", time.gmtime(reset))
    hint = ("; GITHUB_TOKEN is set, so this is that token's limit" if token_set
            else "; set GITHUB_TOKEN to raise the limit")
    return wait, f"GitHub API rate limit reached (HTTP {r.status_code}); it resets at {when} (in {wait:.0f} s){hint}"


def unreachable(e) -> str | None:
    """Why a connection error is final at once, or None: a refused connection or a name that does
    not resolve says the same on every attempt (offline, a typo in a mirror URL); a timeout or a
    reset may pass."""
    if isinstance(e, requests.Timeout):
        return None
    text = repr(e)
    if "NameResolutionError" in text or "Name or service not known" in text or "getaddrinfo failed" in text \
            or "nodename nor servname" in text or "Temporary failure in name resolution" in text:
        return "the host name does not resolve (offline, or a wrong URL?)"
    if "ConnectionRefusedError" in text or "Connection refused" in text or "[Errno 111]" in text:
        return "the connection was refused (offline, or nothing listens there?)"
    return None


def _again(failures: int, attempts: int, limits: Limits, delay: float, why: str, progress=None, what="") -> None:
    """After a failed attempt (``failures`` counts it): wait ``delay`` when another attempt follows;
    after the last one, nothing is announced and nothing waited."""
    if failures < attempts:
        _wait(limits, delay, why, progress, what)


def _wait(limits: Limits, delay: float, why: str, progress=None, what="") -> None:
    if limits.remaining() < delay:
        raise DownloadError(f"{what or why}: waiting {delay:.0f} s would pass the overall deadline of "
                            f"{limits.deadline:g} s ({why}); --timeout or {Limits.ENV['deadline']} changes it")
    say(progress, f"retrying in {delay:.0f} s: {why}")
    if delay > 0:
        time.sleep(delay)


def get_json(session, url: str, what: str, attempts: int = ATTEMPTS, limits: Limits | None = None,
             headers_for=None, token_set: bool = False, progress=None, mirror_env: str = "PICK_BACKEND_GITHUB_API"):
    """GET a JSON document with the same retry rules as downloads.  Redirects are followed here,
    not by requests, so that ``headers_for(url)`` decides per hop what is sent (the token goes to
    the API's own origin only).  ``mirror_env``: the variable that names the server, for a 404's words."""
    limits = limits or Limits()
    headers_for = headers_for or (lambda u: {})
    last = ""
    failures = 0
    while failures < attempts:
        limits.check(what + (f" ({last})" if last else ""))
        hop, seen = url, []
        try:
            while True:
                r = session.get(hop, timeout=limits.timeout, headers=headers_for(hop), allow_redirects=False,
                                stream=True)
                if r.is_redirect and r.headers.get("Location"):
                    r.close()
                    from urllib.parse import urljoin

                    seen.append(hop)
                    hop = urljoin(hop, r.headers["Location"])
                    if hop in seen or len(seen) > 5:
                        raise DownloadError(f"{url}: too many redirects (a redirect loop via {hop})")
                    continue
                break
        except (requests.ConnectionError, requests.Timeout) as e:
            final = unreachable(e)
            if final:
                raise DownloadError(f"{what}: cannot reach {hop}: {final}") from None
            last = f"cannot reach {hop}: {e.__class__.__name__}"
            failures += 1
            _again(failures, attempts, limits, backoff(failures - 1), last, progress, what)
            continue
        except requests.RequestException as e:
            raise DownloadError(f"{what}: {hop}: {e.__class__.__name__}: {e}") from None
        rl = rate_limit(r, token_set)
        if rl is not None:
            wait, msg = rl
            if wait > min(RATE_WAIT_MAX, limits.remaining()):
                raise DownloadError(msg)
            say(progress, f"waiting {wait:.0f} s: {msg}")
            time.sleep(wait)
            last = msg
            failures += 1  # a reset already past, answered again and again, must not loop until the deadline
            continue
        if retryable_status(r.status_code):
            last = f"HTTP {r.status_code} from {hop}"
            ra = retry_after(r)
            failures += 1
            _again(failures, attempts, limits, backoff(failures - 1) if ra is None else ra, last, progress, what)
            continue
        if r.status_code == 404:
            raise DownloadError(f"{what} not found (HTTP 404 from {hop}); check the version pin or the mirror "
                                f"({mirror_env})")
        if r.status_code >= 400:
            hint = " (set GITHUB_TOKEN to raise the API rate limit)" if r.status_code == 403 and not token_set else ""
            raise DownloadError(f"HTTP {r.status_code} from {hop}{hint}")
        try:
            body = _json_body(r, hop, what, limits)
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as e:
            last = f"answer from {hop} cut off: {e.__class__.__name__}"
            failures += 1
            _again(failures, attempts, limits, backoff(failures - 1), last, progress, what)
            continue
        try:
            return json.loads(body)
        except ValueError:
            raise DownloadError(f"{hop} did not answer with JSON") from None
    raise DownloadError(f"{what}: giving up after {attempts} attempts ({last})")


def _json_body(r, url: str, what: str, limits: Limits) -> bytes:
    """The body of an API answer, read in blocks: at most MAX_API_BODY bytes, and never past the
    overall deadline (a server that trickles forever never trips the read timeout)."""
    out = bytearray()
    with r:
        for block in _chunks(r, decode=True):  # GitHub's API answers gzip-encoded
            out += block
            if len(out) > MAX_API_BODY:
                raise DownloadError(f"{what}: the answer from {url} is longer than {MAX_API_BODY >> 20} MiB; "
                                    "stopped reading (not a releases API answer)")
            limits.check(what)
    return bytes(out)


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _chunks(r, decode: bool = False):
    """The body as it arrives (urllib3's read1: a connection that drops mid-chunk keeps the bytes
    that did arrive, so the resume asks only for the rest), else requests' iter_content.  ``decode``
    undoes a Content-Encoding (API answers); downloads are hashed as the bytes on the wire."""
    raw = r.raw
    read1 = getattr(raw, "read1", None)
    if read1 is None:
        yield from r.iter_content(CHUNK)
        return
    import urllib3.exceptions as u3

    while True:
        try:
            block = read1(CHUNK, decode_content=decode) if decode else read1(CHUNK)
        except u3.ReadTimeoutError as e:
            raise requests.Timeout(e) from None
        except u3.DecodeError as e:
            raise DownloadError(f"{r.url}: the body could not be decoded ({e})") from None
        except (u3.HTTPError, OSError) as e:
            raise requests.ConnectionError(e) from None
        if not block:
            return
        yield block


def _hash_file(path, h):
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h


def _declared_limit(r, size: int | None, have: int, limits: Limits, url: str) -> int | None:
    """The bytes the file may have: the release's size, else the answer's Content-Length after what we
    have; more than the download cap is refused before a byte is read."""
    limit = size
    if limit is None:
        try:
            limit = int(r.headers.get("Content-Length", "")) + have
        except ValueError:
            limit = None
    if limit is not None and limit > limits.max_download:
        raise DownloadError(f"{url}: {limit} bytes is more than the download cap of {limits.max_download} "
                            f"({Limits.ENV['max_download']})")
    return limit


def _write_body(r, f, h, url: str, have: int, limit: int | None, limits: Limits, progress, sent: list) -> None:
    """The answer's body into ``f`` and ``h``, ``sent[0]`` counting it: never past ``limit`` or the cap,
    never slower than the minimum speed over its window, never past the deadline."""
    window_t, window_b = time.monotonic(), 0
    for chunk in _chunks(r):
        n = len(chunk)
        if limit is not None and have + sent[0] + n > limit:
            raise DownloadError(f"{url}: the server sent more than the {limit} bytes "
                                "the release declares; stopped reading")
        if have + sent[0] + n > limits.max_download:
            raise DownloadError(f"{url}: more than the download cap of {limits.max_download} "
                                f"bytes ({Limits.ENV['max_download']}); stopped reading")
        f.write(chunk)
        h.update(chunk)
        sent[0] += n
        window_b += n
        if progress is not None:
            progress.advance(n)
        now = time.monotonic()
        if now - window_t >= limits.speed_window:
            if window_b / (now - window_t) < limits.min_speed:
                raise _Slow(f"slower than {limits.min_speed:g} B/s for {limits.speed_window:g} s")
            window_t, window_b = now, 0
        limits.check(f"download of {url}")


def _get(session, url: str, limits: Limits, headers: dict):
    """(the answer, "") or (None, why it could not be reached) where another attempt may help; a
    DownloadError where none can (no such host, a redirect loop)."""
    try:
        return session.get(url, stream=True, timeout=limits.timeout, headers=headers), ""
    except requests.TooManyRedirects:
        raise DownloadError(f"download of {url}: too many redirects (a redirect loop?)") from None
    except (requests.ConnectionError, requests.Timeout) as e:
        final = unreachable(e)
        if final:
            raise DownloadError(f"download of {url}: {final}") from None
        return None, f"cannot reach {url}: {e.__class__.__name__}"
    except requests.RequestException as e:
        raise DownloadError(f"download of {url}: {e.__class__.__name__}: {e}") from None


def fetch(session, url: str, partial: str, size: int | None = None, progress=None,
          attempts: int = ATTEMPTS, limits: Limits | None = None) -> str:
    """Stream ``url`` into ``partial``, hashing as bytes arrive; returns the SHA-256 hex digest.
    After a dropped connection the next attempt asks for the rest with a Range request (the bytes
    already there are hashed again once); a server that answers 200 instead sends the whole file
    again.  Reading stops at the declared ``size``: a server sending more is refused."""
    limits = limits or Limits()
    last = ""
    failures = tries = 0
    h = None
    while failures < attempts and tries < MAX_TRIES:
        tries += 1
        limits.check(f"download of {url}" + (f" ({last})" if last else ""))
        have = os.path.getsize(partial) if os.path.exists(partial) else 0
        if size is not None and have > size:
            os.remove(partial)
            have = 0
        if have and h is None:
            h = _hash_file(partial, hashlib.sha256())
        if size is not None and have == size and have:
            return h.hexdigest()
        headers = {"Range": f"bytes={have}-"} if have else {}
        r, why = _get(session, url, limits, headers)
        if r is None:
            last = why
            failures += 1
            _again(failures, attempts if tries < MAX_TRIES else 0, limits, backoff(failures - 1), last, progress,
                   f"download of {url}")
            continue
        with r:
            if r.status_code == 416 and have:
                # our partial is longer than the file, or the server refuses ranges: start over
                os.remove(partial)
                h, last = None, "HTTP 416 on resume"
                failures += 1
                continue
            if retryable_status(r.status_code):
                last, ra = f"HTTP {r.status_code} from {url}", retry_after(r)
                failures += 1
                _again(failures, attempts if tries < MAX_TRIES else 0, limits,
                       backoff(failures - 1) if ra is None else ra, last, progress, f"download of {url}")
                continue
            if r.status_code >= 400:
                raise DownloadError(f"HTTP {r.status_code} for {url}" +
                                    (" (not found: check the version pin or the mirror)" if r.status_code == 404 else ""))
            resumed = bool(have) and r.status_code == 206 and \
                r.headers.get("Content-Range", "").startswith(f"bytes {have}-")
            if not resumed:
                have = 0
                h = hashlib.sha256()
            limit = _declared_limit(r, size, have, limits, url)
            if progress is not None:
                progress.start(size, have)
            sent = [0]  # bytes written by this attempt, counted as they arrive (a drop keeps the count)
            try:
                with open(partial, "ab" if resumed else "wb") as f:
                    _write_body(r, f, h, url, have, limit, limits, progress, sent)
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                    _Slow) as e:
                why = str(e) if isinstance(e, _Slow) else e.__class__.__name__
                last = f"connection dropped after {os.path.getsize(partial)} bytes ({why})"
                delay = backoff(failures)  # of the attempt that just failed (a drop after progress costs none)
                if not sent[0]:
                    failures += 1
                _again(failures, attempts if tries < MAX_TRIES else 0, limits, delay, last, progress,
                       f"download of {url}")
                continue
            gained = sent[0]
        got = os.path.getsize(partial)
        if size is not None and got < size:
            last = f"connection closed after {got} of {size} bytes"
            delay = backoff(failures)
            if not gained:
                failures += 1
            _again(failures, attempts if tries < MAX_TRIES else 0, limits, delay, last, progress,
                   f"download of {url}")
            continue
        return h.hexdigest()
    raise DownloadError(f"download of {url} failed after {tries} attempts ({last}); "
                        "check the connection and run the command again")


def check_digest(actual: str, digest: str | None, what: str) -> bool:
    """True when ``actual`` (hex) matches ``digest`` ("sha256:<hex>"); None means nothing to check."""
    if digest is None:
        return True
    algo, _, want = digest.partition(":")
    if algo.lower() != "sha256" or not want:
        raise DownloadError(f"cannot check digest {digest!r} of {what}: only sha256:<hex> is supported")
    return actual == want.lower()


def fetch_verified(session, url: str, partial: str, size: int | None, digest: str | None, progress=None,
                   limits: Limits | None = None) -> str:
    """Fetch and check SHA-256 against ``digest`` ("sha256:<hex>"); a mismatch deletes the file and
    downloads once more from scratch, then raises ChecksumError.  Returns the hex digest."""
    for _ in range(2):
        actual = fetch(session, url, partial, size, progress, limits=limits)
        if check_digest(actual, digest, url):
            return actual
        os.remove(partial)
    raise ChecksumError(url, digest, actual)
