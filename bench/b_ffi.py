"""Custom calls: per-call overhead of a Rust and a Python handler, against the same program
without a custom call, with JAX's jax.pure_callback on the same work as the reference.

The work is y = 2·x + 1.5 over f32[8]. Variants (each `exe(x)` + `block_until_ready()`):
- base: the computation in StableHLO (multiply + add), no custom call;
- rust_cc: a custom call served by a Rust handler (rpjrt::ffi);
- py_cc: a custom call served by a Python handler (numpy on the argument views);
- jax_base / jax_pure_callback: JAX jit of the same computation, and of a
  jax.pure_callback doing the same numpy work.

Also a Python handler with an empty body (py_noop_cc: the dispatch cost alone, without
the numpy work), as a figure.

Targets (overheads are per call, variant minus its base, per repetition):
- Rust handler overhead <= 1.5 µs; Python handler overhead <= 5 µs;
- Python handler overhead vs jax.pure_callback overhead <= 1.0x.
Also RSS growth over 10,000 Python-handler calls and 10,000 failing calls (after warm-up),
measured in a child process: <= 1 MiB.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import _harness as h

BASE = """func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %two = stablehlo.constant dense<2.0> : tensor<8xf32>
  %off = stablehlo.constant dense<1.5> : tensor<8xf32>
  %0 = stablehlo.multiply %x, %two : tensor<8xf32>
  %1 = stablehlo.add %0, %off : tensor<8xf32>
  return %1 : tensor<8xf32>
}
"""

CC = """func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.custom_call @TARGET(%x) {api_version = 4 : i32,
      backend_config = {offset = 1.5 : f32}} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""

RSS_CHILD = """
import gc, json, sys
import numpy as np, rpjrt, rpjrt.ffi
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
first, total = int(sys.argv[2]), int(sys.argv[3])
c = rpjrt.Client(sys.argv[1])
prog = sys.argv[4]
def ok(call):
    call.rets[0].to_numpy()[:] = 2 * call.args[0].to_numpy() + call.attrs["offset"]
def bad(call):
    raise RuntimeError("always fails")
rpjrt.ffi.register(c, "bench_rss_ok", ok)
rpjrt.ffi.register(c, "bench_rss_bad", bad)
e_ok = c.compile(prog.replace("TARGET", "bench_rss_ok"))
e_bad = c.compile(prog.replace("TARGET", "bench_rss_bad"))
x = c.put(np.arange(8, dtype=np.float32))
def run(n):
    for _ in range(n):
        e_ok(x)[0].to_numpy()
        try:
            e_bad(x)[0].to_numpy()
        except rpjrt.Error:
            pass
run(first)
gc.collect()
a = rss()
run(total)
gc.collect()
print(json.dumps({"growth": rss() - a, "calls": total}))
"""


def run(res: h.Results, *, smoke: bool, rust: dict[str, Any] | None) -> None:
    import numpy as np

    import rpjrt
    import rpjrt.ffi

    reps, iters = (3, 200) if smoke else (31, 3000)
    client = rpjrt.Client(h.plugin_path("NEW"))
    xs = np.arange(8, dtype=np.float32)
    want = 2 * xs + 1.5
    x = client.put(xs)

    rpjrt._rpjrt._ffi_bench_register_rust(client, "bench_ffi_rust")

    def py_handler(call: Any) -> None:
        y = call.rets[0].to_numpy()
        np.multiply(call.args[0].to_numpy(), 2.0, out=y)
        y += call.attrs["offset"]

    def py_noop(call: Any) -> None:
        pass

    rpjrt.ffi.register(client, "bench_ffi_py", py_handler, replace=True)
    rpjrt.ffi.register(client, "bench_ffi_py_noop", py_noop, replace=True)
    base = client.compile(BASE)
    rust_cc = client.compile(CC.replace("TARGET", "bench_ffi_rust"))
    py_cc = client.compile(CC.replace("TARGET", "bench_ffi_py"))
    py_noop_cc = client.compile(CC.replace("TARGET", "bench_ffi_py_noop"))
    for e in (base, rust_cc, py_cc):
        assert np.array_equal(e(x)[0].to_numpy(), want), "wrong result"

    def loop(exe: Any) -> Any:
        def f(n: int) -> None:
            for _ in range(n):
                exe(x)[0].block_until_ready()

        return f

    variants: dict[str, Any] = {
        "base": loop(base),
        "rust_cc": loop(rust_cc),
        "py_cc": loop(py_cc),
        "py_noop_cc": loop(py_noop_cc),
    }
    jax_version = None
    try:
        import jax
        import jax.numpy as jnp

        jax_version = jax.__version__

        def cb(a: Any) -> Any:
            return np.asarray(a) * 2 + np.float32(1.5)

        jf_base = jax.jit(lambda a: a * 2 + 1.5)
        jf_cb = jax.jit(lambda a: jax.pure_callback(cb, jax.ShapeDtypeStruct(a.shape, a.dtype), a))
        jx = jnp.asarray(xs)
        assert np.array_equal(np.asarray(jf_cb(jx)), want)

        def jloop(f: Any) -> Any:
            def g(n: int) -> None:
                for _ in range(n):
                    f(jx).block_until_ready()

            return g

        variants["jax_base"] = jloop(jf_base)
        variants["jax_pure_callback"] = jloop(jf_cb)
    except ImportError:
        res.note("jax is not installed: jax.pure_callback is not measured")

    t = h.interleaved(variants, reps=reps, iters=iters)
    what = {
        "base": "exe(x) + block_until_ready(), 2x+1.5 in StableHLO (no custom call)",
        "rust_cc": "the same through a custom call to a Rust handler",
        "py_cc": "the same through a custom call to a Python handler (numpy)",
        "py_noop_cc": "a custom call to a Python handler with an empty body (dispatch only)",
        "jax_base": f"JAX {jax_version}: jit(2x+1.5)(x).block_until_ready()",
        "jax_pure_callback": f"JAX {jax_version}: jit(pure_callback(numpy 2x+1.5))(x)",
    }
    for k, v in t.items():
        res.figure(f"ffi.{k}", what[k], "ns", h.stats(v))
    rust_over = [a - b for a, b in zip(t["rust_cc"], t["base"])]
    py_over = [a - b for a, b in zip(t["py_cc"], t["base"])]
    res.figure("ffi.rust_overhead", "Rust handler: rust_cc - base, per repetition", "ns", h.stats(rust_over))
    res.figure("ffi.py_overhead", "Python handler: py_cc - base, per repetition", "ns", h.stats(py_over))
    noop_over = [a - b for a, b in zip(t["py_noop_cc"], t["base"])]
    res.figure(
        "ffi.py_dispatch_overhead",
        "Python handler with an empty body: py_noop_cc - base (GIL, call object, dispatch)",
        "ns",
        h.stats(noop_over),
    )
    res.figure("ffi.rust_ratio", "rust_cc / base", "x", h.paired(t["rust_cc"], t["base"]))
    res.figure("ffi.py_ratio", "py_cc / base", "x", h.paired(t["py_cc"], t["base"]))
    def min_over(k: str, ref: str) -> str:
        return f"{(min(t[k]) - min(t[ref])) / 1e3:.2f} µs"

    res.target(
        "Rust custom-call handler overhead per call",
        value=h.stats([v / 1e3 for v in rust_over]),
        op="<=",
        threshold=1.5,
        unit="µs",
        detail="f32[8] 2x+1.5: custom call minus the same program without it "
        f"(best repetition of each: {min_over('rust_cc', 'base')})",
        reference="the program without a custom call, same process, interleaved",
    )
    res.target(
        "Python custom-call handler overhead per call",
        value=h.stats([v / 1e3 for v in py_over]),
        op="<=",
        threshold=5.0,
        unit="µs",
        detail="handler does the work with numpy on the argument/result views "
        f"(best repetition of each: {min_over('py_cc', 'base')}; empty handler body: "
        f"{min_over('py_noop_cc', 'base')})",
        reference="the program without a custom call, same process, interleaved",
    )
    if "jax_pure_callback" in t:
        cb_over = [a - b for a, b in zip(t["jax_pure_callback"], t["jax_base"])]
        res.figure("ffi.jax_callback_overhead", "jax.pure_callback - jax_base, per repetition", "ns", h.stats(cb_over))
        res.target(
            "Python handler overhead vs jax.pure_callback overhead",
            value=h.stats([a / b for a, b in zip(py_over, cb_over) if b > 0] or [float("nan")]),
            op="<=",
            threshold=1.0,
            unit="x",
            detail="same numpy work in both callbacks",
            reference=f"JAX {jax_version} pure_callback, same process, interleaved",
        )

    first, total = (200, 500) if smoke else (2000, 10000)
    r = subprocess.run(
        [sys.executable, "-c", RSS_CHILD, h.plugin_path("NEW"), str(first), str(total), CC],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=str(Path(__file__).resolve().parent),
    )
    if r.returncode != 0:
        raise RuntimeError(f"RSS child failed: {r.stderr[-2000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    res.target(
        f"RSS growth over {out['calls']} Python-handler calls + {out['calls']} failing calls",
        value=h.stats([out["growth"] / h.MIB]),
        op="<=",
        threshold=1.0,
        unit="MiB",
        detail=f"after {first} warm-up rounds, gc.collect() before both readings",
        reference="RSS of the same process before the loop",
    )
