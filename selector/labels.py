"""Node labels: a Profile and its Decisions as Kubernetes labels (pure, no I/O).

``labels(profile, decisions, prefix)`` gives an ordered dict ``name -> value`` that
``pick-backend labels`` prints as a Node Feature Discovery (NFD) local feature file, one
``name=value`` per line, or as JSON.  The label set, with the default prefix ``pick-backend.``:

==================================  ==========================================================
``pick-backend.<recipe>=<backend>``  the pick for every recipe (``none`` when nothing runs here)
``pick-backend.<recipe>.device=F``   the device family the pick runs on (``gfx1151``, ``sm_89``,
                                     ``XDNA2``, ``x86_64``, ``metal``); absent when the pick is none
``pick-backend.<recipe>.<b>=true``   every backend *b* of the recipe that is supported here (what
                                     ``pick-backend check <recipe> <b>`` answers with exit 0), so an
                                     image built for one backend can select every node that runs it
``pick-backend.os=linux``            ``os.name`` of the Profile
``pick-backend.arch=x86_64``         ``cpu.arch`` of the Profile
``pick-backend.amd.<gfx>=true``      every visible AMD GPU's hardware gfx target
``pick-backend.nvidia.<sm>=true``    every visible NVIDIA GPU whose sm is known
``pick-backend.npu=<generation>``    the NPU the engine would use (``XDNA1``, ``XDNA2``, ``unknown``)
``pick-backend.metal=true``          an Apple GPU with Metal
``pick-backend.<recipe>.verified=``  with ``labels --verify`` only: ``true`` when the installed
                                     build of the pick lists the picked device (``pick-backend
                                     verify`` exits 0), else ``false``; absent when not installed
==================================  ==========================================================

Install states are deliberately not labels: they change with every install and a labelling
container does not see the host's cache.  Where two names collide (a recipe called ``os``), the
first one in the order above wins.

Kubernetes label syntax, and how anything else is sanitised (``sanitize``):

* A value is empty or at most 63 characters of ``[A-Za-z0-9._-]``, beginning and ending with an
  alphanumeric.  A key is an optional DNS-subdomain prefix and ``/`` followed by a name with the
  same rules as a non-empty value.
* Sanitising: (1) every run of characters outside ``[A-Za-z0-9._-]`` (spaces, ``/``, ``:``,
  non-ASCII letters...) becomes a single ``-``; (2) leading and trailing characters that are not
  ASCII alphanumerics are removed; (3) a result longer than 63 characters keeps its first 54
  characters (trailing non-alphanumerics removed again) plus ``-`` plus the first 8 hex digits of the
  SHA-256 of the original text, so that two long inputs sharing a beginning stay distinct.
  An empty name becomes ``unknown``; an empty value stays empty (valid in Kubernetes).
* Valid text is left exactly as it is (the sanitiser is idempotent), case included.
* The prefix is glued to the front of every name and the whole name is sanitised.  A prefix with a
  ``/`` (``gpu.example.com/pb.``) carries a DNS namespace; that part is not rewritten but checked
  (lower case, at most 253 characters) and refused with a ``ValueError`` when invalid.

NFD prepends ``feature.node.kubernetes.io/`` to names without a namespace, so the default labels
appear on the node as ``feature.node.kubernetes.io/pick-backend.llamacpp=rocm``.
"""

from __future__ import annotations

import hashlib
import re

from selector.engine import Machine

DEFAULT_PREFIX = "pick-backend."
MAX_NAME = 63
MAX_VALUE = 63
MAX_NAMESPACE = 253
NONE = "none"

_INVALID_RUN = re.compile(r"[^A-Za-z0-9._-]+")
_EDGE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")
_TRAILING = re.compile(r"[^A-Za-z0-9]+$")
# the Kubernetes rules, written from the API conventions (qualified name / label value)
NAME_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
VALUE_RE = re.compile(r"([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?")
NAMESPACE_RE = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")


def sanitize(text: str, limit: int = MAX_VALUE) -> str:
    """``text`` as a valid label value: see the module docstring for the rules."""
    out = _EDGE.sub("", _INVALID_RUN.sub("-", text))
    if len(out) > limit:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        out = _TRAILING.sub("", out[: limit - 9]) + "-" + digest
    return out


def sanitize_value(text) -> str:
    return sanitize("" if text is None else str(text), MAX_VALUE)


def sanitize_name(text: str) -> str:
    return sanitize(text, MAX_NAME) or "unknown"


def split_prefix(prefix: str) -> tuple[str, str]:
    """(namespace, name prefix); raises ValueError for a namespace Kubernetes would refuse."""
    if "/" not in prefix:
        return "", prefix
    ns, name = prefix.rsplit("/", 1)
    if not ns or len(ns) > MAX_NAMESPACE or not NAMESPACE_RE.fullmatch(ns):
        raise ValueError(f"prefix namespace '{ns}' is not a DNS subdomain (lower-case letters, digits, "
                         f"'-' and '.', at most {MAX_NAMESPACE} characters), e.g. gpu.example.com/")
    return ns, name


def key(prefix: str, name: str) -> str:
    ns, head = split_prefix(prefix)
    seg = sanitize_name(head + name)
    return f"{ns}/{seg}" if ns else seg


def is_valid_key(k: str) -> bool:
    ns, _, name = k.rpartition("/")
    if ns and (len(ns) > MAX_NAMESPACE or not NAMESPACE_RE.fullmatch(ns)):
        return False
    return bool(NAME_RE.fullmatch(name))


def is_valid_value(v: str) -> bool:
    return bool(VALUE_RE.fullmatch(v))


def labels(profile, decisions, prefix: str = DEFAULT_PREFIX, verified: dict | None = None) -> dict[str, str]:
    """Ordered labels for a Profile and the Decisions of the chosen recipes.  ``verified``
    (``labels --verify``): recipe -> whether its installed build passed ``verify``."""
    split_prefix(prefix)  # refuse a bad namespace before anything else
    out: dict[str, str] = {}

    def put(name: str, value) -> None:
        out.setdefault(key(prefix, name), sanitize_value(value))

    for d in decisions:
        put(d.recipe, d.backend if d.ok else NONE)
        if d.ok and d.device is not None and d.device.family:
            put(f"{d.recipe}.device", d.device.family)
        for v in d.backends:
            if v.supported:
                put(f"{d.recipe}.{v.name}", "true")
        if verified and d.recipe in verified:  # issue 16
            put(f"{d.recipe}.verified", "true" if verified[d.recipe] else "false")

    put("os", profile.os.name)
    put("arch", profile.cpu.arch)
    for g in profile.amd_gpus:
        if g.visible and g.gfx:
            put(f"amd.{g.gfx}", "true")
    for g in profile.nvidia_gpus:
        if g.visible and g.sm:
            put(f"nvidia.{g.sm}", "true")
    npu = Machine(profile).first("amd_npu")  # the same NPU the engine judges recipes on
    if npu is not None:
        put("npu", npu.generation or "unknown")
    if profile.metal.available:
        put("metal", "true")
    return out


def feature_file(lbls: dict[str, str]) -> str:
    """The NFD local feature file: ``name=value`` per line (no comments: older NFD reads every line)."""
    return "".join(f"{k}={v}\n" for k, v in lbls.items())
