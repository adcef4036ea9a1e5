"""Dispatch of the tiny program (f32[8] a*b+1) from Python, against the raw C floor and JAX.

Targets:
- Python `exe(x, x)` + `block_until_ready()` vs the raw C floor: <= 1.25x (issue 24)
- Python `exe(x, x, wait=True)` (execute and wait in one release of the GIL) vs the floor:
  <= 1.25x
- the same vs JAX `jit(f)(x, x).block_until_ready()`: <= 1.0x
- Python execute + `to_numpy()` vs JAX execute + `np.asarray`: <= 1.0x

The floor runs in this process, interleaved with the Python variants, through the
extension's hidden `_bench_c_floor` (rpjrt::__bench::c_floor_execute with the GIL released).
Where the extension lacks it, the floor comes from the Rust benchmark's JSON instead
(measured in another process, so noisier).
"""

from __future__ import annotations

from typing import Any

import _harness as h


def run(res: h.Results, *, smoke: bool, rust: dict[str, Any] | None) -> None:
    import numpy as np

    import rpjrt

    reps, iters = (3, 200) if smoke else (31, 3000)
    client = rpjrt.Client(h.plugin_path("NEW"))
    exe = client.compile(h.MUL_ADD)
    xs = np.arange(8, dtype=np.float32)
    x = client.put(xs)
    (y,) = exe(x, x)
    assert np.array_equal(y.to_numpy(), xs * xs + 1), "wrong result"

    def py_bur(n: int) -> None:
        for _ in range(n):
            (y,) = exe(x, x)
            y.block_until_ready()

    def py_numpy(n: int) -> None:
        for _ in range(n):
            (y,) = exe(x, x)
            y.to_numpy()

    def py_asarray(n: int) -> None:
        for _ in range(n):
            (y,) = exe(x, x)
            np.asarray(y)

    def py_wait(n: int) -> None:
        for _ in range(n):
            exe(x, x, wait=True)

    variants: dict[str, Any] = {"py_exe_bur": py_bur, "py_exe_to_numpy": py_numpy, "py_exe_asarray": py_asarray}
    try:
        exe(x, x, wait=True)
        variants["py_exe_wait"] = py_wait
    except TypeError:  # an extension without wait=
        res.note("the extension's Executable.__call__ has no wait=: that figure is not measured")

    floor = getattr(rpjrt._rpjrt, "_bench_c_floor", None)
    if floor is not None:
        try:
            floor(exe, [x, x], 1, "event")
        except Exception:  # built without the `bench` feature
            floor = None
    if floor is not None:
        variants["c_floor_event"] = lambda n: floor(exe, [x, x], n, "event")
        variants["c_floor_ready"] = lambda n: floor(exe, [x, x], n, "ready")
        # The least a Python call of the plugin costs: the same C iteration as c_floor_ready,
        # prepared once, called from a Python loop with the arguments exe(x, x) passes (and
        # ignores), the GIL released around it. No argument check, no result object.
        pf = rpjrt._rpjrt._BenchFloor(exe, [[x, x]], "ready")

        def py_floor(n: int) -> None:
            for _ in range(n):
                pf(x, x)

        variants["py_floor_call"] = py_floor
    else:
        res.note(
            "the extension has no working _bench_c_floor: the C floor is taken from the Rust "
            "benchmark (another process, measured earlier)"
        )

    try:
        import jax
        import jax.numpy as jnp

        f = jax.jit(lambda a, b: a * b + 1)
        jx = jnp.asarray(xs)
        assert np.array_equal(np.asarray(f(jx, jx)), xs * xs + 1)

        def jax_bur(n: int) -> None:
            for _ in range(n):
                f(jx, jx).block_until_ready()

        def jax_np(n: int) -> None:
            for _ in range(n):
                np.asarray(f(jx, jx))

        variants["jax_jit_bur"] = jax_bur
        variants["jax_jit_asarray"] = jax_np
        jax_version = jax.__version__
    except ImportError:
        jax_version = None
        res.note("jax is not installed: the JAX comparisons are not measured")

    t = h.interleaved(variants, reps=reps, iters=iters)
    what = {
        "py_exe_bur": "Python: (y,) = exe(x, x); y.block_until_ready()",
        "py_exe_to_numpy": "Python: (y,) = exe(x, x); y.to_numpy()",
        "py_exe_asarray": "Python: (y,) = exe(x, x); np.asarray(y)",
        "py_exe_wait": "Python: exe(x, x, wait=True) (execute + wait, one release of the GIL)",
        "c_floor_event": "raw C floor: Execute(completion event) + Await + destroys (in-process)",
        "c_floor_ready": "raw C floor: Execute + Buffer_ReadyEvent + Await + destroys (in-process)",
        "py_floor_call": "Python floor: a Python loop calling c_floor_ready's iteration, floor(x, x)",
        "jax_jit_bur": f"JAX {jax_version}: jit(f)(x, x).block_until_ready()",
        "jax_jit_asarray": f"JAX {jax_version}: np.asarray(jit(f)(x, x))",
    }
    for k, v in t.items():
        res.figure(f"execute.{k}", what[k], "ns", h.stats(v))

    # The floor: the faster of the two C sequences in each repetition (the strictest).
    if floor is not None:
        floor_ns = [min(a, b) for a, b in zip(t["c_floor_event"], t["c_floor_ready"])]
        res.figure("execute.c_floor", "raw C floor: the faster of the two, per repetition", "ns", h.stats(floor_ns))
        ratio = h.paired(t["py_exe_bur"], floor_ns)
        wait_ratio = h.paired(t["py_exe_wait"], floor_ns) if "py_exe_wait" in t else None
        ref = "raw C floor, same process, interleaved"
        # Where the Python gap sits: the interpreter's loop and call, and the release of the
        # GIL, cost py_floor_call / c_floor before rpjrt does anything; the rest is rpjrt's
        # API (argument checks, the result Buffer and list, block_until_ready()).
        res.figure(
            "execute.py_floor_vs_c_floor",
            "Python floor (floor(x, x) in a Python loop) / raw C floor, per repetition",
            "x",
            h.paired(t["py_floor_call"], floor_ns),
        )
        res.figure(
            "execute.py_exe_bur_vs_py_floor",
            "Python exe(x, x) + block_until_ready() / Python floor, per repetition",
            "x",
            h.paired(t["py_exe_bur"], t["py_floor_call"]),
        )
    elif rust is not None:
        fe = rust["variants"]["floor_event"]["median"]
        fr = rust["variants"]["floor_ready"]["median"]
        ratio = h.stats([v / min(fe, fr) for v in t["py_exe_bur"]])
        wait_ratio = h.stats([v / min(fe, fr) for v in t["py_exe_wait"]]) if "py_exe_wait" in t else None
        ref = "raw C floor from the Rust benchmark (median)"
    else:
        ratio = wait_ratio = None
        ref = "raw C floor unavailable"
    res.target(
        "Python exe(x, x) + block_until_ready() vs raw C floor",
        value=ratio,
        op="<=",
        threshold=1.25,
        unit="x",
        detail="f32[8] a*b+1 on the PJRT 0.115 CPU plugin",
        reference=ref,
    )
    res.target(
        "Python exe(x, x, wait=True) vs raw C floor",
        value=wait_ratio,
        op="<=",
        threshold=1.25,
        unit="x",
        detail="execute + wait in one release of the GIL",
        reference=ref,
    )
    if jax_version is not None:
        res.target(
            "Python exe(x, x) + block_until_ready() vs JAX jit(f)(x, x).block_until_ready()",
            value=h.paired(t["py_exe_bur"], t["jax_jit_bur"]),
            op="<=",
            threshold=1.0,
            unit="x",
            detail="JAX uses its own bundled CPU client",
            reference=f"JAX {jax_version}, same process, interleaved",
        )
        res.target(
            "Python execute + to_numpy() vs JAX execute + np.asarray",
            value=h.paired(t["py_exe_to_numpy"], t["jax_jit_asarray"]),
            op="<=",
            threshold=1.0,
            unit="x",
            detail="tiny f32[8] result",
            reference=f"JAX {jax_version}, same process, interleaved",
        )
        res.figure(
            "execute.asarray_vs_jax",
            "np.asarray(exe(x, x)[0]) / np.asarray(jit(f)(x, x)), per repetition",
            "x",
            h.paired(t["py_exe_asarray"], t["jax_jit_asarray"]),
        )
    else:
        for name in (
            "Python exe(x, x) + block_until_ready() vs JAX jit(f)(x, x).block_until_ready()",
            "Python execute + to_numpy() vs JAX execute + np.asarray",
        ):
            res.target(name, value=None, op="<=", threshold=1.0, unit="x", detail="jax not installed")
