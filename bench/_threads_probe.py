"""Whether what two Python threads share in rpjrt costs their speed-up (issue 24, item 6).

Usage: python bench/_threads_probe.py [REPS]

Each repetition times 2 x 3000 calls on one thread and 3000 on each of two threads, for:
- `shared_exe`: both threads call one executable, `exe(x, x, wait=True)` (they share its
  spare output handles and the client's list of dropped buffers);
- `own_exe`: each thread calls an executable of its own, compiled from the same program;
- `floor`: each thread calls its own Python floor (`_BenchFloor`, one C-floor iteration
  per call, no rpjrt code; needs the extension built with the `bench` feature).
Prints each variant's speed-up (one thread's time / two threads' time), median [min..max].
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

import _harness as h  # noqa: E402
import rpjrt  # noqa: E402

N = 3000


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    c = rpjrt.Client(h.plugin_path("NEW"))
    exes = [c.compile(h.MUL_ADD) for _ in range(2)]
    xs = [c.put(np.arange(8, dtype=np.float32)) for _ in range(2)]
    floors = [rpjrt._rpjrt._BenchFloor(exes[0], [[x, x]], "ready") for x in xs]

    def plain(exe: Any, x: Any, n: int) -> None:
        for _ in range(n):
            exe(x, x, wait=True)

    def floor(f: Any, x: Any, n: int) -> None:
        for _ in range(n):
            f(x, x)

    def one(fn: Callable[..., None], args: list[tuple[Any, Any]]) -> float:
        t = time.perf_counter()
        fn(*args[0], 2 * N)
        return time.perf_counter() - t

    def two(fn: Callable[..., None], args: list[tuple[Any, Any]]) -> float:
        ts = [threading.Thread(target=fn, args=(*a, N)) for a in args]
        t = time.perf_counter()
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        return time.perf_counter() - t

    variants = {
        "shared_exe": (plain, [(exes[0], xs[0]), (exes[0], xs[1])]),
        "own_exe": (plain, [(exes[0], xs[0]), (exes[1], xs[1])]),
        "floor": (floor, [(floors[0], xs[0]), (floors[1], xs[1])]),
    }
    got: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(reps):
        for k, (fn, args) in variants.items():
            got[k].append(one(fn, args) / two(fn, args))
    for k, v in got.items():
        print(f"{k:12s} speed-up {statistics.median(v):.3f}x [{min(v):.3f}..{max(v):.3f}]")


if __name__ == "__main__":
    main()
