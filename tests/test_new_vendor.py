"""A device kind the product has never heard of, added the way docs/DESIGN.md promises: a probe record, a
kind in the table, a mapping into the engine's device record and catalog rows.  The judge, the
policy and the run environment are not touched, and the pick is right.

The vendor is made up (an "Acme TPU"); what it must get is what every real kind gets: the row that
lists its family runs on it, another family is passed over in its own words, a device this process
cannot open falls back to the CPU saying why, and two alike devices are judged once."""

from __future__ import annotations

import pytest

from probes.profile import Profile
from probes.record import Record, field
from selector import catalog, engine, kinds
from selector.engine import devices


class AcmeTpu(Record):  # what the vendor's probe would report
    index: int = 0
    name: str = ""
    generation: str | None = None
    usable: bool = True


class AcmeProfile(Profile):
    acme_tpus: list[AcmeTpu] = field(default_factory=list)


def _units(m, profile):
    out = []
    for t in sorted(profile.acme_tpus, key=lambda t: t.index):
        out.append(engine.Unit(
            "acme_tpu", t, t.generation, name=t.name, index=t.index,
            closed={"compute": "" if t.usable else "{name}: this process cannot open /dev/acme{index}, so {backend} "
                    "cannot use it", "graphics": "no Vulkan driver"},
            unknown="{name}: its generation is unknown, so no {backend} build can be matched to it",
            mismatch="Requires an Acme {families_or} TPU (found {family}, {name})",
            values={"index": t.index}, key=(t.generation, t.name, t.usable)))
    return out


@pytest.fixture
def acme():
    kinds.register("acme_tpu", {"words": "Acme TPU", "accelerator": True})
    devices.MAPPINGS["acme_tpu"] = devices.Mapping(_units)
    yield
    del devices.MAPPINGS["acme_tpu"]
    kinds.unregister("acme_tpu")


def _catalog():
    return catalog.parse({"schema_version": 1, "name": "t", "recipes": {"llm": {"rows": [
        {"backend": "acme", "os": ["linux"], "devices": {"acme_tpu": ["v5X"]}},
        {"backend": "cpu", "os": ["linux"], "devices": {"cpu": ["x86_64"]}}]}}})


def _pick(*tpus):
    return engine.decide(AcmeProfile(acme_tpus=list(tpus)), _catalog(), "llm")


def test_a_made_up_vendor_is_picked_through_the_one_judge(acme):
    d = _pick(AcmeTpu(0, "Acme v4", "v4"), AcmeTpu(1, "Acme v5e", "v5e"))
    assert d.backend == "acme" and d.reason.startswith("first supported accelerator backend")
    assert (d.device.type, d.device.family, d.device.index, d.device.name) == ("acme_tpu", "v5e", 1, "Acme v5e")
    acme_v = d.verdict("acme")
    assert [(dev.name, why) for dev, why in acme_v.passed_over] == [
        ("Acme v4", "Requires an Acme v5X TPU (found v4, Acme v4)")]
    assert d.to_dict()["device"] == {"type": "acme_tpu", "family": "v5e", "index": 1, "name": "Acme v5e"}


def test_a_made_up_vendor_falls_back_in_its_own_words(acme):
    d = _pick(AcmeTpu(0, "Acme v5p", "v5p", usable=False))
    assert d.backend == "cpu" and d.device.type == "cpu"
    assert d.verdict("acme").reason == "Acme v5p: this process cannot open /dev/acme0, so acme cannot use it"
    assert _pick(AcmeTpu(0, "Acme ?", None)).verdict("acme").reason == \
        "Acme ?: its generation is unknown, so no acme build can be matched to it"
    assert _pick().verdict("acme").reason == "No Acme TPU found"  # the kind's words, from its table entry


def test_alike_devices_of_a_new_kind_are_judged_once(acme, monkeypatch):
    seen = []
    judge = engine.match.judge

    def counting(m, cat, recipe, row, u, *rest):
        seen.append(u.index)
        return judge(m, cat, recipe, row, u, *rest)

    monkeypatch.setattr(engine.match, "judge", counting)
    d = _pick(*(AcmeTpu(i, "Acme v5e", "v5e") for i in range(8)))
    assert [dev.index for dev in d.verdict("acme").devices] == list(range(8))
    assert seen == [0]


def test_a_catalog_naming_a_kind_nobody_registered_is_refused(acme):
    with pytest.raises(catalog.InputError, match="unknown device type 'zeta_npu'"):
        catalog.parse({"schema_version": 1, "name": "t", "recipes": {"llm": {"rows": [
            {"backend": "z", "os": ["linux"], "devices": {"zeta_npu": []}}]}}})


def test_a_kind_without_words_of_its_own_is_still_passed_over_with_a_reason(acme, monkeypatch):
    # a mapping that gives no sentences: the judge says the plain ones, never an empty reason
    monkeypatch.setitem(devices.MAPPINGS, "acme_tpu", devices.Mapping(
        lambda m, p: [engine.Unit("acme_tpu", t, t.generation, name=t.name, key=(t.generation,)) for t in p.acme_tpus]))
    assert _pick(AcmeTpu(0, "Acme v4", "v4")).verdict("acme").reason == "Acme v4: acme is built for v5X, not v4"
    assert _pick(AcmeTpu(0, "Acme ?", None)).verdict("acme").reason == \
        "Acme ?: its family is unknown, so no acme build can be matched to it (acme needs v5X)"
