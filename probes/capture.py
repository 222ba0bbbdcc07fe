"""``pick-backend capture DIR``: record this machine as a capture directory.

The probes run against a RecordingHost; every path they read, listed or looked at is copied into
``DIR/fs`` at its real path (links kept as relative links), and what is not a file (platform,
environment, NVML, Vulkan loader, executables, Windows registry / macOS sysctl answers) goes into
``DIR/capture.json``.  Replaying the capture with ``--root DIR`` gives the same Profile.
"""

from __future__ import annotations

import json
import os
import shutil
import stat

from probes.host import CAPTURE_FORMAT, RELEVANT_ENV, RELEVANT_ENV_PREFIXES, LiveHost, RecordingHost

MAX_FILE = 1 << 20


class _Writer:
    def __init__(self, dest: str):
        self.fs = os.path.join(dest, "fs")
        self.done: dict[str, str] = {}  # live path -> its real path

    def _out(self, path: str) -> str:
        return os.path.join(self.fs, path.lstrip("/"))

    def real(self, path: str, follow_last: bool = True) -> str:
        """Create every link met on the way to ``path`` and return its real path."""
        parts = [p for p in path.split("/") if p]
        cur = "/"
        for i, comp in enumerate(parts):
            full = os.path.join(cur, comp)
            last = i == len(parts) - 1
            if full in self.done and not (last and not follow_last):
                cur = self.done[full]
                continue
            if os.path.islink(full):
                target = os.readlink(full)
                rel = os.path.relpath(target, cur) if target.startswith("/") else target
                self._link(full, rel)
                if last and not follow_last:
                    return full
                nxt = self.real(os.path.normpath(os.path.join(cur, rel)))
                self.done[full] = nxt
                cur = nxt
            else:
                self.done[full] = full
                cur = full
        return cur

    def _link(self, path: str, rel: str) -> None:
        out = self._out(path)
        if os.path.lexists(out):
            return
        os.makedirs(os.path.dirname(out), exist_ok=True)
        os.symlink(rel, out)

    def file(self, path: str) -> None:
        real = self.real(path)
        if not os.path.lexists(real):
            return
        out = self._out(real)
        if os.path.isdir(real):
            os.makedirs(out, exist_ok=True)
            return
        try:
            mode = os.stat(real).st_mode
        except OSError:
            return
        if not stat.S_ISREG(mode):
            # a device node (/dev/kfd, /dev/dri/renderD128): never read; an empty file says it
            # exists, and capture.json 'dev' says what this process may do with it
            os.makedirs(os.path.dirname(out), exist_ok=True)
            open(out, "wb").close()
            return
        try:
            with open(real, "rb") as f:
                data = f.read(MAX_FILE)
        except OSError:
            return  # unreadable on this machine: left out, as the probe saw nothing either
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as f:
            f.write(data)

    def link(self, path: str) -> None:
        self.real(path, follow_last=False)

    def directory(self, path: str) -> None:
        real = self.real(path)
        if not os.path.isdir(real):
            return
        os.makedirs(self._out(real), exist_ok=True)
        try:
            names = os.listdir(real)
        except OSError:
            return
        for name in names:
            child = os.path.join(real, name)
            if os.path.islink(child):
                self.link(child)
            elif os.path.isdir(child):
                os.makedirs(self._out(child), exist_ok=True)
            elif os.path.isfile(child) and not os.path.exists(self._out(child)):
                self.file(child)


class CaptureRefused(Exception):
    """The destination holds files that are not a capture (exit 2): a capture never deletes them."""


def write_capture(dest: str, host: LiveHost | None = None, force: bool = False) -> dict:
    """Probe this machine and write the capture; returns the Profile as a dict.

    ``dest`` must be new or empty; with ``force`` it may hold an earlier capture (its
    ``capture.json`` and ``fs/``), which is replaced, and nothing else.  The capture is written
    beside ``dest`` first and moved into place whole, so a failure leaves no partial capture."""
    from probes import probe

    if os.path.isdir(dest):
        names = set(os.listdir(dest))
        if names and not force:
            raise CaptureRefused(f"{dest} is not empty: capture writes a new or empty directory "
                                 "(--force replaces an earlier capture there)")
        if names - {"capture.json", "fs"}:
            raise CaptureRefused(f"{dest} holds files that are not a capture: capture never deletes them; "
                                 "choose a new directory")
    live = host or LiveHost()
    rec = RecordingHost(live)
    profile = probe(rec)
    parent = os.path.dirname(os.path.abspath(dest))
    os.makedirs(parent, exist_ok=True)
    import tempfile

    work = tempfile.mkdtemp(prefix=".capture-", dir=parent)
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(work, 0o777 & ~mask)  # a directory as mkdir would make it, not mkdtemp's 0700
    try:
        _write(work, live, rec)
        if os.path.isdir(dest):
            shutil.rmtree(os.path.join(dest, "fs"), ignore_errors=True)
            os.replace(os.path.join(work, "fs"), os.path.join(dest, "fs"))
            os.replace(os.path.join(work, "capture.json"), os.path.join(dest, "capture.json"))
        else:
            os.rename(work, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return profile.to_dict()


def _write(dest: str, live, rec) -> None:
    os.makedirs(os.path.join(dest, "fs"), exist_ok=True)
    w = _Writer(dest)
    for p in rec.dirs:
        w.directory(p)
    for p in rec.links:
        w.link(p)
    for p in rec.files:
        w.file(p)
    data = {
        "format": CAPTURE_FORMAT,
        "platform": {"system": live.system, "machine": live.machine, "release": live.release},
        "env": {k: v for k, v in sorted(live.env.items()) if k in RELEVANT_ENV or k.startswith(RELEVANT_ENV_PREFIXES)},
        "nvml": live.nvml(),
        "vulkan_loader": live.vulkan_loader(),
        "executables": dict(rec.execs),
    }
    if live.system == "Linux":
        # device nodes cannot be copied: what this process may do with each one is recorded instead
        data["dev"] = dict(sorted(rec.dev.items()))
    if rec.amdgpu:
        data["amdgpuinfo"] = rec.amdgpu
    win, mac = live.windows(), live.macos()
    if win:
        data["windows"] = win
    if mac:
        data["macos"] = mac
    libc = live.libc()
    if libc:
        data["libc"] = libc
    tmp = os.path.join(dest, "capture.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(dest, "capture.json"))
