"""A machine described in words (--gpu, --vram, --ram): judged with the tables the probe uses, and
said to be described, not probed."""

from __future__ import annotations

import pytest

import gguf_models as gm
from conftest import machine

GiB = 1 << 30


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    return gm.write(str(tmp_path_factory.mktemp("described") / "Qwen3-30B-A3B-Q4_K_M.gguf"), "qwen3-30b-a3b")


def test_two_cards_you_do_not_have_are_picked_with_the_tables(cli):
    r = cli("llamacpp", "--gpu", "RTX 4090", "--gpu", "GeForce RTX 4090", "--json")
    assert r.rc == 0, r.err
    d = r.json()
    pick = d["recipes"]["llamacpp"]
    assert pick["backend"] == "cuda" and pick["device"]["family"] == "sm_89"
    cuda = next(b for b in pick["backends"] if b["name"] == "cuda")
    assert len(cuda["devices"]) == 2 and all(x["memory_bytes"] == 24 * GiB for x in cuda["devices"])
    said = [w["message"] for w in d["warnings"] if w.get("probe") == "described"]
    assert said and "a described machine, not a probed one: 2x RTX 4090 (memory from the tables)" in said[0]
    assert not any(w.get("probe") == "nvidia" for w in d["warnings"])  # the probe's words were of other GPUs


def test_an_amd_card_takes_its_gfx_target_from_the_tables(cli):
    r = cli("--root", machine("linux-debian12-x86_64-cpu-only"), "llamacpp", "--gpu", "Radeon RX 7900 XTX", "--json")
    assert r.rc == 0, r.err
    rocm = next(b for b in r.json()["recipes"]["llamacpp"]["backends"] if b["name"] == "rocm")
    assert rocm["supported"] and rocm["device"]["family"] == "gfx1100"


def test_a_plan_for_a_described_card_says_so_and_holds_its_memory(cli, moe, tmp_path):
    r = cli("plan", "llamacpp", "--model", moe, "--gpu", "RTX 4090", "--ram", "64G", "--ctx-size", "40960",
            "--parallel", "2", "--root", machine("linux-ubuntu24.04-rtx4090"), "--cache-dir", str(tmp_path), "--json")
    assert r.rc == 0, r.err
    p = r.json()
    assert p["described"].startswith("a described machine, not a probed one: RTX 4090 (memory from the tables), "
                                     "64.0 GiB of system memory")
    assert p["fit"]["status"] == "experts" and p["fit"]["devices"][0]["budget_bytes"] < 24 * GiB
    small = cli("plan", "llamacpp", "--model", moe, "--gpu", "RTX 4090", "--vram", "8G", "--ctx-size", "4096",
                "--root", machine("linux-ubuntu24.04-rtx4090"), "--cache-dir", str(tmp_path), "--json").json()
    assert small["fit"]["devices"][0]["budget_bytes"] < 8 * GiB < p["fit"]["devices"][0]["budget_bytes"]
    human = cli("plan", "llamacpp", "--model", moe, "--gpu", "RTX 4090", "--root", machine("linux-ubuntu24.04-rtx4090"),
                "--cache-dir", str(tmp_path))
    assert "a described machine, not a probed one: RTX 4090" in human.out


@pytest.mark.parametrize("args,says", [
    (["--gpu", "RTX 4900"], "--gpu 'RTX 4900': no GPU of that name in the tables; near: RTX 4090"),
    (["--gpu", "RTX 4090 Ti"], "--gpu 'RTX 4090 Ti': no GPU of that name"),  # more words: another card
    (["--gpu", "not an RTX 4090"], "no GPU of that name"),
    (["--gpu", "GB10"], "GB10 shares the machine's memory"),
    (["--gpu", "M3 Max"], "an Apple chip's GPU shares its memory"),
    (["--vram", "24G"], "--vram gives the memory of discrete GPUs, and this machine has none"),
    (["--gpu", "RTX 4090", "--vram", "8M"], "from 256M to 64T"),
    (["--gpu", "Radeon 8060S"], "shares the machine's memory"),
    (["--gpu", "RTX 5060 Ti"], "the tables do not say how much memory a RTX 5060 Ti has; add --vram SIZE"),
    (["--gpu", "RTX 4090", "--vram", "lots"], "--vram 'lots': a size such as 24G"),
    (["--ram", "0"], "--ram '0': a size such as 24G"),
])
def test_a_description_that_is_not_hardware_is_a_usage_error(cli, args, says):
    r = cli("llamacpp", *args)
    assert r.rc == 2 and says in r.err and "Traceback" not in r.err


def test_a_card_the_tables_size_not_can_be_given_its_memory(cli):
    r = cli("llamacpp", "--gpu", "RTX 5060 Ti", "--vram", "16G", "--json")
    assert r.rc == 0, r.err
    assert r.json()["recipes"]["llamacpp"]["device"]["memory_bytes"] == 16 * GiB


def test_models_judged_by_size_split_over_the_cards_the_build_serves(cli):
    two = cli("models", "llamacpp", "--gpu", "RTX 3090", "--gpu", "RTX 3090", "--ram", "16G", "--json",
              "--cache-dir", "/nonexistent")
    one = cli("models", "llamacpp", "--gpu", "RTX 3090", "--ram", "16G", "--json", "--cache-dir", "/nonexistent")
    assert two.rc == one.rc == 0, two.err + one.err
    by2 = {m["name"]: m for m in two.json()["models"]}
    by1 = {m["name"]: m for m in one.json()["models"]}
    name = "Qwen3-Next-80B-A3B-Instruct-GGUF"  # 46.1 GB: more than a 24 GiB card, less than two
    assert by2[name]["status"] == "split" and by2[name]["fits"] and by2[name]["where"] == "split: VRAM"
    assert by1[name]["status"] == "no"  # 42.9 GiB: more than 23.5 of VRAM and 15 of system memory together
    more = cli("models", "llamacpp", "--gpu", "RTX 3090", "--ram", "32G", "--json", "--cache-dir", "/nonexistent")
    assert {m["name"]: m for m in more.json()["models"]}[name]["status"] == "partial"  # with 31 GiB, partly


@pytest.mark.parametrize("spelling", ["rtx4090", "GeForce RTX 4090", "NVIDIA GeForce RTX 4090", "rtx-4090"])
def test_a_card_is_found_however_its_maker_words_are_spelled(cli, spelling):
    r = cli("llamacpp", "--gpu", spelling, "--json")
    assert r.rc == 0, r.err
    assert r.json()["recipes"]["llamacpp"]["device"]["name"] == "NVIDIA RTX 4090"


def test_a_described_machine_is_never_run_but_its_cpu_is_this_machines(cli, moe, tmp_path):
    r = cli("plan", "llamacpp", "--model", moe, "--gpu", "RTX 4060", "--exec", "--cache-dir", str(tmp_path))
    assert r.rc == 2 and "--gpu/--vram/--ram plans for another one" in r.err
    # a described GPU keeps this machine's CPU and memory: weights in system memory are read at the
    # bandwidth measured here (once, then kept), not left without an estimate
    p = cli("plan", "llamacpp", "--model", moe, "--gpu", "RTX 4060", "--ctx-size", "8192",
            "--cache-dir", str(tmp_path), "--json")
    assert p.rc == 0, p.err
    assert p.json()["fit"]["status"] in ("partial", "experts")
    assert "measuring" in p.err and "measured here" in p.json()["speed_estimate"]["source"]
    again = cli("plan", "llamacpp", "--model", moe, "--gpu", "RTX 4060", "--ctx-size", "8192",
                "--cache-dir", str(tmp_path), "--json")
    assert "measuring" not in again.err and again.json()["speed_estimate"] == p.json()["speed_estimate"]


def test_a_split_gives_its_shares_in_the_order_the_engine_numbers_the_gpus(cli, moe):
    """--tensor-split's shares are read in the engine's device order: the GPUs by index (run_env lists
    them so; a CUDA split also sets CUDA_DEVICE_ORDER=PCI_BUS_ID, since CUDA counts fastest first by
    default), not the best one first."""
    for gpus, runtime in ((["RX 7900 XT", "RX 7900 XTX"], "rocm"), (["RTX 3080", "RTX 4090"], "cuda")):
        args = [x for g in gpus for x in ("--gpu", g)]
        r = cli("plan", "llamacpp", "--model", moe, *args, "--backend", runtime, "--ctx-size", "40960",
                "--parallel", "2", "--json", "--cache-dir", "/nonexistent")
        assert r.rc == 0, r.err
        p = r.json()
        res = p["fit"]
        assert res["status"] == "split", res["status"]
        assert [d["name"].split()[-1] for d in res["devices"]] == [g.split()[-1] for g in gpus]
        budgets = [d["budget_bytes"] for d in res["devices"]]
        assert res["tensor_split"] == [round(b / sum(budgets), 2) for b in budgets]
        assert res["tensor_split"][0] < res["tensor_split"][1]  # the smaller card, index 0, first
        assert p["env"].get("CUDA_DEVICE_ORDER") == ("PCI_BUS_ID" if runtime == "cuda" else None)


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    return gm.write(str(tmp_path_factory.mktemp("described") / "Qwen3-14B-Q4_K_M.gguf"), "qwen3-14b")


def test_a_split_over_unequal_cards_reads_each_share_at_its_own_bandwidth(cli, dense, tmp_path):
    """Layer after layer, each GPU reads its own layers: the time per token is the sum of each share over
    its own bandwidth (AMD's specifications: RX 7900 XTX 960 GB/s, RX 7600 288 GB/s), not the whole
    model at the slower card's."""
    r = cli("plan", "llamacpp", "--model", dense, "--gpu", "RX 7900 XTX", "--gpu", "RX 7600", "--ctx-size", "4096",
            "--root", machine("linux-debian12-x86_64-cpu-only"), "--cache-dir", str(tmp_path), "--json")
    assert r.rc == 0, r.err
    p = r.json()
    assert p["fit"]["status"] == "split"
    w = {d["name"]: d["weights_bytes"] for d in p["fit"]["devices"]}
    big, small = w["AMD RX 7900 XTX"], w["AMD RX 7600"]
    assert big > small > 0
    e = p["speed_estimate"]
    per_token = e["bytes_per_token"]
    seconds = per_token * big / (big + small) / 960e9 + per_token * small / (big + small) / 288e9
    assert e["tokens_per_s"] == pytest.approx(1 / seconds, rel=1e-3)
    assert e["tokens_per_s"] > 1.5 * 288e9 / per_token  # not the whole model at the slower card's rate
    assert "960 GB/s on AMD RX 7900 XTX" in e["basis"] and "288 GB/s on AMD RX 7600" in e["basis"]


def test_a_plan_without_a_bandwidth_it_needs_says_why_it_has_no_speed(cli, moe, tmp_path):
    """The experts of most layers in system memory of a replayed machine whose CPU names no platform (a
    cloud VM's "Intel(R) Xeon(R) Processor", this repository's H200 capture): no estimate, and the plan says
    which bandwidth is missing."""
    args = ("plan", "llamacpp", "--model", moe, "--gpu", "RX 7600", "--ram", "64G", "--ctx-size", "4096",
            "--root", machine("linux-ubuntu24.04-h200-device-capture"), "--cache-dir", str(tmp_path))
    p = cli(*args, "--json").json()
    assert p["fit"]["status"] == "experts" and p["speed_estimate"] is None
    assert "system memory bandwidth of Intel(R) Xeon(R) Processor" in p["speed_missing"]
    assert "speed: no estimate (the system memory bandwidth of Intel(R) Xeon(R) Processor" in cli(*args).out
    # a VM's CPU that names its family (QEMU's "AMD EPYC-Milan Processor"): the family's platform, 8 channels of
    # DDR4-3200 (AMD's EPYC 7003 pages), said to be the family's and not this model's
    milan = cli(*args[:-4], "--root", machine("linux-debian12-x86_64-cpu-only"), "--cache-dir", str(tmp_path),
                "--json").json()
    assert milan["speed_missing"] is None and "8 channels of DDR4-3200 (EPYC 7003, Milan)" in milan["speed_estimate"]["basis"]
    assert "204.8 GB/s" in milan["speed_estimate"]["basis"] and "platform family's peak" in milan["speed_estimate"]["basis"]
    # where it has what it needs, nothing is missing
    fits = cli("plan", "llamacpp", "--model", moe, "--gpu", "RX 7900 XTX", "--gpu", "RX 7900 XTX", "--ctx-size", "4096",
               "--root", machine("linux-debian12-x86_64-cpu-only"), "--cache-dir", str(tmp_path), "--json").json()
    assert fits["speed_estimate"] and fits["speed_missing"] is None


def test_a_description_is_of_one_machine_not_of_a_fleet(cli, tmp_path):
    prof = cli("--root", machine("linux-ubuntu24.04-rtx4090"), "probe", "--json").out
    one = tmp_path / "one.jsonl"
    one.write_text(prof.replace("\n", "") + "\n")
    many = tmp_path / "fleet.jsonl"
    many.write_text(one.read_text() * 2)
    r = cli("pick", "llamacpp", "--profile", str(many), "--gpu", "RX 7900 XTX", "--json")
    assert r.rc == 2 and "describe one machine" in r.err and str(many) in r.err
    # one profile in the file: the description changes it, as it changes a saved profile
    r = cli("pick", "llamacpp", "--profile", str(one), "--gpu", "RX 7900 XTX")
    assert r.rc == 0 and "vulkan on AMD GPU (gfx1100): AMD RX 7900 XTX" in r.out, r.out
    assert "NVIDIA" not in r.out.split("\n\n")[1].splitlines()[0]


@pytest.mark.parametrize("fixture", ["macos14-m3max", "macos14-intel"])
def test_a_card_is_not_described_into_a_mac(cli, fixture, tmp_path):
    # the Mac's builds are Metal's and the CPU's: a plan "on an RTX 4090" there would be the M3 Max's
    for args in (("llamacpp",), ("plan", "llamacpp", "--model", str(tmp_path / "m.gguf"))):
        r = cli("--root", machine(fixture), *args, "--gpu", "RTX 4090")
        assert r.rc == 2 and "this machine is a Mac" in r.err and "Traceback" not in r.err


def test_less_vram_on_a_probed_card_does_not_make_it_another_card(cli, dense, tmp_path):
    """The probe names Navi 31 'RX 7900 XTX/XT/GRE' and reads 24 GiB: the XTX (960 GB/s). Asked what 16 GiB
    of it would hold, it stays the XTX, not the 16 GB GRE (576 GB/s)."""
    r = cli("--root", machine("linux-ubuntu24.04-7950x-rx7900xtx"), "plan", "llamacpp", "--model", dense,
            "--vram", "16G", "--ctx-size", "4096", "--cache-dir", str(tmp_path), "--json")
    assert r.rc == 0, r.err
    p = r.json()
    assert p["fit"]["devices"][0]["budget_bytes"] < 16 * GiB
    assert p["speed_estimate"]["basis"].startswith("960 GB/s")
