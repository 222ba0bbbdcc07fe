"""A catalog file is the support matrix a user may replace (``--catalog file.json``): every malformed
field is refused with exit 5 naming the file and the field (docs/catalogs.md), and a well-formed
file is read with the documented defaults.  The field table goes through ``catalog.load`` (fast);
a few cases go through the real CLI to pin the exit code and the message on stderr."""

import copy
import json
import os

import pytest

from conftest import machine, run_cli
from probes.inputs import InputError
from selector import catalog

CPU_VM = "linux-debian12-x86_64-cpu-only"


def base():
    """A small valid catalog: one recipe with two rows, a gate, an exclusion."""
    return {
        "schema_version": 1,
        "name": "mine",
        "recipes": {
            "r": {
                "display_name": "R engine",
                "selectable_backend": True,
                "uses_ctx_size": True,
                "rocm_channels": ["stable"],
                "options": [{"name": "ctx", "flag": "--ctx"}, {"name": "r_backend", "flag": "--r", "type": "BACKEND"}],
                "rows": [
                    {"backend": "rocm", "os": ["linux"], "devices": {"amd_gpu": ["gfx1100"]}},
                    {"backend": "cpu", "tier": "experimental", "format": "container", "os": ["linux", "windows"],
                     "devices": {"cpu": ["x86_64"]}},
                ],
            }
        },
        "gates": [{"recipe": "r", "backend": "rocm", "family": "gfx1100", "reason": "only stable"}],
        "exclusions": [{"backend": "vulkan", "device_type": "amd_gpu", "families": ["gfx942"], "reason": "no driver"}],
    }


def write(tmp_path, data, name="cat.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def load_error(tmp_path, data) -> str:
    path = write(tmp_path, data)
    with pytest.raises(InputError) as e:
        catalog.load(path)
    assert e.value.path == path
    return str(e.value)


# -- a well-formed catalog, with the documented defaults -------------------------------------


def test_a_valid_catalog_is_read_with_its_defaults(tmp_path):
    c = catalog.load(write(tmp_path, base()))
    assert (c.name, c.title, c.source) == ("mine", "mine", "")  # title defaults to the name
    rec = c.recipes["r"]
    assert (rec.display_name, rec.selectable_backend, rec.uses_ctx_size) == ("R engine", True, True)
    assert rec.rocm_channels == ("stable",)
    rocm, cpu = rec.rows
    assert (rocm.backend, rocm.tier, rocm.format, rocm.os) == ("rocm", "core", "native", ("linux",))
    assert rocm.devices == (("amd_gpu", ("gfx1100",)),)
    assert (cpu.tier, cpu.format, cpu.os) == ("experimental", "container", ("linux", "windows"))
    (gate,) = c.gates
    assert gate.os == ("linux", "windows", "macos") and gate.channels == ("stable", "nightly")
    (ex,) = c.exclusions
    assert (ex.backend, ex.device_type, ex.families, ex.reason) == ("vulkan", "amd_gpu", ("gfx942",), "no driver")


def test_recipe_defaults_when_fields_are_left_out(tmp_path):
    data = {"schema_version": 1, "name": "bare",
            "recipes": {"whisper": {"rows": [{"backend": "cpu", "os": ["macos"], "devices": {"cpu": []}}]}}}
    c = catalog.load(write(tmp_path, data))
    rec = c.recipes["whisper"]
    assert rec.display_name == "whisper"
    assert rec.selectable_backend is False and rec.uses_ctx_size is False
    assert rec.rocm_channels == () and rec.options == [] and rec.backend_flag is None
    assert rec.rows[0].devices == (("cpu", ()),)  # an empty family list matches any device
    assert c.gates == [] and c.exclusions == []


def test_backends_keep_preference_order_once_each_and_the_backend_flag_is_found(tmp_path):
    data = base()
    rows = data["recipes"]["r"]["rows"]
    rows.append({"backend": "rocm", "os": ["windows"], "devices": {"amd_gpu": []}})
    rows.insert(0, {"backend": "vulkan", "os": ["linux"], "devices": {"amd_gpu": []}})
    rec = catalog.load(write(tmp_path, data)).recipes["r"]
    assert rec.backends == ["vulkan", "rocm", "cpu"]
    assert rec.backend_flag == "--r"  # the BACKEND option's flag, not the first option's


def test_gates_and_exclusions_are_found_by_recipe_backend_and_device_type(tmp_path):
    data = base()
    data["gates"].append({"recipe": "r", "backend": "vulkan", "family": "gfx1151", "os": ["windows"],
                          "channels": ["nightly"], "reason": "x"})
    data["exclusions"].append({"backend": "vulkan", "device_type": "nvidia_gpu", "families": [], "reason": "y"})
    c = catalog.load(write(tmp_path, data))
    assert set(c.gates_for("r", "rocm")) == {"gfx1100"}
    [g] = c.gates_for("r", "vulkan")["gfx1151"]  # a family can carry several gates (channel, kernel CWSR)
    assert g.os == ("windows",) and g.channels == ("nightly",) and g.needs == ()
    assert c.gates_for("other", "rocm") == {}
    assert [e.reason for e in c.exclusions_for("vulkan", "amd_gpu")] == ["no driver"]
    assert [e.reason for e in c.exclusions_for("vulkan", "nvidia_gpu")] == ["y"]
    assert c.exclusions_for("rocm", "amd_gpu") == []


def test_optional_fields_are_kept_for_the_verdict(tmp_path):
    data = base()
    row = data["recipes"]["r"]["rows"][0]
    row.update(tier="guest", format="python", requires={"executable": "x", "arch": ["x86_64"], "nvidia_driver_min": "580", "glibc_min": "2.39",
                         "macos_min": "15", "boards": ["rk3588"]},
               note="n", family_reason="no kernels for {family}", install="get it",
               device_notes={"amd_gpu": "a note"}, env={"A": "1"})
    data["recipes"]["r"]["homepage"] = "h"
    data.update(no_fit_reason="nothing for {recipe}", title="Mine", source="somewhere", device_types=["cpu"])
    c = catalog.load(write(tmp_path, data))
    assert (c.title, c.source) == ("Mine", "somewhere")
    r0 = c.recipes["r"].rows[0]
    assert r0.requires["nvidia_driver_min"] == "580" and r0.note == "n"
    assert r0.extra == {"family_reason": "no kernels for {family}", "install": "get it",
                        "device_notes": {"amd_gpu": "a note"}, "env": {"A": "1"}}
    assert c.recipes["r"].extra == {"homepage": "h"}
    assert c.extra == {"no_fit_reason": "nothing for {recipe}"}
    assert (r0.tier, r0.format) == ("guest", "python")


def test_builtin_names_and_paths_resolve():
    assert catalog.resolve_path("lemonade").endswith("catalogs/lemonade.json")
    assert catalog.resolve_path("localai").endswith("catalogs/localai.json")
    assert catalog.resolve_path("./mine.json") == "./mine.json"
    assert catalog.resolve_path("mine.json") == "mine.json"
    assert catalog.resolve_path("mine") == os.path.join(catalog.CATALOG_DIR, "mine.json")
    assert catalog.load("localai").name == "localai"
    assert catalog.load().name == "lemonade"  # the default catalog


def test_parse_without_a_path_names_the_catalog():
    with pytest.raises(InputError) as e:
        catalog.parse({"schema_version": 1})
    assert str(e.value).startswith("<catalog>: name: ")


def test_version_pins_skip_comment_keys():
    pins = catalog.load_pins("lemonade")
    assert "llamacpp" in pins and not any(k.startswith("_") for k in pins)
    assert catalog.load_pins("no-such-catalog") == {}


# -- every malformed field: exit 5 naming the field ------------------------------------------

def _set(path, value):
    """Change base() at a dotted path ("recipes.r.rows.0.os"); value DELETE removes the key."""
    def change(d):
        keys = path.split(".")
        node = d
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        elif value is DELETE:
            del node[last]
        else:
            node[last] = value
        return d
    return change


DELETE = object()
ROW = "recipes.r.rows.0"

BAD = [
    # (change, field named in the message, a word of the reason)
    (_set("schema_version", 2), "schema_version", "found 2"),
    (_set("schema_version", DELETE), "schema_version", "found None"),
    (_set("name", ""), "name", "non-empty"),
    (_set("name", 5), "name", "non-empty"),
    (_set("recipes", {}), "recipes", "non-empty"),
    (_set("recipes", []), "recipes", "object"),
    (_set("recipes.r", []), "recipes.r", "object"),
    (_set("recipes.r.display_name", 5), "recipes.r.display_name", "string"),
    (_set("recipes.r.selectable_backend", "yes"), "recipes.r.selectable_backend", "true or false"),
    (_set("recipes.r.uses_ctx_size", 1), "recipes.r.uses_ctx_size", "true or false"),
    (_set("recipes.r.rocm_channels", ["beta"]), "recipes.r.rocm_channels", "'beta'"),
    (_set("recipes.r.rocm_channels", "stable"), "recipes.r.rocm_channels", "list of strings"),
    (_set("recipes.r.options", {}), "recipes.r.options", "list"),
    (_set("recipes.r.options", [{"flag": "--x"}]), "recipes.r.options[0]", "name"),
    (_set("recipes.r.options", ["ctx"]), "recipes.r.options[0]", "name"),
    (_set("recipes.r.options", [{"name": "a"}, {"name": "b", "flag": 3}]), "recipes.r.options[1].flag", "string or null"),
    (_set("recipes.r.rows", []), "recipes.r.rows", "non-empty list"),
    (_set("recipes.r.rows", DELETE), "recipes.r.rows", "non-empty list"),
    (_set(ROW, "rocm"), "recipes.r.rows[0]", "object"),
    (_set(ROW + ".backend", ""), "recipes.r.rows[0].backend", "non-empty"),
    (_set(ROW + ".backend", DELETE), "recipes.r.rows[0].backend", "non-empty"),
    (_set(ROW + ".tier", "beta"), "recipes.r.rows[0].tier", "'beta'"),
    (_set(ROW + ".format", "docker"), "recipes.r.rows[0].format", "'docker'"),
    (_set(ROW + ".os", []), "recipes.r.rows[0].os", "empty"),
    (_set(ROW + ".os", DELETE), "recipes.r.rows[0].os", "list of strings"),
    (_set(ROW + ".os", ["linux", 3]), "recipes.r.rows[0].os", "list of strings"),
    (_set(ROW + ".os", ["linux", "beos"]), "recipes.r.rows[0].os", "'beos'"),
    (_set(ROW + ".devices", {}), "recipes.r.rows[0].devices", "non-empty"),
    (_set(ROW + ".devices", ["amd_gpu"]), "recipes.r.rows[0].devices", "non-empty"),
    (_set(ROW + ".devices", {"amd_gpu": [], "gpu": []}), "recipes.r.rows[0].devices", "'gpu'"),
    (_set(ROW + ".devices", {"cpu": "x86_64"}), "recipes.r.rows[0].devices.cpu", "list of strings"),
    (_set(ROW + ".requires", ["executable"]), "recipes.r.rows[0].requires", "object"),
    (_set(ROW + ".requires", {"exe": "llama-server"}), "recipes.r.rows[0].requires.exe", "unknown"),
    (_set(ROW + ".requires", {"executable": ""}), "recipes.r.rows[0].requires.executable", "non-empty"),
    (_set(ROW + ".requires", {"executable": ["llama-server"]}), "recipes.r.rows[0].requires.executable", "non-empty"),
    (_set(ROW + ".requires", {"nvidia_driver_min": 580}), "recipes.r.rows[0].requires.nvidia_driver_min", "580"),
    (_set(ROW + ".requires", {"glibc_min": "v2.39"}), "recipes.r.rows[0].requires.glibc_min", "v2.39"),
    (_set(ROW + ".requires", {"macos_min": "15."}), "recipes.r.rows[0].requires.macos_min", "15."),
    (_set(ROW + ".requires", {"arch": []}), "recipes.r.rows[0].requires.arch", "empty"),
    (_set(ROW + ".requires", {"boards": "rk3588"}), "recipes.r.rows[0].requires.boards", "list of strings"),
    (_set(ROW + ".family_reason", ""), "recipes.r.rows[0].family_reason", "non-empty"),
    (_set(ROW + ".install", 5), "recipes.r.rows[0].install", "non-empty"),
    (_set(ROW + ".device_notes", {}), "recipes.r.rows[0].device_notes", "non-empty"),
    (_set(ROW + ".device_notes", {"amd_gpu": ""}), "recipes.r.rows[0].device_notes", "non-empty"),
    (_set(ROW + ".device_notes", {"amd_gpu": "a", "gpu": "b"}), "recipes.r.rows[0].device_notes", "'gpu'"),
    (_set(ROW + ".env", {"A": 1}), "recipes.r.rows[0].env", "strings"),
    (_set(ROW + ".env", "A=1"), "recipes.r.rows[0].env", "strings"),
    (_set(ROW + ".note", 5), "recipes.r.rows[0].note", "string"),
    (_set("gates.0", "gate"), "gates[0]", "object"),
    (_set("gates.0.reason", ""), "gates[0].reason", "non-empty"),
    (_set("gates.0.family", DELETE), "gates[0].family", "non-empty"),
    (_set("gates.0.recipe", "nope"), "gates[0].recipe", "'nope'"),
    (_set("gates.0.os", ["beos"]), "gates[0].os", "'beos'"),
    (_set("gates.0.channels", ["beta"]), "gates[0].channels", "'beta'"),
    (_set("exclusions.0", []), "exclusions[0]", "object"),
    (_set("exclusions.0.device_type", ""), "exclusions[0].device_type", "non-empty"),
    (_set("exclusions.0.reason", DELETE), "exclusions[0].reason", "non-empty"),
    (_set("exclusions.0.families", DELETE), "exclusions[0].families", "list of strings"),
    (_set("no_fit_reason", ""), "no_fit_reason", "non-empty"),
    (_set("no_fit_reason", 3), "no_fit_reason", "non-empty"),
]


@pytest.mark.parametrize("change,where,word", BAD, ids=[f"{w}-{i}" for i, (_, w, _) in enumerate(BAD)])
def test_a_malformed_field_is_refused_naming_it(tmp_path, change, where, word):
    message = load_error(tmp_path, change(copy.deepcopy(base())))
    assert f": {where}: " in message, message
    assert word in message, message


def test_top_level_must_be_an_object(tmp_path):
    assert "top level" in load_error(tmp_path, [base()])


def test_the_second_recipe_and_row_are_named(tmp_path):
    data = base()
    data["recipes"]["s"] = copy.deepcopy(data["recipes"]["r"])
    data["recipes"]["s"]["rows"][1]["os"] = ["plan9"]
    assert ": recipes.s.rows[1].os: " in load_error(tmp_path, data)


@pytest.mark.parametrize("change,where", [
    (_set(ROW + ".os", []), "recipes.r.rows[0].os"),
    (_set(ROW + ".requires", {"nvidia_driver_min": "new"}), "recipes.r.rows[0].requires.nvidia_driver_min"),
    (_set("gates.0.recipe", "nope"), "gates[0].recipe"),
])
def test_cli_exits_5_naming_file_and_field(tmp_path, change, where):
    path = write(tmp_path, change(copy.deepcopy(base())), "broken-catalog.json")
    r = run_cli("--root", machine(CPU_VM), "--catalog", path, "r")
    assert r.rc == 5
    assert "broken-catalog.json" in r.err and where in r.err
    assert "Traceback" not in r.err


def test_unknown_builtin_catalog_names_the_builtins(tmp_path):
    # a mistyped built-in name is a usage error with a suggestion, and no internal path
    r = run_cli("--root", machine(CPU_VM), "--catalog", "lemonad", "llamacpp")
    assert r.rc == 2
    assert "did you mean 'lemonade'" in r.err and "catalogs/" not in r.err


# -- the channel a recipe offers ---------------------------------------------------------------


STRIX_7900 = "linux-ubuntu24.04-7950x-rx7900xtx"


def test_stable_only_recipe_clamps_the_nightly_channel():
    """sd-cpp ships ROCm builds on the stable channel only (its rocm_channels); asking for nightly
    gives nightly to llamacpp and stable to sd-cpp."""
    r = run_cli("--root", machine(STRIX_7900), "--channel", "nightly", "sd-cpp", "llamacpp", "--json")
    assert r.rc == 0, r.err
    recs = r.json()["recipes"]
    assert recs["sd-cpp"]["channel"] == "stable"
    assert recs["llamacpp"]["channel"] == "nightly"


@pytest.mark.parametrize("offered,asked,want", [
    (["nightly"], "stable", "nightly"),  # the first channel the recipe offers
    (["stable", "nightly"], "nightly", "nightly"),
    ([], "nightly", "nightly"),  # no ROCm channels listed: the setting stands
])
def test_channel_clamp_follows_the_catalog(tmp_path, offered, asked, want):
    data = base()
    data["recipes"]["r"]["rocm_channels"] = offered
    path = write(tmp_path, data)
    r = run_cli("--root", machine(STRIX_7900), "--catalog", path, "--channel", asked, "r", "--json")
    assert r.rc == 0, r.err
    assert r.json()["recipes"]["r"]["channel"] == want


# -- device types: an accelerator row beats a CPU row listed before it --------------------------


@pytest.mark.parametrize("dtype,name", [
    ("amd_gpu", "linux-ubuntu24.04-7950x-rx7900xtx"),
    ("nvidia_gpu", "linux-ubuntu24.04-rtx4090"),
    ("amd_npu", "linux-ubuntu24.04-strix-halo"),
    ("metal", "macos14-m3max"),
    ("intel_gpu", "linux-ubuntu24.04-arc-a770"),
])
def test_every_accelerator_type_is_preferred_to_the_cpu(dtype, name):
    from conftest import profile_of
    from selector import engine

    data = {"schema_version": 1, "name": "t", "recipes": {"r": {"rows": [
        {"backend": "on-cpu", "os": ["linux", "macos", "windows"], "devices": {"cpu": []}},
        {"backend": "on-acc", "os": ["linux", "macos", "windows"], "devices": {dtype: []}},
    ]}}}
    d = engine.decide(profile_of(name), catalog.parse(data), "r")
    assert d.backend == "on-acc" and d.device.type == dtype


def test_rows_of_one_backend_per_arch_give_the_row_that_fits_this_machine():
    # a catalog may give one backend a row per OS or per CPU arch (different assets): the row that
    # fits this machine decides, whichever comes first, and a later row that does not fit changes nothing
    from conftest import profile_of
    from selector import engine

    x86, arm = {"cpu": ["x86_64"]}, {"cpu": ["arm64"]}
    for rows in ([x86, arm], [arm, x86]):
        data = {"schema_version": 1, "name": "t", "recipes": {"r": {"rows": [
            {"backend": "cpu", "os": ["linux"], "devices": devs} for devs in rows]}}}
        d = engine.decide(profile_of(CPU_VM), catalog.parse(data), "r")
        assert d.backend == "cpu" and d.ok and d.device.family == "x86_64", rows


@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_a_container_row_runs_with_either_container_runtime(runtime):
    # LocalAI's images run under docker or podman alike: either on PATH makes the row usable
    from conftest import profile_of
    from selector import engine

    data = {"schema_version": 1, "name": "t", "recipes": {"r": {"rows": [
        {"backend": "img", "format": "container", "os": ["linux"], "devices": {"cpu": []}}]}}}
    prof = profile_of(CPU_VM)
    cat = catalog.parse(data)
    prof.executables = {}
    assert engine.decide(prof, cat, "r").verdict("img").reason == "needs docker or podman"
    prof.executables = {runtime: f"/usr/bin/{runtime}"}
    d = engine.decide(prof, cat, "r")
    assert d.ok and d.backend == "img"
