"""Installed-version states as Lemonade computes them (lemonade-behaviour.md, "update_required")."""

from selector import catalog, engine


def test_installed_version_with_a_suffix_of_the_pin_is_installed():
    # vllm writes "<pin>-<gfx>" into version.txt; Lemonade counts "{expected}-{suffix}" as a match
    rec = catalog.load("lemonade").recipes["vllm"]
    pins = {"vllm": {"rocm": "vllm0.20.1-rocm7.12.0"}}
    state = engine.state_for(rec, "rocm", "stable", True, {"vllm": {"rocm": "vllm0.20.1-rocm7.12.0-gfx1151"}}, pins)
    assert state == "installed"
    # a different version, or a pin that is only a prefix without the dash, still needs the update
    for have in ("vllm0.20.0-rocm7.12.0-gfx1151", "vllm0.20.1-rocm7.12.01", None):
        assert engine.state_for(rec, "rocm", "stable", True, {"vllm": {"rocm": have}}, pins) == "update_required"


def test_without_a_pin_any_recorded_version_is_installed_and_none_needs_the_update():
    # a backend no pin names (a user catalog's own row): a version.txt with any version is
    # installed; a directory without one (an interrupted copy) needs the update, as in Lemonade
    rec = catalog.load("lemonade").recipes["llamacpp"]
    assert engine.state_for(rec, "vulkan", "stable", True, {"llamacpp": {"vulkan": "b1"}}, {}) == "installed"
    assert engine.state_for(rec, "vulkan", "stable", True, {"llamacpp": {"vulkan": ""}}, {}) == "update_required"
    assert engine.state_for(rec, "vulkan", "stable", True, {"llamacpp": {"cpu": "b1"}}, {}) == "installable"
