"""Planning downloads (selector/install/resolve.py) from a small assets file written here, so each
rule of the format (docs/catalogs.md "assets file") is pinned on its own: placeholders, pins and
their overrides, the per-family vllm release, the TheRock runtime, and every refusal's message."""

import copy
import json
import os
from types import SimpleNamespace as NS

import pytest

from probes.inputs import InputError
from selector.install import resolve
from selector.install.resolve import NoRule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ASSETS = {
    "rocm_asset_families": {"gfx1100": "gfx110X", "gfx1201": "gfx120X", "odd": 7},
    "therock": {"version": "7.14.0", "base_url": "https://repo.example/tarballs/", "os_names": {"linux": "linux"},
                "asset": "therock-dist-{os}-{therock}-{version}.tar.gz", "dir": "therock/{arch}-{version}",
                "expect": "lib", "expect_by_os": {"windows": "bin"}, "architectures": ["gfx1151", "gfx1100", "gfx110X"],
                "url_mapping": {"gfx1100": "gfx110X-all", "gfx110X": "gfx110X-all"}},
    "checksums": {"github": {"o/llama": {"b100": {"llama-b100-cpu.zip": "sha256:aa"}}},
                  "url": {"therock-dist-linux-gfx1151-7.14.0.tar.gz": "sha256:bb"}},
    "recipes": {
        "llamacpp": {"binary": "llama-server", "backends": {
            "cpu": [{"os": "linux", "arch": "x86_64", "repo": "o/llama", "asset": "llama-{tag}-cpu.zip"},
                    {"os": "windows", "arch": "x86_64", "repo": "o/llama", "asset": "llama-{tag}-win.zip"}],
            "cuda": [{"os": "linux", "arch": "x86_64", "repo": "o/llama", "asset": "llama-{tag}-cuda-{sm}.tar.gz"}],
            "rocm-stable": [{"os": "linux", "arch": "x86_64", "repo": "o/llama", "asset": "llama-{tag}-rocm-{therock_mm}.tar.gz",
                             "runtime": "therock"},
                            {"os": "windows", "arch": "x86_64", "repo": "o/llama", "asset": "llama-{tag}-rocm-win.zip",
                             "runtime": "therock"}],
            "rocm-nightly": [{"os": "linux", "arch": "x86_64", "repo": "o/rocm", "asset": "llama-{tag}-{family}-x64.zip",
                              "pin": "nightly-builds"}],
        }},
        "sd-cpp": {"binary": "sd-server", "backends": {
            "metal": [{"os": "macos", "arch": "arm64", "repo": "o/sd", "asset": "sd-{tag_short}-{tag_nov}-*.zip"}]}},
        "vllm": {"binary": "vllm", "backends": {
            "rocm": [{"os": "linux", "arch": "x86_64", "repo": "o/vllm", "asset": "vllm-{release_tag}.tar.gz",
                      "release_tag": "{tag}-{family}", "pin_overrides": "overrides"}]}},
    },
    "no_install": {"_comment": "x", "whispercpp": {"npu": "no build"}},
}
PINS = {"llamacpp": {"cpu": "b100", "cuda": "b100", "rocm-stable": "b200", "rocm-nightly": "b999", "nightly-builds": "b300"},
        "sd-cpp": {"metal": "master-820-de298c2"},
        "vllm": {"rocm": "v0.20", "overrides": {"gfx120X": "v0.19-gfx120X"}}}


def recipe(name, rocm_channels=False, rows=()):
    return NS(name=name, rocm_channels=rocm_channels, rows=list(rows))


LLAMA = recipe("llamacpp", rocm_channels=True)


def gpu(kind, family):
    return NS(type=kind, family=family)


def plan(rec, backend, device=None, os_name="linux", arch="x86_64", channel="stable", pins=PINS, env=None,
         assets=ASSETS, hw_gfx=None):
    return resolve.plan(assets, rec, backend, channel, device, os_name, arch, pins, env=env or {}, hw_gfx=hw_gfx)


def test_a_plain_build_and_its_pinned_checksum():
    p = plan(LLAMA, "cpu")
    assert (p.recipe, p.backend, p.dirname, p.tag) == ("llamacpp", "cpu", "cpu", "b100")
    [a] = p.artifacts
    assert (a.kind, a.dest, a.version, a.asset, a.repo, a.tag, a.binary) == \
        ("backend", "llamacpp/cpu", "b100", "llama-b100-cpu.zip", "o/llama", "b100", "llama-server")
    assert a.pinned_sha256 == "sha256:aa" and a.expected_digest == "sha256:aa" and p.main is a
    assert a.to_dict()["digest_source"] == "pinned"
    w = plan(LLAMA, "cpu", os_name="windows").main
    assert w.asset == "llama-b100-win.zip" and w.pinned_sha256 is None and w.to_dict()["digest_source"] is None
    w.digest = "sha256:cc"
    assert w.to_dict()["digest_source"] == "api" and w.expected_digest == "sha256:cc"


def test_no_rule_for_this_os_or_arch_names_what_is_published():
    with pytest.raises(NoRule) as e:
        plan(LLAMA, "cpu", arch="arm64")
    assert str(e.value) == "no install rule for llamacpp cpu on linux/arm64 (published for: linux/x86_64, windows/x86_64)"


def test_refusals_say_why():
    with pytest.raises(NoRule) as e:
        plan(recipe("whispercpp"), "npu")
    assert str(e.value) == "no install rule for whispercpp npu: no build"
    with pytest.raises(NoRule) as e:
        plan(recipe("ollama", rows=[NS(backend="rocm", format="container")]), "rocm")
    assert "runs as a container image" in str(e.value)
    with pytest.raises(NoRule) as e:
        plan(recipe("kokoro"), "cpu")
    assert str(e.value) == "no install rule for kokoro cpu (no asset rules for kokoro in the catalog's assets file)"
    with pytest.raises(NoRule) as e:
        plan(LLAMA, "metal")
    assert str(e.value) == "no install rule for llamacpp metal"
    with pytest.raises(NoRule) as e:
        plan(recipe("llamacpp", rocm_channels=True), "rocm", channel="preview")
    assert str(e.value) == "no install rule for llamacpp rocm (rocm-preview)"
    with pytest.raises(NoRule) as e:
        plan(LLAMA, "cpu", pins={"llamacpp": {}})
    assert str(e.value) == "no version pin for llamacpp cpu in the catalog's versions file"


def test_cuda_asset_takes_the_gpus_sm_target():
    assert plan(LLAMA, "cuda", gpu("nvidia_gpu", "sm_89")).main.asset == "llama-b100-cuda-sm_89.tar.gz"
    for dev in (None, gpu("amd_gpu", "gfx1100"), gpu("nvidia_gpu", "")):
        with pytest.raises(NoRule) as e:
            plan(LLAMA, "cuda", dev)
        assert "needs the GPU's CUDA target (sm_XX)" in str(e.value) and "--force --sm" in str(e.value)


def test_rocm_nightly_names_the_family_and_its_own_pin():
    # the rule's "pin" names the pins entry to use, before the directory's own
    p = plan(LLAMA, "rocm", gpu("amd_gpu", "gfx1201"), channel="nightly")
    assert (p.dirname, p.main.asset, p.main.repo, p.main.dest) == \
        ("rocm-nightly", "llama-b300-gfx120X-x64.zip", "o/rocm", "llamacpp/rocm-nightly")
    # a target without a family is used verbatim; a family that is not a string is ignored
    assert plan(LLAMA, "rocm", gpu("amd_gpu", "gfx1151"), channel="nightly").main.asset == "llama-b300-gfx1151-x64.zip"
    assert resolve.rocm_family(ASSETS, "odd") == "odd"
    with pytest.raises(NoRule) as e:
        plan(LLAMA, "rocm", gpu("nvidia_gpu", "sm_89"), channel="nightly")
    assert "needs the GPU's gfx target" in str(e.value) and "--force --gfx" in str(e.value)


def test_rocm_stable_brings_the_therock_runtime_of_the_hardware_target():
    p = plan(LLAMA, "rocm", gpu("amd_gpu", "gfx1100"), env={"PICK_BACKEND_THEROCK_URL": "http://127.0.0.1:9/rock/"})
    main, rt = p.artifacts
    assert main.asset == "llama-b200-rocm-7.14.tar.gz" and main.dest == "llamacpp/rocm-stable"
    assert (rt.kind, rt.dest, rt.version, rt.asset, rt.url, rt.expect, rt.method, rt.repo, rt.pinned_sha256) == \
        ("runtime", "therock/gfx1100-7.14.0", "7.14.0", "therock-dist-linux-gfx110X-all-7.14.0.tar.gz",
         "http://127.0.0.1:9/rock/therock-dist-linux-gfx110X-all-7.14.0.tar.gz", "lib", "tarball", None, None)
    # the HSA override changes the family the engine saw, never the directory Lemonade names
    p = plan(LLAMA, "rocm", gpu("amd_gpu", "gfx1100"), hw_gfx="gfx1151")
    rt = p.artifacts[1]
    assert rt.dest == "therock/gfx1151-7.14.0" and rt.url == \
        "https://repo.example/tarballs/therock-dist-linux-gfx1151-7.14.0.tar.gz"  # unmapped: verbatim
    assert rt.pinned_sha256 == "sha256:bb"
    # Windows: the family name, the Windows expect path, the os word as given when unmapped
    p = plan(LLAMA, "rocm", gpu("amd_gpu", "gfx1100"), os_name="windows")
    rt = p.artifacts[1]
    assert (rt.dest, rt.expect, rt.asset) == ("therock/gfx110X-7.14.0", "bin", "therock-dist-windows-gfx110X-all-7.14.0.tar.gz")
    # os_names maps the OS to the word the tarball's name uses
    named = copy.deepcopy(ASSETS)
    named["therock"]["os_names"]["windows"] = "win64"
    rt = plan(LLAMA, "rocm", gpu("amd_gpu", "gfx1100"), os_name="windows", assets=named).artifacts[1]
    assert rt.asset == "therock-dist-win64-gfx110X-all-7.14.0.tar.gz"


def test_no_runtime_for_an_arch_lemonade_does_not_list():
    p = plan(LLAMA, "rocm", gpu("amd_gpu", "gfx1201"))
    assert [a.kind for a in p.artifacts] == ["backend"]


def test_runtime_refusals():
    no_rock = dict(ASSETS, therock=None)
    with pytest.raises(NoRule) as e:
        plan(LLAMA, "rocm", gpu("amd_gpu", "gfx1100"), assets=no_rock)
    assert "needs the TheRock runtime but the assets file has no 'therock' block" in str(e.value)
    with pytest.raises(NoRule) as e:
        plan(LLAMA, "rocm", gpu("nvidia_gpu", "sm_89"))
    assert "the TheRock runtime is chosen by the GPU's gfx target; none was found" in str(e.value)


def test_sd_cpp_short_tag_and_tag_without_v():
    assert resolve.short_tag("master-820-de298c2") == "master-de298c2"
    assert resolve.short_tag("master-x-de298c2") == "master-x-de298c2"
    assert resolve.short_tag("b100") == "b100"
    assert resolve.short_tag("master-820-de298c2-dirty") == "master-de298c2-dirty"  # only the number goes
    p = plan(recipe("sd-cpp"), "metal", os_name="macos", arch="arm64")
    assert p.main.asset == "sd-master-de298c2-master-820-de298c2-*.zip"
    p = plan(recipe("sd-cpp"), "metal", os_name="macos", arch="arm64", pins={"sd-cpp": {"metal": "v1.2"}})
    assert p.main.asset == "sd-v1.2-1.2-*.zip"


def test_vllm_release_per_family_and_pin_overrides():
    vllm = recipe("vllm")
    p = plan(vllm, "rocm", gpu("amd_gpu", "gfx1100"))
    assert (p.tag, p.main.tag, p.main.version, p.main.asset) == \
        ("v0.20-gfx110X", "v0.20-gfx110X", "v0.20-gfx110X", "vllm-v0.20-gfx110X.tar.gz")
    p = plan(vllm, "rocm", gpu("amd_gpu", "gfx1201"))  # the family's override pin already names the release
    assert p.tag == "v0.19-gfx120X" and p.main.asset == "vllm-v0.19-gfx120X.tar.gz"
    bad = copy.deepcopy(PINS)
    bad["vllm"]["overrides"] = {"gfx110X": "v0.18-gfx120X"}
    with pytest.raises(NoRule) as e:
        plan(vllm, "rocm", gpu("amd_gpu", "gfx1100"), pins=bad)
    assert str(e.value) == "vllm rocm: the pin v0.18-gfx120X targets gfx120X but this GPU is gfx110X"
    bad["vllm"]["overrides"] = {"gfx110X": 5}  # not a string: the plain pin stands
    assert plan(vllm, "rocm", gpu("amd_gpu", "gfx1100"), pins=bad).tag == "v0.20-gfx110X"


def test_a_release_tag_alone_can_ask_for_the_family():
    # no pin_overrides: the {family} in release_tag is what makes the plan need the GPU's gfx target
    assets = copy.deepcopy(ASSETS)
    del assets["recipes"]["vllm"]["backends"]["rocm"][0]["pin_overrides"]
    p = plan(recipe("vllm"), "rocm", gpu("amd_gpu", "gfx1100"), assets=assets)
    assert p.main.asset == "vllm-v0.20-gfx110X.tar.gz"
    with pytest.raises(NoRule) as e:
        plan(recipe("vllm"), "rocm", None, assets=assets)
    assert "needs the GPU's gfx target" in str(e.value)


def test_pinned_checksums():
    assert resolve.pinned_checksum(ASSETS, "o/llama", "b100", "llama-b100-cpu.zip") == "sha256:aa"
    assert resolve.pinned_checksum(ASSETS, "o/llama", "b101", "llama-b100-cpu.zip") is None
    assert resolve.pinned_checksum(ASSETS, None, None, "therock-dist-linux-gfx1151-7.14.0.tar.gz") == "sha256:bb"
    assert resolve.pinned_checksum({}, "o/llama", "b100", "x") is None
    assert resolve.pinned_checksum({"checksums": {"url": {"x": 5}}}, None, None, "x") is None


def _bundled():
    with open(os.path.join(ROOT, "selector", "catalogs", "lemonade-assets.json"), encoding="utf-8") as f:
        return json.load(f)


def _cpu_rule(d):
    return d["recipes"]["llamacpp"]["backends"]["cpu"][0]


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.clear() or d.update({"recipes": []}), "recipes: must be an object"),
    (lambda d: d["recipes"].__setitem__("llamacpp", []), "recipes.llamacpp: must be an object"),
    (lambda d: d["recipes"]["llamacpp"].__setitem__("binary", ""), "recipes.llamacpp.binary"),
    (lambda d: d["recipes"]["llamacpp"].__setitem__("backends", []), "recipes.llamacpp.backends: must be an object"),
    (lambda d: d["recipes"]["llamacpp"]["backends"].__setitem__("cpu", {}), "recipes.llamacpp.backends.cpu: must be a list"),
    (lambda d: d["recipes"]["llamacpp"]["backends"]["cpu"].__setitem__(0, "x"), "recipes.llamacpp.backends.cpu[0]: must be"),
    (lambda d: _cpu_rule(d).__setitem__("os", ""), "recipes.llamacpp.backends.cpu[0].os"),
    (lambda d: _cpu_rule(d).pop("arch"), "recipes.llamacpp.backends.cpu[0].arch"),
    (lambda d: _cpu_rule(d).__setitem__("repo", "noslash"), "recipes.llamacpp.backends.cpu[0].repo: must be owner/name"),
    (lambda d: _cpu_rule(d).__setitem__("asset", "../x.zip"), "recipes.llamacpp.backends.cpu[0].asset: must be a plain"),
    (lambda d: _cpu_rule(d).__setitem__("asset", "a/x.zip"), "recipes.llamacpp.backends.cpu[0].asset: must be a plain"),
    (lambda d: _cpu_rule(d).__setitem__("runtime", "cuda"), "recipes.llamacpp.backends.cpu[0].runtime"),
    (lambda d: _cpu_rule(d).__setitem__("pin", 3), "recipes.llamacpp.backends.cpu[0].pin"),
    (lambda d: _cpu_rule(d).__setitem__("pin_overrides", ""), "recipes.llamacpp.backends.cpu[0].pin_overrides"),
    (lambda d: d["therock"].pop("base_url"), "therock.base_url: is missing"),
    (lambda d: d["therock"].__setitem__("architectures", "gfx1151"), "therock.architectures"),
    (lambda d: d.__setitem__("no_install", []), "no_install: must be an object"),
    (lambda d: d["no_install"].__setitem__("x", "reason"), "no_install.x: must map"),
    (lambda d: d.__setitem__("recipes", {"r": {"binary": "b", "backends": {"c": [{"os": "linux", "arch": "x86_64",
                                                                                   "repo": "a/b", "asset": 5}]}}}),
     "recipes.r.backends.c[0].asset: must be a non-empty string"),
])
def test_every_field_of_a_bad_assets_file_is_named(edit, field, tmp_path):
    d = _bundled()
    edit(d)
    path = tmp_path / "lemonade-assets.json"
    path.write_text(json.dumps(d))
    with pytest.raises(InputError) as e:
        resolve.load_assets(path=str(path))
    assert str(e.value).startswith(f"{path}: {field}")  # the field first, whole


def test_a_top_level_that_is_not_an_object(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("[1]")
    with pytest.raises(InputError) as e:
        resolve.load_assets(path=str(path))
    assert str(e.value) == f"{path}: top level: must be a JSON object"


def test_the_bundled_assets_file_loads_and_comments_are_allowed():
    d = resolve.load_assets()  # Lemonade's, by default
    assert d == resolve.load_assets("lemonade")
    assert "llamacpp" in d["recipes"] and d["no_install"]["_comment"]
    assert resolve.assets_path("lemonade").endswith(os.path.join("catalogs", "lemonade-assets.json"))
