"""`pick-backend labels`: NFD feature files from live probes, captures and saved profiles; the
Kubernetes label-syntax sanitiser; the deploy/ examples (DaemonSet, Ansible fact and play)."""

import json
import os
import re
import stat
import subprocess
import sys

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT, expected, machine, machine_names, profile_of, run_cli
from selector import labels as L

STRIX = "linux-ubuntu24.04-strix-halo"
CPU_ONLY = "linux-debian12-x86_64-cpu-only"
NFD_DIR = "/etc/kubernetes/node-feature-discovery/features.d"

# The Kubernetes rules, as written in apimachinery's validation (qualified name and label value):
# at most 63 characters, alphanumerics, '-', '_' and '.', beginning and ending alphanumeric.
K8S_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
K8S_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
K8S_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def k8s_valid_key(k):
    ns, _, name = k.rpartition("/")
    if ns and not (len(ns) <= 253 and K8S_DNS1123_SUBDOMAIN.fullmatch(ns)):
        return False
    return len(name) <= 63 and bool(K8S_NAME.fullmatch(name))


def k8s_valid_value(v):
    return len(v) <= 63 and bool(K8S_VALUE.fullmatch(v))


def parse_feature_file(text):
    out = {}
    for line in text.splitlines():
        assert "=" in line, line
        k, v = line.split("=", 1)
        assert k not in out, f"duplicate label {k}"
        out[k] = v
    return out


def assert_all_valid(lbls):
    for k, v in lbls.items():
        assert k8s_valid_key(k), k
        assert k8s_valid_value(v), (k, v)


def labels_of(*args, env=None):
    r = run_cli(*args, env=env)
    assert r.rc == 0, r.err
    return parse_feature_file(r.out)


# ------------------------------------------------------------------------------------------------
# machines


def test_strix_halo_labels_carry_the_picks_and_the_hardware():
    lbls = labels_of("--root", machine(STRIX), "labels")
    assert_all_valid(lbls)
    picks = expected(STRIX)["picks"]["lemonade"]
    for recipe, backend in picks.items():
        assert lbls[f"pick-backend.{recipe}"] == (backend or "none"), recipe
    assert lbls["pick-backend.llamacpp.device"] == "gfx1151"  # the Radeon 8060S
    assert lbls["pick-backend.flm.device"] == "XDNA2"
    assert lbls["pick-backend.llamacpp.rocm"] == "true"  # supported, though not the pick
    assert "pick-backend.ds4.device" not in lbls  # no pick, no device
    assert lbls["pick-backend.amd.gfx1151"] == "true"
    assert lbls["pick-backend.npu"] == "XDNA2"
    assert lbls["pick-backend.os"] == "linux"
    assert lbls["pick-backend.arch"] == "x86_64"
    assert not [k for k in lbls if k.startswith("pick-backend.nvidia.")]


def test_cpu_only_machine_still_gets_labels_but_no_accelerator_ones():
    lbls = labels_of("labels", "--root", machine(CPU_ONLY), "--recipes", "llamacpp,flm")
    assert_all_valid(lbls)
    assert lbls["pick-backend.llamacpp"] == expected(CPU_ONLY)["picks"]["lemonade"]["llamacpp"]
    assert lbls["pick-backend.llamacpp.device"] == "x86_64"  # it runs on the CPU
    assert lbls["pick-backend.flm"] == "none"
    assert lbls["pick-backend.os"] == "linux" and lbls["pick-backend.arch"] == "x86_64"
    accel = [k for k in lbls if k.startswith(("pick-backend.amd.", "pick-backend.nvidia.", "pick-backend.npu",
                                              "pick-backend.metal"))]
    assert accel == []
    assert set(lbls) >= {"pick-backend.llamacpp", "pick-backend.flm"}
    assert not [k for k in lbls if k.startswith("pick-backend.whispercpp")]  # only the recipes asked for


def test_nvidia_sm_label():
    lbls = labels_of("--root", machine("linux-ubuntu22.04-h100"), "labels", "--recipes", "llamacpp")
    assert lbls["pick-backend.nvidia.sm_90"] == "true"
    assert lbls["pick-backend.llamacpp"] == "cuda"
    assert lbls["pick-backend.llamacpp.device"] == "sm_90"


@pytest.mark.parametrize("name", machine_names())
def test_every_fixture_gives_valid_labels_that_agree_with_its_expected_picks(name):
    from selector import catalog, engine

    prof = profile_of(name)
    cat = catalog.load("lemonade")
    m = engine.Machine(prof)
    decisions = [engine.decide(prof, cat, r, machine=m) for r in cat.recipes]
    lbls = L.labels(prof, decisions)
    assert_all_valid(lbls)
    for recipe, backend in expected(name)["picks"]["lemonade"].items():
        assert lbls[f"pick-backend.{recipe}"] == (backend or "none"), recipe


def test_json_is_the_same_labels():
    lines = labels_of("--root", machine(STRIX), "labels", "--recipes", "llamacpp")
    r = run_cli("--root", machine(STRIX), "labels", "--recipes", "llamacpp", "--json")
    assert r.rc == 0, r.err
    assert r.json()["labels"] == lines
    assert list(r.json()["labels"]) == list(lines)  # same order
    assert r.json()["schema_version"] == 1


def test_labels_from_a_saved_profile_match_the_live_probe(tmp_path):
    r = run_cli("--root", machine(STRIX), "probe", "--json")
    assert r.rc == 0, r.err
    saved = tmp_path / "node7.json"
    saved.write_text(r.out, encoding="utf-8")
    from_profile = labels_of("labels", "--profile", str(saved))
    assert from_profile == labels_of("--root", machine(STRIX), "labels")


def test_prefix_with_a_namespace(tmp_path):
    lbls = labels_of("--root", machine(STRIX), "labels", "--recipes", "llamacpp", "--prefix", "gpu.example.com/pb.")
    assert lbls["gpu.example.com/pb.llamacpp"] == "vulkan"
    assert lbls["gpu.example.com/pb.amd.gfx1151"] == "true"
    assert_all_valid(lbls)
    bare = labels_of("--root", machine(STRIX), "labels", "--recipes", "llamacpp", "--prefix", "")
    assert bare["llamacpp"] == "vulkan" and bare["os"] == "linux"


@pytest.mark.parametrize("args, code, words", [
    (["--prefix", "Not_A_Domain/x."], 2, "--prefix"),
    (["--recipes", "llamacp"], 2, "did you mean 'llamacpp'"),
])
def test_usage_errors(args, code, words):
    r = run_cli("--root", machine(STRIX), "labels", *args)
    assert r.rc == code
    assert words in r.err
    assert "Traceback" not in r.err


def test_bad_profile_names_the_file(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"schema_version": 1, "os": ', encoding="utf-8")
    r = run_cli("labels", "--profile", str(bad))
    assert r.rc == 5
    assert str(bad) in r.err and "Traceback" not in r.err


# ------------------------------------------------------------------------------------------------
# --write


def test_write_replaces_the_file_and_leaves_nothing_else(tmp_path):
    target = tmp_path / "pick-backend"
    target.write_text("pick-backend.llamacpp=stale\nold.label=true\n", encoding="utf-8")
    r = run_cli("--root", machine(STRIX), "labels", "--recipes", "llamacpp", "--write", str(target))
    assert r.rc == 0, r.err
    assert r.out == ""  # quiet, for a loop in a DaemonSet
    written = parse_feature_file(target.read_text(encoding="utf-8"))
    assert written == labels_of("--root", machine(STRIX), "labels", "--recipes", "llamacpp")
    assert "old.label" not in written
    assert os.listdir(tmp_path) == ["pick-backend"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # nfd-worker reads it


def test_write_with_json_prints_too(tmp_path):
    target = tmp_path / "f"
    r = run_cli("--root", machine(CPU_ONLY), "labels", "--recipes", "llamacpp", "--write", str(target), "--json")
    assert r.rc == 0, r.err
    assert r.json()["labels"] == parse_feature_file(target.read_text(encoding="utf-8"))


def test_write_fails_cleanly_when_the_parent_is_a_file(tmp_path):
    blocker = tmp_path / "features.d"
    blocker.write_text("I am a file\n", encoding="utf-8")
    r = run_cli("--root", machine(STRIX), "labels", "--write", str(blocker / "pick-backend"))
    assert r.rc == 4
    assert "cannot write" in r.err and "Traceback" not in r.err
    assert sorted(os.listdir(tmp_path)) == ["features.d"]
    assert blocker.read_text(encoding="utf-8") == "I am a file\n"


def test_write_into_a_missing_directory_promises_no_previous_file(tmp_path):
    # there was no file: "the previous file is untouched" would be a claim about nothing
    target = tmp_path / "features.d" / "pick-backend"
    r = run_cli("--root", machine(STRIX), "labels", "--write", str(target))
    assert r.rc == 4 and f"cannot write {target}: No such file or directory; nothing was written" in r.err, r.err
    assert "previous file" not in r.err and os.listdir(tmp_path) == []


def test_write_removes_its_temp_file_when_the_rename_fails(tmp_path):
    # the target is a non-empty directory: the temp file gets written, the rename then fails
    target = tmp_path / "pick-backend"
    target.mkdir()
    (target / "keep").write_text("x", encoding="utf-8")
    r = run_cli("--root", machine(STRIX), "labels", "--write", str(target))
    assert r.rc == 4 and "cannot write" in r.err and str(target) in r.err  # a wrong destination: exit 4, named
    assert "Traceback" not in r.err and "the previous file is untouched" in r.err  # the directory stays as it was
    assert os.listdir(tmp_path) == ["pick-backend"]
    assert os.listdir(target) == ["keep"]

    from selector.cli.labels import write_atomic

    with pytest.raises(OSError):  # below the option check: the temp file is written, os.replace fails
        write_atomic(str(target), "a=b\n")
    assert os.listdir(tmp_path) == ["pick-backend"]  # no .pick-backend.*.tmp left behind


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only directories")
def test_write_into_a_read_only_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "pick-backend").write_text("previous=true\n", encoding="utf-8")
    ro.chmod(0o555)
    try:
        r = run_cli("--root", machine(STRIX), "labels", "--write", str(ro / "pick-backend"))
        assert r.rc == 4 and "Traceback" not in r.err
        assert os.listdir(ro) == ["pick-backend"]
        assert (ro / "pick-backend").read_text(encoding="utf-8") == "previous=true\n"
    finally:
        ro.chmod(0o755)


# ------------------------------------------------------------------------------------------------
# the sanitiser


@pytest.mark.parametrize("raw, value", [
    ("gfx1151", "gfx1151"),
    ("AMD Radeon 8060S", "AMD-Radeon-8060S"),
    ("  --gfx1151--  ", "gfx1151"),
    ("a / b : c", "a-b-c"),
    ("Strix Halo (XDNA2)", "Strix-Halo-XDNA2"),
    ("ümlaut", "mlaut"),
    ("日本", ""),
    ("", ""),
])
def test_sanitise_examples(raw, value):
    assert L.sanitize_value(raw) == value


def test_long_text_is_cut_with_a_digest_so_distinct_inputs_stay_distinct():
    a, b = "x" * 80 + "a", "x" * 80 + "b"
    sa, sb = L.sanitize_value(a), L.sanitize_value(b)
    assert len(sa) == len(sb) == 63
    assert sa != sb and sa.startswith("x" * 54 + "-")
    assert L.sanitize_name("") == "unknown"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_becomes_a_valid_value_and_name(text):
    v = L.sanitize_value(text)
    assert k8s_valid_value(v)
    n = L.sanitize_name(text)
    assert k8s_valid_key(n)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_sanitiser_is_idempotent_and_deterministic(text):
    once = L.sanitize_value(text)
    assert L.sanitize_value(once) == once
    assert L.sanitize_value(text) == once
    assert L.sanitize_name(L.sanitize_name(text)) == L.sanitize_name(text)


@settings(max_examples=200, deadline=None)
@given(st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?", fullmatch=True))
def test_valid_text_is_left_alone(text):
    assert L.sanitize_value(text) == text
    assert L.sanitize_name(text) == text


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["", "pick-backend.", "gpu.example.com/", "gpu.example.com/pb.", "-weird prefix-"]), st.text())
def test_any_name_under_any_accepted_prefix_is_a_valid_key(prefix, name):
    assert k8s_valid_key(L.key(prefix, name))


# ------------------------------------------------------------------------------------------------
# deploy/kubernetes


def _daemonset():
    with open(os.path.join(ROOT, "deploy", "kubernetes", "daemonset.yaml"), encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    assert len(docs) == 1
    return docs[0]


def test_daemonset_is_well_formed():
    ds = _daemonset()
    assert ds["apiVersion"] == "apps/v1" and ds["kind"] == "DaemonSet"
    assert ds["metadata"]["name"]
    spec = ds["spec"]
    match = spec["selector"]["matchLabels"]
    tmpl_labels = spec["template"]["metadata"]["labels"]
    assert match and all(tmpl_labels.get(k) == v for k, v in match.items())


def test_daemonset_writes_the_nfd_feature_file_with_no_privileges():
    pod = _daemonset()["spec"]["template"]["spec"]
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    volumes = {v["name"]: v for v in pod["volumes"]}
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc.get("privileged") is not True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")
    cmd = " ".join(c.get("command", []) + c.get("args", []))
    assert f"pick-backend labels --write {NFD_DIR}/pick-backend" in cmd

    host_mounts = {}
    for m in c["volumeMounts"]:
        hp = volumes[m["name"]].get("hostPath")
        if hp:
            host_mounts[hp["path"]] = m
    assert set(host_mounts) == {"/sys", "/dev", NFD_DIR}
    for path in ("/sys", "/dev"):
        assert host_mounts[path]["readOnly"] is True, path
        assert host_mounts[path]["mountPath"] == path
    assert host_mounts[NFD_DIR]["mountPath"] == NFD_DIR
    assert not host_mounts[NFD_DIR].get("readOnly")
    # the runtime cannot create the default /dev/termination-log inside a read-only host /dev
    assert not c.get("terminationMessagePath", "/dev/termination-log").startswith("/dev/")


def _yaml_blocks(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def _selector_keys(obj):
    """Every node label key a README example selects on."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "nodeSelector":
                yield from v
            elif k == "key" and isinstance(v, str):
                yield v
            else:
                yield from _selector_keys(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _selector_keys(v)


def test_readme_examples_select_on_labels_that_pick_backend_writes():
    from selector import catalog, engine

    blocks = _yaml_blocks(os.path.join(ROOT, "deploy", "kubernetes", "README.md"))
    assert any(isinstance(b, dict) and b.get("kind") == "Deployment" for b in blocks)
    keys = {k for b in blocks for k in _selector_keys(b)}
    assert "feature.node.kubernetes.io/pick-backend.llamacpp" in keys
    cat = catalog.load("lemonade")
    produced = set()
    for name in machine_names():
        prof = profile_of(name)
        produced |= set(L.labels(prof, [engine.decide(prof, cat, "llamacpp")]))
    for k in keys:
        assert k.startswith("feature.node.kubernetes.io/"), k
        assert k.split("/", 1)[1] in produced, k


# ------------------------------------------------------------------------------------------------
# deploy/ansible


def _play():
    with open(os.path.join(ROOT, "deploy", "ansible", "site.yml"), encoding="utf-8") as f:
        (play,) = yaml.safe_load(f)
    return play


def test_ansible_play_installs_only_behind_the_check_gate():
    tasks = _play()["tasks"]

    def argv(t):
        cmd = t.get("ansible.builtin.command") or t.get("command") or {}
        return cmd.get("argv", []) if isinstance(cmd, dict) else str(cmd).split()

    gates = [t for t in tasks if argv(t)[1:2] == ["check"]]
    assert len(gates) == 1
    gate = gates[0]
    reg = gate["register"]
    assert "0" in str(gate["failed_when"]) and "3" in str(gate["failed_when"])  # 3 = unsupported, not a failure
    installs = [t for t in tasks if argv(t)[1:2] == ["install"]]
    assert len(installs) == 1
    when = installs[0]["when"]
    when = " and ".join(when) if isinstance(when, list) else when
    assert f"{reg}.rc == 0" in when
    assert tasks.index(gate) < tasks.index(installs[0])
    fact_tasks = [t for t in tasks if "pick_backend.fact" in json.dumps(t)]
    assert any("/etc/ansible/facts.d/pick_backend.fact" in json.dumps(t) for t in fact_tasks)


@pytest.mark.skipif(os.name != "posix", reason="the fact script is POSIX sh")
def test_ansible_fact_prints_profile_and_picks(tmp_path):
    fact = os.path.join(ROOT, "deploy", "ansible", "pick_backend.fact")
    assert os.access(fact, os.X_OK)
    wrapper = tmp_path / "pick-backend"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m selector --root "{machine(STRIX)}" "$@"\n',
                       encoding="utf-8")
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PICK_BACKEND")}
    env.update(PICK_BACKEND=str(wrapper), PYTHONPATH=ROOT)
    p = subprocess.run([fact], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert [g["gfx"] for g in data["profile"]["amd_gpus"]] == ["gfx1151"]
    picks = expected(STRIX)["picks"]["lemonade"]
    assert data["picks"]["recipes"]["llamacpp"]["backend"] == picks["llamacpp"]
    assert set(data["picks"]["recipes"]) == set(picks)


@pytest.mark.skipif(os.name != "posix", reason="the fact script is POSIX sh")
def test_ansible_fact_without_pick_backend_is_still_json(tmp_path):
    fact = os.path.join(ROOT, "deploy", "ansible", "pick_backend.fact")
    env = {"PATH": str(tmp_path), "PICK_BACKEND": str(tmp_path / "missing")}
    p = subprocess.run(["/bin/sh", fact], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0
    assert "error" in json.loads(p.stdout)


@pytest.mark.skipif(os.name != "posix", reason="FIFOs and symbolic links")
def test_write_never_replaces_a_link_or_a_special_file(tmp_path):
    # the write is a rename over the path: over a link it would replace the link itself, over a device
    # node (as root: /dev/full) the device; either is refused, and both are left as they were
    real = tmp_path / "real"
    real.write_text("kept\n", encoding="utf-8")
    link, fifo = tmp_path / "link", tmp_path / "fifo"
    os.symlink(real, link)
    os.mkfifo(fifo)
    for target in (link, fifo):
        r = run_cli("--root", machine(CPU_ONLY), "labels", "--write", str(target))
        assert r.rc == 4 and "not a regular file" in r.err and "Traceback" not in r.err, r.err
    assert os.path.islink(link) and real.read_text(encoding="utf-8") == "kept\n"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["fifo", "link", "real"]
