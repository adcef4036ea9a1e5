"""Two threads calling one executable, Python against Rust, in one process.

Target (issue 24, item 6): two Python threads calling one executable reach >= 0.9x the
speed-up that two Rust threads reach on the same machine in the same run.

Each repetition runs, interleaved in a rotating order, 2n executions of the tiny program
(f32[8] a*b+1) on one thread and n on each of two threads (each thread its own input
buffer), for:
- Rust: `Executable::execute_into` + `block_until_ready`, through the extension's hidden
  `_bench_rust_loop` (GIL released for the whole loop);
- Python, plain: `(y,) = exe(x, x); y.block_until_ready()` (two releases of the GIL per
  execution: the execution, then the wait);
- Python, `wait=True`: `exe(x, x, wait=True)` (one release: the execution and the wait).

A speed-up is (time of 2n executions on one thread) / (time of n on each of two threads);
the ratio python / rust is taken per repetition, then summarised.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

import _harness as h


def run(res: h.Results, *, smoke: bool, rust: dict[str, Any] | None) -> None:
    del rust
    import numpy as np

    import rpjrt

    reps, iters = (3, 200) if smoke else (21, 3000)
    client = rpjrt.Client(h.plugin_path("NEW"))
    exe = client.compile(h.MUL_ADD)
    data = np.arange(8, dtype=np.float32)
    xs = [client.put(data) for _ in range(2)]
    (y,) = exe(xs[0], xs[0], wait=True)
    assert np.array_equal(y.to_numpy(), data * data + 1), "wrong result"

    rust_loop = getattr(rpjrt._rpjrt, "_bench_rust_loop", None)
    if rust_loop is None:
        res.note("the extension has no _bench_rust_loop: the thread targets are not measured")
        res.target(
            "2 Python threads' speed-up vs 2 Rust threads', exe(x, x, wait=True)",
            value=None,
            op=">=",
            threshold=0.9,
            unit="x",
            detail="extension too old",
        )
        return

    def plain(i: int, n: int) -> None:
        x = xs[i]
        for _ in range(n):
            (y,) = exe(x, x)
            y.block_until_ready()

    def waiting(i: int, n: int) -> None:
        x = xs[i]
        for _ in range(n):
            exe(x, x, wait=True)

    # The Python floor (bench/b_execute.py): one C-floor iteration per Python call, each
    # thread its own floor on its own input. Its 2-thread speed-up is the most that Python
    # threads reach with no rpjrt code between the interpreter and the plugin.
    floor_cls = getattr(rpjrt._rpjrt, "_BenchFloor", None)
    floors: list[Any] = []
    if floor_cls is not None:
        try:
            floors = [floor_cls(exe, [[x, x]], "ready") for x in xs]
        except Exception:  # built without the `bench` feature
            floors = []

    def pyfloor(i: int, n: int) -> None:
        f, x = floors[i], xs[i]
        for _ in range(n):
            f(x, x)

    def one(work: Callable[[int, int], None]) -> Callable[[int], None]:
        return lambda n: work(0, 2 * n)

    def two(work: Callable[[int, int], None]) -> Callable[[int], None]:
        def f(n: int) -> None:
            ts = [threading.Thread(target=work, args=(i, n)) for i in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()

        return f

    variants = {
        "rust_one": lambda n: rust_loop(exe, [[xs[0], xs[0]]], 2 * n),
        "rust_two": lambda n: rust_loop(exe, [[xs[0], xs[0]], [xs[1], xs[1]]], n),
        "py_one": one(plain),
        "py_two": two(plain),
        "pywait_one": one(waiting),
        "pywait_two": two(waiting),
    }
    if floors:
        variants["pyfloor_one"] = one(pyfloor)
        variants["pyfloor_two"] = two(pyfloor)
    what = {
        "rust_one": "Rust execute_into + block_until_ready, 1 thread (per 2 executions)",
        "rust_two": "the same on 2 threads at once, n each (per 2 executions)",
        "py_one": "Python (y,) = exe(x, x); y.block_until_ready(), 1 thread (per 2 executions)",
        "py_two": "the same on 2 Python threads, n each (per 2 executions)",
        "pywait_one": "Python exe(x, x, wait=True), 1 thread (per 2 executions)",
        "pywait_two": "the same on 2 Python threads, n each (per 2 executions)",
        "pyfloor_one": "Python floor: floor(x, x) (one C-floor iteration per call), 1 thread (per 2 executions)",
        "pyfloor_two": "the same on 2 Python threads, n each (per 2 executions)",
    }
    t = h.interleaved(variants, reps=reps, iters=iters)
    for k, v in t.items():
        res.figure(f"threads.{k}", what[k], "ns", h.stats(v))

    def speedup(name: str) -> list[float]:
        return [a / b for a, b in zip(t[f"{name}_one"], t[f"{name}_two"])]

    rust_s = speedup("rust")
    res.figure("threads.rust_speedup", "2 Rust threads / 1, throughput", "x", h.stats(rust_s))
    cpus = os.cpu_count()
    if floors:
        floor_s = speedup("pyfloor")
        res.figure(
            "threads.pyfloor_speedup",
            "2 Python threads / 1, throughput, calling the Python floor (no rpjrt code per call)",
            "x",
            h.stats(floor_s),
        )
        res.figure(
            "threads.pyfloor_vs_rust_speedup",
            "Python-floor speed-up / Rust speed-up, per repetition: the most item 6 can reach here",
            "x",
            h.paired(floor_s, rust_s),
        )
    for name, loop in (("pywait", "exe(x, x, wait=True)"), ("py", "(y,) = exe(x, x); y.block_until_ready()")):
        py_s = speedup(name)
        res.figure(f"threads.{name}_speedup", f"2 Python threads / 1, throughput, {loop}", "x", h.stats(py_s))
        res.target(
            f"2 Python threads' speed-up vs 2 Rust threads', {loop}",
            value=h.paired(py_s, rust_s),
            op=">=",
            threshold=0.9,
            unit="x",
            detail=f"{cpus} CPUs; f32[8] a*b+1; Rust 2-thread speed-up "
            f"{h.stats(rust_s)['median']:.3f}x, Python {h.stats(py_s)['median']:.3f}x",
            reference="Rust threads in the same process, interleaved",
        )
