"""The download layer on its own (selector/install/download.py), in process against the loopback
release server of test_install: what is retried and how long it waits, resume, the caps, the digest.
The CLI tests (test_install*.py) hold the same rules end to end; these pin the details a user sees
in messages and on the wire (Range headers, the hint about GITHUB_TOKEN, the wait it announces)."""

import email.utils
import hashlib
import io
import os
import sys
import time

import pytest
import requests

from probes.inputs import InputError
from selector import term
from selector.install import download, env_number
from selector.install.download import ChecksumError, DownloadError, Limits
from test_install import Server

DATA = bytes(range(256)) * 64  # 16 KiB
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def srv():
    s = Server()
    s.files["/f"] = DATA
    yield s
    s.close()


class Answer:
    def __init__(self, status=200, headers=None):
        self.status_code, self.headers = status, headers or {}


@pytest.fixture
def screen(monkeypatch):
    """What a progress bar on a terminal shows, as text."""
    from rich.console import Console

    buf = io.StringIO()
    monkeypatch.setattr(term, "console", lambda: Console(file=buf, force_terminal=False, width=100))
    return buf


def send(h, body, headers):
    """Answer 200 with ``body`` and ``headers`` (a server-side handler's reply)."""
    h.send_response(200)
    for k, v in headers.items():
        h.send_header(k, v)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def no_wait(monkeypatch):
    """Record the waits of this test's own thread instead of sleeping them.  time.sleep is patched
    for the whole process, so another thread's sleep (a test server still trickling a body to an
    earlier test) really sleeps and is not taken for one of ours."""
    import threading

    slept, real, mine = [], time.sleep, threading.current_thread()

    def sleep(seconds):
        if threading.current_thread() is mine:
            slept.append(seconds)
        else:
            real(seconds)

    monkeypatch.setattr(download.time, "sleep", sleep)
    return slept


# ---- what is retried, and the waits -----------------------------------------------------------

@pytest.mark.parametrize("code, retried", [(408, True), (429, True), (500, True), (503, True), (599, True),
                                           (400, False), (403, False), (404, False), (499, False), (600, False)])
def test_retryable_statuses(code, retried):
    assert download.retryable_status(code) is retried


def test_backoff_doubles_from_the_base_up_to_a_minute():
    assert [download.backoff(n, {}) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert [download.backoff(n, {"PICK_BACKEND_RETRY_BASE": "0.5"}) for n in range(3)] == [0.5, 1, 2]
    assert download.backoff(3, {"PICK_BACKEND_RETRY_BASE": "0"}) == 0
    assert download.backoff(0, {"PICK_BACKEND_RETRY_BASE": ""}) == 1


@pytest.mark.parametrize("raw", ["-1", "nan", "inf", "soon"])
def test_backoff_base_that_is_not_seconds_is_bad_input(raw):
    with pytest.raises(InputError) as e:
        download.backoff(0, {"PICK_BACKEND_RETRY_BASE": raw})
    assert "PICK_BACKEND_RETRY_BASE" in str(e.value) and repr(raw) in str(e.value)


def test_retry_after_in_seconds_or_as_a_date():
    assert download.retry_after(Answer(headers={"Retry-After": " 120 "})) == 120.0
    later = email.utils.formatdate(time.time() + 90, usegmt=True)
    assert 80 < download.retry_after(Answer(headers={"Retry-After": later})) <= 90
    past = email.utils.formatdate(time.time() - 90, usegmt=True)
    assert download.retry_after(Answer(headers={"Retry-After": past})) == 0.0
    for v in ("", "soon", "-5", "1.5e3"):
        assert download.retry_after(Answer(headers={"Retry-After": v})) is None
    assert download.retry_after(Answer()) is None


def test_rate_limit_says_when_and_whose_limit():
    reset = int(time.time()) + 600
    hdr = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)}
    wait, msg = download.rate_limit(Answer(403, hdr), token_set=False)
    assert 590 < wait <= 600
    assert time.strftime("%H:%M:%S UTC", time.gmtime(reset)) in msg and "HTTP 403" in msg
    assert "set GITHUB_TOKEN" in msg
    wait, msg = download.rate_limit(Answer(429, hdr), token_set=True)
    assert "HTTP 429" in msg and "GITHUB_TOKEN is set" in msg and "set GITHUB_TOKEN to" not in msg
    # not the rate limit: another status, or requests left
    assert download.rate_limit(Answer(500, hdr), False) is None
    assert download.rate_limit(Answer(403, dict(hdr, **{"X-RateLimit-Remaining": "1"})), False) is None
    assert download.rate_limit(Answer(403, {}), False) is None
    # a reset that cannot be read: assume the hour GitHub's window lasts
    wait, _ = download.rate_limit(Answer(403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "x"}), False)
    assert 3590 < wait <= 3600
    # a reset already past is no wait at all
    wait, _ = download.rate_limit(Answer(403, dict(hdr, **{"X-RateLimit-Reset": str(reset - 7200)})), False)
    assert wait == 0


def test_a_wait_past_the_deadline_fails_at_once_and_says_how_to_change_it(monkeypatch, capsys):
    slept = no_wait(monkeypatch)
    limits = Limits(deadline=10)
    with pytest.raises(DownloadError) as e:
        download._wait(limits, 30, "HTTP 503 from x", what="release b1")
    assert "release b1" in str(e.value) and "30 s" in str(e.value) and "PICK_BACKEND_TIMEOUT" in str(e.value)
    assert slept == []
    download._wait(limits, 2, "HTTP 503 from x")
    assert slept == [2]
    assert "pick-backend: retrying in 2 s: HTTP 503 from x" in capsys.readouterr().err
    download._wait(limits, 0, "again")
    assert slept == [2]  # nothing to sleep


def test_limits_from_the_environment():
    lim = Limits.from_env({"PICK_BACKEND_CONNECT_TIMEOUT": "3", "PICK_BACKEND_READ_TIMEOUT": "4",
                           "PICK_BACKEND_TIMEOUT": "50", "PICK_BACKEND_MIN_SPEED": "10",
                           "PICK_BACKEND_SPEED_WINDOW": "5", "PICK_BACKEND_MAX_DOWNLOAD": "1000"})
    assert (lim.timeout, lim.deadline, lim.min_speed, lim.speed_window, lim.max_download) == \
        ((3.0, 4.0), 50.0, 10.0, 5.0, 1000)
    assert Limits.from_env({"PICK_BACKEND_TIMEOUT": "50"}, deadline=7).deadline == 7  # --timeout wins
    d = Limits.from_env({})
    assert (d.timeout, d.deadline, d.min_speed, d.speed_window, d.max_download) == \
        ((15.0, 30.0), 3600.0, 1024.0, 30.0, 16 << 30)
    with pytest.raises(InputError) as e:
        Limits.from_env({"PICK_BACKEND_MAX_DOWNLOAD": "1.5"})
    assert "PICK_BACKEND_MAX_DOWNLOAD" in str(e.value) and "whole number" in str(e.value)


@pytest.mark.parametrize("raw", ["0", "-2", "nan", "inf", "x"])
def test_env_number_takes_positive_finite_numbers_only(raw):
    with pytest.raises(InputError) as e:
        env_number({"V": raw}, "V", 1.0)
    assert str(e.value).startswith("V: must be a positive number")
    assert env_number({"V": "2.5"}, "V", 1.0) == 2.5 and env_number({}, "V", 1.0) == 1.0
    assert env_number({"V": ""}, "V", 1.0) == 1.0  # set but empty: the default, as unset


def test_deadline_check(monkeypatch):
    lim = Limits(deadline=5)
    lim.check("x")
    lim.started -= 5
    with pytest.raises(DownloadError) as e:
        lim.check("download of y")
    assert str(e.value).startswith("download of y: gave up at the overall deadline of 5 s")


# ---- fetch --------------------------------------------------------------------------------------

def test_fetch_hashes_while_downloading(srv, tmp_path):
    part = str(tmp_path / "f.partial")
    assert download.fetch(requests.Session(), srv.url + "/f", part, len(DATA)) == SHA
    assert open(part, "rb").read() == DATA
    assert srv.log == [("/f", None)]
    # all there already: nothing is asked for again
    assert download.fetch(requests.Session(), srv.url + "/f", part, len(DATA)) == SHA
    assert len(srv.log) == 1


def test_a_dropped_download_resumes_where_it_stopped(srv, tmp_path, monkeypatch):
    slept = no_wait(monkeypatch)
    srv.script["/f"] = [("drop", 5000), ("drop", 3000)]
    part = str(tmp_path / "f.partial")
    assert download.fetch(requests.Session(), srv.url + "/f", part, len(DATA), attempts=1) == SHA
    # each retry asks for the rest only; the two drops made progress, so one attempt was enough
    assert srv.log == [("/f", None), ("/f", "bytes=5000-"), ("/f", "bytes=8000-")]
    assert len(slept) == 2


def test_a_partial_from_an_earlier_run_is_resumed_and_hashed_whole(srv, tmp_path):
    part = tmp_path / "f.partial"
    part.write_bytes(DATA[:1000])
    assert download.fetch(requests.Session(), srv.url + "/f", str(part), len(DATA)) == SHA
    assert srv.log == [("/f", "bytes=1000-")]


def test_a_partial_longer_than_the_file_is_started_over(srv, tmp_path):
    part = tmp_path / "f.partial"
    part.write_bytes(b"x" * (len(DATA) + 1))
    assert download.fetch(requests.Session(), srv.url + "/f", str(part), len(DATA)) == SHA
    assert srv.log == [("/f", None)]


def test_a_server_that_ignores_range_sends_it_all_and_the_hash_is_of_the_file(srv, tmp_path):
    part = tmp_path / "f.partial"
    part.write_bytes(b"garbage")  # not the file's first bytes: a 200 answer must replace them
    srv.files["/g"] = DATA
    orig = srv.handle

    def no_ranges(h):
        del h.headers["Range"]
        orig(h)
    srv.handle = no_ranges
    assert download.fetch(requests.Session(), srv.url + "/g", str(part), len(DATA)) == SHA
    assert part.read_bytes() == DATA


def test_http_416_on_resume_starts_over(srv, tmp_path, monkeypatch):
    no_wait(monkeypatch)
    part = tmp_path / "f.partial"
    part.write_bytes(DATA[:10])
    srv.script["/f"] = [416]
    assert download.fetch(requests.Session(), srv.url + "/f", str(part), len(DATA)) == SHA
    assert srv.log == [("/f", "bytes=10-"), ("/f", None)]


def test_more_bytes_than_declared_are_refused(srv, tmp_path):
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), len(DATA) - 100)
    assert "sent more than the 16284 bytes" in str(e.value)


def test_a_length_over_the_download_cap_is_refused_before_reading(srv, tmp_path):
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), None,
                       limits=Limits(max_download=1000))
    assert f"{len(DATA)} bytes is more than the download cap of 1000" in str(e.value)
    assert "PICK_BACKEND_MAX_DOWNLOAD" in str(e.value)
    assert not os.path.exists(tmp_path / "p")


def test_without_a_length_the_cap_stops_the_reading(srv, tmp_path):
    srv.script["/f"] = [("endless",), ("endless",)]
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), None,
                       limits=Limits(max_download=300_000))
    assert "more than the download cap of 300000 bytes" in str(e.value)
    assert os.path.getsize(tmp_path / "p") <= 300_000
    # a cap of several blocks is counted across them (not one block at a time); the deadline only
    # bounds this test should the count be lost
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "q"), None,
                       limits=Limits(max_download=4 * download.CHUNK, deadline=30))
    assert f"more than the download cap of {4 * download.CHUNK} bytes" in str(e.value)
    assert 3 * download.CHUNK < os.path.getsize(tmp_path / "q") <= 4 * download.CHUNK


def test_a_closed_connection_short_of_the_size_is_retried_and_counted(srv, tmp_path, monkeypatch):
    slept = no_wait(monkeypatch)
    srv.files["/short"] = DATA[:100]  # the server has fewer bytes than the release declared
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/short", str(tmp_path / "p"), len(DATA), attempts=3)
    msg = str(e.value)
    assert "connection closed after 100 of 16384 bytes" in msg and "failed after" in msg
    # the first try made progress (free); the three resumes that got nothing used up the attempts.
    # Each wait is the backoff of the attempts counted so far (1 s, 1 s, 2 s), none after the last
    assert srv.log == [("/short", None)] + [("/short", "bytes=100-")] * 3
    assert slept == [1, 1, 2]


def test_not_found_and_other_client_errors_are_not_retried(srv, tmp_path):
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/nothing", str(tmp_path / "p"), 10)
    assert "HTTP 404" in str(e.value) and "check the version pin" in str(e.value)
    srv.script["/f"] = [403]
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), 10)
    assert str(e.value) == f"HTTP 403 for {srv.url}/f"
    assert len(srv.log) == 2


def test_server_errors_are_retried_with_the_backoff(srv, tmp_path, monkeypatch, capsys):
    slept = no_wait(monkeypatch)
    monkeypatch.setenv("PICK_BACKEND_RETRY_BASE", "2")
    srv.script["/f"] = [503, 500]
    assert download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), len(DATA)) == SHA
    assert slept == [2, 4]
    err = capsys.readouterr().err
    assert f"retrying in 2 s: HTTP 503 from {srv.url}/f" in err and "retrying in 4 s: HTTP 500" in err


def test_retry_after_on_a_download_is_the_wait(srv, tmp_path, monkeypatch):
    slept = no_wait(monkeypatch)
    srv.script["/f"] = [("status", 503, {"Retry-After": "7"})]
    assert download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), len(DATA)) == SHA
    assert slept == [7]


def test_a_download_slower_than_the_floor_is_dropped_and_resumed(srv, tmp_path, monkeypatch):
    srv.script["/f"] = [("trickle", 1000, 0.05)]
    lim = Limits(min_speed=1_000_000, speed_window=0.2)
    monkeypatch.setenv("PICK_BACKEND_RETRY_BASE", "0")
    assert download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), len(DATA), limits=lim) == SHA
    assert srv.log[0] == ("/f", None) and srv.log[1][1].startswith("bytes=")


def test_unreachable_host_gives_up_after_the_attempts(tmp_path, monkeypatch):
    slept = no_wait(monkeypatch)
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), f"http://127.0.0.1:{port}/f", str(tmp_path / "p"), 10, attempts=2)
    # nothing listens: refused, the same on every attempt, so final at once with one clear line
    assert str(e.value) == f"download of http://127.0.0.1:{port}/f: the connection was refused (offline, or nothing " \
                           "listens there?)"
    assert slept == []
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), f"http://127.0.0.1:{port}/x", "release b1", attempts=3)
    assert str(e.value) == f"release b1: cannot reach http://127.0.0.1:{port}/x: the connection was refused " \
                           "(offline, or nothing listens there?)"
    assert slept == []


def test_a_name_that_does_not_resolve_is_final_at_once(tmp_path, monkeypatch):
    slept = no_wait(monkeypatch)
    with pytest.raises(DownloadError) as e:  # .invalid never resolves (RFC 2606)
        download.get_json(requests.Session(), "http://mirror.invalid/x", "release b1", attempts=3)
    assert str(e.value) == ("release b1: cannot reach http://mirror.invalid/x: the host name does not resolve "
                            "(offline, or a wrong URL?)")
    assert slept == []


def test_a_stall_after_the_headers_is_retried_on_the_documented_backoff_and_bounded_by_the_deadline(
        srv, tmp_path, monkeypatch):
    # the server answers its headers, then sends nothing: each read times out; the waits are 1, 2
    # (not 2, 4), nothing after the last attempt, and the read timeout never outlives --timeout
    slept = []
    monkeypatch.setattr(download, "_wait", lambda limits, delay, *a, **k: slept.append(delay))  # no sleep
    srv.files["/stall"] = DATA
    srv.script["/stall"] = [("stall", 2)] * 5
    lim = Limits(read=0.3)
    with pytest.raises(DownloadError):
        download.fetch(requests.Session(), srv.url + "/stall", str(tmp_path / "p"), len(DATA), attempts=3, limits=lim)
    assert slept == [1, 2]
    connect, read = Limits(connect=10, read=30, deadline=8).timeout
    assert connect <= 8 and read <= 8  # capped at the time left


# ---- the digest --------------------------------------------------------------------------------

def test_check_digest():
    assert download.check_digest(SHA, None, "x") is True
    assert download.check_digest(SHA, "sha256:" + SHA, "x") is True
    assert download.check_digest(SHA, "SHA256:" + SHA.upper(), "x") is True
    assert download.check_digest(SHA, "sha256:" + "0" * 64, "x") is False
    for bad in ("md5:abc", "sha256:", SHA):
        with pytest.raises(DownloadError) as e:
            download.check_digest(SHA, bad, "asset a.zip")
        assert "asset a.zip" in str(e.value) and "sha256:<hex>" in str(e.value)


def test_a_wrong_digest_downloads_once_more_then_names_both(srv, tmp_path):
    part = tmp_path / "p"
    with pytest.raises(ChecksumError) as e:
        download.fetch_verified(requests.Session(), srv.url + "/f", str(part), len(DATA), "sha256:" + "a" * 64)
    assert e.value.expected == "sha256:" + "a" * 64 and e.value.actual == SHA
    assert f"got sha256:{SHA}" in str(e.value)
    assert srv.log == [("/f", None), ("/f", None)]  # from scratch, not resumed from the bad file
    assert not part.exists()
    assert download.fetch_verified(requests.Session(), srv.url + "/f", str(part), len(DATA), "sha256:" + SHA) == SHA


def test_sha256_of_a_file(tmp_path):
    p = tmp_path / "x"
    p.write_bytes(DATA * 100)  # more than one read block
    assert download.sha256_of(str(p)) == hashlib.sha256(DATA * 100).hexdigest()


# ---- the API --------------------------------------------------------------------------------------

def test_api_answer_follows_redirects_asking_per_hop_what_to_send(srv):
    srv.releases[("o/r", "t1")] = {}
    srv.script["/api/o/r"] = [("redirect", "/repos/o/r/releases/tags/t1")]
    asked = []

    def headers_for(url):
        asked.append(url)
        return {"Authorization": "Bearer k"} if url.endswith("/api/o/r") else {}
    got = download.get_json(requests.Session(), srv.url + "/api/o/r", "release t1", headers_for=headers_for)
    assert got == {"tag_name": "t1", "assets": []}
    assert asked == [srv.url + "/api/o/r", srv.url + "/repos/o/r/releases/tags/t1"]
    assert srv.auth == [("/api/o/r", "Bearer k"), ("/repos/o/r/releases/tags/t1", None)]


def test_api_errors_say_what_to_do(srv, monkeypatch):
    no_wait(monkeypatch)
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/repos/o/r/releases/tags/nope", "release nope of o/r")
    assert str(e.value).startswith("release nope of o/r not found (HTTP 404") and "PICK_BACKEND_GITHUB_API" in str(e.value)
    srv.script["/x"] = [403, 403]
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/x", "x")
    assert "set GITHUB_TOKEN" in str(e.value)
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/x", "x", token_set=True)
    assert "GITHUB_TOKEN" not in str(e.value) and "HTTP 403" in str(e.value)
    srv.files["/notjson"] = b"<html>"
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/notjson", "x")
    assert "did not answer with JSON" in str(e.value)


def test_api_server_errors_are_retried_then_given_up(srv, monkeypatch):
    slept = no_wait(monkeypatch)
    srv.script["/x"] = [502, 502, 502]
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/x", "release b1", attempts=3)
    assert str(e.value) == f"release b1: giving up after 3 attempts (HTTP 502 from {srv.url}/x)"
    assert slept == [1, 2] and len(srv.log) == 3  # each retry waits its backoff; none after the last attempt


def test_api_rate_limit_is_waited_for_when_short_and_counted(srv, monkeypatch, capsys):
    slept = no_wait(monkeypatch)
    srv.releases[("o/r", "t")] = {}
    soon = str(int(time.time()) + 5)
    srv.script["/repos/o/r/releases/tags/t"] = [("status", 403, {"X-RateLimit-Remaining": "0",
                                                                 "X-RateLimit-Reset": soon})]
    assert download.get_json(requests.Session(), srv.url + "/repos/o/r/releases/tags/t", "r")["tag_name"] == "t"
    assert len(slept) == 1 and 0 < slept[0] <= 5
    assert "waiting" in capsys.readouterr().err
    late = str(int(time.time()) + 3000)
    srv.script["/repos/o/r/releases/tags/t"] = [("status", 403, {"X-RateLimit-Remaining": "0",
                                                                 "X-RateLimit-Reset": late})]
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/repos/o/r/releases/tags/t", "r")
    assert "rate limit" in str(e.value)
    assert len(slept) == 1  # too long to wait: said at once


def test_api_answer_over_the_cap_stops_reading(srv, monkeypatch):
    monkeypatch.setattr(download, "MAX_API_BODY", 1000)
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/f", "release b1")
    assert "release b1" in str(e.value) and "stopped reading" in str(e.value)


def test_a_compressed_api_answer_is_decoded_a_block_at_a_time(srv, monkeypatch):
    """A gzip bomb (64 MiB of zeros in 64 KiB on the wire) is stopped at the cap without ever
    holding more than one block decoded: urllib3 2's bounded read1 (the dependency floor)."""
    import gzip

    bomb = gzip.compress(bytes(64 << 20))
    srv.handle = lambda h: send(h, bomb, {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    monkeypatch.setattr(download, "MAX_API_BODY", 4 << 20)
    biggest = []
    real = download._chunks

    def spy(r, decode=False):
        for block in real(r, decode):
            biggest.append(len(block))
            yield block

    monkeypatch.setattr(download, "_chunks", spy)
    with pytest.raises(DownloadError, match="stopped reading"):
        download.get_json(requests.Session(), srv.url + "/x", "release b1")
    assert max(biggest) <= download.CHUNK and sum(biggest) <= (4 << 20) + download.CHUNK


# ---- progress --------------------------------------------------------------------------------------

def test_progress_without_a_terminal_prints_plain_lines(capsys):
    with term.Progress(enabled=False) as p:
        p.new("vulkan")
        p.start(100, 0)
        p.advance(50)
        p.say("retrying in 1 s: x")
    out = capsys.readouterr()
    assert out.out == "" and out.err == "pick-backend: retrying in 1 s: x\n"


def test_progress_bar_counts_the_bytes(screen):
    buf = screen
    with term.Progress(enabled=True) as p:
        p.new("llama-b1.tar.gz")
        p.start(1000, 100)
        p.advance(400)
        task = p._bar.tasks[0]
        assert (task.description, task.total, task.completed) == ("llama-b1.tar.gz", 1000, 500)
        p.start(2000, 0)  # a retry from scratch resets the same bar
        assert len(p._bar.tasks) == 1 and p._bar.tasks[0].completed == 0 and p._bar.tasks[0].total == 2000
        p.new("runtime.tar.gz")
        p.start(10, 0)
        assert len(p._bar.tasks) == 2
        p.say("retrying in 2 s: y")
    assert "retrying in 2 s: y" in buf.getvalue()


class Recorder:
    def __init__(self):
        self.calls = []

    def start(self, total, done):
        self.calls.append(("start", total, done))

    def advance(self, n):
        self.calls.append(("advance", n))

    def say(self, msg):
        self.calls.append(("say", msg))


def test_progress_is_told_the_size_the_resume_point_and_every_byte(srv, tmp_path, monkeypatch):
    no_wait(monkeypatch)
    srv.script["/f"] = [("drop", 5000)]
    rec = Recorder()
    part = str(tmp_path / "p")
    assert download.fetch(requests.Session(), srv.url + "/f", part, len(DATA), progress=rec) == SHA
    starts = [c for c in rec.calls if c[0] == "start"]
    assert starts == [("start", len(DATA), 0), ("start", len(DATA), 5000)]
    assert sum(c[1] for c in rec.calls if c[0] == "advance") == len(DATA)
    # the retry is said through the progress display (a bar would be torn by a plain write to stderr)
    assert [c for c in rec.calls if c[0] == "say"] == [
        ("say", "retrying in 1 s: connection dropped after 5000 bytes (ConnectionError)")]


def test_a_garbled_compressed_api_answer_is_named(srv):
    body = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 40
    srv.handle = lambda h: send(h, body, {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/x", "release b1")
    assert "the body could not be decoded" in str(e.value) and f"{srv.url}/x" in str(e.value)


def test_a_download_past_the_deadline_stops_between_blocks(srv, tmp_path):
    srv.script["/f"] = [("trickle", 2000, 0.2)]
    lim = Limits(deadline=0.5, min_speed=1)
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), len(DATA), limits=lim)
    assert str(e.value).startswith(f"download of {srv.url}/f: gave up at the overall deadline of 0.5 s")


def test_five_attempts_by_default(srv, tmp_path, monkeypatch):
    # docs/install.md: a download or API call is tried 5 times (attempts that made progress aside)
    slept = no_wait(monkeypatch)
    srv.script["/f"] = [503] * 10
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), len(DATA))
    assert "failed after 5 attempts" in str(e.value) and len(srv.log) == 5 and slept == [1, 2, 4, 8]
    srv.script["/x"] = [503] * 10
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/x", "release b1")
    assert "giving up after 5 attempts" in str(e.value)


def test_a_download_is_hashed_as_the_bytes_on_the_wire(srv, tmp_path):
    # a mirror that labels a .tar.gz "Content-Encoding: gzip": the digest is of the file as published,
    # so the body must not be decompressed on the way
    import gzip

    packed = gzip.compress(DATA)

    srv.handle = lambda h: send(h, packed, {"Content-Encoding": "gzip"})
    part = tmp_path / "p"
    assert download.fetch(requests.Session(), srv.url + "/f", str(part), len(packed)) == hashlib.sha256(packed).hexdigest()
    assert part.read_bytes() == packed


def test_rate_limit_waits_count_as_attempts(srv, monkeypatch):
    slept = no_wait(monkeypatch)
    soon = str(int(time.time()) + 2)
    srv.script["/x"] = [("status", 403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": soon})] * 10
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/x", "release b1")
    assert str(e.value).startswith("release b1: giving up after 5 attempts (GitHub API rate limit reached")
    assert len(slept) == 5 and len(srv.log) == 5


def test_the_speed_floor_is_an_average_over_its_window(srv, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PICK_BACKEND_RETRY_BASE", "0")
    # steady 20 KiB/s for about a second, floor 1000 B/s checked every 0.2 s: never slow, one request
    srv.script["/f"] = [("trickle", 4096, 0.2)]
    lim = Limits(min_speed=1000, speed_window=0.2)
    assert download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "a"), len(DATA), limits=lim) == SHA
    assert srv.log == [("/f", None)]
    # 10 KiB/s in four bursts over 1.6 s, floor 20 kB/s over 10 s: the window never ends, so a slow
    # stretch shorter than the window is no abort (each gap alone is below the floor)
    srv.log.clear()
    srv.script["/f"] = [("trickle", 4096, 0.4)]
    lim = Limits(min_speed=20_000, speed_window=10.0)
    assert download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "b"), len(DATA), limits=lim) == SHA
    assert srv.log == [("/f", None)]
    assert "retrying" not in capsys.readouterr().err


def test_the_bar_stays_after_the_download_and_messages_are_not_markup(screen):
    buf = screen
    with term.Progress(enabled=True) as p:
        p.new("llama-b1.tar.gz")
        p.start(10, 0)
        p.advance(10)
        p.say("HTTP 503 from [/] a mirror [bold]x")  # text from a server, printed as it is
    out = buf.getvalue()
    assert "HTTP 503 from [/] a mirror [bold]x" in out
    assert "llama-b1.tar.gz" in out  # the finished bar is left on the screen, not wiped


def test_an_api_answer_cut_off_every_time_uses_up_the_attempts(srv, monkeypatch):
    slept = no_wait(monkeypatch)
    srv.files["/x"] = b'{"assets": []}' * 1000
    srv.script["/x"] = [("drop", 100)] * 10
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/x", "release b1", attempts=3)
    assert str(e.value).startswith(f"release b1: giving up after 3 attempts (answer from {srv.url}/x cut off")
    assert len(srv.log) == 3 and slept == [1, 2]


def test_a_deadline_already_past_names_only_the_download(srv, tmp_path):
    lim = Limits(deadline=5)
    lim.started -= 10
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), len(DATA), limits=lim)
    assert str(e.value).startswith(f"download of {srv.url}/f: gave up at the overall deadline of 5 s")
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/x", "release b1", limits=lim)
    assert str(e.value).startswith("release b1: gave up at the overall deadline of 5 s")
    assert srv.log == []


def test_http_416_counts_as_an_attempt_and_is_named(srv, tmp_path, monkeypatch):
    no_wait(monkeypatch)
    part = tmp_path / "p"
    part.write_bytes(DATA[:10])
    srv.script["/f"] = [416]
    assert download.fetch(requests.Session(), srv.url + "/f", str(part), len(DATA), attempts=2) == SHA
    part.write_bytes(DATA[:10])
    srv.script["/f"] = [416, 503]
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(part), len(DATA), attempts=2)
    assert "failed after 2 attempts" in str(e.value)


def test_http_400_is_not_retried(srv, tmp_path):
    srv.script["/f"] = [400]
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), len(DATA))
    assert str(e.value) == f"HTTP 400 for {srv.url}/f" and len(srv.log) == 1


def test_at_most_five_redirects_are_followed(srv):
    srv.releases[("o/r", "t")] = {}
    for hops in (5, 6):
        srv.script.clear()
        for i in range(hops):
            srv.script[f"/h{hops}-{i}"] = [("redirect", f"/h{hops}-{i + 1}" if i + 1 < hops else "/repos/o/r/releases/tags/t")]
        if hops == 5:
            assert download.get_json(requests.Session(), srv.url + "/h5-0", "r")["tag_name"] == "t"
        else:
            with pytest.raises(DownloadError) as e:
                download.get_json(requests.Session(), srv.url + "/h6-0", "r")
            assert "too many redirects" in str(e.value)


def test_a_drop_before_any_byte_uses_up_an_attempt(srv, tmp_path, monkeypatch):
    no_wait(monkeypatch)
    srv.script["/f"] = [("drop", 0)] * 10
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), len(DATA), attempts=3)
    assert "failed after 3 attempts" in str(e.value) and len(srv.log) == 3


def test_a_resumed_download_that_runs_past_the_declared_size_is_refused(srv, tmp_path):
    part = tmp_path / "p"
    part.write_bytes(DATA[:1000])
    srv.script["/f"] = [("trickle", 4096, 0.01)]
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(part), len(DATA) - 100)
    assert "sent more than the 16284 bytes" in str(e.value)


def test_a_416_that_ends_the_attempts_is_named(srv, tmp_path, monkeypatch):
    no_wait(monkeypatch)
    part = tmp_path / "p"
    part.write_bytes(DATA[:10])
    srv.script["/f"] = [416]
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(part), len(DATA), attempts=1)
    assert "(HTTP 416 on resume)" in str(e.value)


def test_an_api_400_is_final_and_named(srv):
    srv.script["/x"] = [400]
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/x", "release b1")
    assert str(e.value) == f"HTTP 400 from {srv.url}/x" and len(srv.log) == 1


def test_drops_that_make_progress_end_at_the_try_limit_with_no_wait_after_the_last(srv, tmp_path, monkeypatch):
    # each drop gains bytes, so no attempt is used up: MAX_TRIES ends it, every announced retry is made,
    # and nothing is waited after the last try
    slept = no_wait(monkeypatch)
    monkeypatch.setattr(download, "MAX_TRIES", 3)
    srv.script["/f"] = [("drop", 1000), ("drop", 1000), ("drop", 1000)]
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), len(DATA))
    assert "failed after 3 attempts (connection dropped after" in str(e.value)
    assert len(srv.log) == 3 and len(slept) == 2


def test_a_body_cut_short_every_time_ends_at_the_try_limit_with_no_wait_after_the_last(srv, tmp_path, monkeypatch):
    # a server that ends each answer cleanly 100 bytes in (its own Content-Length says so) while the
    # release declares 16 KiB: each try gains 100 bytes, the range goes on, and the try limit ends it
    slept = no_wait(monkeypatch)
    monkeypatch.setattr(download, "MAX_TRIES", 3)

    def short(h):
        start = int((h.headers.get("Range") or "bytes=0-")[6:].rstrip("-"))
        h.send_response(206 if start else 200)
        if start:
            h.send_header("Content-Range", f"bytes {start}-{start + 99}/{len(DATA)}")
        h.send_header("Content-Length", "100")
        h.end_headers()
        h.wfile.write(DATA[start:start + 100])

    srv.handle = short
    with pytest.raises(DownloadError) as e:
        download.fetch(requests.Session(), srv.url + "/f", str(tmp_path / "p"), len(DATA))
    assert f"failed after 3 attempts (connection closed after 300 of {len(DATA)} bytes)" in str(e.value)
    assert [r for _, r in srv.log] == [None, "bytes=100-", "bytes=200-"] and len(slept) == 2


def test_an_api_connection_reset_is_retried(srv, monkeypatch):
    # a reset before any answer (a proxy restarting) is not final: the next attempt gets the release
    slept = no_wait(monkeypatch)
    srv.files["/x"] = b'{"assets": []}'
    answer, calls = srv.handle, []

    def reset_once(h):  # the connection closes before a status line: requests' ConnectionError
        calls.append(h.path)
        if len(calls) == 1:
            h.close_connection = True
            return
        answer(h)

    srv.handle = reset_once
    assert download.get_json(requests.Session(), srv.url + "/x", "release b1", attempts=3) == {"assets": []}
    assert len(calls) == 2 and slept == [1]
    # reset on every attempt: the error names the last failure
    srv.handle = lambda h: (calls.append(h.path), setattr(h, "close_connection", True))
    with pytest.raises(DownloadError) as e:
        download.get_json(requests.Session(), srv.url + "/x", "release b1", attempts=2)
    assert str(e.value) == f"release b1: giving up after 2 attempts (cannot reach {srv.url}/x: ConnectionError)"
