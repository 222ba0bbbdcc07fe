"""Streaming downloads: ``.partial`` files, Range resume, retries with backoff, SHA-256 checks.

Retried: connection errors, timeouts, a connection dropped mid-file (resumed with a Range request
when the server answers 206), HTTP 408, 429 and 5xx.  Never retried: any other 4xx.  The backoff
doubles from ``PICK_BACKEND_RETRY_BASE`` seconds (default 1, at most 60); tests set it to 0.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

import requests

ATTEMPTS = 5
RETRY_BASE_ENV = "PICK_BACKEND_RETRY_BASE"
TIMEOUT = (15, 60)  # connect, read (seconds without a byte)
CHUNK = 1 << 16


class DownloadError(Exception):
    """The file could not be fetched (exit 4)."""


class ChecksumError(DownloadError):
    def __init__(self, url, expected, actual):
        self.expected, self.actual = expected, actual
        super().__init__(f"SHA-256 mismatch for {url}: expected {expected}, got sha256:{actual} "
                         "(the download is corrupt or the release changed; nothing was installed)")


def retryable_status(code: int) -> bool:
    return code in (408, 429) or 500 <= code <= 599


def backoff(attempt: int, env=None) -> float:
    env = os.environ if env is None else env
    try:
        base = float(env.get(RETRY_BASE_ENV, "1"))
    except ValueError:
        base = 1.0
    return min(60.0, base * (2 ** attempt))


def _sleep(attempt: int) -> None:
    delay = backoff(attempt)
    if delay > 0:
        time.sleep(delay)


def get_json(session, url: str, what: str, attempts: int = ATTEMPTS):
    """GET a JSON document with the same retry rules as downloads."""
    last = ""
    for attempt in range(attempts):
        try:
            r = session.get(url, timeout=TIMEOUT)
        except (requests.ConnectionError, requests.Timeout) as e:
            last = f"cannot reach {url}: {e.__class__.__name__}"
            _sleep(attempt)
            continue
        if retryable_status(r.status_code):
            last = f"HTTP {r.status_code} from {url}"
            _sleep(attempt)
            continue
        if r.status_code == 404:
            raise DownloadError(f"{what} not found (HTTP 404 from {url}); check the version pin or the mirror "
                                "(PICK_BACKEND_GITHUB_API)")
        if r.status_code >= 400:
            hint = " (set GITHUB_TOKEN to raise the API rate limit)" if r.status_code == 403 else ""
            raise DownloadError(f"HTTP {r.status_code} from {url}{hint}")
        try:
            return r.json()
        except ValueError:
            raise DownloadError(f"{url} did not answer with JSON") from None
    raise DownloadError(f"{what}: giving up after {attempts} attempts ({last})")


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(session, url: str, partial: str, size: int | None = None, progress=None,
          attempts: int = ATTEMPTS) -> None:
    """Stream ``url`` into ``partial``.  After a dropped connection the next attempt asks for the
    rest with a Range request; a server that answers 200 instead sends the whole file again."""
    last = ""
    for attempt in range(attempts):
        have = os.path.getsize(partial) if os.path.exists(partial) else 0
        if size is not None and have == size and have:
            return
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            r = session.get(url, stream=True, timeout=TIMEOUT, headers=headers)
        except (requests.ConnectionError, requests.Timeout) as e:
            last = f"cannot reach {url}: {e.__class__.__name__}"
            _sleep(attempt)
            continue
        with r:
            if r.status_code == 416 and have:
                # our partial is longer than the file, or the server refuses ranges: start over
                os.remove(partial)
                last = "HTTP 416 on resume"
                continue
            if retryable_status(r.status_code):
                last = f"HTTP {r.status_code} from {url}"
                _sleep(attempt)
                continue
            if r.status_code >= 400:
                raise DownloadError(f"HTTP {r.status_code} for {url}" +
                                    (" (not found: check the version pin or the mirror)" if r.status_code == 404 else ""))
            resumed = have and r.status_code == 206
            if not resumed:
                have = 0
            if progress is not None:
                progress.start(size, have)
            try:
                with open(partial, "ab" if resumed else "wb") as f:
                    for chunk in r.iter_content(CHUNK):
                        f.write(chunk)
                        if progress is not None:
                            progress.advance(len(chunk))
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as e:
                last = f"connection dropped after {os.path.getsize(partial)} bytes ({e.__class__.__name__})"
                _sleep(attempt)
                continue
        got = os.path.getsize(partial)
        if size is not None and got < size:
            last = f"connection closed after {got} of {size} bytes"
            _sleep(attempt)
            continue
        if size is not None and got > size:
            raise DownloadError(f"{url}: received {got} bytes, the release says {size}")
        return
    raise DownloadError(f"download of {url} failed after {attempts} attempts ({last}); "
                        "check the connection and run the command again")


def fetch_verified(session, url: str, partial: str, size: int | None, digest: str | None, progress=None) -> str:
    """Fetch and check SHA-256 against ``digest`` ("sha256:<hex>"); a mismatch deletes the file and
    downloads once more from scratch, then raises ChecksumError.  Returns the hex digest."""
    for round_ in range(2):
        fetch(session, url, partial, size, progress)
        actual = sha256_of(partial)
        if digest is None:
            return actual
        algo, _, want = digest.partition(":")
        if algo.lower() != "sha256" or not want:
            raise DownloadError(f"cannot check digest {digest!r} of {url}: only sha256:<hex> is supported")
        if actual == want.lower():
            return actual
        os.remove(partial)
        if round_ == 1:
            raise ChecksumError(url, digest, actual)
    raise AssertionError("unreachable")


class Progress:
    """A rich progress bar (bytes, rate, ETA) on a terminal; nothing otherwise."""

    def __init__(self, enabled: bool | None = None):
        self.enabled = sys.stdout.isatty() if enabled is None else enabled
        self._bar = None
        self._task = None
        self.label = ""

    def __enter__(self):
        if self.enabled:
            from rich.progress import (BarColumn, DownloadColumn, Progress as RichProgress, TextColumn,
                                       TimeRemainingColumn, TransferSpeedColumn)

            self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                     TransferSpeedColumn(), TimeRemainingColumn(), transient=False)
            self._bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def start(self, total, done):
        if self._bar is None:
            return
        if self._task is None:
            self._task = self._bar.add_task(self.label, total=total, completed=done)
        else:
            self._bar.reset(self._task, total=total, completed=done, description=self.label)

    def new(self, label: str):
        self.label = label
        self._task = None

    def advance(self, n):
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, n)
