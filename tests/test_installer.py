"""The installer in process (selector/install/installer.py) against the loopback release server:
what it asks the API, what it refuses before downloading, and what a failure leaves behind.  The
CLI tests hold the same paths end to end; these pin the decisions one by one."""

import hashlib
import os
import shutil
from collections import namedtuple

import pytest

from selector.install import installer
from selector.install.installer import InstallError, match_files
from selector.install.resolve import Artifact, Plan
from test_install import SCRIPT, Server, make_tar  # noqa: F401

TAG = "b9000"
ASSET = "llama-b9000-bin-ubuntu-vulkan-x64.tar.gz"
BUILD = make_tar([("llama-server", SCRIPT, 0o755), ("libggml.so", b"\x7fELF")])


@pytest.fixture
def srv(monkeypatch):
    s = Server()
    monkeypatch.setenv("PICK_BACKEND_GITHUB_API", s.url)
    monkeypatch.setenv("PICK_BACKEND_RETRY_BASE", "0")
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    yield s
    s.close()


def backend(**kw):
    a = dict(kind="backend", dest="llamacpp/vulkan", version=TAG, asset=ASSET, repo="ggml-org/llama.cpp", tag=TAG,
             binary="llama-server")
    a.update(kw)
    return Artifact(**a)


def plan_of(*arts):
    return Plan("llamacpp", "vulkan", "vulkan", TAG, list(arts))


def test_one_api_call_per_release_and_asset_facts_taken_with_care(srv):
    srv.release("ggml-org/llama.cpp", TAG, {ASSET: BUILD, "other.zip": b"PK"})
    srv.release("o/other", "v2", {ASSET: b"another build"})  # the same asset name in another release
    a, b = backend(), backend(asset="other.zip", dest="llamacpp/other")
    c = backend(repo="o/other", tag="v2", dest="x/y")
    runtime = Artifact("runtime", "therock/x", "7.0", "t.tar.gz", url="http://127.0.0.1:1/t.tar.gz")
    installer.resolve_remote([a, b, runtime, c])
    assert [p for p, _ in srv.log] == [f"/repos/ggml-org/llama.cpp/releases/tags/{TAG}",
                                       "/repos/o/other/releases/tags/v2"]
    assert c.url == f"{srv.url}/dl/o/other/v2/{ASSET}" and c.size == len(b"another build")
    assert a.url == f"{srv.url}/dl/ggml-org/llama.cpp/{TAG}/{ASSET}" and a.size == len(BUILD)
    assert a.digest == f"sha256:{hashlib.sha256(BUILD).hexdigest()}"
    assert runtime.url == "http://127.0.0.1:1/t.tar.gz" and runtime.size is None  # a plain URL: not asked
    installer.resolve_remote([])
    assert len(srv.log) == 2


def test_asset_size_and_digest_that_are_not_what_they_say_are_dropped(monkeypatch):
    answers = {"assets": [{"name": ASSET, "browser_download_url": "https://x/a", "size": -5, "digest": ""},
                          {"name": "b.zip", "browser_download_url": "https://x/b", "size": "12", "digest": 7},
                          {"name": "c.zip", "browser_download_url": "https://x/c", "size": 0, "digest": "sha256:ab"},
                          {"name": "d.zip", "browser_download_url": "https://x/d", "size": 9, "digest": "sha256:" + "Ab" * 32},
                          {"name": "e.zip", "browser_download_url": "https://x/e", "digest": "md5:" + "0" * 32}]}
    monkeypatch.setattr(installer.github, "release", lambda *a, **k: answers)
    a, b, c, d, e = (backend(asset=n) for n in (ASSET, "b.zip", "c.zip", "d.zip", "e.zip"))
    installer.resolve_remote([a, b, c, d, e], env={})
    assert (a.size, a.digest, b.size, b.digest) == (None, None, None, None)
    # a digest that cannot verify anything (too short, another algorithm) counts as none: not two
    # downloads and a misleading mismatch, but "no published SHA-256" and --allow-unverified
    assert (c.size, c.digest, e.digest) == (0, None, None)
    assert (d.size, d.digest) == (9, "sha256:" + "Ab" * 32)


def test_allowed_unverified_kinds():
    assert installer._allowed(True, "runtime") and installer._allowed(("all",), "backend")
    assert installer._allowed(("runtime",), "runtime") and not installer._allowed(("runtime",), "backend")
    assert not installer._allowed((), "backend") and not installer._allowed(None, "runtime")


def test_from_file_is_matched_by_name(tmp_path):
    f = tmp_path / ASSET
    f.write_bytes(BUILD)
    p = plan_of(backend(), Artifact("runtime", "therock/gfx1151-7.14.0", "7.14.0", "therock-dist-linux-*.tar.gz"))
    assert match_files(p, [str(f)]) == {"llamacpp/vulkan": str(f)}
    rt = tmp_path / "therock-dist-linux-gfx1151-7.14.0.tar.gz"
    rt.write_bytes(b"x")
    assert match_files(p, [str(rt)]) == {"therock/gfx1151-7.14.0": str(rt)}
    assert match_files(p, None) == {} and match_files(p, []) == {}
    with pytest.raises(InstallError) as e:
        match_files(p, [str(tmp_path / "llama.zip")])
    assert e.value.exit_code == 2 and ASSET in str(e.value) and "therock-dist-linux-*.tar.gz" in str(e.value)
    with pytest.raises(InstallError) as e:
        match_files(p, [str(tmp_path / "missing" / ASSET)])
    assert e.value.exit_code == 5 and str(e.value).endswith("no such file")


Usage = namedtuple("Usage", "total used free")


def test_free_space_estimate_counts_download_and_unpacked_copy(srv, tmp_path, monkeypatch):
    srv.release("ggml-org/llama.cpp", TAG, {ASSET: BUILD})
    need = len(BUILD) * (1 + 3)  # docs/install.md: the download plus its unpacked copy, estimated at 3x
    seen = []

    def usage(p):
        seen.append(p)
        return Usage(10**12, 0, need - 1)
    monkeypatch.setattr(shutil, "disk_usage", usage)
    cache = tmp_path / "deep" / "cache"
    with pytest.raises(InstallError) as e:
        installer.install(plan_of(backend()), str(cache), "linux")
    msg = str(e.value)
    assert msg.startswith(f"not enough free space in {cache / 'bin'}")
    assert f"about {installer.human(need)} needed" in msg and f"{installer.human(need - 1)} free" in msg
    assert seen == [str(cache / "bin")]  # the nearest existing directory (the lock made cache/bin)
    assert srv.downloads(ASSET) == []
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10**12, 0, need))
    [r] = installer.install(plan_of(backend()), str(cache), "linux")
    assert r["action"] == "installed"


def test_free_space_for_a_local_archive_is_the_unpacked_copy_only(tmp_path, monkeypatch):
    f = tmp_path / ASSET
    f.write_bytes(BUILD)
    need = len(BUILD) * 3  # no download: only the unpacked copy
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10**12, 0, need - 1))
    a = backend(pinned_sha256=f"sha256:{hashlib.sha256(BUILD).hexdigest()}")
    with pytest.raises(InstallError) as e:
        installer.install(plan_of(a), str(tmp_path / "c"), "linux", from_files={a.dest: str(f)})
    assert f"about {installer.human(need)} needed" in str(e.value)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10**12, 0, need))
    [r] = installer.install(plan_of(a), str(tmp_path / "c"), "linux", from_files={a.dest: str(f)})
    assert r["action"] == "installed" and r["verified"] is True and r["digest_source"] == "pinned"


def test_no_size_known_means_no_space_check(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "disk_usage", lambda p: pytest.fail("asked for free space with nothing to weigh"))
    installer._check_space([backend()], str(tmp_path), {})


def test_a_declared_size_over_the_cap_is_refused_before_downloading(srv, tmp_path, monkeypatch):
    srv.release("ggml-org/llama.cpp", TAG, {ASSET: BUILD})
    from selector.install.download import Limits

    with pytest.raises(InstallError) as e:
        installer.install(plan_of(backend()), str(tmp_path / "c"), "linux", limits=Limits(max_download=len(BUILD) - 1))
    assert str(e.value).startswith(f"{ASSET} is {installer.human(len(BUILD))}, more than the download cap of")
    assert srv.downloads(ASSET) == []
    [r] = installer.install(plan_of(backend()), str(tmp_path / "c"), "linux", limits=Limits(max_download=len(BUILD)))
    assert r["action"] == "installed"


def test_unverified_is_refused_per_kind_before_downloading(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", TAG, {ASSET: BUILD}, digest=None)
    with pytest.raises(InstallError) as e:
        installer.install(plan_of(backend()), str(tmp_path / "c"), "linux", allow_unverified=("runtime",))
    assert "--allow-unverified backend" in str(e.value) and "(backend)" in str(e.value)
    assert srv.downloads(ASSET) == []
    [r] = installer.install(plan_of(backend()), str(tmp_path / "c"), "linux", allow_unverified=("backend",))
    assert r["verified"] is False


def test_from_file_whose_name_is_not_the_release_asset(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", TAG, {ASSET: BUILD})
    a = backend(asset="llama-*-vulkan-x64.tar.gz")
    f = tmp_path / "llama-b8000-bin-ubuntu-vulkan-x64.tar.gz"  # matches the rule, not this release's asset
    f.write_bytes(BUILD)
    with pytest.raises(InstallError) as e:
        installer.install(plan_of(a), str(tmp_path / "c"), "linux", from_files={a.dest: str(f)})
    assert e.value.exit_code == 2 and str(e.value).endswith(f"the release's asset is {ASSET}")


def test_a_failure_while_staging_leaves_no_staging_no_partial_and_the_old_install(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", TAG, {ASSET: make_tar([("README", b"no binary here")])})
    cache = tmp_path / "c"
    old = cache / "bin" / "llamacpp" / "vulkan"
    old.mkdir(parents=True)
    (old / "version.txt").write_text("b1\n")
    (old / "llama-server").write_bytes(SCRIPT)
    with pytest.raises(InstallError) as e:
        installer.install(plan_of(backend()), str(cache), "linux")
    assert str(e.value) == "the archive does not contain llama-server"
    assert sorted(os.listdir(old.parent)) == ["vulkan", "vulkan.lock"]
    assert (old / "version.txt").read_text() == "b1\n"


def test_a_verify_failure_keeps_the_old_install_and_its_code(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", TAG, {ASSET: BUILD})
    cache = tmp_path / "c"
    seen = []

    def verify(staging):
        seen.append(sorted(os.listdir(staging)))
        return False, 3, "the build sees no GPU"
    with pytest.raises(installer.VerifyFailed) as e:
        installer.install(plan_of(backend()), str(cache), "linux", verify=verify)
    assert e.value.exit_code == 3 and str(e.value) == "the build sees no GPU"
    assert seen == [["install.json", "libggml.so", "llama-server", "version.txt"]]
    assert sorted(os.listdir(cache / "bin" / "llamacpp")) == ["vulkan.lock"]
    with pytest.raises(installer.VerifyFailed) as e:
        installer.install(plan_of(backend()), str(cache), "linux", verify=lambda s: (False, 0, "x"))
    assert e.value.exit_code == 4  # a verifier that gives no code still fails the install
    [r] = installer.install(plan_of(backend()), str(cache), "linux", verify=lambda s: (True, 0, ""))
    assert r["action"] == "installed"


def test_a_read_only_cache_with_the_version_and_leftovers_is_already_installed(srv, tmp_path, monkeypatch, capsys):
    """docs/install.md: a read-only cache that holds the pinned version is "already installed",
    even with a crash's leftovers it cannot clean; another version still fails to take the lock."""
    import errno

    srv.release("ggml-org/llama.cpp", TAG, {ASSET: BUILD})
    cache = tmp_path / "c"
    installer.install(plan_of(backend()), str(cache), "linux")
    (cache / "bin" / "llamacpp" / "vulkan.staging").mkdir()  # an interrupted install's leftover

    def read_only(path, *a, **k):
        raise PermissionError(errno.EROFS, "Read-only file system", path)

    monkeypatch.setattr(installer, "lock", read_only)
    capsys.readouterr()
    [r] = installer.install(plan_of(backend()), str(cache), "linux")
    assert r["action"] == "present"
    # the user is told why the leftover stays (a silent skip would look like a cache never cleaned)
    assert "the cache is read-only" in capsys.readouterr().err
    with pytest.raises(InstallError) as e:
        installer.install(plan_of(backend(version="b9001")), str(cache), "linux")
    assert str(e.value).startswith("taking the lock failed: Read-only file system")


def test_present_unless_reinstall_or_incomplete(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", TAG, {ASSET: BUILD})
    cache = tmp_path / "c"
    installer.install(plan_of(backend()), str(cache), "linux")
    [r] = installer.install(plan_of(backend()), str(cache), "linux")
    assert r["action"] == "present" and len(srv.downloads(ASSET)) == 1
    [r] = installer.install(plan_of(backend()), str(cache), "linux", reinstall=True)
    assert r["action"] == "installed" and len(srv.downloads(ASSET)) == 2
    os.remove(cache / "bin" / "llamacpp" / "vulkan" / "llama-server")
    [r] = installer.install(plan_of(backend()), str(cache), "linux")
    assert r["action"] == "installed" and len(srv.downloads(ASSET)) == 3
    [r] = installer.install(plan_of(backend(version="b9001")), str(cache), "linux")
    assert r["action"] == "installed"  # another version pinned: not present


def test_step_names_what_failed_and_where():
    with pytest.raises(InstallError) as e:
        with installer.step("taking the lock", "/c/x.lock"):
            raise PermissionError(13, "Permission denied")
    assert str(e.value) == "taking the lock failed: Permission denied: /c/x.lock"
    with pytest.raises(InstallError) as e:
        with installer.step("reading", "/a"):
            raise FileNotFoundError(2, "No such file or directory", "/b")
    assert str(e.value) == "reading failed: No such file or directory: /b"
    with pytest.raises(InstallError) as e:
        with installer.step("writing"):
            raise OSError("disk on fire")
    assert str(e.value) == "writing failed: disk on fire"
    # a step named by where it writes reads as a sentence, not "unpacking into failed: ..."
    with pytest.raises(InstallError) as e:
        with installer.step("unpacking into", "/c/vulkan.staging"):
            raise OSError(28, "No space left on device")
    assert str(e.value) == "unpacking into /c/vulkan.staging failed: No space left on device"
    with pytest.raises(InstallError) as e:
        with installer.step("unpacking into", "/c/s"):
            raise OSError(28, "No space left on device", "/c/s/lib/libggml.so")
    assert str(e.value) == "unpacking into /c/s failed: No space left on device: /c/s/lib/libggml.so"
    with pytest.raises(ValueError):
        with installer.step("anything", "/p"):
            raise ValueError("not an OS error: not turned into an install error")


class Shown:
    """Stands in for download.Progress: what the user would see."""

    def __init__(self):
        self.labels, self.said = [], []

    def new(self, label):
        self.labels.append(label)

    def start(self, total, done):
        pass

    def advance(self, n):
        pass

    def say(self, msg):
        self.said.append(msg)


def test_an_upgrade_leaves_only_the_new_install_and_says_what_it_repaired(srv, tmp_path):
    srv.release("ggml-org/llama.cpp", TAG, {ASSET: BUILD})
    cache = tmp_path / "c"
    base = cache / "bin" / "llamacpp"
    (base / "vulkan").mkdir(parents=True)
    (base / "vulkan" / "version.txt").write_text("b1\n")
    (base / "vulkan.staging").mkdir()  # a crash's leftover from an earlier run
    shown = Shown()
    [r] = installer.install(plan_of(backend()), str(cache), "linux", progress=shown)
    assert r["action"] == "installed"
    assert shown.labels == [ASSET]  # the bar is labelled with what it downloads
    assert shown.said == [f"repaired: removed {base / 'vulkan.staging'}"]
    assert sorted(os.listdir(base)) == ["vulkan", "vulkan.lock"]  # the replaced install is gone, no .old
    assert (base / "vulkan" / "version.txt").read_text() == f"{TAG}\n"


@pytest.mark.parametrize("kw,factor", [({}, 3), ({"dest": "llamacpp/cuda", "asset": "llama-b1-bin-win-cuda-12.4-x64.zip"}, 9),
                                       ({"kind": "runtime", "dest": "therock/gfx1151-7.14.0"}, 6)])
def test_free_space_is_estimated_by_what_the_archive_is(srv, tmp_path, monkeypatch, kw, factor):
    # docs/install.md: 3x a build, 9x a CUDA build (8.6:1 measured), 6x a TheRock runtime (5.7:1)
    a = backend(**kw)
    srv.release(a.repo, a.tag, {a.asset: BUILD})
    need = len(BUILD) * (1 + factor)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10**12, 0, need - 1))
    with pytest.raises(InstallError) as e:
        installer.install(plan_of(a), str(tmp_path / "cache"), "linux")
    assert f"about {installer.human(need)} needed" in str(e.value) and f"estimated at {factor}x" in str(e.value)
