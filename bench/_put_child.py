"""Child process of the transfer benchmark: `put` (copy) of SIZE MiB vs a numpy copy, run
under whatever malloc tunables the parent set (GLIBC_TUNABLES=glibc.malloc.hugetlb=1 lets
glibc back the plugin's large allocations with transparent huge pages). Prints one JSON line
with the per-repetition times (ns) and minor page faults of both."""

from __future__ import annotations

import json
import resource
import sys

import _harness as h


def main() -> None:
    import numpy as np

    import rpjrt

    size, reps, iters = (int(a) for a in sys.argv[1:4])
    client = rpjrt.Client(h.plugin_path("NEW"))
    src = np.random.default_rng(0).random(size * h.MIB // 4, dtype=np.float32)
    faults: dict[str, int] = {}

    def counted(name: str, body: object) -> object:
        def f(n: int) -> None:
            r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            body(n)  # type: ignore[operator]
            faults[name] = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0) // max(n, 1)

        return f

    def put(n: int) -> None:
        for _ in range(n):
            b = client.put(src)
            b.block_until_ready()
            del b

    def copy(n: int) -> None:
        for _ in range(n):
            c = src.copy()
            del c

    t = h.interleaved({"put": counted("put", put), "np_copy": counted("np_copy", copy)}, reps=reps, iters=iters)
    print(json.dumps({"times": t, "faults_per_call": faults}))


if __name__ == "__main__":
    main()
