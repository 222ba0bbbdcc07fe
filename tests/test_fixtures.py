"""Every captured machine yields the facts and the picks its expected.json records.

expected.json is written by hand from the reference tables (facts) and the support matrix (picks);
the code under test never wrote it."""

import pytest

from conftest import expected, machine_names, profile_of


def assert_subset(actual, want, path="profile"):
    if isinstance(want, dict):
        assert isinstance(actual, dict), f"{path}: expected an object, got {actual!r}"
        for k, v in want.items():
            assert k in actual, f"{path}.{k} missing"
            assert_subset(actual[k], v, f"{path}.{k}")
    elif isinstance(want, list):
        assert isinstance(actual, list) and len(actual) == len(want), f"{path}: expected {len(want)} items, got {actual!r}"
        for i, (a, w) in enumerate(zip(actual, want)):
            assert_subset(a, w, f"{path}[{i}]")
    else:
        assert actual == want, f"{path}: expected {want!r}, got {actual!r}"


@pytest.mark.parametrize("name", machine_names())
def test_profile_matches_expected(name):
    exp = expected(name)
    prof = profile_of(name).to_dict()
    assert_subset(prof, exp["profile"])


@pytest.mark.parametrize("name", machine_names())
def test_profile_round_trips(name):
    from probes.profile import Profile

    prof = profile_of(name)
    assert Profile.from_dict(prof.to_dict()).to_dict() == prof.to_dict()


def _pick_cases(catalog_name):
    cases = []
    for name in machine_names():
        exp = expected(name)
        picks = exp.get("picks", {}).get(catalog_name, {})
        for recipe, backend in sorted(picks.items()):
            cases.append((name, recipe, backend))
    return cases


def _with_catalog(c, case):
    if hasattr(case, "marks"):  # a pytest.param (itself a tuple)
        return pytest.param(c, *case.values, marks=case.marks)
    return (c, *case)


@pytest.mark.parametrize("catalog_name,name,recipe,backend",
                         [_with_catalog(c, case) for c in ("lemonade", "localai") for case in _pick_cases(c)])
def test_pick_table(catalog_name, name, recipe, backend):
    from selector import catalog, engine

    d = engine.decide(profile_of(name), catalog.load(catalog_name), recipe)
    got = d.backend if d.ok else None
    assert got == backend, f"{name} {recipe}: picked {got} ({d.reason}); verdicts: " + "; ".join(
        f"{v.name}={'ok' if v.supported else v.reason}" for v in d.backends)


def _where_cases():
    cases = []
    for name in machine_names():
        for key, want in sorted(expected(name).get("where", {}).get("lemonade", {}).items()):
            cases.append((name, key, want))
    return cases


@pytest.mark.parametrize("name,key,want", _where_cases())
def test_the_pick_says_where_the_build_runs(cli, name, key, want):
    """expected.json "where": the backend, the device and the run_env the CLI gives (worked out by hand
    from the runtimes' rules), for a recipe or a recipe with --backend pinned."""
    from conftest import machine

    recipe, _, backend = key.partition("/")
    r = cli("--root", machine(name), recipe, *(["--backend", backend] if backend else []), "--json")
    rec = r.json()["recipes"][recipe]
    assert rec["backend"] == want["backend"], rec["reason"]
    chosen = next(b for b in rec["backends"] if b["name"] == want["backend"])
    assert chosen["supported"] == want.get("supported", True), chosen["reason"]
    if "reason" in want:
        assert want["reason"] in chosen["reason"]
    for k, v in want.get("device", {}).items():
        assert rec["device"][k] == v, (k, rec["device"])
    if "run_env" in want:
        assert rec["run_env"] == want["run_env"]
    if "note" in want:  # on the pick or on the chosen backend's verdict
        notes = rec["notes"] + chosen["notes"]
        assert any(want["note"] in n for n in notes), notes


@pytest.mark.parametrize("name", [n for n in machine_names() if "warnings" in expected(n) or "no_warnings" in expected(n)])
def test_the_probe_warns_what_expected_json_says(name):
    messages = [w.message for w in profile_of(name).warnings]
    for text in expected(name).get("warnings", []):
        assert any(text in m for m in messages), (text, messages)
    for text in expected(name).get("no_warnings", []):
        assert not any(text in m for m in messages), (text, messages)
