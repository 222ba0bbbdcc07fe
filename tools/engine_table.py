#!/usr/bin/env python3
"""The table in docs/models.md: `plan` against what a real llama.cpp allocates, per buffer.

For every model tests/engine_gguf.py writes and each context, runs `pick-backend plan` with the
build as the `system` backend, starts the build with the plan's own line (-lv 4) and prints one
markdown row: ours / printed, per buffer.  The same comparison tests/test_real_engine.py asserts.

    python tools/engine_table.py [--contexts 512,4096,32768] [--llama-cpp DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--contexts", default="512,4096,32768")
    ap.add_argument("--llama-cpp", help="a llama.cpp directory with bin/ (default: ../shared/llama.cpp)")
    a = ap.parse_args(argv)
    if a.llama_cpp:
        os.environ["PICK_BACKEND_LLAMA_CPP"] = a.llama_cpp
    import engine_gguf
    import real_engine as E

    if E.WHY_NOT:
        print(E.WHY_NOT, file=sys.stderr)
        return 2
    build, commit = E.version()
    mib = lambda n: f"{n / E.MiB:.2f}"  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = os.path.join(tmp, "bin")
        os.mkdir(bin_dir)
        os.symlink(E.exe("llama-server"), os.path.join(bin_dir, "llama-server"))
        env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        print(f"llama.cpp build {build} (commit {commit}), CPU; MiB, plan / printed")
        print()
        print("| model | ctx | model (mapped) | repacked | KV | compute | output | total |")
        print("|---|---|---|---|---|---|---|---|")
        for key in engine_gguf.SHAPES:
            path = engine_gguf.write(os.path.join(tmp, f"{key}.gguf"), key)
            for ctx in a.contexts.split(","):
                out = subprocess.run([sys.executable, "-m", "selector", "plan", "llamacpp", "--backend", "system",
                                      "--model", path, "--ctx-size", ctx, "--cache-dir", tmp, "--json"],
                                     capture_output=True, text=True, env=env, cwd=ROOT)
                p = json.loads(out.stdout)
                log, rc = E.start_server([p["executable"], *p["args"]], env=env)
                if rc:
                    print(f"| {key} | {ctx} | the build did not start (exit {rc}) |||||")
                    continue
                got = E.buffers(log)
                ours = p["fit"]["cpu"]
                printed = {"weights": got["model"].get("CPU_Mapped", 0), "repack": got["model"].get("CPU_REPACK", 0),
                           "kv": sum(got["kv"]), "compute": got["compute"].get("CPU", 0),
                           "output": got["output"].get("CPU", 0)}
                total = sum(printed.values())
                cells = [f"{mib(ours[k])} / {mib(printed[k])}" for k in ("weights", "repack", "kv", "compute", "output")]
                print(f"| {key} | {ctx} | " + " | ".join(cells) +
                      f" | {100 * (ours['total'] - total) / total:+.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
