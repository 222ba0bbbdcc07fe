"""probes/record.py: the lean ``@dataclass`` stand-in keeps the dataclass options it is given, and
refuses the ones it does not implement instead of dropping them."""

from functools import cached_property

import pytest

from probes.record import FrozenRecord, Record, as_dict, field
from selector.catalog import Row


def _row(**kw):
    base = dict(backend="vulkan", tier="core", format="native", os=("linux",),
                devices=(("amd_gpu", ("gfx1151",)),), note=None)
    return Row(**{**base, **kw})


def test_rows_differing_only_in_a_compare_false_field_are_equal_and_hash_equal():
    a = _row(extra={"install": "a"}, requires={"container": "docker"})
    b = _row(extra={"install": "b"})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert _row(note="other") != a  # a compared field still tells rows apart
    assert hash(_row(note="other")) != hash(a)
    # left out of the comparison only: still shown and still data
    assert "extra={'install': 'a'}" in repr(a)
    assert as_dict(a)["extra"] == {"install": "a"} and as_dict(a)["requires"] == {"container": "docker"}


def test_compare_false_holds_in_subclasses_and_hash_true_keeps_a_field_hashed():
    class Base(FrozenRecord):
        key: int
        seen: int = field(default=0, compare=False)
        weight: int = field(default=0, compare=False, hash=True)

    class Child(Base):
        more: int = 0

    assert Child(1, seen=1) == Child(1, seen=2) and hash(Child(1, seen=1)) == hash(Child(1, seen=2))
    assert Child(1, weight=1) == Child(1, weight=2)
    assert hash(Child(1, weight=1)) != hash(Child(1, weight=2))
    assert Child(1, more=1) != Child(1, more=2)
    assert Base.seen == 0 and Child(1).seen == 0  # the default stays a class attribute, as in dataclasses


def test_a_required_compare_false_field_must_be_given():
    class R(Record):
        name: str
        note: str = field(compare=False)

    with pytest.raises(TypeError, match="note"):
        R("a")
    assert R("a", "x") == R("a", "y")


@pytest.mark.parametrize("option", ["init", "repr", "kw_only", "metadata"])
def test_a_field_option_record_does_not_implement_is_refused(option):
    with pytest.raises(TypeError, match=option):
        field(default=None, **{option: False})
    with pytest.raises(TypeError, match=option):
        class R(Record):  # noqa: F841 - the class statement is what must fail
            x: int = field(default=0, **{option: False})


def test_default_and_default_factory_together_are_refused():
    with pytest.raises(ValueError):
        field(default=0, default_factory=int)


def _records(value, seen=None):
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, Record):
        yield value
        value = [getattr(value, f) for f in value._fields]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _records(v, seen)


def test_records_carry_only_the_fields_they_declare():
    """Nothing pins private state onto a record: what a probe of every fixture machine hands on, the
    engine's decisions over it, and the catalogs they were judged with hold their declared fields,
    and the caches their classes declare (cached_property), and nothing else."""
    from conftest import machine_names, profile_of
    from selector import catalog, engine

    cats = [catalog.load(name) for name in catalog.BUILTIN]
    found: list = []
    for name in machine_names():
        profile = profile_of(name)
        machine = engine.Machine(profile)
        found += _records(profile)
        for cat in cats:
            found += _records([engine.decide(profile, cat, r, machine=machine) for r in cat.recipes])
    found += _records(cats)
    assert len(found) > 5000
    extra = {(type(r).__name__, k) for r in found for k in vars(r) if k not in r._fields
             and not isinstance(getattr(type(r), k, None), cached_property)}  # a cache the class declares
    assert not extra
