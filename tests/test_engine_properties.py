"""Properties of the rule engine over random machines and settings (hypothesis)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.profile import CPU, OS, AmdGpu, Metal, Npu, NvidiaGpu, Profile
from selector import catalog, engine

LEMONADE = catalog.load("lemonade")
GFX = ["gfx1030", "gfx1031", "gfx1036", "gfx1100", "gfx1101", "gfx1103", "gfx1150", "gfx1151", "gfx1152",
       "gfx1201", "gfx908", "gfx90a", "gfx942", "gfx950", "gfx906"]
SM = [None, "sm_61", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "sm_121"]

amd = st.builds(AmdGpu, gfx=st.sampled_from(GFX), integrated=st.booleans(),
                vram_bytes=st.integers(0, 1 << 38), visible=st.booleans())
nvidia = st.builds(NvidiaGpu, sm=st.sampled_from(SM), memory_bytes=st.integers(0, 1 << 37), visible=st.booleans())
npu = st.builds(Npu, generation=st.sampled_from(["XDNA1", "XDNA2", "unknown"]), driver_bound=st.booleans())


@st.composite
def profiles(draw):
    os_name = draw(st.sampled_from(["linux", "windows", "macos"]))
    p = Profile(os=OS(name=os_name), cpu=CPU(arch=draw(st.sampled_from(["x86_64", "arm64"]))))
    p.amd_gpus = draw(st.lists(amd, max_size=3))
    for i, g in enumerate(p.amd_gpus):
        g.index = i
        g.gfx_effective = draw(st.sampled_from([g.gfx, g.gfx, "gfx1030"]))
    p.nvidia_gpus = draw(st.lists(nvidia, max_size=2))
    for i, g in enumerate(p.nvidia_gpus):
        g.index = i
    p.npus = draw(st.lists(npu, max_size=1))
    p.metal = Metal(available=os_name == "macos" and draw(st.booleans()))
    p.executables = draw(st.dictionaries(st.sampled_from(["llama-server", "docker", "podman"]), st.just("/usr/bin/x")))
    return p


@st.composite
def inputs(draw):
    prof = draw(profiles())
    s = engine.Settings(channel=draw(st.sampled_from(engine.CHANNELS)), prefer_system=draw(st.booleans()),
                        policy=draw(st.sampled_from(engine.POLICIES)))
    recipe = draw(st.sampled_from(sorted(LEMONADE.recipes)))
    r = LEMONADE.recipes[recipe]
    dirs = [engine.install_dir_name(r, b, engine.recipe_channel(r, s)) for b in r.backends]
    installed = {recipe: draw(st.dictionaries(st.sampled_from(dirs), st.sampled_from([None, "b1", "b10375"])))}
    return prof, s, recipe, installed


INSTALLED = set(engine.INSTALLED_STATES)


@settings(max_examples=400, deadline=None)
@given(inputs())
def test_never_picks_an_unsupported_backend_unless_pinned(args):
    prof, s, recipe, installed = args
    d = engine.decide(prof, LEMONADE, recipe, installed, s)
    if d.backend is not None:
        assert d.verdict(d.backend).supported
        assert d.ok
    else:
        assert not any(v.supported and (v.name != "system" or s.prefer_system) for v in d.backends)


@settings(max_examples=400, deadline=None)
@given(inputs())
def test_accelerator_first_never_picks_cpu_while_an_accelerator_row_is_supported(args):
    prof, s, recipe, installed = args
    s = s.replace(policy="accelerator-first")
    d = engine.decide(prof, LEMONADE, recipe, installed, s)
    acc = [v for v in d.backends if v.supported and not v.on_cpu and (v.name != "system" or s.prefer_system)]
    if acc:
        assert d.device is not None and d.device.type != "cpu", (d.backend, [v.name for v in acc])


@settings(max_examples=400, deadline=None)
@given(inputs())
def test_lemonade_policy_is_first_supported_unless_a_later_one_is_installed(args):
    prof, s, recipe, installed = args
    s = s.replace(policy="lemonade")
    d = engine.decide(prof, LEMONADE, recipe, installed, s)
    # Lemonade's defaults.json prefers a system llama-server for llamacpp
    system_ok = s.prefer_system or LEMONADE.recipes[recipe].extra.get("prefer_system_default", False)
    cands = [v for v in d.backends if v.supported and (v.name != "system" or system_ok)]
    if not cands:
        assert d.backend is None
        return
    first = cands[0]
    if d.backend != first.name:
        chosen = d.verdict(d.backend)
        assert chosen.state in INSTALLED and first.state == "installable"
        earlier = cands[:cands.index(chosen)]
        assert all(v.state == "installable" for v in earlier)
        assert chosen is next(v for v in cands if v.state in INSTALLED)


@settings(max_examples=300, deadline=None)
@given(inputs())
def test_gfx950_never_passes_on_nightly_or_windows(args):
    prof, s, _, installed = args
    for g in prof.amd_gpus:
        g.gfx = g.gfx_effective = "gfx950"
        g.integrated, g.visible = False, True
    d = engine.decide(prof, LEMONADE, "llamacpp", installed, s)
    rocm = d.verdict("rocm")
    if s.channel == "nightly" or prof.os.name != "linux":
        assert not rocm.supported
    if prof.amd_gpus and s.channel == "nightly" and prof.os.name == "linux":
        # on arm64 the x86_64-only build is the first reason (checked right after the OS)
        assert ("stable channel" if prof.cpu.arch == "x86_64" else "built for x86_64 only") in rocm.reason


@settings(max_examples=300, deadline=None)
@given(inputs())
def test_system_is_never_picked_without_prefer_system(args):
    prof, s, recipe, installed = args
    s = s.replace(prefer_system=False, policy="accelerator-first")  # --policy lemonade follows Lemonade's defaults.json (llamacpp prefers system)
    d = engine.decide(prof, LEMONADE, recipe, installed, s)
    assert d.backend != "system"


@settings(max_examples=200, deadline=None)
@given(inputs(), st.data())
def test_a_pinned_backend_is_chosen_even_when_unsupported(args, data):
    prof, s, recipe, installed = args
    backend = data.draw(st.sampled_from(LEMONADE.recipes[recipe].backends))
    s = s.replace(backends={recipe: backend})
    d = engine.decide(prof, LEMONADE, recipe, installed, s)
    assert d.backend == backend and d.pinned
    assert d.ok == d.verdict(backend).supported
    if not d.ok:
        assert "not supported here" in d.reason


def test_a_trailing_x_family_matches_by_prefix_in_exclusions_and_cpu_entries_too():
    # catalog families take the trailing-X wildcard everywhere (docs/catalogs.md), not only in
    # device entries: an exclusion written "gfx94X" covers gfx942
    from selector.engine import family_token, matches_family as _matches_family

    assert _matches_family("gfx942", ["gfx94X"]) and _matches_family("gfx942", ["gfx90a", "gfx942"])
    assert not _matches_family("gfx950", ["gfx94X"]) and not _matches_family("gfx94", ["gfx942"])
    assert _matches_family("x86_64", []) and not _matches_family(None, ["x86_64"])
    # a lone "X" is a family name, not a wildcard for every target
    assert family_token("gfx1100", ["X"]) is None and family_token("X", ["X"]) == "X"


@settings(max_examples=100, deadline=None)
@given(inputs())
def test_a_pin_of_auto_is_no_pin(args):
    # "auto" (config.json's "backend": "auto", --backend auto) leaves the choice to the policy
    prof, s, recipe, installed = args
    free = engine.decide(prof, LEMONADE, recipe, installed, s)
    s = s.replace(backends={recipe: "auto"})
    auto = engine.decide(prof, LEMONADE, recipe, installed, s)
    assert not auto.pinned and (auto.backend, auto.reason) == (free.backend, free.reason)


def test_a_rows_families_are_said_as_a_range_or_a_list():
    # sm targets sorted by number: a range from three on, else listed; other families as the row gives them
    from selector.engine import describe_families

    assert describe_families(["sm_120", "sm_89", "sm_75"]) == "sm_75..sm_120"
    assert describe_families(["sm_89", "sm_86"]) == "sm_86, sm_89"
    assert describe_families(["gfx110X", "gfx1151"]) == "gfx110X, gfx1151"


def test_settings_are_frozen_once_built():
    # one source per setting: a pin or a policy patched in after build() would be a second one
    from selector.settings import build

    s, _ = build(LEMONADE.recipes, policy="lemonade", backend="cpu", backend_recipes=["llamacpp"], env={})
    assert (s.policy, dict(s.backends)) == ("lemonade", {"llamacpp": "cpu"})
    with pytest.raises(AttributeError):
        s.policy = "measured"
    with pytest.raises(TypeError):
        s.backends["whispercpp"] = "cpu"
    t = s.replace(policy="measured")
    assert (t.policy, s.policy, dict(t.backends)) == ("measured", "lemonade", {"llamacpp": "cpu"})
