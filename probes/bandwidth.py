"""System memory bandwidth, measured: how fast this machine's cores read memory they did not cache.

Generating a token on the CPU reads every active weight once, so this bounds a CPU build's speed.
No file or sysfs attribute says it (DIMM speeds need root and dmidecode, and the channels fitted are
not in /proc), so it is measured: each thread sums its own array, larger than any cache, several
times, and the best round counts (a busy machine only ever makes a round slower).  Costs about half
a second and the memory of the arrays; the caller keeps the answer (selector/store.py) and never
measures a machine it only replays.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

MIB = 1 << 20


def measure_read(threads: int, total_bytes: int = 512 * MIB, rounds: int = 3) -> float:
    """Read bandwidth in GB/s (10^9 bytes/s) with ``threads`` threads over ``total_bytes`` in all."""
    import numpy as np  # only here: the gguf package brings it for the commands that read models

    threads = max(1, threads)
    each = max(total_bytes // threads // 4, 1 << 20)  # float32 values per thread
    arrays = [np.ones(each, dtype=np.float32) for _ in range(threads)]  # written once: pages are real
    best = 0.0
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for _ in range(rounds):
            t0 = time.perf_counter()
            list(pool.map(lambda a: float(a.sum(dtype=np.float32)), arrays))  # numpy reads without the GIL
            dt = time.perf_counter() - t0
            if dt > 0:
                best = max(best, threads * each * 4 / dt / 1e9)
    return round(best, 1)
