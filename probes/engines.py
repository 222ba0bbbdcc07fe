"""Facts that decide what an engine installs by itself, read through the Host:

- ``cuda_toolkits``: the CUDA toolkit majors installed as ``/usr/local/cuda-N`` (Linux), which
  LocalAI's detection reads (``nvidia-cuda-13`` when ``/usr/local/cuda-13`` exists).
- ``localai_capability`` (+ ``_source``): a capability forced on LocalAI by the environment
  variable ``LOCALAI_FORCE_META_BACKEND_CAPABILITY`` (``env``), else by the run file
  ``/run/localai/capability`` or the file named by ``LOCALAI_FORCE_META_BACKEND_CAPABILITY_RUN_FILE``
  (``run_file``).  Source: mudler/LocalAI@82c191af pkg/system/capabilities.go L34-36, L339-362.
  The environment is this process's; LocalAI's own process may differ (the human view says so).
"""

from __future__ import annotations

import re

ENV = "LOCALAI_FORCE_META_BACKEND_CAPABILITY"
RUN_FILE_ENV = "LOCALAI_FORCE_META_BACKEND_CAPABILITY_RUN_FILE"
RUN_FILE = "/run/localai/capability"
_CUDA_DIR = re.compile(r"^cuda-(\d+)$")


def probe(host, profile) -> None:
    if host.system == "Linux":
        majors = {m.group(1) for m in (_CUDA_DIR.match(n) for n in host.listdir("/usr/local")) if m}
        profile.cuda_toolkits = sorted(majors, key=int, reverse=True)
    forced = (host.env.get(ENV) or "").strip()
    if forced:
        profile.localai_capability, profile.localai_capability_source = forced, "env"
        return
    path = host.env.get(RUN_FILE_ENV) or RUN_FILE
    try:
        text = host.read(path)
    except PermissionError:
        text = None
    if text and text.strip():
        profile.localai_capability, profile.localai_capability_source = text.strip(), "run_file"
