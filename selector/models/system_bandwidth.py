"""System memory's read bandwidth for a plan: where a plan reads weights from system memory (a CPU
build, -ngl K, --n-cpu-moe N), its speed bound and the choice between -ngl and --n-cpu-moe need it.

From the tables where the CPU shares a known device's memory (an APU, an Apple chip); else measured
once on this machine (probes/bandwidth.py, the one place it is measured) and kept in the cache.  A
machine that is only replayed (--root, --profile) is never measured: its CPU platform's peak from the
tables, or nothing.  A described GPU (--gpu, --vram, --ram) keeps this machine's CPU, so its
measurement counts.
"""

from __future__ import annotations

import datetime
import os


class SystemBandwidth:
    """``bw()``: (GB/s, where it comes from) or None, worked out at the first call and kept."""

    def __init__(self, profile, cache: str | None, replayed: bool, say=None):
        self.profile, self.cache, self.replayed, self.say = profile, cache, replayed, say or (lambda _t: None)
        self._got: list = []

    def __call__(self) -> tuple[float, str] | None:
        if not self._got:
            self._got.append(self._find())
        return self._got[0]

    def _find(self) -> tuple[float, str] | None:
        from selector.models.speed import cpu_bandwidth, cpu_platform_bandwidth

        known = cpu_bandwidth(self.profile)
        if known:
            return known
        if self.replayed:  # another machine: its platform's peak, never a measurement here
            return cpu_platform_bandwidth(self.profile)
        return self._measured()

    def _measured(self) -> tuple[float, str]:
        from selector import store

        cpu = self.profile.cpu
        threads = cpu.cores or os.cpu_count() or 1
        path = store.path(self.cache, "machine", f"memory-bandwidth:{cpu.brand}:{threads}:{cpu.memory_bytes}") \
            if self.cache else None
        rec = store.read(path) if path else None
        if not (rec and isinstance(rec.get("gbps"), (int, float)) and rec["gbps"] > 0 and isinstance(rec.get("at"), str)):
            from probes.bandwidth import measure_read

            self.say("measuring this machine's memory bandwidth (about a second; kept in the cache)...")
            rec = {"gbps": measure_read(threads), "threads": threads, "at": datetime.date.today().isoformat()}
            try:
                if path:
                    store.write(path, rec)
            except OSError as e:  # a read-only cache: measured again next time, and said so
                self.say(f"the measurement cannot be kept ({e.strerror or e}); it is taken again on every plan")
        return float(rec["gbps"]), f"measured here on {rec['at']}: {threads} threads reading memory"
