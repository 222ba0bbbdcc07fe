"""The issue's 'Done means' for deciding, run through the real command line on captured machines.
Expected answers come from the Lemonade support matrix, not from the tool."""

import json
import os

import pytest

from conftest import machine

STRIX = machine("linux-ubuntu24.04-strix-halo")
MI355X = machine("linux-ubuntu24.04-8x-mi355x")
RX7900 = machine("linux-ubuntu24.04-7950x-rx7900xtx")
GTX1080 = machine("linux-debian12-gtx1080")
PHOENIX = machine("linux-ubuntu24.04-phoenix-laptop")
KRACKAN = machine("linux-ubuntu24.04-krackan-laptop-no-npu-driver")
SPARK = machine("linux-dgxos7-dgx-spark-gb10")
OVERRIDE = machine("linux-ubuntu22.04-rx6700xt-override")


def pick(cli, root, *args, env=None):
    r = cli("--root", root, *args, "--json", env=env)
    return r, (r.json() if r.out.strip() else None)


def test_this_machine_picks_a_backend_that_runs_on_the_cpu(cli):
    r = cli("llamacpp", "--json")
    assert r.rc == 0, r.err
    d = r.json()["recipes"]["llamacpp"]
    if not r.json()["host"]["arch"] in ("x86_64", "arm64"):
        pytest.skip("not an x86_64/arm64 machine")
    prof = cli("probe", "--json").json()
    if not prof["amd_gpus"] and not prof["nvidia_gpus"]:
        assert d["device"]["type"] == "cpu"
        human = cli("llamacpp")
        assert human.rc == 0 and "CPU" in human.out


def test_strix_halo_picks(cli):
    r, doc = pick(cli, STRIX, "llamacpp", "flm", "whispercpp", "vllm")
    assert r.rc == 0, r.err
    rec = doc["recipes"]
    assert rec["llamacpp"]["backend"] == "vulkan"
    assert rec["llamacpp"]["device"]["type"] == "amd_gpu" and rec["llamacpp"]["device"]["family"] == "gfx1151"
    assert rec["llamacpp"]["run_args"] == "--llamacpp vulkan"
    assert rec["flm"]["backend"] == "npu" and rec["flm"]["device"]["family"] == "XDNA2"
    assert rec["whispercpp"]["backend"] == "vulkan"
    assert rec["vllm"]["backend"] == "rocm"


def test_strix_halo_container_recipe_needs_docker(cli):
    r, doc = pick(cli, STRIX, "ds4")
    assert r.rc == 3
    assert doc["recipes"]["ds4"]["backend"] is None
    assert doc["recipes"]["ds4"]["backends"][0]["reason"] == "needs docker or podman"


def test_installed_rocm_wins_over_installable_vulkan(cli, tmp_path):
    from selector.catalog import load_pins

    d = tmp_path / "bin" / "llamacpp" / "rocm-stable"
    d.mkdir(parents=True)
    (d / "version.txt").write_text(load_pins("lemonade")["llamacpp"]["rocm-stable"] + "\n")
    (d / "llama-server").write_text("")  # installed = the binary is there (as Lemonade checks)
    r, doc = pick(cli, STRIX, "llamacpp", "--cache-dir", str(tmp_path))
    rec = doc["recipes"]["llamacpp"]
    assert rec["backend"] == "rocm" and rec["state"] == "installed"
    assert "installed" in rec["reason"]
    # a stale version is still installed (update_required) and still wins
    (d / "version.txt").write_text("b1\n")
    rec = pick(cli, STRIX, "llamacpp", "--cache-dir", str(tmp_path))[1]["recipes"]["llamacpp"]
    assert rec["backend"] == "rocm" and rec["state"] == "update_required"


def test_mi355x_rocm_on_gfx950_and_the_lemonade_policy(cli):
    r, doc = pick(cli, MI355X, "llamacpp")
    rec = doc["recipes"]["llamacpp"]
    assert r.rc == 0 and rec["backend"] == "rocm" and rec["device"]["family"] == "gfx950"
    vk = next(b for b in rec["backends"] if b["name"] == "vulkan")
    assert vk["supported"] and vk["device"]["type"] == "cpu"  # no Vulkan driver on Instinct
    assert any("lemonade would pick vulkan" in n for n in rec["notes"])
    lem = pick(cli, MI355X, "llamacpp", "--policy", "lemonade")[1]["recipes"]["llamacpp"]
    assert lem["backend"] == "vulkan"


def test_mi355x_check_and_the_nightly_gate(cli):
    assert cli("--root", MI355X, "check", "llamacpp", "rocm").rc == 0
    r = cli("--root", MI355X, "check", "llamacpp", "rocm", "--channel", "nightly")
    assert r.rc == 3
    assert "gfx950" in r.err and "stable channel" in r.err
    r, doc = pick(cli, MI355X, "llamacpp", "--channel", "nightly")
    rec = doc["recipes"]["llamacpp"]
    assert rec["device"]["type"] == "cpu"
    assert any("runs on the CPU" in w for w in rec["warnings"])
    # the environment sets the channel too; the flag beats it
    assert cli("--root", MI355X, "check", "llamacpp", "rocm", env={"PICK_BACKEND_CHANNEL": "nightly"}).rc == 3
    assert cli("--root", MI355X, "check", "llamacpp", "rocm", "--channel", "stable",
               env={"PICK_BACKEND_CHANNEL": "nightly"}).rc == 0


def test_7900xtx_is_chosen_over_the_igpu_and_visibility_hides_it(cli, tmp_path):
    r = cli("--root", RX7900, "check", "llamacpp", "rocm", "--json")
    assert r.rc == 0
    assert r.json()["device"]["family"] == "gfx1100"
    # hide the discrete GPU (KFD index 0) from HIP: the iGPU (gfx1036) is what remains
    hidden = _with_env(tmp_path, RX7900, {"HIP_VISIBLE_DEVICES": "1"})
    r = cli("--root", hidden, "check", "llamacpp", "rocm", "--json")
    # gfx1036 is inside the gfx103X family of the rocm row: the iGPU is now the device
    assert r.rc == 0 and r.json()["device"]["family"] == "gfx1036"
    # ROCR_VISIBLE_DEVICES selects first; HIP indexes what is left
    both = _with_env(tmp_path / "b", RX7900, {"ROCR_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0"})
    assert cli("--root", both, "check", "llamacpp", "rocm", "--json").json()["device"]["family"] == "gfx1036"
    none = _with_env(tmp_path / "n", RX7900, {"HIP_VISIBLE_DEVICES": "garbage"})
    r = cli("--root", none, "check", "llamacpp", "rocm", "--json")
    assert r.rc == 3 and "No visible AMD GPU" in r.json()["reason"]
    # HIP_VISIBLE_DEVICES is HIP's alone: RADV ignores it, so Vulkan still runs on the discrete GPU
    r = cli("--root", hidden, "check", "llamacpp", "vulkan", "--json")
    assert r.rc == 0 and r.json()["device"]["family"] == "gfx1100" and r.json()["device"]["type"] == "amd_gpu"
    r = cli("--root", none, "check", "llamacpp", "vulkan", "--json")
    assert r.rc == 0 and r.json()["device"]["family"] == "gfx1100"
    # an empty value is unset for ROCr and HIP (their flags default to ""): every GPU stays visible
    empty = _with_env(tmp_path / "e", RX7900, {"HIP_VISIBLE_DEVICES": ""})
    assert cli("--root", empty, "check", "llamacpp", "rocm", "--json").json()["device"]["family"] == "gfx1100"


def _with_env(tmp_path, root, env):
    import json
    import shutil

    dest = tmp_path / os.path.basename(root)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(root, dest, symlinks=True)
    data = json.loads((dest / "capture.json").read_text())
    data.setdefault("env", {}).update(env)
    (dest / "capture.json").write_text(json.dumps(data))
    return str(dest)


def test_override_is_judged_and_reported(cli, tmp_path):
    r, doc = pick(cli, OVERRIDE, "llamacpp", "--backend", "rocm")
    rocm = doc["recipes"]["llamacpp"]["backends"][4]
    assert rocm["name"] == "rocm" and rocm["supported"] and rocm["device"]["family"] == "gfx1030"
    assert any("HSA_OVERRIDE_GFX_VERSION" in n for n in rocm["notes"])
    # an override across a major version (gfx1031 as gfx906) is refused by ROCm: unsupported, and said
    odd = _with_env(tmp_path, OVERRIDE, {"HSA_OVERRIDE_GFX_VERSION": "9.0.6"})
    r = cli("--root", odd, "check", "llamacpp", "rocm")
    assert r.rc == 3 and "HSA_OVERRIDE_GFX_VERSION=9.0.6" in r.err and "as gfx906, across a major version" in r.err
    # within the major version, a target the row lacks is judged as such
    odd = _with_env(tmp_path / "b", OVERRIDE, {"HSA_OVERRIDE_GFX_VERSION": "10.1.0"})
    r = cli("--root", odd, "check", "llamacpp", "rocm")
    assert r.rc == 3 and "gfx1010" in r.err and "HSA_OVERRIDE_GFX_VERSION makes gfx1031 run as gfx1010" in r.err


def test_gtx1080_cuda_names_sm61_and_trellis_picks_cuda12(cli):
    r, doc = pick(cli, GTX1080, "llamacpp", "trellis")
    cuda = next(b for b in doc["recipes"]["llamacpp"]["backends"] if b["name"] == "cuda")
    assert not cuda["supported"] and "sm_61" in cuda["reason"]
    assert doc["recipes"]["trellis"]["backend"] == "cuda12"


def test_npu_reasons_name_the_generation_and_the_driver(cli):
    r = cli("--root", PHOENIX, "flm")
    assert r.rc == 3 and "XDNA1" in r.out
    r, doc = pick(cli, PHOENIX, "flm")
    assert doc["recipes"]["flm"]["backends"][0]["reason"] == "Requires an AMD XDNA2 NPU (found XDNA1 Phoenix)"
    r, doc = pick(cli, KRACKAN, "flm")
    assert r.rc == 3
    assert "driver is not loaded" in doc["recipes"]["flm"]["backends"][0]["reason"]


def test_dgx_spark(cli):
    r, doc = pick(cli, SPARK, "llamacpp")
    assert r.rc == 0 and doc["recipes"]["llamacpp"]["backend"] == "cuda"
    assert doc["recipes"]["llamacpp"]["device"]["family"] == "sm_121"
    r, doc = pick(cli, SPARK, "whispercpp")
    assert r.rc == 3 and doc["recipes"]["whispercpp"]["backend"] is None
    assert all(b["reason"] for b in doc["recipes"]["whispercpp"]["backends"])


def test_pinned_backend_is_chosen_even_when_unsupported(cli, tmp_path):
    r, doc = pick(cli, STRIX, "llamacpp", "--backend", "cuda")
    assert r.rc == 3
    rec = doc["recipes"]["llamacpp"]
    assert rec["backend"] == "cuda" and rec["pinned"] and "not supported" in rec["reason"]
    cfg = tmp_path / "config.json"
    cfg.write_text('{"llamacpp": {"backend": "rocm"}, "rocm_channel": "stable"}')
    r, doc = pick(cli, STRIX, "llamacpp", "--config", str(cfg))
    assert r.rc == 0 and doc["recipes"]["llamacpp"]["backend"] == "rocm" and doc["recipes"]["llamacpp"]["pinned"]
    # "auto" is not a pin
    cfg.write_text('{"llamacpp": {"backend": "auto"}}')
    assert pick(cli, STRIX, "llamacpp", "--config", str(cfg))[1]["recipes"]["llamacpp"]["backend"] == "vulkan"


@pytest.mark.parametrize("text,needle", [
    ('{"rocm_channel": 3}', "rocm_channel"),
    ('{"llamacpp": {"prefer_system": "yes"}}', "llamacpp.prefer_system"),
    ('{"llamacpp": []}', "llamacpp"),
    ('not json', "not valid JSON"),
])
def test_bad_config_exits_5_naming_the_key(cli, tmp_path, text, needle):
    cfg = tmp_path / "config.json"
    cfg.write_text(text)
    r = cli("--root", STRIX, "llamacpp", "--config", str(cfg))
    assert r.rc == 5 and needle in r.err and "config.json" in r.err and "Traceback" not in r.err


def test_unknown_config_keys_are_warnings(cli, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"llamacpp": {"backend": "vulkan", "llamacpp_bin": "latest"}, "telemetry": true}')
    r, doc = pick(cli, STRIX, "llamacpp", env={"PICK_BACKEND_CONFIG": str(cfg)})
    assert r.rc == 0
    msgs = [w["message"] for w in doc["warnings"]]
    assert any("llamacpp.llamacpp_bin" in m for m in msgs) and any("telemetry" in m for m in msgs)


def test_prefer_system_picks_llama_server_on_path(cli):
    pi = machine("linux-raspberrypi-pi5-arm64")
    assert pick(cli, pi, "llamacpp")[1]["recipes"]["llamacpp"]["backend"] == "vulkan"
    rec = pick(cli, pi, "llamacpp", "--prefer-system")[1]["recipes"]["llamacpp"]
    assert rec["backend"] == "system"


@pytest.mark.parametrize("args,needle", [
    (["llamcpp"], "did you mean 'llamacpp'"),
    (["check", "llamacpp", "rcom"], "did you mean 'rocm'"),
    (["llamacpp", "--backend", "vulcan"], "did you mean 'vulkan'"),
    (["matrix", "whispercp"], "did you mean 'whispercpp'"),
])
def test_unknown_names_exit_2_with_the_closest_name(cli, args, needle):
    r = cli("--root", STRIX, *args)
    assert r.rc == 2 and needle in r.err


def test_saved_profile_is_evaluated_like_the_machine(cli, tmp_path):
    prof = cli("--root", STRIX, "probe", "--json")
    path = tmp_path / "strix.json"
    path.write_text(prof.out)
    a = cli("--root", STRIX, "llamacpp", "flm", "--json").json()
    b = cli("--profile", str(path), "llamacpp", "flm", "--json").json()
    assert a["recipes"] == b["recipes"]
    assert cli("--profile", str(path), "check", "flm", "npu").rc == 0


@pytest.mark.parametrize("text,needle", [
    ("{", "not valid JSON"),
    ('{"schema_version": 9}', "schema_version"),
    ('{"schema_version": 1, "amd_gpus": [{"gfx": 11}]}', "amd_gpus[0].gfx"),
    ('{"schema_version": 1, "os": "linux"}', "os"),
])
def test_bad_profile_exits_5_naming_the_field(cli, tmp_path, text, needle):
    path = tmp_path / "p.json"
    path.write_text(text)
    r = cli("--profile", str(path), "llamacpp")
    assert r.rc == 5 and needle in r.err and "p.json" in r.err and "Traceback" not in r.err


def test_matrix_recipes_and_here(cli):
    r = cli("matrix", "llamacpp", "--json")
    rows = r.json()["recipes"]["llamacpp"]["rows"]
    assert [x["backend"] for x in rows] == ["system", "metal", "cuda", "vulkan", "rocm", "cpu", "nathanw", "halobox"]
    here = cli("--root", MI355X, "matrix", "llamacpp", "--here", "--json").json()
    rocm = next(x for x in here["recipes"]["llamacpp"]["rows"] if x["backend"] == "rocm")
    assert rocm["here"]["supported"] is True
    r = cli("recipes")
    assert r.rc == 0 and "llamacpp" in r.out and "Whisper.cpp" in r.out
    assert cli("--root", MI355X, "matrix", "--here").rc == 0


def test_catalog_file_can_replace_the_bundled_one(cli, tmp_path):
    import json

    from selector.catalog import resolve_path

    data = json.load(open(resolve_path("lemonade")))
    data["recipes"]["llamacpp"]["rows"] = [r for r in data["recipes"]["llamacpp"]["rows"] if r["backend"] != "vulkan"]
    path = tmp_path / "newer.json"
    path.write_text(json.dumps(data))
    rec = pick(cli, STRIX, "llamacpp", "--catalog", str(path))[1]["recipes"]["llamacpp"]
    assert rec["backend"] == "rocm"
    data["recipes"]["llamacpp"]["rows"][0]["devices"] = {"gpu": []}
    path.write_text(json.dumps(data))
    r = cli("--root", STRIX, "llamacpp", "--catalog", str(path))
    assert r.rc == 5 and "recipes.llamacpp.rows[0].devices" in r.err and "gpu" in r.err


def test_arm64_gets_no_pick_that_has_no_arm64_build(cli):
    # DGX Spark (arm64, GB10): acestep's cuda/vulkan/rocm builds are published for x86_64 only
    # (pwilkin/acestep.cpp assets *-linux-x64.tar.gz, selector/catalogs/lemonade-assets.json), so
    # "cuda [installable]" was a pick that `install` then refused ("no install rule ... linux/arm64")
    spark = machine("linux-dgxos7-dgx-spark-gb10")
    r, doc = pick(cli, spark, "acestep")
    rec = doc["recipes"]["acestep"]
    assert r.rc == 3 and rec["backend"] is None
    cuda = next(b for b in rec["backends"] if b["name"] == "cuda")
    assert cuda["reason"] == "the image is built for x86_64 only (found arm64)"
    assert cli("--root", spark, "check", "acestep", "cuda").rc == 3
    # llamacpp's cuda build has an arm64 asset: still picked there
    assert pick(cli, spark, "llamacpp")[1]["recipes"]["llamacpp"]["backend"] == "cuda"


def test_names_in_a_config_and_the_environment_match_in_any_case(cli, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"llamacpp": {"backend": "ROCM"}, "whispercpp": {"backend": "Vulkan"},
                               "rocm_channel": "Nightly"}))
    r = cli("--root", STRIX, "llamacpp", "whispercpp", "--config", str(cfg), "--json",
            env={"PICK_BACKEND_CHANNEL": "NIGHTLY", "PICK_BACKEND_POLICY": "Lemonade"})
    assert r.rc == 0, r.err
    doc = r.json()
    assert doc["settings"]["channel"] == "nightly" and doc["settings"]["policy"] == "lemonade"
    assert doc["recipes"]["llamacpp"]["backend"] == "rocm" and doc["recipes"]["llamacpp"]["pinned"]
    # a pin that is no backend: an invalid config (exit 5), the file, the field and the closest name
    cfg.write_text(json.dumps({"whispercpp": {"backend": "vulkn"}}))
    r = cli("--root", STRIX, "whispercpp", "--config", str(cfg))
    assert r.rc == 5 and f"{cfg}: key 'whispercpp.backend': unknown backend of whispercpp 'vulkn'; did you mean " \
        "'vulkan'?" in r.err, r.err


def test_the_no_driver_warning_is_hidden_by_its_code_not_by_its_words(cli, tmp_path):
    # "no NVIDIA driver" matters only on a machine with an NVIDIA card: the pick leaves it to `probe`
    # elsewhere, and knows it by the code the probe gave it, so rewording the warning changes nothing
    cpu = machine("linux-debian12-x86_64-cpu-only")
    prof = cli("probe", "--root", cpu, "--json").json()
    (w,) = [w for w in prof["warnings"] if w["probe"] == "nvidia"]
    assert w["code"] == "no_nvidia_driver"
    assert "NVML library not found" not in cli("llamacpp", "--root", cpu).out
    saved = tmp_path / "p.json"
    w["message"] = "the NVML library is missing"  # other words, the same fact
    saved.write_text(json.dumps(prof))
    assert "NVML library is missing" not in cli("llamacpp", "--profile", str(saved)).out
    del w["code"]  # the same words without the fact: a warning like any other, shown
    w["message"] = "No NVIDIA driver is installed (NVML library not found)"
    saved.write_text(json.dumps(prof))
    assert "nvidia: No NVIDIA driver is installed" in cli("llamacpp", "--profile", str(saved)).out
