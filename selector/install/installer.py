"""Install a Plan into the cache: resolve through the API, download, verify, unpack, swap.

All artifacts of a plan (the backend build and, for ROCm stable, the TheRock runtime) are installed
together or not at all: each is downloaded (hashed as it arrives), verified and unpacked into
``<dest>.staging`` first; then the optional ``verify(staging_dir)`` callback runs on each staging
tree (the one point "after unpack, before swap"); only then are they swapped in, runtimes before the
backend that needs them, and a failure during the swaps rolls back the ones already done.  A kill
at any point leaves the old install or the new one: ``repair`` (run by install, status and
uninstall) finishes or undoes an interrupted swap.  Whether anything needs doing is decided before
the lock is taken, so a read-only cache that already holds the version answers "present".
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import json
import os
import re
import shutil
import time

from selector.install import github
from selector.install.download import DownloadError, Limits, check_digest, fetch_verified, say, sha256_of
from selector.install.resolve import Artifact, Plan
from selector.install.states import complete, read_record, read_version  # noqa: F401 (re-exported)
from selector.install.unpack import (ArchiveError, Caps, Swap, crash_point, extract, find_binary, human, lock,
                                     needs_repair, remove_tree, repair, strip_wrapper, write_own)

SHA256 = re.compile(r"sha256:[0-9a-fA-F]{64}")
# free-space estimate: how many times its size an archive unpacks to, by what it is (measured, with
# room): llama.cpp CPU/Vulkan builds 2-3:1; a CUDA build 8.6:1 (ggml-org/llama.cpp#16205); a TheRock
# runtime 5.7:1 (lemonade-sdk/lemonade#1124)
UNPACK_FACTOR = 3
UNPACK_FACTORS = {"cuda": 9, "runtime": 6}


def unpack_factor(a) -> int:
    """The estimate for one artifact: a runtime (TheRock), a CUDA build (its asset or directory names
    cuda), else a plain build."""
    if a.kind == "runtime":
        return UNPACK_FACTORS["runtime"]
    if "cuda" in f"{a.dest} {a.asset}".lower():
        return UNPACK_FACTORS["cuda"]
    return UNPACK_FACTOR


class InstallError(Exception):
    """Install failed; the previous install is untouched (exit 4, or the code given)."""

    def __init__(self, message: str, exit_code: int = 4):
        self.exit_code = exit_code
        super().__init__(message)


@contextlib.contextmanager
def step(what: str, path: str = ""):
    """Turn an OSError during ``what`` into an InstallError naming the step and the path."""
    try:
        yield
    except OSError as e:
        where = e.filename or path
        if path and what.endswith((" into", " to", " in")):  # "unpacking into PATH failed: ...", not "into failed"
            extra = f": {e.filename}" if e.filename and e.filename != path else ""
            raise InstallError(f"{what} {path} failed: {e.strerror or e}{extra}") from None
        raise InstallError(f"{what} failed: {e.strerror or e}" + (f": {where}" if where else "")) from None


class VerifyFailed(InstallError):  # issue 16: install --verify
    """The new build did not pass its verification; the previous install is untouched."""

    def __init__(self, exit_code: int, message: str):
        super().__init__(message, exit_code)


def dest_path(cache: str, a: Artifact) -> str:
    return os.path.join(cache, "bin", *a.dest.split("/"))


def _allowed(allow_unverified, kind: str) -> bool:
    if allow_unverified is True:
        return True
    return bool(allow_unverified) and (kind in allow_unverified or "all" in allow_unverified)


def resolve_remote(artifacts, env=None, attempts: int | None = None, limits=None, progress=None) -> None:
    """Fill url, size and digest of GitHub artifacts from the releases API."""
    session = None
    releases: dict = {}
    for a in artifacts:
        if not a.repo:
            continue
        if session is None:
            session = github.api_session(env)
        key = (a.repo, a.tag)
        if key not in releases:
            releases[key] = github.release(session, a.repo, a.tag, env, attempts, limits=limits, progress=progress)
        asset = github.find_asset(releases[key], a.asset, a.repo, a.tag)
        a.asset = asset["name"]  # a plain file name: find_asset checked it
        a.url = asset["browser_download_url"]
        a.size = asset.get("size") if isinstance(asset.get("size"), int) and asset["size"] >= 0 else None
        d = asset.get("digest")
        # GitHub's form, "sha256:<64 hex>"; anything else cannot verify a download, so it counts as none
        a.digest = d if isinstance(d, str) and SHA256.fullmatch(d) else None


def _present(a: Artifact, d: str, reinstall: bool, leftovers_ok: bool = False) -> bool:
    """Installed, complete, at the version; ``leftovers_ok``: even with a crash's leftovers beside
    it (a read-only cache, where they cannot be cleaned: the install itself is whole)."""
    return not reinstall and (leftovers_ok or not needs_repair(d)) and read_version(d) == a.version and \
        complete(d, a.binary, a.expect)


def match_files(plan: Plan, files) -> dict[str, str]:
    """--from-file ARCHIVE...: {artifact dest: path}, matched by file name to the plan's asset names."""
    out = {}
    for f in files or ():
        base = os.path.basename(f)
        hits = [a for a in plan.artifacts if fnmatch.fnmatchcase(base, a.asset)]
        if not hits:
            raise InstallError(f"--from-file {f}: the file name matches none of the assets this install needs "
                               f"({', '.join(a.asset for a in plan.artifacts)})", 2)
        if not os.path.isfile(f):
            raise InstallError(f"--from-file {f}: no such file", 5)
        out[hits[0].dest] = f
    return out


def install(plan: Plan, cache: str, os_name: str, allow_unverified=(), reinstall: bool = False,
            progress=None, env=None, limits: Limits | None = None, from_files: dict | None = None,
            verify=None, caps: Caps | None = None) -> list[dict]:
    """Install every artifact of ``plan`` that is not already there, complete, at its version.
    ``allow_unverified``: kinds ("backend", "runtime", "all") that may install without a digest
    (True: all).  ``from_files``: {artifact dest: local archive} used instead of downloading (the
    digest is still checked against the pin or the release).  ``verify(staging_dir) -> (ok,
    exit_code, message)`` runs on each unpacked tree before anything is swapped in.
    Returns one result per artifact (``action``: installed | present)."""
    limits = limits or Limits.from_env(env)
    caps = caps or Caps.from_env(env)
    from_files = from_files or {}
    dests = [dest_path(cache, a) for a in plan.artifacts]
    if all(_present(a, d, reinstall) for a, d in zip(plan.artifacts, dests)):
        return [_result(a, d, "present", read_record(d)) for a, d in zip(plan.artifacts, dests)]
    results: list[dict] = []
    with contextlib.ExitStack() as locks:
        for a, d in zip(plan.artifacts, dests):  # always in plan order: backend, then runtime
            try:
                os.makedirs(os.path.dirname(d), exist_ok=True)
                locks.enter_context(lock(d + ".lock", lambda a=a, d=d: say(
                    progress, f"waiting for another install of {a.dest} (lock {d}.lock)")))
            except OSError as e:
                if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and \
                        all(_present(x, y, reinstall, leftovers_ok=True) for x, y in zip(plan.artifacts, dests)):
                    # a read-only cache that already holds this version: nothing to do, and the
                    # leftovers beside it cannot be cleaned (nor do they matter)
                    say(progress, f"the cache is read-only ({d}); the installed {a.dest} is whole, "
                                  "so its leftovers stay until it is writable")
                    return [_result(x, y, "present", read_record(y)) for x, y in zip(plan.artifacts, dests)]
                with step("creating the cache directory" if not os.path.isdir(os.path.dirname(d)) else "taking the lock",
                          d + ".lock"):
                    raise
        todo: list[Artifact] = []
        for a, d in zip(plan.artifacts, dests):
            with step("repairing an interrupted install", d):
                for msg in repair(d):
                    say(progress, f"repaired: {msg}")
            if _present(a, d, reinstall):
                results.append(_result(a, d, "present", read_record(d)))
            else:
                todo.append(a)
        if not todo:
            return results
        # a --from-file archive needs the API only for its digest: not when a pin gives one, nor when
        # the user accepts it unverified (offline, where the API would only time out)
        unasked = [a for a in todo if a.dest in from_files and not a.pinned_sha256 and _allowed(allow_unverified, a.kind)]
        for a in unasked:
            say(progress, f"warning: {a.asset}: installing from the file unverified (--allow-unverified "
                          f"{a.kind}); the releases API was not asked for its digest")
        remote = [a for a in todo if not (a.dest in from_files and a.pinned_sha256) and a not in unasked]
        try:
            resolve_remote(remote, env, limits=limits, progress=progress)
        except DownloadError as e:
            offline = [a for a in remote if a.dest in from_files]
            if not offline or len(offline) != len(remote):
                raise InstallError(str(e)) from None
            for a in offline:  # --from-file with no pin and no API: only when the user accepts it
                if not _allowed(allow_unverified, a.kind):
                    raise InstallError(f"{a.asset}: no pinned SHA-256 and the releases API could not be asked for "
                                       f"one ({e}); pass --allow-unverified {a.kind} to install it unverified") from None
                say(progress, f"warning: {a.asset}: releases API unreachable ({e}); installing unverified")
        for a in todo:
            if a.dest in from_files and a.url and os.path.basename(from_files[a.dest]) != a.asset:
                raise InstallError(f"--from-file {from_files[a.dest]}: the release's asset is {a.asset}", 2)
            if not a.expected_digest and not _allowed(allow_unverified, a.kind):
                raise InstallError(f"{a.asset} ({a.kind}) has no published or pinned SHA-256, so it cannot be "
                                   f"verified; pass --allow-unverified {a.kind} to install it anyway "
                                   "(recorded as unverified)")
            if a.size is not None and a.size > limits.max_download:
                raise InstallError(f"{a.asset} is {human(a.size)}, more than the download cap of "
                                   f"{human(limits.max_download)} ({Limits.ENV['max_download']})")
        _check_space(todo, cache, from_files)
        _install_all(todo, cache, os_name, progress, results, limits, caps, from_files, verify, plan)
    return results


def _check_space(todo, cache, from_files) -> None:
    """Download + staging must fit next to the old install (which stays until the swap)."""
    need = 0
    factors = set()
    for a in todo:
        size = a.size
        factor = unpack_factor(a)
        if a.dest in from_files:
            size = os.path.getsize(from_files[a.dest])
            need += size * factor
            factors.add(factor)
        elif size is not None:
            need += size * (1 + factor)
            factors.add(factor)
    if not need:
        return
    p = os.path.join(cache, "bin")  # made with the locks, before this check
    with step("checking free space", p):
        free = shutil.disk_usage(p).free
    if free < need:
        raise InstallError(f"not enough free space in {p}: {human(free)} free, about {human(need)} needed "
                           f"(the download and its unpacked copy, estimated at "
                           f"{' and '.join(f'{f}x' for f in sorted(factors))}; the old install stays until the swap)")


def _read_local(a: Artifact, local: str) -> str:
    """The SHA-256 of a downloaded archive given by --from-file, which must be the one the release
    publishes."""
    with step("reading", local):
        sha = sha256_of(local)
    if not check_digest(sha, a.expected_digest, local):
        raise InstallError(f"SHA-256 mismatch for {local}: expected {a.expected_digest}, got sha256:{sha} "
                           "(not the file the release publishes; nothing was installed)")
    return sha


def _record(a: Artifact, sha: str, local: str | None, staging: str, os_name: str, runtime_of) -> dict:
    """The install record of an unpacked artifact, its files checked and the record written into it."""
    record = {
        "installed_by": "pick-backend",
        "kind": a.kind,
        "version": a.version,
        "repository": a.repo,
        "tag": a.tag,
        "asset": a.asset,
        "url": a.url,
        "sha256": sha,
        "verified": bool(a.expected_digest),
        "digest_source": "pinned" if a.pinned_sha256 else ("api" if a.digest else None),
        "from_file": os.path.abspath(local) if local else None,
        "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with step("checking the unpacked files in", staging):
        if a.binary:
            record["binary"] = find_binary(staging, a.binary, os_name).replace(os.sep, "/")
        if a.expect:
            if not os.path.exists(os.path.join(staging, *a.expect.split("/"))):
                raise ArchiveError(f"{a.asset} does not contain {a.expect}")
            record["expect"] = a.expect
        if a.kind == "backend" and runtime_of is not None:
            record["runtime"] = runtime_of.dest
            record["runtime_version"] = runtime_of.version
            record["runtime_expect"] = runtime_of.expect
    with step("writing the install record in", staging):
        write_own(staging, "version.txt", a.version + "\n")
        write_own(staging, "install.json", json.dumps(record, indent=2) + "\n")
        if a.method:
            write_own(staging, "method.txt", a.method + "\n")
    return record


def _install_all(todo, cache, os_name, progress, results, limits, caps, from_files, verify, plan):
    from selector.install.github import download_session

    session = None
    partials: list[str] = []
    stagings: list[str] = []
    swaps: list[Swap] = []
    staged: list[tuple[Artifact, str, str, dict]] = []
    runtime_of = {a.kind: a for a in plan.artifacts}.get("runtime")
    try:
        for a in todo:
            d = dest_path(cache, a)
            local = from_files.get(a.dest)
            if local:
                sha, archive = _read_local(a, local), local
            else:
                archive = os.path.join(os.path.dirname(d), f".{os.path.basename(d)}.{a.asset}.partial")
                partials.append(archive)
                if progress is not None:
                    progress.new(a.asset)
                session = session or download_session()
                with step("downloading to", archive):
                    sha = fetch_verified(session, a.url, archive, a.size, a.expected_digest, progress, limits)
            crash_point("downloaded")
            staging = d + ".staging"
            stagings.append(staging)
            with step("unpacking into", staging):
                remove_tree(staging)
                extract(archive, staging, a.asset, caps)
                if a.expect:
                    strip_wrapper(staging, a.expect)
            if not local:
                with step("removing", archive):
                    os.remove(archive)
            crash_point("unpacked")
            record = _record(a, sha, local, staging, os_name, runtime_of)
            staged.append((a, staging, d, record))
        if verify is not None:  # install --verify: the new build must see the device before it replaces the old
            for a, staging, d, record in staged:
                if a.kind == "backend":
                    ok, code, message = verify(staging)
                    if not ok:
                        raise VerifyFailed(code or 4, message)
        crash_point("staged")
        # runtimes first: a backend is never in place without the runtime it needs
        order = sorted(staged, key=lambda s: 0 if s[0].kind == "runtime" else 1)
        for a, staging, d, record in order:
            s = Swap(staging, d, a.kind)
            with step(f"moving the new {a.kind} into place at", d):
                s.run()
            swaps.append(s)
        for s in swaps:
            with step("removing the replaced install", s.old):
                s.commit()
        crash_point("committed")
        for a, staging, d, record in staged:
            results.append(_result(a, d, "installed", record))
    except BaseException as e:
        for s in reversed(swaps):
            try:
                s.rollback()
            except OSError:
                pass
        if isinstance(e, (DownloadError, ArchiveError)):
            raise InstallError(str(e)) from None
        if isinstance(e, OSError):
            raise InstallError(f"{e.strerror or e}: {e.filename or ''}".rstrip(": ")) from None
        raise
    finally:
        for p in partials:
            with contextlib.suppress(OSError):
                os.remove(p)
        for st in stagings:
            remove_tree(st)
            remove_tree(st + ".unwrap")


def _result(a: Artifact, path: str, action: str, record: dict) -> dict:
    out = a.to_dict()
    out.update({
        "path": path,
        "action": action,
        "sha256": record.get("sha256"),
        "verified": record.get("verified"),
        "binary": record.get("binary"),
    })
    if action == "present" and record.get("url"):
        out["url"] = out["url"] or record.get("url")
    return out
