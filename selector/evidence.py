"""Published llama-bench results (catalogs/llama-bench-published.json): what other people measured,
with where they said it.

Each result is one row of a llama-bench table someone published: the GPU as the source names it, the
row of the bandwidth table it is (``match``: "RX 7900 XTX") and its family (gfx1100, sm_89), the
backend and its runtime, the llama.cpp build and the date, the model as llama-bench names it, the
test (pp512, tg128) and tokens/s, and the page and place it was read from, with the row itself.
Rows of one post that ran two backends on the same machine and model share a ``pair``: only those
compare backends.  Loaded and validated once; a malformed file is an InputError naming the entry and
the field (exit 5).  Pure over that data: the engine and the planner ask it, nothing here reads the
machine.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache

from probes.inputs import InputError
from probes.record import Record

PATH = os.path.join(os.path.dirname(__file__), "catalogs", "llama-bench-published.json")
BACKENDS = ("vulkan", "rocm", "cuda", "metal", "sycl", "cpu")
TEST = re.compile(r"(pp|tg)\d+")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class Result(Record):
    gpu: str
    match: str
    family: str | None
    backend: str
    runtime: str | None
    build: str | None
    date: str
    model: str
    size_gib: float | None
    params_b: float | None
    ngl: int | None
    fa: int | None
    test: str
    tps: float
    url: str
    where: str
    pair: str | None
    quote: str
    note: str | None = None  # what the source says that qualifies the row (a retyped table, a different build)
    depth: int = 0  # llama-bench's -d: the positions already in the KV cache when the test ran ("tg128 @ d4096")
    no_build: str | None = None  # why a row has no build (the post prints none): such a row counts for less
    os: str = "linux"  # the machine's OS: a Windows or macOS run is said so by the source (drivers differ)

    @property
    def source(self) -> str:
        """The page as people cite it: owner/repo#N for GitHub, else the URL."""
        m = re.match(r"https://github\.com/([^/]+/[^/]+)/(?:(issues|pull|discussions)/(\d+)|blob/)", self.url)
        if not m:
            return self.url
        return f"{m[1]}#{m[3]}" if m[3] else m[1]  # a repository's committed file: the repository

    def to_dict(self) -> dict:
        return {"backend": self.backend, "test": self.test, "depth": self.depth, "tokens_per_s": self.tps, "gpu": self.gpu,
                "match": self.match, "family": self.family, "runtime": self.runtime, "build": self.build,
                "date": self.date, "model": self.model, "source": self.url, "where": self.where, "note": self.note,
                "os": self.os}


def _real_date(text: str) -> bool:
    import datetime

    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _size(text, path, where) -> float | None:
    """'3.56 GiB' -> 3.56; '6.74 B' -> 6.74 (llama-bench's size and params columns)."""
    if text is None:
        return None
    # llama-bench prints GiB and MiB for sizes, B and M for parameters; a table retyped by hand may drop
    # the unit or shorten it (19.70G): its column says which it is
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(GiB|MiB|G|B|M|)\s*", str(text))
    if not m:
        raise InputError(path, f"{where}: {text!r} is not a size llama-bench prints ('3.56 GiB', '6.74 B')")
    value = float(m[1])
    return value / 1024 if m[2] == "MiB" else value / 1000 if m[2] == "M" else value


def _os_of(r: dict, backend: str) -> str:
    """The OS a run was on: the entry's ``os``; else Linux where the source says Asahi (Linux on a Mac),
    macOS for Metal, an Apple chip or MoltenVK (not a mention of it denied), Windows where the source
    says so or its commands are Windows' (``llama-bench.exe``, ``..\\model.gguf``, ``C:\\``), else
    Linux (RADV, ROCm, the CUDA and Vulkan builds of the posts read)."""
    from selector.bandwidth import table

    if r.get("os") in ("linux", "windows", "macos"):
        return r["os"]
    said = " ".join(str(r.get(k) or "") for k in ("where", "note", "runtime", "gpu")).lower()
    if "asahi" in said:
        return "linux"
    apple = any(x["match"] == r.get("match") for x in table().get("apple", []))
    if backend == "metal" or apple or "macos" in said or re.search(r"(?<!not )moltenvk", said):
        return "macos"
    text = said + " " + str(r.get("quote") or "").lower()
    return "windows" if re.search(r"windows|\.exe\b|\b[a-z]:\\|\.\.\\", text) else "linux"


def parse(data, path: str = PATH) -> list[Result]:
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise InputError(path, "must be an object with a 'results' list")
    from selector.bandwidth import by_match

    # `match` is the GPU table's name of the GPU measured: the pick says it and the estimates find its
    # bandwidth by it, so a name the table lacks is a broken entry, not a GPU of its own
    known = by_match()
    out = []
    for i, r in enumerate(data["results"]):
        at = f"results[{i}]"
        if not isinstance(r, dict):
            raise InputError(path, f"{at}: must be an object")

        def text(key, optional=False, r=r, at=at):
            v = r.get(key)
            if v is None and optional:
                return None
            if not isinstance(v, str) or not v.strip():
                raise InputError(path, f"{at}.{key}: must be a non-empty string")
            return v

        def whole(key, r=r, at=at):
            v = r.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise InputError(path, f"{at}.{key}: must be a whole number or null")
            return v

        backend, test, date, url = text("backend"), text("test"), text("date"), text("url")
        if backend not in BACKENDS:
            raise InputError(path, f"{at}.backend: {backend!r} is not one of {', '.join(BACKENDS)}")
        if r.get("os") is not None and r["os"] not in ("linux", "windows", "macos"):
            raise InputError(path, f"{at}.os: {r['os']!r} is not one of linux, windows, macos")
        if not TEST.fullmatch(test):
            raise InputError(path, f"{at}.test: {test!r} is not a llama-bench test such as pp512 or tg128")
        if not DATE.fullmatch(date) or not _real_date(date):
            raise InputError(path, f"{at}.date: {date!r} is not a date (YYYY-MM-DD)")
        if not url.startswith("https://"):
            raise InputError(path, f"{at}.url: {url!r} is not an https address")
        tps = r.get("tps")
        if not isinstance(tps, (int, float)) or isinstance(tps, bool) or not 0 < tps < 1e6:
            raise InputError(path, f"{at}.tps: must be a positive number of tokens per second")
        if text("match") not in known:
            raise InputError(path, f"{at}.match: {r['match']!r} is not a GPU of the GPU table (catalogs/bandwidth.json)")
        fa = whole("fa")
        if fa not in (None, 0, 1):
            raise InputError(path, f"{at}.fa: must be 0, 1 or null")
        depth = whole("depth") or 0
        if r.get("build") is None and not (isinstance(r.get("no_build"), str) and r["no_build"].strip()):
            raise InputError(path, f"{at}.no_build: a row without a build must say why (the post prints none, ...)")
        out.append(Result(
            gpu=text("gpu"), match=text("match"), family=text("family", True), backend=backend,
            runtime=text("runtime", True), build=text("build", True), date=date, model=text("model"),
            size_gib=_size(r.get("size"), path, f"{at}.size"), params_b=_size(r.get("params"), path, f"{at}.params"),
            ngl=whole("ngl"), fa=fa, test=test, tps=float(tps), url=url, where=text("where"),
            pair=text("pair", True), quote=text("quote"), note=text("note", True),
            os=_os_of(r, backend), depth=depth, no_build=text("no_build", True)))
    return out


@lru_cache(maxsize=4)
def load(path: str = PATH) -> tuple[Result, ...]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise InputError(path, f"cannot be read ({e.strerror})") from None
    except ValueError as e:
        raise InputError(path, f"is not JSON ({e})") from None
    return tuple(parse(data, path))


def for_device(results, kind: str, name: str | None, family: str | None, os_name: str | None = None,
               memory_bytes: int | None = None) -> list[tuple[str, list[Result]]]:
    """The results that speak for a device, nearest first: its own model of GPU (the GPU table's row its
    name is, the rule the speed bound uses), then the rest of its family (gfx1100, sm_89).  Each as
    (the GPU model or the family, results)."""
    from selector.bandwidth import row_for

    if os_name:  # a driver is its OS's: Linux's RADV and ROCm say little of Windows' AMD driver
        results = [r for r in results if r.os == os_name]
    row = row_for(kind, name, memory_bytes, exact=True)  # a name several cards share names none of them
    own = [r for r in results if row and r.match == row["match"]]
    kin = [r for r in results if family and r.family == family and r not in own]
    out = []
    if own:
        out.append((row["match"], own))
    if kin:
        out.append((family, kin))
    return out


STANDARD = ("tg128", "pp512")  # llama-bench's default tests: the ones a comparison is judged by


def _test_order(test: str) -> tuple:
    """Generation before prompts, each type's default test first, then by length (pp512 before pp2048)."""
    digits = "".join(c for c in test if c.isdigit())
    return (test[:2] != "tg", test not in STANDARD, int(digits) if digits else 0, test)


def comparison(results, backends, metric: str | None = None, depth: int = 0) -> list[Result]:
    """The latest published comparison of two or more of ``backends``: the rows of one post that ran them
    on the same machine and model (a ``pair``), for every test it ran on two of them (``metric`` "tg" or
    "pp": those tests only); the deciding test first (tg128, else pp512, else the type's shortest),
    fastest first per test.  Where that day's posts compared several models, the model shown is one on
    which the backend that led most of them led, the middle one by its lead: never the one a name
    sorts first; an exact tie keeps the order of ``backends`` (the catalog's).  ``depth``: the comparison
    at that depth (llama-bench's -d; 0, an empty context, by default); the rows the same post ran at other
    depths follow, each test's at its depth (where the order of the backends swaps, they show it).  []
    when no post compared them."""
    order = {b: i for i, b in enumerate(backends)}  # the catalog's order: what an exact tie keeps
    wanted = set(order)
    groups: dict[tuple, list[Result]] = {}
    for r in results:
        if r.pair and r.backend in wanted and (metric is None or r.test.startswith(metric)) and r.depth == depth:
            # one model with one setting of flash attention: a post's other model compares nothing here
            groups.setdefault((r.pair, r.model, r.fa), []).append(r)
    compared = []
    for key, rows in groups.items():
        first: dict[tuple, Result] = {}
        for r in rows:  # a backend's first row of a test (a table may repeat one)
            first.setdefault((r.test, r.backend), r)
        tests: dict[str, set] = {}
        for test, backend in first:
            tests.setdefault(test, set()).add(backend)
        kept = sorted((r for (test, _b), r in first.items() if len(tests[test]) > 1),
                      key=lambda r: (_test_order(r.test), -r.tps, order[r.backend]))
        if kept:
            decide = [r for r in kept if r.test == kept[0].test]
            compared.append((max(r.date for r in kept), decide[0].backend, decide[0].tps / decide[1].tps, key, kept))
    if not compared:
        return []
    day = max(c[0] for c in compared)
    latest = [c for c in compared if c[0] == day]
    leads: dict[str, list] = {}
    for c in latest:
        leads.setdefault(c[1], []).append(c)
    # the backend that led on most models (a tie: the larger typical lead), its middle model by lead
    led = max(leads.values(), key=lambda cs: (len(cs), sorted(c[2] for c in cs)[(len(cs) - 1) // 2], -order[cs[0][1]]))
    led.sort(key=lambda c: (c[2], c[3][0], c[3][1]))
    rows = led[(len(led) - 1) // 2][4]
    return rows + _other_depths(results, rows, order)


def _other_depths(results, rows: list[Result], order: dict) -> list[Result]:
    """The rows the post of ``rows`` ran at other depths, of the same model, setting and tests, where two
    or more of the backends ran at that depth: fastest first per test and depth."""
    first = rows[0]
    tests = {r.test for r in rows}
    seen: dict[tuple, Result] = {}
    for r in results:
        if r.pair == first.pair and r.model == first.model and r.fa == first.fa and r.backend in order \
                and r.test in tests and r.depth != first.depth:
            seen.setdefault((r.test, r.depth, r.backend), r)
    by: dict[tuple, list[Result]] = {}
    for (test, depth, _b), r in seen.items():
        by.setdefault((test, depth), []).append(r)
    out = []
    for key in sorted(by, key=lambda k: (_test_order(k[0]), k[1])):
        if len(by[key]) > 1:
            out += sorted(by[key], key=lambda r: (-r.tps, order[r.backend]))
    return out


def swaps(rows: list[Result]) -> list[tuple[str, int, str]]:
    """Where a comparison's lead changes with the depth: (test, depth, the backend that leads there) for
    each depth at which another backend leads than at the comparison's own depth."""
    if not rows:
        return []
    base = rows[0].depth
    lead: dict[tuple, str] = {}
    for r in rows:  # fastest first per test and depth: the first row of each leads it
        lead.setdefault((r.test, r.depth), r.backend)
    return [(test, depth, b) for (test, depth), b in lead.items()
            if depth != base and (test, base) in lead and lead[(test, base)] != b]


def nearest(results, kind: str, name: str | None, family: str | None, backends, metric: str | None = None,
            os_name: str | None = None, memory_bytes: int | None = None, depth: int = 0) -> tuple[str, list[Result]]:
    """The nearest published comparison of ``backends`` for a device at ``depth``: on its own GPU model,
    else its family, on the same OS.  (words for where, rows), or ("", [])."""
    for where, rs in for_device(results, kind, name, family, os_name, memory_bytes):
        rows = comparison(rs, backends, metric, depth)
        if rows:
            if where != rows[0].match:  # a post of one machine: name its GPU, and why it speaks for this one
                where = f"{rows[0].match} ({family}, this GPU's family)"
            return where, rows
    return "", []


def _tps(r: Result) -> str:
    """A rate as it is worth saying: a decimal below 100 (9.46 vs 8.51), whole above; '~' where the
    catalog derived it (the midpoint of a range the source gave)."""
    text = f"{r.tps:.1f}" if r.tps < 100 else str(int(r.tps + 0.5))
    return ("~" if "(derived)" in (r.note or "") else "") + text


def _test_words(r: Result) -> str:
    """'tg128', 'tg128 @ d4096' (llama-bench's own words for a test at a depth)."""
    return f"{r.test} @ d{r.depth}" if r.depth else r.test


def _parts(rows: list[Result]) -> str:
    by_test: dict[tuple, list[Result]] = {}
    for r in rows:
        by_test.setdefault((r.test, r.depth), []).append(r)
    parts = []
    for rs in by_test.values():
        first, rest = rs[0], rs[1:]
        parts.append(f"{first.backend} {_test_words(first)} {_tps(first)} vs "
                     + " vs ".join(f"{r.backend} {_tps(r)}" for r in rest))
    swapped = swaps(rows)
    if swapped:  # the order changes with the context: say at which depth each leads
        base = rows[0]
        parts.append("; ".join(f"{b} leads {t} from d{d}, {base.backend} at d{base.depth}" for t, d, b in swapped))
    return ", ".join(parts)


def _of(rows: list[Result]) -> str:
    """'llama 7B Q4_0; kyuz0/amd-strix-halo-toolboxes, b9187, 2026-05': the model and where it was published."""
    r0 = rows[0]
    builds = {r.build for r in rows}
    build = r0.build if len(builds) == 1 else None  # one build for every row, or none said
    return f"{r0.model}; " + ", ".join(x for x in (r0.source, build, r0.date[:7]) if x)


def words(rows: list[Result], scope_words: str) -> str:
    """'published on RX 7900 XTX: vulkan tg128 172 vs rocm 138, rocm pp512 4210 vs vulkan 3650
    (llama 7B Q4_0; ggml-org/llama.cpp#20934, b5298, 2025-05)'."""
    return f"published on {scope_words}: {_parts(rows)} ({_of(rows)})"


def words_each(segments: list[tuple[str, list[Result]]]) -> str:
    """Several comparisons (generation's, the prompts') in one line: one source said once where they share
    it, else each with its own; a second GPU named where they were run on two."""
    if len({where for where, _r in segments}) == 1 and len({_of(rows) for _w, rows in segments}) == 1:
        return words([r for _w, rows in segments for r in rows], segments[0][0])
    out = []
    for i, (where, rows) in enumerate(segments):
        lead = f"published on {where}: " if i == 0 else (f"on {where}: " if where != segments[i - 1][0] else "")
        out.append(f"{lead}{_parts(rows)} ({_of(rows)})")
    return ", ".join(out) if len({w for w, _r in segments}) == 1 else "; ".join(out)
