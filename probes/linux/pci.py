"""``/sys/bus/pci/devices``: read once per host, shared by the NPU, NVIDIA and Intel probes."""

from __future__ import annotations

import weakref

from probes.record import Record

from probes.util import parse_hex

BASE = "/sys/bus/pci/devices"

# host -> its scan: the module that reads the scan keeps it, for as long as the host lives
_SCANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class PciDevice(Record):
    bus_id: str
    vendor: str
    device: str | None
    revision: str | None
    pci_class: str | None
    driver: str | None

    @property
    def is_display(self) -> bool:
        return bool(self.pci_class) and self.pci_class.startswith("0x03")


def scan(host) -> list[PciDevice]:
    try:
        return _SCANS[host]
    except KeyError:
        pass
    except TypeError:  # a host that cannot be weakly referenced: scanned each time
        return _scan(host)
    out = _SCANS[host] = _scan(host)
    return out


def _scan(host) -> list[PciDevice]:
    out = []
    for bdf in host.listdir(BASE):
        path = f"{BASE}/{bdf}"
        try:
            vendor = parse_hex(host.read(f"{path}/vendor"))
        except PermissionError:
            continue
        if vendor not in ("0x1002", "0x1022", "0x10de", "0x8086"):
            continue  # no vendor we have facts for: skip the other reads
        def rd(name):
            try:
                return parse_hex(host.read(f"{path}/{name}"))
            except PermissionError:
                return None
        out.append(
            PciDevice(
                bus_id=bdf,
                vendor=vendor,
                device=rd("device"),
                revision=rd("revision"),
                pci_class=rd("class"),
                driver=host.link_name(f"{path}/driver"),
            )
        )
    return out
