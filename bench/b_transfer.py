"""Host <-> device transfers of large arrays (64 MiB of float32), against numpy and memcpy.

Targets:
- `put` 64 MiB (copy) bandwidth vs a numpy copy of 64 MiB: >= 0.8x
- `put(copy=False)` and a zero-copy host view of 64 MiB: <= 20 us each, independent of size
- `to_numpy` of 64 MiB into a preallocated array vs memcpy: >= 0.8x
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

    t = h.interleaved({"to_numpy_out": to_host, "memcpy": memcpy}, reps=reps, iters=iters)
    res.figure("transfer.to_numpy_out", f"{how}, {label}", "ns", h.stats(t["to_numpy_out"]))
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
