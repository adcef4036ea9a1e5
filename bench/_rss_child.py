"""Child process of the RSS benchmark: runs execute cycles and reports VmRSS.

Usage: python _rss_child.py FIRST TOTAL. Prints one JSON line with the RSS (KiB) after
FIRST cycles and after TOTAL cycles. A cycle is `(y,) = exe(x, x)`, `y.block_until_ready()`,
`y.to_numpy()`, with the garbage collector left on, as in a user's program.
"""

from __future__ import annotations

import json
import sys

import _harness as h


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    import numpy as np

    import rpjrt

    first, total = int(sys.argv[1]), int(sys.argv[2])
    client = rpjrt.Client(h.plugin_path("NEW"))
    exe = client.compile(h.MUL_ADD)
    x = client.put(np.arange(8, dtype=np.float32))

    def cycles(n: int) -> None:
        for _ in range(n):
            (y,) = exe(x, x)
            y.block_until_ready()
            y.to_numpy()

    cycles(first)
    at_first = rss_kib()
    cycles(total - first)
    at_end = rss_kib()
    print(json.dumps({"first": first, "total": total, "rss_first_kib": at_first, "rss_end_kib": at_end}))


if __name__ == "__main__":
    main()
