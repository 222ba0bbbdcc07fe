"""`bench`'s words for a person: the measured table (the JSON is docs/json.md 'bench')."""

from __future__ import annotations


def table(con, results, winner, metric, tests) -> None:
    """`bench`'s table: each build's results per test, its failures with their evidence, and the winner."""
    from selector.bench import NOISY

    cols = ["backend", "build", "device"] + [f"{t} t/s" for t in tests]
    lines = [cols]
    for r in results:
        build = next((x["build"] for x in r["tests"].values()), {}) if r["tests"] else {}
        own = r.get("build_version")
        version = str(r["version"] or build.get("number") or "?")
        row = [r["backend"] + (" *" if r["backend"] == winner else ""),
               version + (f" (says {own})" if own and own != version else ""), r["device"]["name"]]
        for t in tests:
            x = r["tests"].get(t)
            row.append((f"{x['avg_ts']:.1f} ± {x['stddev_ts']:.1f}" + (" noisy" if x.get("noisy") else ""))
                       if x and r["status"] == "ok" else "failed")
        lines.append(row)
    widths = [max(len(x[i]) for x in lines) for i in range(len(cols))]
    for i, line in enumerate(lines):
        con.print("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip(), style="bold" if i == 0 else None,
                  markup=False, highlight=False, soft_wrap=True)
    for r in results:
        if r["status"] != "ok":
            con.print(f"{r['backend']}: {r['why']}", style="red", markup=False, highlight=False, soft_wrap=True)
            for e in r["evidence"][-5:]:
                con.print(f"  {e}", style="dim", markup=False, highlight=False, soft_wrap=True)
    if any(x.get("noisy") for r in results for x in r["tests"].values()):
        con.print(f"noisy: the runs of a test varied by more than {NOISY:.0%} of their mean, twice; such a result is "
                  "kept but never chosen by --policy measured (measure again on a quiet machine)",
                  markup=False, highlight=False, soft_wrap=True)
    if winner:
        depth = metric.rsplit("@d", 1)[1] if "@d" in metric else None
        con.print(f"* fastest by {metric}; `pick-backend pick {results[0]['recipe']} --policy measured"
                  f"{f' --depth {depth}' if depth else ''}` picks it",
                  markup=False, highlight=False, soft_wrap=True)
