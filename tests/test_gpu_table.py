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
    ("nvidia_gpu", "NVIDIA RTX 4000 Ada Generation", "RTX 4000 Ada"),
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
    # NVIDIA names its Ada workstation laptops "RTX 2000 Ada Generation Laptop GPU" (8 GB, not the 16 GB card)
    ("nvidia_gpu", "NVIDIA RTX 2000 Ada Generation Laptop GPU"),
    ("nvidia_gpu", "NVIDIA RTX 4000 SFF Ada Generation"),  # 280 GB/s: not the RTX 4000 Ada's 360
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


def test_a_part_sold_under_another_parts_name_is_told_by_its_memory():
    """NVIDIA sells an RTX 3080 of 10 GB (320-bit, 760 GB/s) and one of 12 GB (384-bit, 912 GB/s); NVML names
    both "NVIDIA GeForce RTX 3080" (NVIDIA's RTX 3080 / 3080 Ti specifications).  A 12 GB card's bound is
    its own, and published runs of the 10 GB part are not its own model's."""
    name = "NVIDIA GeForce RTX 3080"
    twelve = row_for("nvidia_gpu", name, 12 * GiB, exact=True)
    assert (twelve["match"], twelve["gbps"]) == ("RTX 3080 12GB", 912)
    assert (row_for("nvidia_gpu", name, 10 * GiB)["match"], row_for("nvidia_gpu", name, 10 * GiB)["gbps"]) == ("RTX 3080", 760)
    assert row_for("nvidia_gpu", name, exact=True)["gbps"] == 760  # a source naming no memory: the row's own part
    assert row_for("nvidia_gpu", name)["gbps"] == 912  # a bound without the memory: the fastest part
    # a source that names the part is of it, with or without the memory
    assert row_for("nvidia_gpu", "NVIDIA GeForce RTX 3080 12GB", exact=True)["match"] == "RTX 3080 12GB"
    from selector.bandwidth import by_match

    assert by_match()["RTX 3080 12GB"][1]["gbps"] == 912 and by_match()["RTX 3080"][1]["gbps"] == 760


@pytest.mark.parametrize("name,memory_gib,row", [
    # names as probes/tables/amd_pci.json gives them (libdrm's amdgpu.ids), told apart by memory where
    # AMD's specifications differ: RX 7800 XT 16 GB, RX 7700 XT 12 GB; RX 7600 8 GB, RX 7600 XT 16 GB
    ("AMD Radeon RX 7800 XT/7700 XT", 16, "RX 7800 XT"),
    ("AMD Radeon RX 7800 XT/7700 XT", 12, "RX 7700 XT"),
    ("AMD Radeon RX 7600/7600 XT", 8, "RX 7600"),
    ("AMD Radeon RX 7600/7600 XT", 16, "RX 7600 XT"),
    # RX 6800, 6800 XT and 6900 XT all have 16 GB: which card it is cannot be told
    ("AMD Radeon RX 6800/6800 XT/6900 XT", 16, None),
    # the table has no plain RX 9060 or RX 9070 GRE: the name may be of the card it lacks
    ("AMD Radeon RX 9060 XT/9060", 16, None),
    ("AMD Radeon RX 9070 XT/9070/9070 GRE", 16, None),
])
def test_a_name_the_pci_table_gives_several_cards_is_each_of_them(name, memory_gib, row):
    got = row_for("amd_gpu", name, memory_gib * GiB, exact=True)
    assert (got and got["match"]) == row
    assert row_for("amd_gpu", name, memory_gib * GiB) is not None  # a bound still has a row: the fastest


def test_lunar_lake_names_reach_their_memory_system():
    # the probe's name for Lunar Lake's iGPU and the driver's (LPDDR5X-8533 on a 128-bit package bus)
    assert row_for("intel_gpu", "Intel Arc Graphics 130V/140V (Lunar Lake iGPU)")["gbps"] == 136.5
    assert row_for("intel_gpu", "Intel(R) Arc(TM) 140V GPU (16GB)")["match"] == "140V"


@pytest.mark.parametrize("kind,name,shared", [
    ("metal", "Apple M3 Max", True), ("nvidia_gpu", "NVIDIA GB10", True), ("amd_gpu", "AMD Radeon 8060S", True),
    ("intel_gpu", "Intel(R) Arc(TM) 140V GPU (16GB)", True),
    ("nvidia_gpu", "NVIDIA GeForce RTX 4090", False), ("amd_gpu", "AMD Radeon RX 7900 XTX", False),
    ("intel_gpu", "Intel Arc Pro B70", False),
])
def test_which_gpus_read_the_machines_own_memory(kind, name, shared):
    # the published runs of the two kinds are pooled apart (an iGPU reaches more of its bound than a card)
    from selector.bandwidth import shares_memory

    assert shares_memory(kind, row_for(kind, name)) is shared


@pytest.mark.parametrize("kind,name,memory", [
    ("nvidia_gpu", "NVIDIA H100 80GB HBM3", "hbm"), ("nvidia_gpu", "NVIDIA A100 80GB PCIe", "hbm"),
    ("amd_gpu", "AMD Instinct MI50", "hbm"), ("nvidia_gpu", "NVIDIA GeForce RTX 4090", "own"),
    ("nvidia_gpu", "NVIDIA L40S", "own"), ("amd_gpu", "AMD Radeon 8060S", "shared"), ("metal", "Apple M3 Max", "shared"),
])
def test_which_cards_have_stacked_memory(kind, name, memory):
    # the estimate pools HBM cards apart from GDDR ones: llama.cpp reads a smaller share of HBM's bound
    from selector.bandwidth import memory_kind

    assert memory_kind(kind, row_for(kind, name)) == memory


def test_a_name_with_an_empty_part_is_each_of_the_rest():
    assert row_for("amd_gpu", "AMD Radeon RX 7800 XT//7700 XT/", 12 * GiB, exact=True)["match"] == "RX 7700 XT"
