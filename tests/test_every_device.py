"""Every device counts: a row is judged against every visible device of its types; the verdict names
the best device that satisfies it, lists every satisfying one, explains every device passed over,
and the pick says how to make the engine use the chosen device(s) (run_env).

The machines are saved Profiles (``--profile``), the form a fleet collects, run through the real
CLI.  Their devices are the ones of the issue's real machines; expected answers are worked out from
the Lemonade matrix (selector/catalogs/lemonade.json rows quoted in each test).  The same machines as
sysfs captures live in fixtures/machines/ (see test_fixtures.py).
"""

import json

import pytest

GIB = 1 << 30


def amd(index, gfx, name, vram_gib, integrated=False, **kw):
    g = {"index": index, "name": name, "gfx": gfx, "gfx_effective": kw.pop("eff", gfx), "integrated": integrated,
         "vram_bytes": int(vram_gib * GIB), "visible": True, "source": "kfd", "hip_index": index,
         "pci": {"vendor": "0x1002", "device": kw.pop("device", "0x0000"), "bus_id": kw.pop("bus", None)}}
    g.update(kw)
    return g


def nv(index, sm, name, mem_gib, uuid=None, **kw):
    cc = [int(sm[3:-1]), int(sm[-1])]
    g = {"index": index, "name": name, "sm": sm, "compute_capability": cc, "memory_bytes": int(mem_gib * GIB),
         "driver_version": kw.pop("driver", "570.86.15"), "cuda_driver_version": 12080, "visible": True,
         "source": "nvml", "uuid": uuid, "cuda_index": index}
    g.update(kw)
    return g


def profile(amd_gpus=(), nvidia_gpus=(), container=False, npus=(), executables=None):
    """A complete saved Profile (every field `probe --json` writes; defaults where not given)."""
    from probes.profile import Profile

    return Profile.from_dict(_partial(amd_gpus, nvidia_gpus, container, npus, executables)).to_dict()


def _partial(amd_gpus, nvidia_gpus, container, npus, executables):
    return {"schema_version": 1,
            "os": {"name": "linux", "version": "6.11.0", "distro": {"id": "ubuntu", "version": "24.04"},
                   "container": container},
            "cpu": {"arch": "x86_64", "brand": "AMD Ryzen 9 7950X", "cores": 32},
            "amd_gpus": list(amd_gpus), "nvidia_gpus": list(nvidia_gpus), "npus": list(npus),
            "metal": {"available": False}, "vulkan": {"loader": True, "gpu_drivers": ["radeon_icd", "nvidia_icd"]},
            "executables": executables or {}, "warnings": []}


@pytest.fixture
def run(cli, tmp_path):
    def go(prof, *args, json_out=True):
        path = tmp_path / "profile.json"
        path.write_text(json.dumps(prof))
        r = cli("--profile", str(path), *args, *(["--json"] if json_out else []))
        return r, (r.json() if json_out and r.out.strip() else None)
    return go


# Radeon VII (gfx906, 16 GiB), Radeon PRO W7500 (gfx1102, 8 GiB), RX 6600 (gfx1032, 8 GiB)
TRIO = profile([amd(0, "gfx906", "AMD Radeon VII", 16, device="0x66af"),
                amd(1, "gfx1102", "AMD Radeon PRO W7500", 8, device="0x7489"),
                amd(2, "gfx1032", "AMD Radeon RX 6600", 8, device="0x73ff")])


def test_trio_check_rocm_passes_on_the_supported_gpus(run):
    # llamacpp rocm lists gfx103X and gfx110X: the W7500 and the RX 6600 fit, the Radeon VII does not
    r, doc = run(TRIO, "check", "llamacpp", "rocm")
    assert r.rc == 0, r.err + r.out
    r, doc = run(TRIO, "llamacpp", "--backend", "rocm")
    v = next(b for b in doc["recipes"]["llamacpp"]["backends"] if b["name"] == "rocm")
    assert v["supported"] is True
    # equal memory (8 GiB): the lower index wins, so the W7500 (index 1) is the device
    assert v["device"]["family"] == "gfx1102" and v["device"]["index"] == 1
    assert [d["family"] for d in v["devices"]] == ["gfx1102", "gfx1032"]
    [(passed)] = v["passed_over"]
    assert passed["device"]["family"] == "gfx906" and "gfx906" in passed["reason"]


def test_trio_run_env_keeps_one_rocm_family(run):
    # a ROCm build serves one gfx family: the gfx110X build gets the W7500 only, never the RX 6600
    r, doc = run(TRIO, "llamacpp", "--backend", "rocm")
    assert doc["recipes"]["llamacpp"]["run_env"] == {"HIP_VISIBLE_DEVICES": "1"}
    r, human = run(TRIO, "llamacpp", "--backend", "rocm", json_out=False)
    assert "HIP_VISIBLE_DEVICES=1" in r.out


def test_run_env_lists_the_gpus_in_index_order_whichever_is_best(run):
    # the RX 7900 XTX (index 2) is the device named; the variable lists both gfx110X cards by index, the
    # order HIP then numbers them in and the order `plan` gives --tensor-split's shares in
    prof = profile([amd(0, "gfx1032", "AMD Radeon RX 6600", 8), amd(1, "gfx1101", "AMD Radeon RX 7800 XT", 16),
                    amd(2, "gfx1100", "AMD Radeon RX 7900 XTX", 24)])
    r, doc = run(prof, "llamacpp", "--backend", "rocm")
    rec = doc["recipes"]["llamacpp"]
    assert rec["device"]["name"] == "AMD Radeon RX 7900 XTX"
    assert rec["run_env"] == {"HIP_VISIBLE_DEVICES": "1,2"}


def test_trio_default_pick_is_vulkan_on_the_largest_gpu_with_a_note_not_a_guess(run):
    # accelerator-first: vulkan comes before rocm in llamacpp's rows and takes any AMD GPU; the largest
    # (Radeon VII, 16 GiB) is the device; Vulkan's order is unknown, so no GGML_VK_VISIBLE_DEVICES guess
    r, doc = run(TRIO, "llamacpp")
    rec = doc["recipes"]["llamacpp"]
    assert rec["backend"] == "vulkan" and rec["device"]["name"] == "AMD Radeon VII"
    assert rec["run_env"] == {}
    assert any("GGML_VK_VISIBLE_DEVICES" in n for n in rec["notes"])


def test_unsupported_verdict_explains_each_gpu(run):
    # llamacpp-hrx's hrx row lists gfx1100 and gfx1151 only: none of the trio fits, each is named
    r, doc = run(TRIO, "check", "llamacpp-hrx", "hrx")
    assert r.rc == 3
    r, doc = run(TRIO, "llamacpp-hrx")
    assert r.rc == 3
    v = next(b for b in doc["recipes"]["llamacpp-hrx"]["backends"] if b["name"] == "hrx")
    assert sorted(p["device"]["family"] for p in v["passed_over"]) == ["gfx1032", "gfx1102", "gfx906"]
    for gfx in ("gfx906", "gfx1102", "gfx1032"):
        assert gfx in v["reason"]


# Strix Halo (gfx1151, integrated, 512 MiB carve-out) with an R9700 (gfx1201, 32 GiB) in an eGPU dock
HALO_EGPU = profile([amd(0, "gfx1151", "AMD Radeon 8060S", 0.5, integrated=True),
                     amd(1, "gfx1201", "AMD Radeon AI PRO R9700", 32)])


def test_strix_halo_with_egpu_llamacpp_hrx_runs_on_the_igpu(run):
    # the hrx row lists gfx1100 and gfx1151: the R9700 does not fit, the integrated 8060S does
    r, doc = run(HALO_EGPU, "llamacpp-hrx")
    assert r.rc == 0, r.err
    rec = doc["recipes"]["llamacpp-hrx"]
    assert rec["device"]["family"] == "gfx1151"
    assert rec["run_env"] == {"HIP_VISIBLE_DEVICES": "0"}


def test_strix_halo_with_egpu_rocm_prefers_the_discrete_card(run):
    # llamacpp rocm lists gfx1151 and gfx120X: both fit; discrete before integrated
    r, doc = run(HALO_EGPU, "llamacpp", "--backend", "rocm")
    rec = doc["recipes"]["llamacpp"]
    assert rec["device"]["family"] == "gfx1201"
    assert [d["family"] for d in rec["backends"][4]["devices"]] == ["gfx1201", "gfx1151"]
    assert rec["run_env"] == {"HIP_VISIBLE_DEVICES": "1"}


# TITAN V (sm_70, 12 GiB) next to an RTX 5880 Ada (sm_89, 48 GiB)
TITAN_ADA = profile(nvidia_gpus=[nv(0, "sm_89", "NVIDIA RTX 5880 Ada Generation", 48, uuid="GPU-aaaa"),
                                 nv(1, "sm_70", "NVIDIA TITAN V", 12, uuid="GPU-bbbb")])


def test_titan_v_serves_trellis_cuda12(run):
    # trellis cuda12 lists sm_60..sm_72: the TITAN V fits although the larger card does not
    r, doc = run(TITAN_ADA, "check", "trellis", "cuda12")
    assert r.rc == 0, r.err + r.out
    assert doc["device"]["family"] == "sm_70" if "device" in doc else True
    r, doc = run(TITAN_ADA, "trellis")
    rec = doc["recipes"]["trellis"]
    assert rec["backend"] == "cuda12" and rec["device"]["name"] == "NVIDIA TITAN V"
    assert rec["run_env"] == {"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}


def test_llamacpp_cuda_on_both_cards_needs_no_env(run):
    # llamacpp cuda lists sm_75..sm_121: only the Ada fits (sm_70 is not listed) -> pinned by UUID
    r, doc = run(TITAN_ADA, "llamacpp")
    rec = doc["recipes"]["llamacpp"]
    assert rec["backend"] == "cuda" and rec["device"]["family"] == "sm_89"
    assert rec["run_env"] == {"CUDA_VISIBLE_DEVICES": "GPU-aaaa"}


def test_cuda_index_used_when_uuid_unknown(run):
    prof = profile(nvidia_gpus=[nv(0, "sm_89", "NVIDIA RTX 5880 Ada Generation", 48),
                                nv(1, "sm_70", "NVIDIA TITAN V", 12)])
    r, doc = run(prof, "trellis")
    assert doc["recipes"]["trellis"]["run_env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}


# A container that sees an RX 7900 XTX in sysfs but was started without --device /dev/kfd
CONTAINER = profile([amd(0, "gfx1100", "AMD Radeon RX 7900 XTX", 24, usable_compute=False,
                         access_fix="add --device /dev/kfd --device /dev/dri to the container")], container=True)


def test_container_without_kfd_cannot_pick_rocm(run):
    r, doc = run(CONTAINER, "check", "llamacpp", "rocm")
    assert r.rc == 3
    assert "--device /dev/kfd" in (doc.get("reason") or json.dumps(doc))
    r, doc = run(CONTAINER, "llamacpp")
    rec = doc["recipes"]["llamacpp"]
    # Vulkan needs the render node only, which the container has
    assert rec["backend"] == "vulkan" and rec["device"]["type"] == "amd_gpu"


def test_gpu_without_render_access_falls_back_to_the_cpu_and_says_why(run):
    prof = profile([amd(0, "gfx1100", "AMD Radeon RX 7900 XTX", 24, usable_compute=False, usable_graphics=False,
                        render_node="/dev/dri/renderD128", access_fix="add this user to the render group")])
    r, doc = run(prof, "llamacpp")
    rec = doc["recipes"]["llamacpp"]
    assert rec["device"]["type"] == "cpu"
    assert any("render group" in w["message"] for w in doc["warnings"])


def test_kernel_without_cwsr_fix_refuses_rocm_on_gfx1151(run):
    old = profile([amd(0, "gfx1151", "AMD Radeon 8060S", 96, integrated=True, cwsr=False)])
    r, doc = run(old, "check", "llamacpp", "rocm")
    assert r.rc == 3 and "kernel" in json.dumps(doc)
    fixed = profile([amd(0, "gfx1151", "AMD Radeon 8060S", 96, integrated=True, cwsr=True)])
    r, doc = run(fixed, "check", "llamacpp", "rocm")
    assert r.rc == 0
    # whispercpp's descriptor does not set rocm_requires_cwsr_fix: no gate there
    r, doc = run(old, "whispercpp", "--backend", "rocm")
    v = next(b for b in doc["recipes"]["whispercpp"]["backends"] if b["name"] == "rocm")
    assert "kernel" not in v["reason"]


def test_cuda_needs_a_loaded_driver_even_without_a_family_list(run):
    # acestep's cuda row takes any NVIDIA GPU; without a driver it still cannot run
    prof = profile(nvidia_gpus=[nv(0, "sm_86", "NVIDIA GeForce RTX 3090", 24, driver=None, driver_loaded=False)])
    r, doc = run(prof, "acestep")
    rec = doc["recipes"]["acestep"]
    cuda = next(b for b in rec["backends"] if b["name"] == "cuda")
    assert cuda["supported"] is False and "no NVIDIA driver drives it" in cuda["reason"]


def test_vulkan_on_an_nvidia_machine_runs_on_the_nvidia_gpu_and_says_the_row_does_not_list_it(run):
    # llamacpp's vulkan row lists amd_gpu and cpu only; NVIDIA's Vulkan driver runs it on the GPU
    prof = profile(nvidia_gpus=[nv(0, "sm_70", "NVIDIA TITAN V", 12)])
    r, doc = run(prof, "llamacpp", "--backend", "vulkan")
    v = next(b for b in doc["recipes"]["llamacpp"]["backends"] if b["name"] == "vulkan")
    assert v["device"]["type"] == "nvidia_gpu" and v["device"]["name"] == "NVIDIA TITAN V"
    assert "Lemonade's matrix lists this build for AMD GPUs and CPUs; it runs on this NVIDIA GPU" in "; ".join(v["notes"])
    assert "No AMD GPU found" not in json.dumps(v)
    # without NVIDIA's Vulkan ICD the GPU is no Vulkan device: the CPU, and the reason names the GPU
    prof["vulkan"]["gpu_drivers"] = []
    prof["nvidia_gpus"][0]["vulkan_driver"] = None
    r, doc = run(prof, "llamacpp", "--backend", "vulkan")
    v = next(b for b in doc["recipes"]["llamacpp"]["backends"] if b["name"] == "vulkan")
    assert v["device"]["type"] == "cpu"
    assert "NVIDIA TITAN V: no Vulkan driver for it is installed" in "; ".join(v["notes"])


def test_lemonade_policy_prefers_a_system_llama_server(run):
    prof = profile([amd(0, "gfx1100", "AMD Radeon RX 7900 XTX", 24)],
                   executables={"llama-server": "/usr/local/bin/llama-server"})
    r, doc = run(prof, "llamacpp", "--policy", "lemonade")
    assert doc["recipes"]["llamacpp"]["backend"] == "system"
    r, doc = run(prof, "llamacpp")  # accelerator-first keeps the GPU build unless told
    assert doc["recipes"]["llamacpp"]["backend"] == "vulkan"


@pytest.mark.parametrize("prof", [TRIO, HALO_EGPU, TITAN_ADA, CONTAINER], ids=["trio", "halo-egpu", "titan-ada", "container"])
def test_mixed_machines_follow_the_documented_schema(run, prof):
    import jsonschema
    from test_json_contract import schema

    r, doc = run(prof, "pick", "--all")
    jsonschema.validate(doc, schema("pick"))
    assert any(len(b["devices"]) > 1 or b["passed_over"] for rec in doc["recipes"].values() for b in rec["backends"])
    r, doc = run(prof, "check", "llamacpp", "rocm")
    jsonschema.validate(doc, schema("check"))


# The issue's four machines as sysfs captures (fixtures/machines/*/expected.json cites their sources),
# through the real CLI: `check` is the installer's gate, so it is what must answer right.
@pytest.mark.parametrize("fixture,args,rc,words", [
    ("linux-ubuntu24.04-radeonvii-w7500-rx6600", ("check", "llamacpp", "rocm"), 0, "HIP_VISIBLE_DEVICES=1"),
    ("linux-ubuntu24.04-strix-halo-r9700-egpu", ("check", "llamacpp-hrx", "hrx"), 0, "gfx1151"),
    ("linux-ubuntu22.04-titanv-rtx5880ada", ("check", "trellis", "cuda12"), 0, "TITAN V"),
    ("linux-container-ubuntu24.04-rx7900xtx-no-dev-kfd", ("check", "llamacpp", "rocm"), 3, "--device /dev/kfd"),
])
def test_the_four_machines_of_the_issue(cli, fixture, args, rc, words):
    from conftest import machine

    r = cli("--root", machine(fixture), *args)
    assert r.rc == rc, r.out + r.err
    assert words in r.out + r.err


# run_env replaces the variable it names: its values must select the devices from scratch, not be
# indices among the devices a variable already set in this shell left visible.

def _capture_with_env(tmp_path, name, env):
    import shutil

    from conftest import machine

    root = tmp_path / name
    shutil.copytree(machine(name), root, symlinks=True)
    cap = json.loads((root / "capture.json").read_text())
    cap["env"] = env
    (root / "capture.json").write_text(json.dumps(cap))
    return str(root)


def test_run_env_hip_index_holds_when_hip_visible_devices_is_already_set(cli, tmp_path):
    # HIP_VISIBLE_DEVICES=1,2 leaves the W7500 (KFD GPU 1) and the RX 6600 (GPU 2); the gfx110X build
    # gets the W7500 alone.  run_env replaces HIP_VISIBLE_DEVICES, so it must say 1 (HIP_VISIBLE_DEVICES=0
    # would select the Radeon VII)
    root = _capture_with_env(tmp_path, "linux-ubuntu24.04-radeonvii-w7500-rx6600", {"HIP_VISIBLE_DEVICES": "1,2"})
    r = cli("--root", root, "llamacpp", "--backend", "rocm", "--json")
    rec = r.json()["recipes"]["llamacpp"]
    assert rec["device"]["name"] == "AMD Radeon PRO W7500"
    assert rec["run_env"] == {"HIP_VISIBLE_DEVICES": "1"}
    # under ROCR_VISIBLE_DEVICES (which run_env leaves in place) HIP numbers what ROCR left: 0
    root = _capture_with_env(tmp_path / "rocr", "linux-ubuntu24.04-radeonvii-w7500-rx6600", {"ROCR_VISIBLE_DEVICES": "1,2"})
    rec = cli("--root", root, "llamacpp", "--backend", "rocm", "--json").json()["recipes"]["llamacpp"]
    assert rec["run_env"] == {"HIP_VISIBLE_DEVICES": "0"}


def test_cuda_run_env_by_index_fixes_the_order_and_ignores_the_shells_selection(run):
    # Without UUIDs CUDA_VISIBLE_DEVICES takes indices, which CUDA counts fastest first unless
    # CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA C Programming Guide, "CUDA Environment Variables"): the TITAN V
    # (PCI order 0, slower) would be CUDA device 1.  The index must be the PCI-order one, counted over
    # every GPU CUDA can use, since run_env replaces a CUDA_VISIBLE_DEVICES of the shell.
    prof = profile(nvidia_gpus=[nv(0, "sm_70", "NVIDIA TITAN V", 12, cuda_index=None, visible=False),
                                nv(1, "sm_70", "NVIDIA TITAN V", 12, cuda_index=0),
                                nv(2, "sm_89", "NVIDIA RTX 5880 Ada Generation", 48, cuda_index=1)])
    r, doc = run(prof, "trellis")
    rec = doc["recipes"]["trellis"]
    assert rec["device"]["index"] == 1
    assert rec["run_env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}


def test_no_run_env_when_the_runtime_sees_only_the_chosen_gpu(cli, run):
    # the GTX 1080 Ti has no driver (the open module drives Turing and newer): CUDA enumerates the
    # RTX 4090 alone, so there is nothing to pin and "run with: CUDA_VISIBLE_DEVICES=..." would
    # suggest a choice that does not exist
    from conftest import machine

    root = machine("linux-ubuntu24.04-rtx4090-gtx1080ti-open-module")
    rec = cli("--root", root, "llamacpp", "--json").json()["recipes"]["llamacpp"]
    assert rec["backend"] == "cuda" and rec["device"]["name"] == "NVIDIA GeForce RTX 4090"
    assert rec["run_env"] == {}
    assert "run with" not in cli("--root", root, "llamacpp").out
    # an AMD GPU ROCm cannot open (no access to its render node) is no HIP device either
    prof = profile([amd(0, "gfx1100", "AMD Radeon RX 7900 XTX", 24),
                    amd(1, "gfx1100", "AMD Radeon RX 7900 XTX", 24, usable_compute=False, usable_graphics=False,
                        hip_index=None, access_fix="add this user to the render group")])
    r, doc = run(prof, "llamacpp", "--backend", "rocm")
    rec = doc["recipes"]["llamacpp"]
    assert rec["device"]["index"] == 0 and rec["run_env"] == {}


def test_version_txt_without_the_binary_is_not_installed(cli, tmp_path):
    # issue 12: "installed" means the backend's binary is present, as Lemonade checks (it searches
    # <cache>/bin/<recipe>/<backend>/ for the binary), not version.txt alone.  A leftover rocm
    # directory must not win the pick ("an installed backend wins") nor read as installed.
    from conftest import machine
    from selector.catalog import load_pins

    strix = machine("linux-ubuntu24.04-strix-halo")
    d = tmp_path / "bin" / "llamacpp" / "rocm-stable"
    d.mkdir(parents=True)
    (d / "version.txt").write_text(load_pins("lemonade")["llamacpp"]["rocm-stable"] + "\n")
    rec = cli("--root", strix, "llamacpp", "--cache-dir", str(tmp_path), "--json").json()["recipes"]["llamacpp"]
    assert rec["backend"] == "vulkan" and rec["state"] == "installable"
    rocm = next(b for b in rec["backends"] if b["name"] == "rocm")
    assert rocm["state"] == "installable"
    # with the binary somewhere below it (as Lemonade's archives unpack), it is installed and wins
    (d / "build" / "bin").mkdir(parents=True)
    (d / "build" / "bin" / "llama-server").write_text("")
    rec = cli("--root", strix, "llamacpp", "--cache-dir", str(tmp_path), "--json").json()["recipes"]["llamacpp"]
    assert rec["backend"] == "rocm" and rec["state"] == "installed"


def test_a_row_of_several_gpu_types_names_the_best_gpu_of_all_of_them(run):
    # sd-cpp's vulkan row takes any AMD GPU or any NVIDIA GPU: on a Ryzen 7000 desktop (Raphael iGPU,
    # gfx1036, 512 MiB carve-out) with an RTX 4090, the device is the discrete 4090, not the iGPU that
    # happens to be of the first listed type, and `devices` holds every satisfying GPU
    prof = profile([amd(0, "gfx1036", "AMD Radeon Graphics (Raphael)", 0.5, integrated=True)],
                   nvidia_gpus=[nv(0, "sm_89", "NVIDIA GeForce RTX 4090", 24, uuid="GPU-4090")])
    r, doc = run(prof, "sd-cpp", "--backend", "vulkan")
    v = next(b for b in doc["recipes"]["sd-cpp"]["backends"] if b["name"] == "vulkan")
    assert v["device"]["name"] == "NVIDIA GeForce RTX 4090"
    assert [d["name"] for d in v["devices"]] == ["NVIDIA GeForce RTX 4090", "AMD Radeon Graphics (Raphael)"]
    # Vulkan sees both: the note says so although each type has one GPU
    notes = doc["recipes"]["sd-cpp"]["notes"]
    assert any("2 GPUs" in n and "GGML_VK_VISIBLE_DEVICES" in n for n in notes), notes


def test_an_amd_gpu_of_unknown_target_is_still_an_amd_gpu(run):
    # a card newer than every table, seen through DRM only (no KFD): its gfx target is unknown, but it
    # is an AMD GPU with a render node, so Vulkan (any AMD GPU) runs on it; ROCm cannot be matched
    # to a build, and nothing may say "No AMD GPU found"
    g = amd(0, "gfx1100", "AMD GPU [1002:7fff]", 16, device="0x7fff", source="drm", usable_compute=False,
            hip_index=None, access_fix="load the amdgpu driver with KFD")
    prof = profile([g])
    prof["amd_gpus"][0].update(gfx=None, gfx_effective=None)
    r, doc = run(prof, "llamacpp")
    rec = doc["recipes"]["llamacpp"]
    assert rec["backend"] == "vulkan" and rec["device"]["name"] == "AMD GPU [1002:7fff]"
    rocm = next(b for b in rec["backends"] if b["name"] == "rocm")
    assert rocm["supported"] is False and "gfx target" in rocm["reason"]
    assert "No AMD GPU found" not in json.dumps(doc)


def test_each_later_installable_accelerator_backend_is_named_with_how_to_choose_it(run):
    # trellis rows: cuda12 (sm_60..sm_72), cuda (any NVIDIA GPU), vulkan (AMD, NVIDIA, CPU), rocm
    # (gfx110X...): a TITAN V (sm_70) with an RX 7900 XTX (gfx1100) satisfies all four, cuda12 first
    prof = profile([amd(0, "gfx1100", "AMD Radeon RX 7900 XTX", 24)], nvidia_gpus=[nv(0, "sm_70", "NVIDIA TITAN V", 12)])
    r, doc = run(prof, "trellis")
    rec = doc["recipes"]["trellis"]
    assert rec["backend"] == "cuda12"
    assert rec["reason"] == ("first supported accelerator backend in preference order; cuda12 comes before cuda, "
                             "vulkan and rocm in Lemonade's order for trellis; --backend cuda or --backend vulkan or "
                             "--backend rocm chooses one")
    # one later backend: "it"
    r, doc = run(profile([amd(0, "gfx1151", "AMD Radeon 8060S", 96, integrated=True, cwsr=True)]), "llamacpp")
    assert doc["recipes"]["llamacpp"]["reason"].endswith(
        "; vulkan comes before rocm in Lemonade's order for llamacpp; --backend rocm chooses it")


def test_two_identical_gpus_with_an_override_on_one_node_are_judged_apart(run):
    # HSA_OVERRIDE_GFX_VERSION_<node> on one of two W7500s: hrx (gfx1100, gfx1151) fits that one only
    a = amd(0, "gfx1102", "AMD Radeon PRO W7500", 8, eff="gfx1100", gfx_override="HSA_OVERRIDE_GFX_VERSION_1",
            kfd_node=1)
    b = amd(1, "gfx1102", "AMD Radeon PRO W7500", 8, kfd_node=2)
    prof = profile([a, b])
    prof["device_env"] = {"HSA_OVERRIDE_GFX_VERSION_1": "11.0.0"}
    r, doc = run(prof, "llamacpp-hrx")
    rec = doc["recipes"]["llamacpp-hrx"]
    assert rec["backend"] == "hrx" and [d["index"] for d in rec["backends"][0]["devices"]] == [0]
    assert rec["run_env"] == {"HIP_VISIBLE_DEVICES": "0"}
    (over,) = rec["backends"][0]["passed_over"]
    assert over["device"]["index"] == 1 and "gfx1102" in over["reason"]


def test_a_row_for_another_gpu_type_names_what_the_machine_has_not_its_npu():
    # thenoise's cuda row takes any NVIDIA GPU; on a Strix Halo (Radeon 8060S and an XDNA2 NPU) the
    # reason names the GPU, never the NPU (no GPU build runs on an NPU)
    from conftest import machine, run_cli

    r = run_cli("--root", machine("linux-ubuntu24.04-strix-halo"), "thenoise", "--json")
    cuda = next(b for b in r.json()["recipes"]["thenoise"]["backends"] if b["name"] == "cuda")
    assert cuda["reason"] == "this cuda build is listed for NVIDIA GPUs only (found AMD GPU: AMD Radeon 8060S/8050S/8040S)"


def test_a_cuda_row_names_its_targets_as_a_range():
    from conftest import machine, run_cli

    r = run_cli("--root", machine("linux-debian12-gtx1080"), "check", "llamacpp", "cuda", "--json")
    assert r.rc == 3
    assert r.json()["reason"] == "No NVIDIA GPU with sm_75..sm_121 (found sm_61, NVIDIA GeForce GTX 1080)"


def test_every_nvidia_gpu_is_judged_the_fitting_ones_listed_the_others_passed_over(run):
    # llamacpp cuda lists sm_75..: the RTX 5880 fits, the TITAN V (sm_70) is passed over with its reason
    r, doc = run(TITAN_ADA, "check", "llamacpp", "cuda")
    assert r.rc == 0 and [d["name"] for d in doc["devices"]] == ["NVIDIA RTX 5880 Ada Generation"]
    (over,) = doc["passed_over"]
    assert over["device"]["name"] == "NVIDIA TITAN V" and "sm_70" in over["reason"]
    # trellis cuda (any NVIDIA GPU): both fit, best first
    r, doc = run(TITAN_ADA, "check", "trellis", "cuda")
    assert [d["name"] for d in doc["devices"]] == ["NVIDIA RTX 5880 Ada Generation", "NVIDIA TITAN V"]


def test_one_nvidia_gpu_and_a_shell_cuda_visible_devices_needs_no_pin(run):
    prof = profile(nvidia_gpus=[nv(0, "sm_61", "NVIDIA GeForce GTX 1080", 8, uuid="GPU-1080")])
    prof["device_env"] = {"CUDA_VISIBLE_DEVICES": "0"}
    r, doc = run(prof, "trellis")
    assert doc["recipes"]["trellis"]["backend"] == "cuda12" and doc["recipes"]["trellis"]["run_env"] == {}


def test_an_intel_gpu_without_its_vulkan_driver_says_what_installs_it(run):
    prof = profile()
    prof["intel_gpus"] = [{"name": "Intel Arc A770", "arc": True, "index": 0, "render_node": "/dev/dri/renderD128",
                           "pci": {"vendor": "0x8086", "device": "0x56a0"}, "vulkan_driver": None}]
    r, doc = run(prof, "llamacpp", "--backend", "vulkan")
    v = next(b for b in doc["recipes"]["llamacpp"]["backends"] if b["name"] == "vulkan")
    assert v["device"]["type"] == "cpu"
    assert any("Intel Arc A770: no Vulkan driver for it is installed, so vulkan cannot use it (install Mesa's ANV "
               "(mesa-vulkan-drivers))" in n for n in v["notes"]), v["notes"]


def test_a_recipe_with_no_backend_here_is_not_pinned_and_system_on_path_is_installed(run):
    r, doc = run(profile(), "flm")
    assert r.rc == 3 and doc["recipes"]["flm"]["backend"] is None and doc["recipes"]["flm"]["pinned"] is False
    prof = profile(executables={"llama-server": "/usr/local/bin/llama-server"})
    r, doc = run(prof, "llamacpp")
    system = next(b for b in doc["recipes"]["llamacpp"]["backends"] if b["name"] == "system")
    assert system["supported"] and system["state"] == "installed"  # it is the binary on PATH


def test_the_row_for_this_os_gives_the_reason_when_a_backend_has_one_row_per_os():
    # moonshine's cpu backend has a row per OS (Windows x86_64, Linux, macOS arm64): on an Intel Mac
    # the macOS row is the one that counts, so the reason is its CPU, not "Requires Windows"
    from conftest import machine, run_cli

    r = run_cli("--root", machine("macos14-intel"), "moonshine", "--json")
    (cpu,) = r.json()["recipes"]["moonshine"]["backends"]
    assert cpu["reason"] == "Requires a arm64 CPU (found x86_64)"


def test_an_npu_this_process_cannot_open_says_which_node_and_the_fix(run):
    npu = {"vendor": "amd", "generation": "XDNA2", "codename": "Strix Halo", "driver_bound": True,
           "device_node": "/dev/accel/accel0", "usable": False, "access_fix": "add --device /dev/accel to the container",
           "pci": {"device": "0x17f0", "revision": "0x11"}}
    r, doc = run(profile(npus=[npu], container=True), "flm")
    assert r.rc == 3
    assert doc["recipes"]["flm"]["backends"][0]["reason"] == (
        "XDNA2 NPU found but this process cannot open /dev/accel/accel0 (add --device /dev/accel to the container)")


def test_where_lemonades_rule_differs_the_pick_says_so():
    # 8x MI300X: accelerator-first skips vulkan (CDNA has no Vulkan driver) and picks rocm; Lemonade's
    # own rule takes its first row, vulkan, which runs on the CPU here
    from conftest import machine, run_cli

    root = machine("linux-ubuntu22.04-8x-mi300x")
    rec = run_cli("--root", root, "llamacpp", "--json").json()["recipes"]["llamacpp"]
    assert rec["backend"] == "rocm"
    # all eight GPUs take the same build: no run_env, and no note but this one
    assert rec["run_env"] == {} and rec["notes"] == [
        "--policy lemonade would pick vulkan (Lemonade takes the first supported row; accelerator-first prefers "
        "rocm on the AMD GPU)"]
    lem = run_cli("--root", root, "llamacpp", "--policy", "lemonade", "--json").json()["recipes"]["llamacpp"]
    assert lem["backend"] == "vulkan" and lem["device"]["type"] == "cpu"


def test_a_discrete_intel_arc_beats_an_amd_igpu_for_vulkan_and_no_override_note_without_an_override(run):
    # a Ryzen desktop's Raphael iGPU (gfx1036, 512 MiB carve-out) and an Arc A770 (Intel reports no
    # memory size): the discrete card is the Vulkan device
    prof = profile([amd(0, "gfx1036", "AMD Radeon Graphics (Raphael)", 0.5, integrated=True)])
    prof["vulkan"]["gpu_drivers"] = ["radeon_icd", "intel_icd"]
    prof["amd_gpus"][0]["vulkan_driver"] = "radeon_icd"
    prof["intel_gpus"] = [{"name": "Intel Arc A770", "arc": True, "index": 0, "render_node": "/dev/dri/renderD129",
                           "pci": {"vendor": "0x8086", "device": "0x56a0"}, "vulkan_driver": "intel_icd"}]
    r, doc = run(prof, "llamacpp", "--backend", "vulkan")
    v = next(b for b in doc["recipes"]["llamacpp"]["backends"] if b["name"] == "vulkan")
    assert [d["name"] for d in v["devices"]] == ["Intel Arc A770", "AMD Radeon Graphics (Raphael)"]
    rocm = next(b for b in doc["recipes"]["llamacpp"]["backends"] if b["name"] == "rocm")
    assert rocm["supported"] and not any("judged as" in n for n in rocm["notes"])


def test_the_cpu_device_is_named_by_its_brand():
    from conftest import machine, run_cli

    r = run_cli("--root", machine("linux-debian12-gtx1080"), "check", "llamacpp", "cpu", "--json")
    assert r.json()["device"] == {"type": "cpu", "family": "x86_64", "index": 0,
                                  "name": "Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz"}


def test_a_row_for_three_oses_names_all_three_on_a_fourth(run):
    prof = profile()
    prof["os"]["name"] = "freebsd"
    r, doc = run(prof, "onnxruntime")
    (cpu,) = doc["recipes"]["onnxruntime"]["backends"]
    assert cpu["reason"] == "Requires Windows, Linux or macOS"


def test_an_amd_device_carries_its_kfd_unique_id_as_its_uuid():
    from conftest import machine, run_cli

    r = run_cli("--root", machine("linux-ubuntu24.04-radeonvii-w7500-rx6600"), "check", "llamacpp", "rocm", "--json")
    assert r.json()["device"]["uuid"] == "GPU-6cd7a02e6951e9cc"  # the W7500's KFD unique_id, as ROCm prints it


def test_an_instinct_gpu_is_never_the_vulkan_device_whatever_the_policy(run):
    # CDNA has no graphics pipeline: even with RADV installed, a Vulkan build runs on the CPU of an
    # MI300X host. Under --policy lemonade the backend is Lemonade's (vulkan, its first row), and the
    # device it names is still the CPU, with the reason
    prof = profile([amd(0, "gfx942", "AMD Instinct MI300X", 192, device="0x74a1")])
    prof["amd_gpus"][0]["vulkan_driver"] = "radeon_icd"
    for policy in ("accelerator-first", "lemonade"):
        r, doc = run(prof, "llamacpp", "--policy", policy)
        rec = doc["recipes"]["llamacpp"]
        vk = next(b for b in rec["backends"] if b["name"] == "vulkan")
        assert vk["supported"] and vk["device"]["type"] == "cpu", policy
        why = "AMD Instinct (CDNA) GPUs have no Vulkan driver (AMD Instinct MI300X, gfx942)"
        assert vk["notes"] == [f"runs on the CPU: {why}"], policy
        assert [p["reason"] for p in vk["passed_over"]] == [why], policy
        assert rec["backend"] == ("vulkan" if policy == "lemonade" else "rocm")


def test_a_device_is_known_across_runs_by_its_uuid_first():
    # bench results are stored by device: the UUID survives a card moving slot, the PCI address a
    # driver that gives no UUID; only a device with neither falls back to its kind and index
    from selector.engine import Device, device_key

    assert device_key(Device("nvidia_gpu", "sm_89", 1, "RTX 4090", bus_id="0000:01:00.0", uuid="GPU-1")) == "GPU-1"
    assert device_key(Device("amd_gpu", "gfx1100", 0, "RX 7900 XTX", bus_id="0000:03:00.0")) == "0000:03:00.0"
    assert device_key(Device("amd_npu", "xdna2", 0, "NPU")) == "amd_npu:0"
    assert device_key(None) == "cpu" and device_key(Device("cpu", "arm64", 0, "Cortex-A76")) == "cpu"


def test_a_system_llama_server_is_not_said_to_run_on_the_cpu(run):
    # the llama-server on PATH is whatever build the user put there (it may well use the GPU): its row
    # is judged on the CPU entry, and the pick does not claim "runs on the CPU here" for it
    prof = profile([amd(0, "gfx1100", "AMD Radeon RX 7900 XTX", 24, device="0x744c")],
                   executables={"llama-server": "/usr/local/bin/llama-server"})
    r, doc = run(prof, "llamacpp", "--backend", "system")
    rec = doc["recipes"]["llamacpp"]
    assert rec["backend"] == "system" and rec["state"] == "installed" and rec["warnings"] == []
    r, doc = run(prof, "llamacpp", "--backend", "cpu")  # the CPU build says nothing either: it is the CPU
    assert not any("runs on the CPU here" in w for w in doc["recipes"]["llamacpp"]["warnings"])


def test_a_row_that_lists_the_cpu_before_nvidia_still_runs_on_the_nvidia_gpu():
    # Lemonade's sd-cpp vulkan row lists amd_gpu, cpu, nvidia_gpu in that order: the CPU entry is
    # the fallback whatever its place, so on a GTX 1080 the build runs on the GPU, and the row lists
    # NVIDIA GPUs, so no "lists this build for ..." note is owed (a GTX 1080: no other GPU to find first)
    from conftest import machine, run_cli

    rec = run_cli("--root", machine("linux-debian12-gtx1080"), "sd-cpp", "--backend", "vulkan",
                  "--json").json()["recipes"]["sd-cpp"]
    assert rec["device"]["type"] == "nvidia_gpu" and rec["device"]["name"] == "NVIDIA GeForce GTX 1080"
    vk = next(b for b in rec["backends"] if b["name"] == "vulkan")
    assert not any("lists this build for" in n for n in vk["notes"])


def test_an_apus_gtt_counts_in_the_memory_the_device_order_compares():
    # a Strix Halo's 512 MiB carve-out is not what an engine can use: its GTT is (probes/memory.py),
    # and the order among integrated GPUs of different vendors compares that
    from probes.profile import AmdGpu, NvidiaGpu, Profile
    from selector.engine import Machine

    apu = AmdGpu(gfx="gfx1151", integrated=True, vram_bytes=512 << 20, gtt_bytes=64 << 30)
    m = Machine(Profile(amd_gpus=[apu], nvidia_gpus=[NvidiaGpu(sm="sm_89", memory_bytes=24 << 30)]))
    assert m.visible["amd_gpu"][0].usable_memory() == (512 << 20) + (64 << 30)
    assert m.visible["nvidia_gpu"][0].usable_memory() == 24 << 30


def test_the_system_note_names_prefer_system_only_where_it_would_choose_system(run):
    # --prefer-system allows the llama-server on PATH; under accelerator-first a GPU build still comes
    # first. On a Pi 5 (Vulkan on the CPU) the flag picks system; beside an RX 7900 XTX it would not,
    # so the note names only --backend system there
    from conftest import machine, run_cli

    pi = run_cli("--root", machine("linux-raspberrypi-pi5-arm64"), "llamacpp", "--json").json()["recipes"]["llamacpp"]
    assert pi["backend"] == "vulkan" and pi["notes"] == [
        "--policy lemonade would pick system (Lemonade prefers a llama-server on PATH for llamacpp); prefer_system "
        "is off outside --policy lemonade: --prefer-system or --backend system chooses it"]
    assert run_cli("--root", machine("linux-raspberrypi-pi5-arm64"), "llamacpp", "--prefer-system",
                   "--json").json()["recipes"]["llamacpp"]["backend"] == "system"
    prof = profile([amd(0, "gfx1100", "AMD Radeon RX 7900 XTX", 24, device="0x744c")],
                   executables={"llama-server": "/usr/local/bin/llama-server"})
    rec = run(prof, "llamacpp")[1]["recipes"]["llamacpp"]
    assert rec["backend"] == "vulkan" and rec["notes"] == [
        "--policy lemonade would pick system (Lemonade prefers a llama-server on PATH for llamacpp); prefer_system "
        "is off outside --policy lemonade: --backend system chooses it"]
    assert run(prof, "llamacpp", "--prefer-system")[1]["recipes"]["llamacpp"]["backend"] == "vulkan"


def test_gpus_without_uuids_are_pinned_by_pci_order_indices(run):
    # NVML gave no UUIDs: two RTX 4090 take the sm_89 build, the GTX 1080 between them (sm_61) does
    # not; run_env names both by their place in PCI order, and tells CUDA to count that way
    prof = profile(nvidia_gpus=[nv(0, "sm_89", "NVIDIA GeForce RTX 4090", 24), nv(1, "sm_61", "NVIDIA GeForce GTX 1080", 8),
                                nv(2, "sm_89", "NVIDIA GeForce RTX 4090", 24)])
    rec = run(prof, "llamacpp", "--backend", "cuda")[1]["recipes"]["llamacpp"]
    assert rec["run_env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0,2"}


def test_a_machine_without_an_npu_is_told_which_npu_the_recipe_needs(run):
    r, doc = run(profile([amd(0, "gfx1100", "AMD Radeon RX 7900 XTX", 24, device="0x744c")]), "check", "flm", "npu")
    assert r.rc == 3 and doc["reason"] == "Requires an AMD XDNA2 NPU (none found)"


def test_a_system_build_is_not_said_to_run_on_the_cpu_in_words_either(run):
    # the llama-server on PATH is the user's build: the pick cannot know its device, so it does not
    # name one (JSON keeps the CPU entry the row was judged by)
    prof = profile([amd(0, "gfx1100", "AMD Radeon RX 7900 XTX", 24, device="0x744c")],
                   executables={"llama-server": "/usr/local/bin/llama-server"})
    r, _ = run(prof, "llamacpp", "--backend", "system", json_out=False)
    head = next(line for line in r.out.splitlines() if line.startswith("llamacpp"))
    assert "→ system: the build on PATH, which runs where that build runs" in head and "CPU" not in head
    row = next(line for line in r.out.splitlines() if line.split()[:2] == ["✓", "system"])
    assert "CPU" not in row and "`pick-backend verify` shows where" in row


def test_a_vulkan_driver_without_the_loader_leaves_the_build_on_the_cpu(run):
    """The NVIDIA driver installs nvidia_icd.json, but without libvulkan.so.1 nothing loads it: llama.cpp's
    Vulkan build lists no device and runs on the CPU (what `verify` finds on headless NVIDIA hosts)."""
    prof = profile(nvidia_gpus=[nv(0, "sm_89", "NVIDIA GeForce RTX 4090", 24, vulkan_driver="nvidia_icd")])
    prof["vulkan"]["loader"] = False
    r, doc = run(prof, "llamacpp", "--backend", "vulkan")
    v = next(b for b in doc["recipes"]["llamacpp"]["backends"] if b["name"] == "vulkan")
    assert v["device"]["type"] == "cpu"
    said = "; ".join(v["notes"])
    assert "the Vulkan loader is not installed, so vulkan finds no GPU through its Vulkan driver" in said
    assert "libvulkan1" in said
    assert said.count("is not installed") == 1 and "listed for" not in said, said  # once, and nothing else claimed
    prof["vulkan"]["loader"] = True
    r, doc = run(prof, "llamacpp", "--backend", "vulkan")
    assert doc["recipes"]["llamacpp"]["device"]["type"] == "nvidia_gpu"


def test_the_advice_for_a_missing_vulkan_driver_is_for_the_machines_os(run):
    prof = profile([amd(0, "gfx1100", "AMD Radeon RX 7900 XTX", 24, vulkan_driver=None)])
    prof["os"].update(name="windows", version="10.0.26100")
    r, doc = run(prof, "llamacpp", "--backend", "vulkan")
    notes = "; ".join(next(b for b in doc["recipes"]["llamacpp"]["backends"] if b["name"] == "vulkan")["notes"])
    assert "AMD Radeon RX 7900 XTX: no Vulkan driver for it is installed" in notes
    assert "Adrenalin" in notes and "mesa" not in notes.lower()
