#!/usr/bin/env python3
"""Build selector/catalogs/llama-bench-published.json from the rows read from public pages
(catalogs-src/llama-bench/read-*.json: each row as the page printed it, with its URL and place), by the
rules of docs/catalogs.md: a row is kept where it is llama.cpp's own llama-bench output (or its
author's table of it) from an upstream build, with every layer offloaded, dated, on a GPU of the GPU
table; DROP says why each source that is not kept is not.

    python catalogs-src/llama-bench/build.py            # the change; exit 1 when the catalog differs
    python catalogs-src/llama-bench/build.py --write    # ... and write it
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import add_bench  # noqa: E402

DROP = [  # (url substring, reason)
    ("PrismML-Eng/", "a fork of llama.cpp (PrismML), 1-bit quantizations"),
    ("ikawrakow/ik_llama.cpp", "a fork of llama.cpp (ik_llama.cpp); mainline figures quoted second-hand"),
    ("TheTom/turboquant_plus", "a fork of llama.cpp"),
    ("intel/ipex-llm", "Intel's IPEX-LLM build, not llama.cpp's"),
    ("maeddesg/ROCmForge", "a table of another engine's project; which build each figure is from is unclear"),
    ("brand-o/normiebench", "a scoreboard's JSON, not llama-bench's output"),
    ("geerlingguy/beowulf-ai-cluster/issues/17", "the chip is not named"),
    ("ggml-org/llama.cpp/pull/16634", "a benchmark app's output, not llama-bench's"),
    ("ggml-org/llama.cpp/pull/10171", "the backend is not named (Accelerate)"),
    ("victoralcazardev/rx7900xtx-local-llm", "the author reports the card's memory clock stuck at 772 MHz under Vulkan"),
    ("ggml-org/llama.cpp/issues/26663", "a summary table whose columns cannot be told apart"),
    ("ggml-org/llama.cpp/pull/13506", "a pull request's own branch"),
    ("ggml-org/llama.cpp/pull/21024", "a compare table without a backend column"),
    ("ggml-org/llama.cpp/pull/22078", "a pull request's own build"),
    ("ggml-org/llama.cpp/pull/25893", "a pull request's own branch (DSv4 Lightning Indexer)"),
    ("ggml-org/llama.cpp/pull/2059", "the Vulkan backend's own pull request, measured on its branch (2024)"),
    ("ggml-org/llama.cpp/pull/13324", "its note: flash attention fell back to the CPU on that build"),
    ("geerlingguy/ai-benchmarks/issues/23", "a Raspberry Pi host (PCIe x1)"),
    ("geerlingguy/ai-benchmarks/issues/25", "a Raspberry Pi host (PCIe x1)"),
    ("geerlingguy/raspberry-pi-pcie-devices/issues/766", "a Raspberry Pi host (PCIe x1)"),
    ("geerlingguy/ai-benchmarks/issues/40", "a Raspberry Pi host (PCIe x1)"),
    ("geerlingguy/ai-benchmarks/issues/29", "a Raspberry Pi host (PCIe x1)"),
    ("geerlingguy/ai-benchmarks/issues/27", "a Raspberry Pi host (PCIe x1)"),
    ("ggml-org/llama.cpp/issues/22413", "llama-bench warned that asserts were enabled (a debug build)"),
    ("ggml-org/llama.cpp/issues/10444", "the command above the table names another model than the table"),
    ("ggml-org/llama.cpp/pull/3084", "a pull request's own column of a compare table"),
    ("ggml-org/llama.cpp/pull/3648", "a review bench of a pull request's branch (2023)"),
    ("ggml-org/llama.cpp/pull/10597", "a table in a pull request's thread that names no build (the branch or master cannot be told)"),
    ("ollama/ollama/pull/5059", "a table in another project's thread that names no build"),
    ("AUGMXNT/llm-tracker.info-vault/blob/b40eb6497c0c74fac1064544caeabd7f2cbe3874/_TOORG/Strix%20Halo.md",
     "its author calls the H200's speed poor ('the perf sucks'): a 405B at IQ2_XXS, whose kernels, not the memory, set it"),
    ("shisa-ai/hipEngine/blob/7ab8f4fdbe0baa2cd9273d0979d6fd8059795ca6/benchmarks/results/2026-05-17-llamacpp-hip",
     "a ROCm build from a local checkout in a tuning workspace; that build 8977 is upstream's cannot be told"),
]
GPU = {  # the GPU as a source names it -> as the GPU table does, where the words alone do not say it
    "AMD Radeon RX 7900 XTX (24GB, gfx1100)": "AMD Radeon RX 7900 XTX",
    "AMD Radeon Graphics, gfx1151": "Radeon 8060S",  # lhl's Ryzen AI MAX+ 395 (llama.cpp#13565)
    "Strix Halo gfx1151 iGPU (Ryzen AI MAX 395; same machine)": "Radeon 8060S",
    # kyuz0/intel-b70-ai-toolboxes: Vulkan names the chip (BMG G31), the repository the card
    "Intel Arc B70 (per README 'Intel Arc B70'; ggml_vulkan: Intel(R) Graphics (BMG G31))": "Intel Arc Pro B70",
}
READ = ("read-amd-rdna3-4.json", "read-amd-rdna2-cdna-intel.json", "read-nvidia.json", "read-apple.json",
        "read-earlier.json", "read-round2-nvidia.json", "read-round2-amd-intel.json", "read-round2-apple.json", "read-round3-nvidia.json",
        "read-round3-amd-intel.json", "read-round4-amd-vulkan.json", "read-round4-nvidia-pairs.json", "read-round4-hbm.json",
        "read-round5-depth.json", "read-round6-depth.json", "read-round6-vulkan.json", "read-added.json")  # read-added.json: what tools/add_bench.py --write adds


# this repository's own llama-bench runs (tests/data/device/*/README.md says how each was captured): kept
# apart from the published results (the pick never shows them as someone's post), the speed model fits
# them beside them; every layer on the GPU (-ngl 99) only
CAPTURES = [("tests/data/device/h200-cuda-b11312/" + f, "H200", "2026-12-04")
            for f in ("bench-llama3-8b-q4_0.json", "bench-gemma3-4b-q8_0.json", "bench-qwen2.5-3b-tied-q8_0.json",
                      "bench-qwen3moe-30b-a3b-12l-q4_0.json")]


def captures() -> list[dict]:
    out = []
    for path, gpu, date in CAPTURES:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = f.read()
        rows, meta = add_bench.parse_json(text[:text.rindex("]") + 1], gpu_given=True)
        for e in add_bench.entries(rows, meta, "https://github.com/", "", date, gpu):
            e.update(url=None, where=f"this repository's device capture, {path}", capture=path)
            del e["quote"]  # the file is the quote: one JSON object a run
            out.append(e)
    return out


def build() -> tuple[list[dict], list[tuple]]:
    out, dropped = [], []
    for f in READ:
        if not os.path.exists(os.path.join(HERE, f)):
            continue
        with open(os.path.join(HERE, f), encoding="utf-8") as fh:
            rows = json.load(fh)
        for r in rows:
            why = next((w for u, w in DROP if u in r["url"]), None)
            if why is None and not r.get("date"):
                why = "no date"
            if why is None and "Raspberry Pi" in (r.get("note") or ""):
                why = "a Raspberry Pi host (PCIe x1)"
            if why is None and "DOUBTFUL" in (r.get("note") or ""):
                why = r["note"]
            if why is None:
                why = add_bench.partial(r.get("ngl"), r["backend"], r["date"])
            if why:
                dropped.append((r["gpu"], r["url"], why))
                continue
            name = GPU.get(r["gpu"], r["gpu"])
            name = re.sub(r"\(issue title.*|\(per .*|\(ggml_vulkan.*|, compute capab.*", "", name).strip()
            try:
                match, family = add_bench.gpu_facts(name)
            except ValueError as e:
                dropped.append((r["gpu"], r["url"], f"not in the GPU table ({e})"))
                continue
            test, depth = add_bench.split_test(r["test"]) or (r["test"].replace(" ", ""), 0)
            depth = r.get("depth") or depth  # a row read with its depth apart, or "tg128 @ d4096"
            e = {"gpu": r["gpu"], "match": match, "family": family, "backend": r["backend"],
                 "runtime": r.get("runtime"), "build": r.get("build"), "date": r["date"], "model": r["model"],
                 "size": r.get("size"), "params": r.get("params"), "ngl": r.get("ngl"), "fa": r.get("fa"),
                 "test": test, **({"depth": depth} if depth else {}), "tps": r["tps"], "url": r["url"],
                 "where": r["where"], "pair": r.get("pair"), "quote": r["quote"]}
            if not e["build"]:  # a row without a build says why, and counts for less
                e["no_build"] = r.get("no_build") or add_bench.NO_BUILD
            if "Asahi" in (r.get("note") or "") + r["gpu"] + (r.get("runtime") or "") and e["pair"]:
                e["pair"] = None  # Linux on the same Mac: not macOS's Metal beside it
            over = _over_bound(e)
            if over:
                dropped.append((r["gpu"], r["url"], over))
                continue
            if r.get("note"):
                e["note"] = r["note"]
            if r.get("os"):
                e["os"] = r["os"]
            out.append(e)
    # a comparison is of one build: a pair whose rows name two builds compares the builds as much as the
    # backends, so its rows stay as single results
    builds: dict[str, set] = {}
    for e in out:
        if e["pair"] and e["build"]:
            builds.setdefault(e["pair"], set()).add(e["build"])
    for e in out:
        if e["pair"] and len(builds.get(e["pair"], ())) > 1:
            dropped.append((e["gpu"], e["url"], f"kept, but not as a comparison: pair {e['pair']} names builds "
                                                f"{', '.join(sorted(builds[e['pair']]))}"))
            e["pair"] = None
    out.sort(key=lambda e: (e["match"], e["date"], e["url"], e["backend"], e["test"]))
    return out, dropped


def _over_bound(e: dict) -> str | None:
    """Why a generation run of a dense model is faster than reading its file at the GPU's bandwidth can
    be (a token then reads less than the file, or the row is wrong), else None: the speed estimate's
    calibration takes such runs as every weight read per token."""
    from selector.bandwidth import by_match
    from selector.evidence import _size
    from selector.models.speed import _dense

    if not e["test"].startswith("tg") or e.get("depth") or not _dense(e["model"]) or not e.get("size"):
        return None
    gib = _size(e["size"], "", "size")
    gbps = by_match().get(e["match"], (None, {}))[1].get("gbps")
    if not gib or not gbps:
        return None
    bound = gbps * 1e9 / (gib * (1 << 30))
    if e["tps"] <= bound:
        return None
    return (f"faster than its bandwidth bound ({e['tps']:g} t/s over {bound:.1f}: {gbps} GB/s over its "
            f"{e['size']}): a token does not read this whole file, or the row is wrong")


def main(argv) -> int:
    from selector.evidence import PATH, parse

    results, dropped = build()
    with open(PATH, encoding="utf-8") as f:
        catalog = json.load(f)
    new = {**catalog, "results": results, "captures": captures()}
    parse(new, PATH)
    if "--write" in argv:
        with open(PATH, "w", encoding="utf-8") as f:
            json.dump(new, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print(f"wrote {len(results)} results of {len({e['match'] for e in results})} GPUs; "
              f"{len(dropped)} rows read were not kept")
        return 0
    same = catalog.get("results") == results and catalog.get("captures") == new["captures"]
    print("no change" if same else f"{len(results)} results differ from the catalog's {len(catalog.get('results', []))}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
