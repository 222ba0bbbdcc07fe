"""Install a Plan into the cache: resolve through the API, download, verify, unpack, swap.

All artifacts of a plan (the backend build and, for ROCm stable, the TheRock runtime) are installed
together or not at all: each is downloaded, verified and unpacked into ``<dest>.staging`` first;
only then are they swapped in, and a failure during the swaps rolls back the ones already done.
Ctrl-C or any failure leaves the previous install as it was and no ``.partial`` or ``.staging``
behind.  A lock file per destination serializes two installs of the same backend.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

from selector.install import github
from selector.install.download import DownloadError, fetch_verified
from selector.install.resolve import Artifact, Plan
from selector.install.unpack import ArchiveError, Swap, extract, find_binary, lock, remove_tree


class InstallError(Exception):
    """Install failed; the previous install is untouched (exit 4)."""


class VerifyFailed(InstallError):  # issue 16: install --verify
    """The new build did not pass its verification; the previous install is untouched."""

    def __init__(self, exit_code: int, message: str):
        self.exit_code = exit_code
        super().__init__(message)


def dest_path(cache: str, a: Artifact) -> str:
    return os.path.join(cache, "bin", *a.dest.split("/"))


def read_version(path: str) -> str | None:
    try:
        with open(os.path.join(path, "version.txt"), encoding="utf-8") as f:
            return f.readline().strip() or None
    except OSError:
        return None


def read_record(path: str) -> dict:
    try:
        with open(os.path.join(path, "install.json"), encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def resolve_remote(artifacts, env=None, attempts: int | None = None) -> None:
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
            releases[key] = github.release(session, a.repo, a.tag, env, attempts)
        asset = github.find_asset(releases[key], a.asset, a.repo, a.tag)
        a.asset = asset["name"]
        a.url = asset["browser_download_url"]
        a.size = asset.get("size") if isinstance(asset.get("size"), int) else None
        d = asset.get("digest")
        a.digest = d if isinstance(d, str) and d else None


def install(plan: Plan, cache: str, os_name: str, allow_unverified: bool = False, reinstall: bool = False,
            progress=None, env=None, verify=None) -> list[dict]:
    """Install every artifact of ``plan`` that is not already there at its version.
    Returns one result per artifact (``action``: installed | present).
    ``verify(staging_dir) -> (ok, exit_code, message)`` is called for the backend build after unpack,
    before the swap; when not ok, nothing is swapped and VerifyFailed carries the exit code."""
    results: list[dict] = []
    with contextlib.ExitStack() as locks:
        for a in plan.artifacts:  # always in plan order: backend, then runtime
            d = dest_path(cache, a)
            locks.enter_context(lock(d + ".lock"))
        todo: list[Artifact] = []
        for a in plan.artifacts:
            d = dest_path(cache, a)
            if not os.path.lexists(d) and os.path.isdir(d + ".old"):
                os.rename(d + ".old", d)  # a crash between the two renames of an earlier swap
            if not reinstall and read_version(d) == a.version:
                results.append(_result(a, d, "present", read_record(d)))
            else:
                todo.append(a)
        if not todo:
            return results
        try:
            resolve_remote(todo, env)
        except DownloadError as e:
            raise InstallError(str(e)) from None
        for a in todo:
            if not a.expected_digest and not allow_unverified:
                raise InstallError(f"{a.asset} has no published or pinned SHA-256, so it cannot be verified; "
                                   "pass --allow-unverified to install it anyway (recorded as unverified)")
        _install_all(todo, cache, os_name, progress, results, verify)
    return results


def _install_all(todo, cache, os_name, progress, results, verify=None):
    from selector.install.github import download_session

    session = download_session()
    partials: list[str] = []
    stagings: list[str] = []
    swaps: list[Swap] = []
    staged: list[tuple[Artifact, str, str, dict]] = []
    try:
        for a in todo:
            d = dest_path(cache, a)
            os.makedirs(os.path.dirname(d), exist_ok=True)
            partial = os.path.join(os.path.dirname(d), f".{os.path.basename(d)}.{a.asset}.partial")
            partials.append(partial)
            if progress is not None:
                progress.new(a.asset)
            sha = fetch_verified(session, a.url, partial, a.size, a.expected_digest, progress)
            staging = d + ".staging"
            stagings.append(staging)
            remove_tree(staging)
            extract(partial, staging, a.asset)
            os.remove(partial)
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
                "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            if a.binary:
                record["binary"] = find_binary(staging, a.binary, os_name).replace(os.sep, "/")
            if a.expect and not os.path.exists(os.path.join(staging, *a.expect.split("/"))):
                raise ArchiveError(f"{a.asset} does not contain {a.expect}")
            with open(os.path.join(staging, "version.txt"), "w", encoding="utf-8") as f:
                f.write(a.version + "\n")
            with open(os.path.join(staging, "install.json"), "w", encoding="utf-8") as f:
                json.dump(record, f, indent=2)
                f.write("\n")
            if a.method:
                with open(os.path.join(staging, "method.txt"), "w", encoding="utf-8") as f:
                    f.write(a.method + "\n")
            staged.append((a, staging, d, record))
        # --- verify hook (issue 16): after unpack, before swap ---
        if verify is not None:
            for a, staging, d, record in staged:
                if a.kind == "backend":
                    ok, code, message = verify(staging)
                    if not ok:
                        raise VerifyFailed(code, message)
        # --- end verify hook ---
        for a, staging, d, record in staged:
            s = Swap(staging, d)
            s.run()
            swaps.append(s)
        for s in swaps:
            s.commit()
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
