#!/usr/bin/env python3
"""Turn a published llama-bench result into rows for selector/catalogs/llama-bench-published.json.

    python tools/add_bench.py --url URL --where "comment by NAME" --date 2026-03-01 < pasted.txt
    python tools/add_bench.py --url URL --where ... --date ... --gpu "RX 7900 XTX" --write < pasted.txt

The input is what people paste: llama-bench's markdown table (``| model | size | params | backend |
ngl | ... | test | t/s |``), with the lines around it that name the device (``ggml_vulkan: 0 = AMD
Radeon RX 7900 XTX (RADV NAVI31) ...``, ``Device 0: NVIDIA GeForce RTX 4090, compute capability
8.9``) and the build (``build: 141a908a (5298)``); or llama-bench's ``-o json`` output.  Each row
becomes one entry: the GPU (the device line, or ``--gpu`` where it names none or several), the GPU table's row it is and its
family (from the same tables the probe uses), the backend, the build, the model as llama-bench
names it, the test and tokens/s, the page, and the row itself.  A table that ran two backends on
one machine gets a ``pair`` id, so the pick can compare them.  A test at a depth (llama-bench's ``-d``:
``tg128 @ d4096`` in the markdown, ``n_depth`` in the JSON) keeps its depth: the test is ``tg128`` and
``depth`` 4096 (the KV cache already holds 4096 positions).  Rows that may not have offloaded every
layer (``ngl`` below llama-bench's default 99) and combined tests (``pp512+tg128``) are left out; a row of a backend that does not run on the GPU named (ROCm on an
NVIDIA card) refuses the paste.

A paste that names several devices or builds is refused (its tables would be filed under one
another's), unless ``--gpu`` says which device ran.  Prints the entries as JSON; ``--write`` adds
them to the rows read, catalogs-src/llama-bench/read-added.json (``--to``; a row already there, same
page and same row, is not added twice), and ``catalogs-src/llama-bench/build.py --write`` makes the
catalog from the rows read.  Exit 0, 2 (usage: no device named, --gpu naming another device than the
paste, a bad --date or --url, a date after today), 5 (the input: nothing usable, several devices or
builds, a GPU the table does not know, over 4 MiB, malformed JSON; or a file that cannot be read or
written).
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

READ_ADDED = os.path.join(ROOT, "catalogs-src", "llama-bench", "read-added.json")
BACKEND = {"vulkan": "vulkan", "rocm": "rocm", "hip": "rocm", "cuda": "cuda", "metal": "metal", "sycl": "sycl",
           "cpu": "cpu", "blas": "cpu", "mtl": "metal"}
DEVICE_LINES = (re.compile(r"ggml_vulkan:\s*\d+\s*=\s*(.+?)\s*(?:\(|\|)"),
                re.compile(r"Device\s+\d+:\s*(.+?),\s*(?:compute capability|gfx)"),
                re.compile(r"ggml_metal_init:\s*found device:\s*(.+)"),
                re.compile(r"GPU name:\s*(.+)"))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


class UsageError(ValueError):
    """What the command line must add (exit 2)."""


class PasteError(ValueError):
    """The input cannot be turned into entries as it is: said in words (exit 5)."""


def parse_table(text: str, gpu_given: bool = False) -> tuple[list[dict], dict]:
    """The rows of the llama-bench tables in ``text`` (each a dict by column name, and its line), and
    what the text says around them: {"gpu": ..., "build": ...}.  A paste that names more than one
    device or build is refused: each table's rows would be filed under another's (paste one machine
    and one build at a time)."""
    rows, devices, builds = [], [], []
    header = None
    for line in text.splitlines():
        s = line.strip()
        for rx in DEVICE_LINES:
            m = rx.search(s)
            if m and m[1].strip() not in devices:
                devices.append(m[1].strip())
        m = re.search(r"build:\s*([0-9a-f]{6,40})\s*\((\d+)\)", s)
        if m and f"b{m[2]}" not in builds:
            builds.append(f"b{m[2]}")
        if not s.startswith("|"):
            header = None
            continue
        cells = _cells(s)
        if {"model", "backend", "test", "t/s"} <= set(cells):
            header = cells
            continue
        if header is None or set(s) <= set("|-: "):
            continue
        if len(cells) != len(header):
            continue
        rows.append({**dict(zip(header, cells)), "_line": s})
    if len(devices) > 1 and not gpu_given:
        raise PasteError(f"the paste names {len(devices)} devices ({'; '.join(devices)}): llama-bench may have "
                         "split the model over them, or the tables are of different machines; paste one machine's "
                         "table with one device, or give --gpu for a run that used one")
    if len(builds) > 1:
        raise PasteError(f"the paste names {len(builds)} builds ({', '.join(builds)}): paste one build's table at a time")
    return rows, {**({"gpu": devices[0], "devices": devices} if devices else {}),
                  **({"build": builds[0]} if builds else {})}


def parse_json(text: str, gpu_given: bool = False) -> tuple[list[dict], dict]:
    """llama-bench ``-o json``: a list of runs (a run at a depth, n_depth > 0, keeps it; combined ones are left out)."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise PasteError(f"not llama-bench JSON ({e})") from None
    except RecursionError:
        raise PasteError("not llama-bench JSON (nested deeper than any llama-bench output)") from None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise PasteError("not llama-bench JSON: a list of runs (objects) is expected")
    rows, gpus, builds = [], [], []
    for i, run in enumerate(data):
        n_prompt, n_gen, ts = run.get("n_prompt"), run.get("n_gen"), run.get("avg_ts")
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (n_prompt, n_gen)) \
                or not isinstance(ts, (int, float)) or isinstance(ts, bool):
            raise PasteError(f"run {i}: n_prompt, n_gen and avg_ts are llama-bench's fields; this run lacks one")
        if not 0 <= n_prompt <= 1 << 20 or not 0 <= n_gen <= 1 << 20 or not 0 < ts < 1e6:
            raise PasteError(f"run {i}: n_prompt {n_prompt}, n_gen {n_gen}, avg_ts {ts}: not a llama-bench run's figures")
        for key, kinds, what in (("model_size", int, "a number of bytes"), ("model_n_params", int, "a number"),
                                 ("n_gpu_layers", int, "a number"), ("build_number", int, "a number"),
                                 ("n_depth", int, "a number"), ("flash_attn", (bool, int), "true, false, 0 or 1"),
                                 ("model_type", str, "text"), ("backends", str, "text"), ("gpu_info", str, "text")):
            v = run.get(key)
            if v is not None and (not isinstance(v, kinds) or (isinstance(v, bool) and kinds is int)
                                  or (key == "flash_attn" and v not in (0, 1))
                                  or (kinds is int and not 0 <= v < 1 << 50 and key != "n_gpu_layers")):
                raise PasteError(f"run {i}: {key} is {what} in llama-bench's JSON, not {json.dumps(v)[:40]}")
        if (n_prompt and n_gen) or not (n_prompt or n_gen):
            continue
        depth = run.get("n_depth") or 0
        fa = run.get("flash_attn")
        rows.append({"model": run.get("model_type", ""), "size": f"{run.get('model_size', 0) / (1 << 30):.2f} GiB",
                     "params": f"{run.get('model_n_params', 0) / 1e9:.2f} B", "backend": run.get("backends", ""),
                     "ngl": str(run.get("n_gpu_layers", "")), "fa": str(int(fa)) if fa in (0, 1, True, False) else "",
                     "test": (f"pp{n_prompt}" if n_prompt else f"tg{n_gen}") + (f" @ d{depth}" if depth else ""),
                     "t/s": f"{run['avg_ts']:.2f}",
                     "_line": json.dumps(run, sort_keys=True)})
        for seen, value in ((gpus, run.get("gpu_info")), (builds, run.get("build_number"))):
            if value and value not in seen:
                seen.append(value)
    if (len(gpus) > 1 or any("," in g for g in gpus)) and not gpu_given:
        raise PasteError(f"the runs name several GPUs ({'; '.join(gpus)}): give --gpu for a run that used one")
    if len(builds) > 1:
        raise PasteError(f"the runs are of {len(builds)} builds: add one build's runs at a time")
    devices = [d.strip() for g in gpus for d in g.split(",") if d.strip()]
    return rows, {**({"gpu": gpus[0], "devices": devices} if gpus else {}),
                  **({"build": f"b{builds[0]}"} if builds else {})}


def gpu_facts(gpu: str) -> tuple[str, str | None]:
    """(the GPU table's row name, the family) of a GPU named as a source names it."""
    from selector.bandwidth import row_for
    from selector.described import DescribeError, lookup

    if re.search(r"\bapple\b|\bM\d\b", gpu, re.I):
        row = row_for("metal", gpu, exact=True)
        if row is None:
            raise ValueError(f"{gpu!r}: not an Apple chip of the GPU table")
        return row["match"], None
    for candidate in (gpu, re.sub(r"\(.*?\)", "", gpu).strip()):
        found = [(kind, row) for kind in ("nvidia_gpu", "amd_gpu", "intel_gpu")
                 if (row := row_for(kind, candidate, exact=True))]
        if len(found) == 1:
            return found[0][1]["match"], _family(*found[0])
        if len(found) > 1:
            raise ValueError(f"{gpu!r} names GPUs of {len(found)} vendors: --gpu names the one that ran")
        try:
            kind, row = lookup(candidate)
            return row["match"], _family(kind, row)
        except DescribeError:
            pass
    raise ValueError(f"{gpu!r}: no one GPU of that name in selector/catalogs/bandwidth.json (a name the table does "
                     "not know, or one several cards share: --gpu names the card that ran)")


def _family(kind: str, row: dict) -> str | None:
    if kind == "amd_gpu":
        from selector.described import _amd_gfx

        return _amd_gfx(row, row["match"])
    if kind == "nvidia_gpu":
        from probes.tables import nvidia_cc_from_name

        cc = nvidia_cc_from_name(row["match"])
        return f"sm_{cc[0]}{cc[1]}" if cc else None
    return None


# llama.cpp's README of 2023, its Metal build: "Any value larger than 0 will offload the computation to the
# GPU" (the whole graph ran on Metal); later builds offload by layer, as the other backends always did
METAL_WHOLE_GRAPH_UNTIL = "2023-12-31"
FIRST_DAY = "2023-03-10"  # llama.cpp's first commit: no llama.cpp result is older


def partial(ngl, backend: str, date: str) -> str | None:
    """Why a row may have had layers on the CPU, else None: llama-bench's default, -ngl 99, offloads every
    layer of any model here; fewer may leave some on the CPU (and a negative one is 'auto', which fits what
    it can).  ``ngl`` None: the row does not say, and llama-bench's default is 99."""
    if ngl is None or (isinstance(ngl, int) and ngl >= 99):
        return None
    if isinstance(ngl, int) and ngl > 0 and backend == "metal" and date <= METAL_WHOLE_GRAPH_UNTIL:
        return None
    return f"ngl {ngl}: some layers may have stayed on the CPU (llama-bench's default 99 offloads every one)"


VENDOR_BACKENDS = {"rocm": "amd", "cuda": "nvidia", "metal": "apple"}  # vulkan, sycl and the CPU run on several


def _known(device: str) -> str | None:
    """The GPU table's row name of a device line's name, or None where the table does not know it (a
    Vulkan line may name the chip, not the card)."""
    try:
        return gpu_facts(device)[0]
    except ValueError:
        return None


def _vendor(match: str, family: str | None) -> str:
    if family is None:
        return "apple" if re.match(r"M\d", match) else "other"
    return "amd" if family.startswith("gfx") else "nvidia" if family.startswith("sm_") else "other"


NO_BUILD = "the post prints no 'build:' line"  # what a row without a build says, unless --no-build says more


def entries(rows: list[dict], meta: dict, url: str, where: str, date: str, gpu: str | None = None,
            runtime: str | None = None, no_build: str | None = None) -> list[dict]:
    if not rows:
        return []
    if gpu and meta.get("devices"):
        # --gpu says which of the devices a paste names ran; it does not overrule what the paste says
        named = {_known(d) for d in meta["devices"]} - {None}
        if named and gpu_facts(gpu)[0] not in named:
            raise UsageError(f"--gpu {gpu!r} is not a device the paste names ({'; '.join(meta['devices'])})")
    gpu = gpu or meta.get("gpu")
    if not gpu:
        raise UsageError("the input names no device (no ggml_vulkan, Device or gpu_info line): give --gpu")
    match, family = gpu_facts(gpu)
    out = []
    for r in rows:
        split = split_test(r.get("test", ""))
        if split is None:
            continue  # pp512+tg128, tg0
        test, depth = split
        ngl = r.get("ngl")
        ngl = None if ngl in (None, "") else int(ngl) if re.fullmatch(r"-?\d+", ngl) else ngl
        backend = BACKEND.get(r.get("backend", "").split(",")[0].strip().lower())
        if partial(ngl, backend or "", date):
            continue
        m = re.match(r"\s*([\d.]+)", r.get("t/s", ""))
        if backend is None or not m:
            continue
        if VENDOR_BACKENDS.get(backend, _vendor(match, family)) != _vendor(match, family):
            raise PasteError(f"a {backend} row on the {match}: {backend} does not run on it (is the GPU right?)")
        fa = r.get("fa")
        out.append({"gpu": gpu, "match": match, "family": family, "backend": backend, "runtime": runtime,
                    "build": meta.get("build"), **({} if meta.get("build") else {"no_build": no_build or NO_BUILD}),
                    "date": date, "model": r["model"], "size": r.get("size"),
                    "params": r.get("params"), "ngl": ngl,
                    "fa": int(fa) if fa in ("0", "1") else None, "test": test, **({"depth": depth} if depth else {}),
                    "tps": float(m[1]), "url": url,
                    "where": where, "pair": None, "quote": r["_line"]})
    # a pair is one model run on two or more backends with the same settings: rows of another model, or
    # of one backend alone, compare nothing
    for model in dict.fromkeys(e["model"] for e in out):
        for fa in dict.fromkeys(e["fa"] for e in out if e["model"] == model):
            group = [e for e in out if e["model"] == model and e["fa"] == fa]
            by_test: dict[tuple, set] = {}
            for e in group:
                by_test.setdefault((e["test"], e.get("depth", 0)), set()).add(e["backend"])
            if any(len(b) > 1 for b in by_test.values()):
                pair = hashlib.sha1(f"{url} {where} {model} {fa}".encode()).hexdigest()[:10]
                for e in group:
                    e["pair"] = pair
    return out


def split_test(text: str) -> tuple[str, int] | None:
    """llama-bench's test column as (test, depth): 'tg128' -> ('tg128', 0), 'tg128 @ d4096' ->
    ('tg128', 4096); None for a combined test ('pp512+tg128') or none at all."""
    m = re.fullmatch(r"\s*((?:pp|tg)\s*[1-9]\d*)\s*(?:@\s*d(\d+))?\s*", text)
    return (m[1].replace(" ", ""), int(m[2] or 0)) if m else None


def render(es: list[dict]) -> str:
    """The entries as the llama-bench table they came from (the round trip the tests pin)."""
    lines = [f"ggml_vulkan: 0 = {es[0]['gpu']} |" if es else "",
             "| model | size | params | backend | ngl | fa | test | t/s |", "| --- | ---: | ---: | --- | --: | -: | ---: | ---: |"]
    for e in es:
        lines.append(f"| {e['model']} | {e['size']} | {e['params']} | {e['backend']} | {e['ngl']} | {e['fa']} | "
                     f"{e['test']}{f' @ d' + str(e['depth']) if e.get('depth') else ''} | {e['tps']:.2f} ± 0.00 |")
    if es and es[0]["build"]:
        lines.append(f"\nbuild: 0000000 ({es[0]['build'][1:]})")
    return "\n".join(lines) + "\n"


MAX_INPUT = 4 << 20  # a pasted table is kilobytes; megabytes are not one post's results


def merge(rows: list, new: list[dict]) -> tuple[list, int]:
    """``new`` added to a list of rows read (catalogs-src/llama-bench/read-*.json), each once (the same
    page and row is not added twice), in the order given."""
    seen = {(e.get("url"), e.get("quote")) for e in rows if isinstance(e, dict)}
    added = [e for e in new if (e["url"], e["quote"]) not in seen]
    return rows + added, len(added)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--where", required=True, help="the place in the page: 'comment by NAME, 2026-03-01'")
    ap.add_argument("--date", required=True, help="YYYY-MM-DD of the post")
    ap.add_argument("--gpu", help="the GPU, where the pasted text does not name it")
    ap.add_argument("--runtime", help="the driver or runtime the post names (RADV, ROCm 6.4, CUDA 12.8)")
    ap.add_argument("--no-build", help="why the rows have no build, where the paste prints none (a release "
                                       "named only by its date, a package's version); they count for less")
    ap.add_argument("--os", choices=("linux", "windows", "macos"),
                    help="the machine's OS, where the post does not say it (drivers differ: the pick uses only "
                         "results of its own OS)")
    ap.add_argument("--write", action="store_true",
                    help="add the rows to the rows read (then catalogs-src/llama-bench/build.py --write builds the catalog)")
    ap.add_argument("--to", default=READ_ADDED, help=f"the rows-read file --write adds to (default {os.path.relpath(READ_ADDED, ROOT)})")
    args = ap.parse_args(argv)
    import datetime

    try:
        day = datetime.date.fromisoformat(args.date)
    except ValueError:
        print(f"add_bench: --date {args.date!r} is not a date (YYYY-MM-DD)", file=sys.stderr)
        return 2
    if args.date < FIRST_DAY:
        print(f"add_bench: --date {args.date} is before llama.cpp's first commit ({FIRST_DAY})", file=sys.stderr)
        return 2
    if day > datetime.date.today():
        # the latest comparison is the one shown: a mistyped year would outrank every other
        print(f"add_bench: --date {args.date} is after today: the day the post was published", file=sys.stderr)
        return 2
    if not args.url.startswith("https://"):
        print(f"add_bench: --url {args.url!r} is not an https address", file=sys.stderr)
        return 2
    text = sys.stdin.read(MAX_INPUT + 1)
    if len(text) > MAX_INPUT:
        print(f"add_bench: the input is over {MAX_INPUT >> 20} MiB: paste one post's tables", file=sys.stderr)
        return 5
    try:
        parse_input = parse_json if text.lstrip().startswith("[") else parse_table
        rows, meta = parse_input(text, bool(args.gpu))
        es = entries(rows, meta, args.url, args.where, args.date, args.gpu, args.runtime, args.no_build)
        for e in es if args.os else ():
            e["os"] = args.os
    except UsageError as e:
        print(f"add_bench: {e}", file=sys.stderr)
        return 2
    except (PasteError, ValueError) as e:
        print(f"add_bench: {e}", file=sys.stderr)
        return 5
    if not rows:
        print("add_bench: no llama-bench table in the input (a header with model, backend, test and t/s columns, "
              "or -o json output)", file=sys.stderr)
        return 5
    if not es:
        print(f"add_bench: none of the {len(rows)} rows is a generation or prompt test (tgN, ppN, at any depth) of a "
              "llama.cpp backend with every layer offloaded (ngl 99 or more)", file=sys.stderr)
        return 5
    from probes.inputs import InputError
    from selector.evidence import parse

    try:
        parse({"results": es}, "the input")  # each entry as the catalog will load it
    except InputError as e:
        print(f"add_bench: {e}", file=sys.stderr)
        return 5
    if not args.write:
        print(json.dumps(es, indent=1, ensure_ascii=False))
        return 0
    try:
        with open(args.to, encoding="utf-8") as f:
            rows_read = json.load(f)
    except FileNotFoundError:
        rows_read = []
    except (OSError, ValueError) as e:
        print(f"add_bench: {args.to}: cannot be read as a list of rows ({e})", file=sys.stderr)
        return 5
    if not isinstance(rows_read, list):
        print(f"add_bench: {args.to}: not a list of rows read (catalogs-src/llama-bench/read-*.json)", file=sys.stderr)
        return 5
    rows_read, n = merge(rows_read, es)
    tmp = args.to + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(rows_read, f, indent=1, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, args.to)
    except OSError as e:
        print(f"add_bench: {args.to}: cannot be written ({e.strerror})", file=sys.stderr)
        return 5
    print(f"added {n} of {len(es)} rows to {args.to}; catalogs-src/llama-bench/build.py --write makes the catalog")
    return 0


if __name__ == "__main__":
    sys.exit(main())
