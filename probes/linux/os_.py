"""OS: kernel release, distro (os-release), WSL, container."""

from __future__ import annotations

# distro's own normalisation of os-release IDs (distro.NORMALIZED_OS_ID, distro 1.9.0)
_NORMALIZED_ID = {"ol": "oracle", "opensuse-leap": "opensuse"}


def parse_os_release(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key.strip()] = value.replace('\\"', '"')
    return out


def probe(host, profile) -> None:
    p = profile.os
    p.name = "linux"
    p.version = host.release
    text = host.read("/etc/os-release")
    if text is None:
        text = host.read("/usr/lib/os-release")
    if text is None:
        profile.warn("os", "no /etc/os-release or /usr/lib/os-release: distro unknown")
    else:
        rel = parse_os_release(text)
        dist_id = rel.get("ID", "").lower().replace(" ", "_")
        p.distro.id = _NORMALIZED_ID.get(dist_id, dist_id)
        p.distro.version = rel.get("VERSION_ID", "")
        p.distro.like = rel.get("ID_LIKE", "")
    version = host.read("/proc/version") or ""
    p.wsl = "microsoft" in version.lower() or host.exists("/dev/dxg")
    p.container = host.exists("/.dockerenv") or host.exists("/run/.containerenv")
