"""The GPU table's one naming rule (selector/bandwidth.py ``row_for``): which model of GPU a device
name is.  The speed bound, the published evidence and a described machine all ask it, so a wrong
answer files an M5 Max's runs under a plain M5 or bounds a 7900 XT at a 7900 XTX's bandwidth."""

from __future__ import annotations

import pytest

from selector.bandwidth import row_for

GiB = 1 << 30


@pytest.mark.parametrize("kind,name,row", [
    # as the drivers print them (nvidia-smi, KFD/amdgpu marketing names, Metal's chip)
    ("nvidia_gpu", "NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("nvidia_gpu", "NVIDIA GeForce RTX 4090 Laptop GPU", "RTX 4090 Laptop"),  # the longest name it holds
    ("nvidia_gpu", "NVIDIA GeForce RTX 4080 SUPER", "RTX 4080 SUPER"),
    ("nvidia_gpu", "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "RTX PRO 6000"),
    ("amd_gpu", "AMD Radeon RX 9060 XT", "RX 9060 XT"),
    ("amd_gpu", "AMD Radeon(TM) 890M Graphics", "Radeon 890M"),  # trademark signs are not words
    ("amd_gpu", "AMD Radeon (TM) Pro VII", "Radeon Pro VII"),  # not the Radeon VII
    ("metal", "Apple M3 Max", "M3 Max"),
])
def test_a_device_name_is_the_model_its_maker_sells(kind, name, row):
    assert row_for(kind, name, exact=True)["match"] == row


@pytest.mark.parametrize("kind,name", [
    # a variant the table has no row of is not its base card (Apple: M5 153 GB/s; the M5 Max is another
    # memory system altogether)
    ("metal", "Apple M5 Max"),
    ("metal", "Apple M5 Pro"),
    ("nvidia_gpu", "NVIDIA GeForce RTX 4090 Ti"),
    ("amd_gpu", "AMD Radeon RX 6700"),  # the 10 GB RX 6700 is not the RX 6700 XT
    ("nvidia_gpu", "NVIDIA GeForce RTX 40900"),  # not a whole word
])
def test_a_variant_the_table_lacks_is_no_row_not_its_base_card(kind, name):
    assert row_for(kind, name) is None


def test_a_name_several_cards_share_is_told_apart_by_memory_or_not_at_all():
    # the PCI id table names Navi 31 "RX 7900 XTX/XT/GRE": 24, 20 and 16 GB (AMD's specifications)
    name = "AMD Radeon RX 7900 XTX/XT/GRE"
    assert row_for("amd_gpu", name, 20 * GiB, exact=True)["match"] == "RX 7900 XT"
    assert row_for("amd_gpu", name, 16 * GiB, exact=True)["match"] == "RX 7900 GRE"
    assert row_for("amd_gpu", name, exact=True) is None  # published runs of one card speak for none of them
    assert row_for("amd_gpu", name)["gbps"] == 960  # a bound: the fastest of them (the XTX's 960 GB/s)
