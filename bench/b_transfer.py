"""Host <-> device transfers of large arrays (64 MiB of float32), against numpy and memcpy.

Targets:
- `put` 64 MiB (copy) bandwidth vs a numpy copy of 64 MiB: >= 0.8x
- `put(copy=False)` and a zero-copy host view of 64 MiB: <= 20 us each, independent of size
- `to_numpy` of 64 MiB into a preallocated array vs memcpy: >= 0.8x
- issue 24, target 1 (copies at memcpy speed): repeated 64 MiB `put` (the previous buffer
  freed in between, as a data loader does) vs a warm memcpy >= 0.9x; `to_numpy(out=)` of
  64 MiB vs a warm memcpy >= 0.9x (a fresh array's figure printed beside it); one cold put
  (staging pool emptied first) vs numpy's `copy()` >= 1.0x

The transfer-size sweep (issue 24, target 7) runs 4 KiB to 256 MiB: rpjrt `put` and
`to_numpy` (fresh and `out=`), JAX `device_put` and `np.array(x)` on its CPU backend, a warm
memcpy and numpy's `copy()`; it records one figure per size and variant and draws
bench/out/transfer_put.png and bench/out/transfer_to_host.png (time per call against size)
through `_plots.plot_sweep`.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from typing import Any

import _harness as h


def aligned(a: Any, align: int = 64) -> Any:
    """A copy of numpy array `a` whose data starts on an `align`-byte boundary (XLA's CPU
    plugins alias host memory in place only when it is 64-byte aligned)."""
    import numpy as np

    raw = np.empty(a.nbytes + align, dtype=np.uint8)
    off = (-raw.__array_interface__["data"][0]) % align
    out = raw[off : off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def run(res: h.Results, *, smoke: bool, rust: dict[str, Any] | None) -> None:
    del rust
    import numpy as np

    import rpjrt

    size = (8 if smoke else 64) * h.MIB
    reps, iters = (3, 2) if smoke else (15, 4)
    client = rpjrt.Client(h.plugin_path("NEW"))
    src = aligned(np.random.default_rng(0).random(size // 4, dtype=np.float32))
    label = f"{size // h.MIB} MiB"

    # --- put (copy) vs numpy copy: both allocate their destination, as a user's call would.
    def put_copy(n: int) -> None:
        for _ in range(n):
            b = client.put(src)
            b.block_until_ready()
            del b

    def np_copy(n: int) -> None:
        for _ in range(n):
            c = src.copy()
            del c

    b = client.put(src)
    assert np.array_equal(b.to_numpy(), src)
    del b
    t = h.interleaved({"put_copy": put_copy, "np_copy": np_copy}, reps=reps, iters=iters)
    gib = [size / ns for ns in t["put_copy"]]  # bytes per ns == GB/s
    res.figure("transfer.put_copy", f"client.put(a) of {label} (copy), + block_until_ready", "ns", h.stats(t["put_copy"]))
    res.figure("transfer.np_copy", f"a.copy() of {label} (numpy)", "ns", h.stats(t["np_copy"]))
    res.figure("transfer.put_copy_bw", f"client.put(a) bandwidth, {label}", "GB/s", h.stats(gib))
    res.target(
        "put 64 MiB (copy) bandwidth vs numpy copy of 64 MiB",
        value=h.paired(t["np_copy"], t["put_copy"]),  # bandwidth ratio = inverse time ratio
        op=">=",
        threshold=0.8,
        unit="x",
        detail=f"{label} float32, fresh destination each time",
        reference="numpy a.copy(), same process, interleaved",
    )

    # Where put's time goes: minor page faults of one call each (the plugin allocates its
    # destination with 4 KiB pages; numpy asks for transparent huge pages), and the same
    # comparison in a child process whose glibc backs large allocations with huge pages.
    def faults(f: Any) -> int:
        r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        f(1)
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0

    fp, fn = faults(put_copy), faults(np_copy)
    res.figure("transfer.put_copy_faults", f"minor page faults of one put of {label}", "faults", h.stats([float(fp)]))
    res.figure("transfer.np_copy_faults", f"minor page faults of one numpy copy of {label}", "faults", h.stats([float(fn)]))
    env = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.hugetlb=1")
    child = subprocess.run(
        [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_put_child.py"),
         str(size // h.MIB), str(reps), str(iters)],
        env=env, capture_output=True, text=True,
    )
    if child.returncode == 0:
        r = json.loads(child.stdout.strip().splitlines()[-1])
        ratio = h.paired(r["times"]["np_copy"], r["times"]["put"])
        res.figure(
            "transfer.put_copy_hugetlb",
            f"with GLIBC_TUNABLES=glibc.malloc.hugetlb=1: put/numpy bandwidth ratio "
            f"(faults per put {r['faults_per_call']['put']}, per numpy copy {r['faults_per_call']['np_copy']})",
            "x",
            ratio,
        )
    else:
        res.note(f"the hugetlb put child failed: {child.stderr.strip()[-300:]}")

    # --- zero-copy put and zero-copy host view, at two sizes (size independence).
    small = aligned(src[:1024])
    zreps, ziters = (3, 20) if smoke else (15, 200)
    variants: dict[str, Any] = {}
    aliasing: dict[str, bool] = {}

    def make_put_nocopy(a: Any) -> Any:
        def f(n: int) -> None:
            for _ in range(n):
                b = client.put(a, copy=False)
                del b

        return f

    try:
        zb = client.put(src, copy=False)
        variants["put_nocopy_big"] = make_put_nocopy(src)
        variants["put_nocopy_small"] = make_put_nocopy(small)
        view = np.from_dlpack(zb)
        aliasing["put(copy=False)"] = view.__array_interface__["data"][0] == src.__array_interface__["data"][0]
        del view, zb
    except Exception as e:  # noqa: BLE001 - report what the bindings say
        res.note(f"put(copy=False) failed: {type(e).__name__}: {e}")

    big = client.put(src)
    little = client.put(small)
    big.block_until_ready()

    def make_view(b: Any) -> Any:
        def f(n: int) -> None:
            for _ in range(n):
                v = np.from_dlpack(b)
                del v

        return f

    try:
        v1, v2 = np.from_dlpack(big), np.from_dlpack(big)
        aliasing["np.from_dlpack(buf)"] = v1.__array_interface__["data"][0] == v2.__array_interface__["data"][0]
        assert np.array_equal(v1, src)
        del v1, v2
        variants["view_big"] = make_view(big)
        variants["view_small"] = make_view(little)
    except Exception as e:  # noqa: BLE001
        res.note(f"np.from_dlpack(buf) failed: {type(e).__name__}: {e}")
    for what, ok in aliasing.items():
        if not ok:
            res.note(f"{what} did not alias the memory (it copied): its timing is not zero-copy")

    t = h.interleaved(variants, reps=zreps, iters=ziters) if variants else {}
    texts = {
        "put_nocopy_big": f"client.put(a, copy=False), {label}",
        "put_nocopy_small": "client.put(a, copy=False), 4 KiB",
        "view_big": f"np.from_dlpack(buf) (zero-copy host view), {label}",
        "view_small": "np.from_dlpack(buf) (zero-copy host view), 4 KiB",
    }
    for k, v in t.items():
        res.figure(f"transfer.{k}", texts[k], "ns", h.stats(v))
    for key, name in (("put_nocopy", "put(copy=False)"), ("view", "zero-copy host view (np.from_dlpack)")):
        bigk = f"{key}_big"
        value = None
        if bigk in t and aliasing.get("put(copy=False)" if key == "put_nocopy" else "np.from_dlpack(buf)", False):
            value = h.stats([ns / 1e3 for ns in t[bigk]])
        detail = ""
        if bigk in t:
            small_med = h.stats(t[f"{key}_small"])["median"] / 1e3
            detail = f"4 KiB: {small_med:.2f} µs (size independence)"
        res.target(
            f"{name} of 64 MiB",
            value=value,
            op="<=",
            threshold=20.0,
            unit="µs",
            detail=detail,
            reference="absolute",
        )

    # --- to_numpy into a preallocated array vs memcpy (np.copyto between two arrays).
    dst = np.empty_like(src)
    ref_dst = np.empty_like(src)
    dst[:] = 0
    ref_dst[:] = 0
    to_numpy_out = None
    how = ""
    try:
        big.to_numpy(out=dst)  # type: ignore[call-arg]
        to_numpy_out = lambda: big.to_numpy(out=dst)  # noqa: E731
        how = "buf.to_numpy(out=dst)"
    except TypeError:
        try:
            np.copyto(dst, np.from_dlpack(big))
            to_numpy_out = lambda: np.copyto(dst, np.from_dlpack(big))  # noqa: E731
            how = "np.copyto(dst, np.from_dlpack(buf)) (the bindings have no to_numpy(out=))"
        except Exception:  # noqa: BLE001
            to_numpy_out = lambda: np.copyto(dst, big.to_numpy())  # noqa: E731
            how = "np.copyto(dst, buf.to_numpy()) (no out=, no DLPack)"
    assert np.array_equal(dst, src)

    def to_host(n: int) -> None:
        for _ in range(n):
            to_numpy_out()

    def memcpy(n: int) -> None:
        for _ in range(n):
            np.copyto(ref_dst, src)

    def to_numpy_fresh(n: int) -> None:
        for _ in range(n):
            a = big.to_numpy()
            del a

    t = h.interleaved(
        {"to_numpy_out": to_host, "memcpy": memcpy, "to_numpy_fresh": to_numpy_fresh},
        reps=reps,
        iters=iters,
    )
    res.figure("transfer.to_numpy_out", f"{how}, {label}", "ns", h.stats(t["to_numpy_out"]))
    res.figure("transfer.to_numpy_fresh", f"buf.to_numpy() into a fresh array, {label}", "ns", h.stats(t["to_numpy_fresh"]))
    res.figure("transfer.memcpy", f"np.copyto(dst, src), {label} (memcpy)", "ns", h.stats(t["memcpy"]))
    res.target(
        "to_numpy 64 MiB into a preallocated array vs memcpy",
        value=h.paired(t["memcpy"], t["to_numpy_out"]),
        op=">=",
        threshold=0.8,
        unit="x",
        detail=how,
        reference="np.copyto between preallocated arrays, same process, interleaved",
    )

    # --- issue 24, target 1: copies at memcpy speed.
    copies_at_memcpy_speed(res, client, src, big, dst, t, smoke=smoke, label=label, how=how)
    del big, little
    sweep(res, client, smoke=smoke)


def copies_at_memcpy_speed(
    res: h.Results, client: Any, src: Any, big: Any, dst: Any, to_host_t: dict[str, list[float]],
    *, smoke: bool, label: str, how: str,
) -> None:
    """The three ratios of issue 24 target 1 (see the module docstring)."""
    import time

    import numpy as np

    import rpjrt

    reps, iters = (3, 2) if smoke else (15, 4)
    warm = np.empty_like(src)
    warm[...] = 0

    def put_loop(n: int) -> None:
        for _ in range(n):
            b = client.put(src)
            b.block_until_ready()
            del b

    def memcpy(n: int) -> None:
        for _ in range(n):
            np.copyto(warm, src)

    # A memcpy split between two threads (numpy releases the GIL while it copies) is printed
    # beside the single-thread memcpy the target names: what a split copy would gain here.
    from concurrent.futures import ThreadPoolExecutor

    helper = ThreadPoolExecutor(1)
    half = src.size // 2

    def memcpy_2threads(n: int) -> None:
        for _ in range(n):
            f = helper.submit(np.copyto, warm[half:], src[half:])
            np.copyto(warm[:half], src[:half])
            f.result()

    stats0 = rpjrt.pooled_memory_stats()
    t = h.interleaved(
        {"put_repeat": put_loop, "memcpy": memcpy, "memcpy_2threads": memcpy_2threads},
        reps=reps,
        iters=iters,
    )
    stats1 = rpjrt.pooled_memory_stats()
    helper.shutdown()
    res.figure("transfer.memcpy_2threads", f"np.copyto of {label} split between two threads, warm destination", "ns", h.stats(t["memcpy_2threads"]))
    res.figure("transfer.put_repeat", f"client.put(a) of {label}, previous buffer freed (pooled staging)", "ns", h.stats(t["put_repeat"]))
    res.figure("transfer.memcpy_warm", f"np.copyto(dst, src) of {label}, warm destination", "ns", h.stats(t["memcpy"]))
    hits = stats1["hits"] - stats0["hits"]
    misses = stats1["misses"] - stats0["misses"]
    res.target(
        "24.1 repeated put 64 MiB vs warm memcpy",
        value=h.paired(t["memcpy"], t["put_repeat"]),
        op=">=",
        threshold=0.9,
        unit="x",
        detail=f"{label} float32, the previous buffer freed between puts; staging pool hits {hits}, misses {misses}; "
        f"put vs a 2-thread memcpy: {h.paired(t['memcpy_2threads'], t['put_repeat'])['median']:.3f}x",
        reference="np.copyto into a warm preallocated array, same process, interleaved",
    )

    fresh = h.stats(to_host_t["to_numpy_fresh"])["median"]
    res.target(
        "24.1 to_numpy 64 MiB vs warm memcpy",
        value=h.paired(to_host_t["memcpy"], to_host_t["to_numpy_out"]),
        op=">=",
        threshold=0.9,
        unit="x",
        detail=f"{how} (a reused destination); a fresh array each time: "
        f"{h.stats(to_host_t['memcpy'])['median'] / fresh:.3f}x ({h.fmt_time(fresh)})",
        reference="np.copyto between preallocated arrays, same process, interleaved",
    )

    # One cold put: the pool is emptied before each, so the put maps and faults in fresh
    # memory, as numpy's copy() does; only the put itself (or the copy) is timed.
    creps = 3 if smoke else 15
    cold: dict[str, list[float]] = {"put_cold": [], "np_copy": []}
    for rep in range(creps):
        for name in (("put_cold", "np_copy") if rep % 2 == 0 else ("np_copy", "put_cold")):
            rpjrt.release_pooled_memory()
            t0 = time.perf_counter_ns()
            if name == "put_cold":
                out = client.put(src)
                out.block_until_ready()
            else:
                out = src.copy()
            cold[name].append(float(time.perf_counter_ns() - t0))
            del out
    rpjrt.release_pooled_memory()
    res.figure("transfer.put_cold", f"client.put(a) of {label} with the staging pool empty", "ns", h.stats(cold["put_cold"]))
    res.figure("transfer.np_copy_cold", f"a.copy() of {label} (numpy), one call", "ns", h.stats(cold["np_copy"]))
    res.target(
        "24.1 cold put 64 MiB vs numpy copy",
        value=h.paired(cold["np_copy"], cold["put_cold"]),
        op=">=",
        threshold=1.0,
        unit="x",
        detail=f"{label} float32, staging pool released before each put (fresh memory, as numpy's)",
        reference="numpy a.copy() of the same array, one call each, alternating",
    )


SWEEP_SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]
SMOKE_SIZES = [4 << 10, 256 << 10, 8 << 20]


def sweep(res: h.Results, client: Any, *, smoke: bool) -> None:
    """Issue 24 target 7, transfers: each variant at each size, as bandwidth and time."""
    import numpy as np

    import _plots

    try:
        import jax
        import jax.numpy as jnp  # noqa: F401

        jdev = jax.devices("cpu")[0]
    except Exception as e:  # noqa: BLE001 - JAX is optional for the sweep
        jax = None
        res.note(f"transfer sweep without JAX: {type(e).__name__}: {e}")

    sizes = SMOKE_SIZES if smoke else SWEEP_SIZES
    curves: dict[str, dict[str, list[tuple[float, float]]]] = {"put": {}, "to_host": {}}
    table: list[str] = []
    for size in sizes:
        src = aligned(np.random.default_rng(size).random(size // 4, dtype=np.float32))
        warm = np.empty_like(src)
        warm[...] = 0
        out = np.empty_like(src)
        out[...] = 0
        buf = client.put(src)
        buf.block_until_ready()
        # About 32 MiB (smoke: 4 MiB) per timed repetition, at least 2 and at most 400 calls.
        iters = max(2, min(400, ((4 if smoke else 32) << 20) // size))
        reps = 2 if smoke else 5

        def loop(body: Any) -> Any:
            def f(n: int) -> None:
                for _ in range(n):
                    body()

            return f

        def put_once() -> None:
            b = client.put(src)
            b.block_until_ready()

        variants: dict[str, Any] = {
            "rpjrt put": loop(put_once),
            "rpjrt to_numpy": loop(lambda: buf.to_numpy()),
            "rpjrt to_numpy(out=)": loop(lambda: buf.to_numpy(out=out)),
            "memcpy (warm)": loop(lambda: np.copyto(warm, src)),
            "numpy copy()": loop(lambda: src.copy()),
        }
        if jax is not None:
            jx = jax.device_put(src, jdev)
            jx.block_until_ready()
            assert np.array_equal(np.array(jx), src)
            variants["jax np.array(x)"] = loop(lambda: np.array(jx))
        t = h.interleaved(variants, reps=reps, iters=iters, warmup=1)
        # Calls that do not copy (aliasing) cost the same at every size: timed over many
        # calls, as a few would measure only the first call's cold caches.
        aliasing: dict[str, Any] = {"rpjrt put(copy=False)": loop(lambda: client.put(src, copy=False))}
        if jax is not None:
            aliasing["jax device_put"] = loop(lambda: jax.device_put(src, jdev).block_until_ready())
        t.update(h.interleaved(aliasing, reps=reps, iters=20 if smoke else 200))
        row = [_plots.fmt_bytes(size)]
        for name, samples in t.items():
            st = h.stats(samples)
            key = "transfer.sweep." + "".join(ch if ch.isalnum() else "_" for ch in name).strip("_") + f".{size}"
            res.figure(key, f"{name}, {_plots.fmt_bytes(size)}", "ns", st)
            gbs = size / st["median"]
            row.append(f"{name} {h.fmt_time(st['median'])} ({gbs:.1f} GB/s)")
            to_host = name in ("rpjrt to_numpy", "rpjrt to_numpy(out=)", "jax np.array(x)")
            reference = name in ("memcpy (warm)", "numpy copy()")
            us = st["median"] / 1e3
            if to_host or reference:
                curves["to_host"].setdefault(name, []).append((size, us))
            if not to_host or reference:
                label = "jax device_put (aliases, no copy)" if name == "jax device_put" else name
                curves["put"].setdefault(label, []).append((size, us))
        table.append("; ".join(row))
        del buf, src, warm, out
        if jax is not None:
            del jx
    ref_style = {
        "memcpy (warm)": {"color": "black", "linestyle": "--"},
        "numpy copy()": {"color": "grey", "linestyle": ":"},
    }
    import os
    import time

    note = (
        f"{'smoke run; ' if smoke else ''}{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
        f"median of {2 if smoke else 5} interleaved repetitions"
    )
    drawn = []
    for name, title, series in (
        ("transfer_put.png", "host -> device: rpjrt put vs JAX device_put (CPU)", curves["put"]),
        ("transfer_to_host.png", "device -> host: rpjrt to_numpy vs JAX np.array (CPU)", curves["to_host"]),
    ):
        p = _plots.plot_sweep(
            h.ROOT / "bench" / "out" / name,
            title,
            "transfer size",
            series,
            log_x=True,
            log_y=True,
            y_label="time per call (µs, lower is better)",
            x_format=_plots.fmt_bytes,
            styles=ref_style,
            note=note,
        )
        if p is not None:
            drawn.append(str(p.relative_to(h.ROOT)))
    res.note(
        "transfer sweep (median per call; JAX's device_put aliases a 64-byte-aligned numpy "
        "array on CPU instead of copying, like rpjrt's put(copy=False); JAX's np.array(x) "
        "copies the host value it caches after the first conversion):\n  " + "\n  ".join(table)
    )
    if drawn:
        res.note("transfer sweep plots: " + ", ".join(drawn))
    else:
        res.note("transfer sweep plots not drawn (matplotlib missing)")
