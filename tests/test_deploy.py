"""deploy/: the Kubernetes manifests against the Kubernetes API schemas (kubernetes-validate, which
ships the schemas: offline), the NVIDIA DaemonSet against the plain one, and the Containerfile."""

import copy
import os
import re
import socket

import pytest
import yaml

from conftest import ROOT

K8S = os.path.join(ROOT, "deploy", "kubernetes")
MANIFESTS = ["daemonset.yaml", "daemonset-nvidia.yaml"]
NVIDIA_KEYS = ("feature.node.kubernetes.io/pci-0300_10de.present", "feature.node.kubernetes.io/pci-0302_10de.present")


@pytest.fixture
def offline(monkeypatch):
    """Any attempt to reach the network fails the test."""
    def refuse(*a, **k):
        raise AssertionError("the validator tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def load(name):
    with open(os.path.join(K8S, name), encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


@pytest.mark.parametrize("name", MANIFESTS)
def test_manifests_are_valid_kubernetes_objects(offline, name):
    import kubernetes_validate as kv

    for doc in load(name):
        kv.validate(doc, kv.latest_version(), strict=True)


def test_the_validator_rejects_what_the_api_server_would(offline):
    import kubernetes_validate as kv

    good = load("daemonset.yaml")[0]
    for spoil in (lambda d: d["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0].__setitem__("readOnly", "yes"),
                  lambda d: d["spec"]["template"]["spec"].__setitem__("runtimeClass", "nvidia"),  # the field is runtimeClassName
                  lambda d: d["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "X", "value": 1})):
        bad = copy.deepcopy(good)
        spoil(bad)
        with pytest.raises(kv.ValidationError):
            kv.validate(bad, kv.latest_version(), strict=True)


def _pod(name):
    [ds] = load(name)
    return ds["spec"]["template"]["spec"]


def test_the_nvidia_daemonset_is_the_same_pod_with_what_the_nvidia_runtime_needs():
    plain, nv = _pod("daemonset.yaml"), _pod("daemonset-nvidia.yaml")
    assert nv["runtimeClassName"] == "nvidia" and "runtimeClassName" not in plain
    env = {e["name"]: e["value"] for e in nv["containers"][0]["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    assert not [e for e in plain["containers"][0]["env"] if e["name"].startswith("NVIDIA_")]
    assert "resources" in nv["containers"][0] and "nvidia.com/gpu" not in str(nv["containers"][0]["resources"])
    # everything else is the same pod
    a, b = copy.deepcopy(plain), copy.deepcopy(nv)
    for p in (a, b):
        p.pop("affinity")
        p.pop("runtimeClassName", None)
        p["containers"][0]["env"] = [e for e in p["containers"][0]["env"] if not e["name"].startswith("NVIDIA_")]
    assert a == b


def _selects(pod, labels) -> bool:
    """Does the pod's required node affinity accept a node with these labels?"""
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]

    def ok(e):
        return {"Exists": e["key"] in labels, "DoesNotExist": e["key"] not in labels}[e["operator"]]

    return any(all(ok(e) for e in t["matchExpressions"]) for t in terms)


@pytest.mark.parametrize("labels", [set(), {NVIDIA_KEYS[0]}, {NVIDIA_KEYS[1]}, set(NVIDIA_KEYS),
                                    {"feature.node.kubernetes.io/pci-0300_1002.present"}])
def test_every_node_runs_exactly_one_labeller(labels):
    plain, nv = _pod("daemonset.yaml"), _pod("daemonset-nvidia.yaml")
    assert _selects(plain, labels) != _selects(nv, labels)
    assert _selects(nv, labels) == bool(labels & set(NVIDIA_KEYS))  # AMD and CPU nodes: the plain one


def test_containerfile_builds_a_small_non_root_image_from_the_repo():
    text = open(os.path.join(ROOT, "deploy", "container", "Containerfile"), encoding="utf-8").read()
    base = re.search(r"(?m)^ARG BASE=(\S+)$", text).group(1)
    # pinned: an exact Python patch release on a named Debian release (or a digest), never a floating tag
    assert re.search(r":3\.\d+\.\d+-slim-[a-z]+$|@sha256:[0-9a-f]{64}$", base), base
    froms = re.findall(r"(?m)^FROM (\S+)", text)
    assert froms and all(f.startswith("${BASE}") for f in froms)
    copies = re.findall(r"(?m)^COPY (?!--from)(.+) \S+$", text)
    sources = [s for line in copies for s in line.split()]
    assert sorted(sources) == ["README.md", "probes/", "pyproject.toml", "selector/"]
    for s in sources:
        assert os.path.exists(os.path.join(ROOT, s)), s
    user = re.findall(r"(?m)^USER (\S+)$", text)
    assert user and not user[-1].startswith(("0", "root"))
    assert "--no-cache-dir" in text
    assert re.search(r'(?m)^ENTRYPOINT \["pick-backend"\]$', text)
    ignore = open(os.path.join(ROOT, ".dockerignore"), encoding="utf-8").read().split()
    assert {".venv", "fixtures", ".git"} <= set(ignore)


def test_the_image_name_in_the_manifests_is_the_one_the_readme_builds():
    readme = open(os.path.join(K8S, "README.md"), encoding="utf-8").read()
    for name in MANIFESTS:
        image = _pod(name)["containers"][0]["image"]
        assert image == "REGISTRY/pick-backend:VERSION"
    assert "deploy/container/Containerfile" in readme and "REGISTRY/pick-backend:VERSION" in readme
