#!/usr/bin/env python3
"""Turn a published llama-bench result into entries of selector/catalogs/llama-bench-published.json.

    python tools/add_bench.py --url URL --where "comment by NAME" --date 2026-03-01 < pasted.txt
    python tools/add_bench.py --url URL --where ... --date ... --gpu "RX 7900 XTX" --write < pasted.txt

The input is what people paste: llama-bench's markdown table (``| model | size | params | backend |
ngl | ... | test | t/s |``), with the lines around it that name the device (``ggml_vulkan: 0 = AMD
Radeon RX 7900 XTX (RADV NAVI31) ...``, ``Device 0: NVIDIA GeForce RTX 4090, compute capability
8.9``) and the build (``build: 141a908a (5298)``); or llama-bench's ``-o json`` output.  Each row
becomes one entry: the GPU (``--gpu``, else the device line), the GPU table's row it is and its
family (from the same tables the probe uses), the backend, the build, the model as llama-bench
names it, the test and tokens/s, the page, and the row itself.  A table that ran two backends on
one machine gets a ``pair`` id, so the pick can compare them.  Rows that did not offload every layer
(``ngl`` 0), depth tests (``@ d4096``) and combined ones (``pp512+tg128``) are left out.

Prints the entries as JSON; ``--write`` adds the new ones to the catalog (an entry already there,
same page and same row, is not added twice).  Exit 0, 2 (usage), 5 (nothing usable in the input).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CATALOG = os.path.join(ROOT, "selector", "catalogs", "llama-bench-published.json")
BACKEND = {"vulkan": "vulkan", "rocm": "rocm", "hip": "rocm", "cuda": "cuda", "metal": "metal", "sycl": "sycl",
           "cpu": "cpu", "blas": "cpu", "mtl": "metal"}
DEVICE_LINES = (re.compile(r"ggml_vulkan:\s*\d+\s*=\s*(.+?)\s*(?:\(|\|)"),
                re.compile(r"Device\s+\d+:\s*(.+?),\s*(?:compute capability|gfx)"),
                re.compile(r"ggml_metal_init:\s*found device:\s*(.+)"),
                re.compile(r"GPU name:\s*(.+)"))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_table(text: str) -> tuple[list[dict], dict]:
    """The rows of every llama-bench table in ``text`` (each a dict by column name, and its line), and
    what the text says around them: {"gpu": ..., "build": ...}."""
    rows, meta = [], {}
    header = None
    for line in text.splitlines():
        s = line.strip()
        for rx in DEVICE_LINES:
            m = rx.search(s)
            if m and "gpu" not in meta:
                meta["gpu"] = m[1].strip()
        m = re.search(r"build:\s*([0-9a-f]{6,40})\s*\((\d+)\)", s)
        if m:
            meta["build"] = f"b{m[2]}"
        if not s.startswith("|"):
            header = None
            continue
        cells = _cells(s)
        if {"model", "backend", "test"} <= set(cells) and ("t/s" in cells or "t/s (before)" in cells):
            header = cells
            continue
        if header is None or set(s) <= set("|-: "):
            continue
        if len(cells) != len(header):
            continue
        rows.append({**dict(zip(header, cells)), "_line": s})
    return rows, meta


def parse_json(text: str) -> tuple[list[dict], dict]:
    """llama-bench ``-o json``: a list of runs."""
    data = json.loads(text)
    rows, meta = [], {}
    for run in data if isinstance(data, list) else []:
        test = f"pp{run['n_prompt']}" if run.get("n_gen", 0) == 0 else f"tg{run['n_gen']}" if run.get("n_prompt", 0) == 0 else None
        if test is None:
            continue
        rows.append({"model": run.get("model_type", ""), "size": f"{run.get('model_size', 0) / (1 << 30):.2f} GiB",
                     "params": f"{run.get('model_n_params', 0) / 1e9:.2f} B", "backend": run.get("backends", ""),
                     "ngl": str(run.get("n_gpu_layers", "")), "fa": str(int(bool(run.get("flash_attn")))),
                     "test": test, "t/s": f"{run.get('avg_ts', 0):.2f}", "_line": json.dumps(run, sort_keys=True)})
        if run.get("gpu_info"):
            meta.setdefault("gpu", run["gpu_info"])
        if run.get("build_number"):
            meta.setdefault("build", f"b{run['build_number']}")
    return rows, meta


def gpu_facts(gpu: str) -> tuple[str, str | None]:
    """(the GPU table's row name, the family) of a GPU named as a source names it."""
    from selector.bandwidth import row_for
    from selector.described import DescribeError, lookup

    if re.search(r"\bapple\b|\bM\d\b", gpu, re.I):
        row = row_for("metal", gpu)
        if row is None:
            raise ValueError(f"{gpu!r}: not an Apple chip of the GPU table")
        return row["match"], None
    for candidate in (gpu, re.sub(r"\(.*?\)", "", gpu).strip()):
        for kind in ("nvidia_gpu", "amd_gpu", "intel_gpu"):
            row = row_for(kind, candidate)
            if row:
                return row["match"], _family(kind, row)
        try:
            kind, row = lookup(candidate)
            return row["match"], _family(kind, row)
        except DescribeError:
            pass
    raise ValueError(f"{gpu!r}: no GPU of that name in selector/catalogs/bandwidth.json (--gpu names it)")


def _family(kind: str, row: dict) -> str | None:
    if kind == "amd_gpu":
        from selector.described import _amd_gfx

        return _amd_gfx(row, row["match"])
    if kind == "nvidia_gpu":
        from probes.tables import nvidia_cc_from_name

        cc = nvidia_cc_from_name(row["match"])
        return f"sm_{cc[0]}{cc[1]}" if cc else None
    return None


def entries(rows: list[dict], meta: dict, url: str, where: str, date: str, gpu: str | None = None,
            runtime: str | None = None) -> list[dict]:
    gpu = gpu or meta.get("gpu")
    if not rows:
        return []
    if not gpu:
        raise ValueError("the input names no device: give --gpu")
    match, family = gpu_facts(gpu)
    out = []
    for r in rows:
        test = r.get("test", "").replace(" ", "")
        if not re.fullmatch(r"(pp|tg)\d+", test):
            continue  # pp512+tg128, pp512 @ d4096
        ngl = r.get("ngl")
        if ngl not in (None, "") and ngl.isdigit() and int(ngl) == 0:
            continue
        backend = BACKEND.get(r.get("backend", "").split(",")[0].strip().lower())
        m = re.match(r"\s*([\d.]+)", r.get("t/s", ""))
        if backend is None or not m:
            continue
        fa = r.get("fa")
        out.append({"gpu": gpu, "match": match, "family": family, "backend": backend, "runtime": runtime,
                    "build": meta.get("build"), "date": date, "model": r["model"], "size": r.get("size"),
                    "params": r.get("params"), "ngl": int(ngl) if ngl and ngl.isdigit() else None,
                    "fa": int(fa) if fa in ("0", "1") else None, "test": test, "tps": float(m[1]), "url": url,
                    "where": where, "pair": None, "quote": r["_line"]})
    kinds = {(e["model"], e["test"]) for e in out}
    if len({e["backend"] for e in out}) > 1 and any(sum(1 for e in out if (e["model"], e["test"]) == k) > 1 for k in kinds):
        pair = hashlib.sha1(f"{url} {where}".encode()).hexdigest()[:10]
        for e in out:
            e["pair"] = pair
    return out


def render(es: list[dict]) -> str:
    """The entries as the llama-bench table they came from (the round trip the tests pin)."""
    lines = [f"ggml_vulkan: 0 = {es[0]['gpu']} |" if es else "",
             "| model | size | params | backend | ngl | fa | test | t/s |", "| --- | ---: | ---: | --- | --: | -: | ---: | ---: |"]
    for e in es:
        lines.append(f"| {e['model']} | {e['size']} | {e['params']} | {e['backend']} | {e['ngl']} | {e['fa']} | "
                     f"{e['test']} | {e['tps']:.2f} ± 0.00 |")
    if es and es[0]["build"]:
        lines.append(f"\nbuild: 0000000 ({es[0]['build'][1:]})")
    return "\n".join(lines) + "\n"


def merge(catalog: dict, new: list[dict]) -> tuple[dict, int]:
    seen = {(e["url"], e["quote"]) for e in catalog["results"]}
    added = [e for e in new if (e["url"], e["quote"]) not in seen]
    catalog["results"] = sorted(catalog["results"] + added, key=lambda e: (e["match"], e["date"], e["backend"], e["test"]))
    return catalog, len(added)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--where", required=True, help="the place in the page: 'comment by NAME, 2026-03-01'")
    ap.add_argument("--date", required=True, help="YYYY-MM-DD of the post")
    ap.add_argument("--gpu", help="the GPU, where the pasted text does not name it")
    ap.add_argument("--runtime", help="the driver or runtime the post names (RADV, ROCm 6.4, CUDA 12.8)")
    ap.add_argument("--write", action="store_true", help="add the entries to the catalog")
    ap.add_argument("--catalog", default=CATALOG, help=f"the catalog --write adds to (default {os.path.relpath(CATALOG, ROOT)})")
    args = ap.parse_args(argv)
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", args.date) or not args.url.startswith("https://"):
        print("add_bench: --date is YYYY-MM-DD and --url an https address", file=sys.stderr)
        return 2
    text = sys.stdin.read()
    try:
        rows, meta = parse_json(text) if text.lstrip().startswith("[") else parse_table(text)
        es = entries(rows, meta, args.url, args.where, args.date, args.gpu, args.runtime)
    except (ValueError, KeyError) as e:
        print(f"add_bench: {e}", file=sys.stderr)
        return 5
    if not es:
        print("add_bench: no llama-bench row with every layer offloaded in the input", file=sys.stderr)
        return 5
    if args.write:
        from selector.evidence import parse

        with open(args.catalog, encoding="utf-8") as f:
            catalog = json.load(f)
        catalog, n = merge(catalog, es)
        parse(catalog, args.catalog)  # what is written loads
        with open(args.catalog + ".tmp", "w", encoding="utf-8") as f:
            json.dump(catalog, f, indent=1, ensure_ascii=False)
            f.write("\n")
        os.replace(args.catalog + ".tmp", args.catalog)
        print(f"added {n} of {len(es)} entries to {args.catalog}")
    else:
        print(json.dumps(es, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
