"""System memory bandwidth, measured: how fast this machine's cores read memory they did not cache.

Generating a token on the CPU reads every active weight once, so this bounds a CPU build's speed.
No file or sysfs attribute says it (DIMM speeds need root and dmidecode, and the channels fitted are
not in /proc), so it is measured: each thread sums its own array, larger than any cache, several
times, and the best round counts (a busy machine only ever makes a round slower).  Costs about half
a second and the memory of the arrays; the caller keeps the answer (selector/store.py) and never
measures a machine it only replays.  Each thread counts the non-zero 8-byte words of its array: the
cheapest full read numpy has (faster than a float sum: 44 against 35 GB/s on this project's 2-core
machines), so the figure is as near the memory's own rate as Python gets and a bound built on it
stays a bound.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

MIB = 1 << 20


def measure_read(threads: int, total_bytes: int = 512 * MIB, rounds: int = 5) -> float:
    """Read bandwidth in GB/s (10^9 bytes/s) with ``threads`` threads over ``total_bytes`` in all."""
    import numpy as np  # only here: the gguf package brings it for the commands that read models

    threads = max(1, threads)
    each = max(total_bytes // threads // 8, 1 << 17)  # 8-byte words per thread
    arrays = [np.ones(each, dtype=np.uint64) for _ in range(threads)]  # written once: the pages are real
    best = 0.0
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for _ in range(rounds):
            t0 = time.perf_counter()
            list(pool.map(np.count_nonzero, arrays))  # numpy reads without the GIL
            dt = time.perf_counter() - t0
            if dt > 0:
                best = max(best, threads * each * 8 / dt / 1e9)
    return round(best, 1)
