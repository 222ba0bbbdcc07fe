"""The install lock (selector/install/unpack.py ``lock``): one install of a backend at a time, a
waiting install says so once, and ``repair`` never waits (blocking=False).  The Windows branch uses
msvcrt's byte-range lock, which does not wait by itself: it is polled.  It is run here through a
stand-in msvcrt that reports the lock busy a few times, so its loop is pinned on every platform."""

import os
import sys
import threading
import time

import pytest

from selector.install import unpack


class BusyMsvcrt:
    LK_NBLCK = 2

    def __init__(self, busy):
        self.busy, self.calls = busy, []

    def locking(self, fd, mode, nbytes):
        self.calls.append((mode, nbytes))
        if self.busy:
            self.busy -= 1
            raise OSError(36, "Resource deadlock avoided")


def _as_windows(monkeypatch, busy):
    fake = BusyMsvcrt(busy)
    monkeypatch.setitem(sys.modules, "msvcrt", fake)
    monkeypatch.setattr(os, "name", "nt")
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return fake, slept


def test_windows_lock_polls_and_says_it_waits_once(monkeypatch, tmp_path):
    fake, slept = _as_windows(monkeypatch, busy=3)
    told = []
    with unpack.lock(str(tmp_path / "sub" / "vulkan.lock"), wait_message=lambda: told.append("waiting")):
        held = True
    assert held and told == ["waiting"]
    assert fake.calls == [(BusyMsvcrt.LK_NBLCK, 1)] * 4  # three busy answers, then the lock
    assert slept and all(0 < s < 1 for s in slept) and len(slept) == 3


def test_windows_lock_that_is_free_is_taken_without_a_word(monkeypatch, tmp_path):
    fake, slept = _as_windows(monkeypatch, busy=0)
    told = []
    with unpack.lock(str(tmp_path / "vulkan.lock"), wait_message=lambda: told.append("waiting")):
        pass
    assert told == [] and slept == [] and len(fake.calls) == 1


def test_windows_lock_held_elsewhere_is_refused_when_not_waiting(monkeypatch, tmp_path):
    fake, slept = _as_windows(monkeypatch, busy=1)
    with pytest.raises(BlockingIOError):
        with unpack.lock(str(tmp_path / "vulkan.lock"), blocking=False):
            pytest.fail("the body ran without the lock")
    assert slept == []


@pytest.mark.skipif(os.name == "nt", reason="fcntl")
def test_unix_lock_waits_for_the_holder_and_says_so(tmp_path):
    path = str(tmp_path / "vulkan.lock")
    told, order = [], []
    entered, release = threading.Event(), threading.Event()

    def holder():
        with unpack.lock(path):
            entered.set()
            release.wait(10)  # held until the waiter has said it waits: no timing to win or lose
            order.append("holder done")

    def waiting():
        told.append("waiting")
        release.set()

    t = threading.Thread(target=holder)
    t.start()
    assert entered.wait(10)
    with pytest.raises(BlockingIOError):
        with unpack.lock(path, blocking=False):
            pass
    with unpack.lock(path, wait_message=waiting):
        order.append("second in")
    t.join(10)
    assert told == ["waiting"] and order == ["holder done", "second in"]
    # released: taken again at once, without a word
    with unpack.lock(path, wait_message=lambda: told.append("again")):
        pass
    assert told == ["waiting"]
