"""How an 8-device call's wait costs (issue 24, item 4): the prepared call with the
default poll, with no poll and with a long one, against JAX and the raw C floors.

Usage: python bench/_spmd_wait_probe.py [REPS]

Every variant runs the 8-device `a * b + 1` program of `_spmd_child.py`, interleaved in
one process (REPS repetitions of 300 calls each). Prints each variant's median time per
call + wait, then the prepared call's and the floors' ratios to JAX, paired per
repetition. The floors need the extension built with the `bench` feature.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h  # noqa: E402
from _spmd_child import Case, mul_add, setup_jax  # noqa: E402


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    plugin = h.plugin_path("NEW")
    jax = setup_jax(plugin)
    import rpjrt

    client = rpjrt.Client(plugin, options={"cpu_device_count": 8})
    case = Case(jax, client, mul_add, 2, 8)
    variants = {k: f for k, f in case.variants.items() if k != "rpjrt_plain"}
    floor = rpjrt._rpjrt._BenchFloor
    variants["c_ready"] = floor(case.exe, case.lists, "ready").run
    variants["c_event"] = floor(case.exe, case.lists, "event").run
    call = case.exe.prepare(case.lists)

    def with_spin(seconds: float) -> Callable[[int], None]:
        def loop(n: int) -> None:
            old = rpjrt.wait_spin()
            rpjrt.set_wait_spin(seconds)
            try:
                for _ in range(n):
                    call()
            finally:
                rpjrt.set_wait_spin(old)

        return loop

    variants["prepared_spin0"] = with_spin(0.0)
    variants["prepared_spin1000us"] = with_spin(1e-3)
    r = h.interleaved(variants, reps=reps, iters=300)
    for k, s in r.items():
        st = h.stats(s)
        print(f"{k:20s} {st['median'] / 1e3:8.1f} µs  [{st['min'] / 1e3:.1f}..{st['max'] / 1e3:.1f}]")
    for k in ("rpjrt_prepared", "prepared_spin0", "c_ready", "c_event"):
        print(f"{k} / jax: {h.paired(r[k], r['jax'])['median']:.3f}x")


if __name__ == "__main__":
    main()
