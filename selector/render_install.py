"""`install`, `status`: the words for a person (the JSON is the result dicts themselves, docs/json.md).
Each line is plain text; an address or a path is never broken."""

from __future__ import annotations

import click


def size(n) -> str:
    if n is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def dry_run(out: dict) -> None:
    click.echo(f"{out['recipe']} {out['backend']} ({out['dir']}, {out['version']}): dry run, nothing downloaded")
    for a in out["artifacts"]:
        click.echo(f"  {a['kind']}:")
        if a["repository"]:
            click.echo(f"    repository   {a['repository']}")
            click.echo(f"    tag          {a['tag']}")
        click.echo(f"    asset        {a['asset']}")
        click.echo(f"    url          {a['url']}")
        click.echo(f"    size         {size(a['size'])}")
        if a["digest"]:
            click.echo(f"    digest       {a['digest']}")
        elif a.get("digest_known", True):
            click.echo("    digest       none published (install needs --allow-unverified)")
        else:
            click.echo("    digest       unknown (the releases API could not be asked; see the warning)")
        click.echo(f"    destination  {a['path']}"
                   + (f" (installed: {a['installed_version']})" if a.get("installed_version") else ""))
    for w in out["warnings"]:
        click.echo(f"warning: {w}", err=True)


def installed(name: str, dirname: str, out: dict) -> None:
    """What an install did, one line per artifact, after its warnings."""
    for w in out["warnings"]:
        click.echo(f"warning: {w}", err=True)
    for r in out["artifacts"]:
        what = "TheRock runtime" if r["kind"] == "runtime" else f"{name} {dirname}"
        if r["action"] == "present":
            click.echo(f"{what} {r['version']} is already installed: {r['path']}")
            continue
        check = ("SHA-256 verified (" + (r.get("digest_source") or "") + ")") if r.get("verified") else "UNVERIFIED"
        click.echo(f"installed {what} {r['version']} ({r['asset']}, {check}) -> {r['path']}")


def measurements(con, measured: list[dict]) -> None:
    con.print("measurements (pick-backend bench; --policy measured uses the fresh, steady ones)", style="bold",
              markup=False)
    for r in measured:
        speed = f"{r['avg_ts']:.1f} ± {r.get('stddev_ts', 0):.1f} t/s" if r.get("status") == "ok" else f"failed: {r.get('why')}"
        state = ("fresh" if r["fresh"] else f"stale: {r['stale_because']}") + \
            (", noisy: never chosen" if r.get("noisy") else "")
        version = r.get("version") or "version unknown"
        con.print(f"  {r['recipe']} {r.get('dir')} {version}  {r['test']}  {r['model'].get('label')}  "
                  f"{r['device'].get('name')}  {speed}  ({str(r.get('at', ''))[:10]}, {state})", markup=False, highlight=False,
                  soft_wrap=True)
