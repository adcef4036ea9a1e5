"""The GPU tier: rpjrt on a real NVIDIA GPU through the CUDA PJRT plugin.

Run by scripts/test-gpu.sh (never by CI, never collected by the normal pytest run: the
package's pytest testpaths is ``tests``). It needs a GPU and fails, not skips, without one.
It runs under pytest when pytest is installed, else as a script (``python test_gpu.py``)
with the small runner at the bottom, so a bare image with jax, torch and CuPy is enough.

Each check appends a line to the results file named by RPJRT_GPU_RESULTS (Markdown for
bench/RESULTS-GPU.md). JAX runs on the same GPU in this process as the reference.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

import rpjrt
import rpjrt.cuda

_RESULTS = os.environ.get("RPJRT_GPU_RESULTS")
_state: dict[str, Any] = {}


def record(check: str, text: str) -> None:
    line = f"| {check} | {text} |"
    print(line, flush=True)
    if _RESULTS:
        with open(_RESULTS, "a") as f:
            f.write(line + "\n")


def client() -> rpjrt.Client:
    if "client" not in _state:
        # Leave room for JAX and torch in the same process.
        opts = rpjrt.cuda.options(memory_fraction=0.4, preallocate=False)
        c = rpjrt.Client("cuda", options=opts)
        assert c.platform == "cuda", c.platform
        _state["client"] = c
    c = _state["client"]
    assert isinstance(c, rpjrt.Client)
    return c


def driver() -> rpjrt.cuda.CudaDriver:
    if "driver" not in _state:
        _state["driver"] = rpjrt.cuda.load()
    d = _state["driver"]
    assert isinstance(d, rpjrt.cuda.CudaDriver)
    return d


def jax_mod() -> Any:
    import jax

    assert any(d.platform == "gpu" for d in jax.devices()), jax.devices()
    return jax


def stablehlo(fn: Callable[..., Any], *args: Any) -> str:
    """The StableHLO text JAX lowers `fn` to for these arguments."""
    jax = jax_mod()
    text = jax.jit(fn).lower(*args).as_text()
    assert isinstance(text, str)
    return text


def run_rpjrt(text: str, *args: np.ndarray) -> list[np.ndarray]:
    c = client()
    exe = c.compile(text)
    outs = exe(*[c.put(np.ascontiguousarray(a)) for a in args])
    return [np.asarray(o.to_numpy()) for o in outs]


# ---------------------------------------------------------------------------------------


def test_gpu_present() -> None:
    d = driver()
    n = d.device_count()
    assert n >= 1, "the CUDA driver sees no device: the GPU tier needs one"
    c = client()
    devs = c.devices()
    assert len(devs) >= 1
    record(
        "device",
        f"{d.device_name(0)}; driver CUDA {d.driver_version // 1000}.{d.driver_version % 1000 // 10}; "
        f"plugin {c.plugin.path} (PJRT {c.plugin.api_version[0]}.{c.plugin.api_version[1]}, "
        f"{c.platform} {c.platform_version}); {n} device(s)",
    )


def _programs() -> list[tuple[str, Callable[..., Any], list[np.ndarray]]]:
    rng = np.random.default_rng(0)
    f32 = np.float32
    a = rng.standard_normal((256, 512)).astype(f32)
    b = rng.standard_normal((512, 128)).astype(f32)
    v = rng.standard_normal((4096,)).astype(f32)
    i = rng.integers(-1000, 1000, size=(64, 64)).astype(np.int32)
    img = rng.standard_normal((2, 3, 32, 32)).astype(f32)
    ker = rng.standard_normal((8, 3, 3, 3)).astype(f32)

    import jax.numpy as jnp
    from jax import lax

    return [
        ("add", lambda x, y: x + y, [v, v[::-1].copy()]),
        ("matmul", lambda x, y: x @ y, [a, b]),
        ("reduce_sum", lambda x: jnp.sum(x, axis=1), [a]),
        ("elementwise", lambda x: jnp.tanh(x) * jnp.exp(-x * x) + jnp.sqrt(jnp.abs(x)), [v]),
        ("transpose_broadcast", lambda x, y: x.T + y[:, None], [b, v[:128].copy()]),
        ("softmax", lambda x: jax_mod().nn.softmax(x, axis=-1), [a]),
        ("int_ops", lambda x: (x * 3 - (x >> 2)) % 17, [i]),
        ("cumsum_sort", lambda x: (jnp.cumsum(x), jnp.sort(x)), [v]),
        ("conv", lambda x, w: lax.conv(x, w, (1, 1), "SAME"), [img, ker]),
        ("while_loop", lambda x: lax.fori_loop(0, 10, lambda k, s: s * 0.9 + k, x), [v]),
        ("gather", lambda x, idx: x[idx], [v, rng.integers(0, 4096, size=(300,)).astype(np.int32)]),
    ]


def test_simple_programs_match_jax() -> None:
    jax = jax_mod()
    names = []
    for name, fn, args in _programs():
        text = stablehlo(fn, *args)
        got = run_rpjrt(text, *args)
        want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
        assert len(got) == len(want), name
        for g, w in zip(got, want):
            w = np.asarray(w)
            assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, w.shape, g.dtype, w.dtype)
            if np.issubdtype(w.dtype, np.floating):
                np.testing.assert_allclose(g, w, rtol=2e-3, atol=1e-4, err_msg=name)
            else:
                np.testing.assert_array_equal(g, w, err_msg=name)
        names.append(name)
    record("programs vs JAX", f"{len(names)} match: {', '.join(names)}")


def test_mlp_training_step_matches_jax() -> None:
    jax = jax_mod()
    import jax.numpy as jnp

    rng = np.random.default_rng(1)
    f32 = np.float32
    w1 = (rng.standard_normal((64, 256)) * 0.1).astype(f32)
    b1 = np.zeros((256,), f32)
    w2 = (rng.standard_normal((256, 10)) * 0.1).astype(f32)
    b2 = np.zeros((10,), f32)
    x = rng.standard_normal((128, 64)).astype(f32)
    y = rng.integers(0, 10, size=(128,)).astype(np.int32)

    def loss(w1: Any, b1: Any, w2: Any, b2: Any, x: Any, y: Any) -> Any:
        h = jax.nn.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def step(w1: Any, b1: Any, w2: Any, b2: Any, x: Any, y: Any) -> Any:
        value, grads = jax.value_and_grad(loss, argnums=(0, 1, 2, 3))(w1, b1, w2, b2, x, y)
        new = [p - 0.1 * g for p, g in zip((w1, b1, w2, b2), grads)]
        return (*new, value)

    args = [w1, b1, w2, b2, x, y]
    text = stablehlo(step, *args)
    c = client()
    exe = c.compile(text)
    bufs = [c.put(a) for a in args]
    losses = []
    ref = [jnp.asarray(a) for a in args]
    jstep = jax.jit(step)
    for _ in range(5):
        outs = exe(*bufs)
        bufs = [*outs[:4], bufs[4], bufs[5]]
        losses.append(float(np.asarray(outs[4].to_numpy())))
        r = jstep(*ref)
        ref = [*r[:4], ref[4], ref[5]]
        np.testing.assert_allclose(losses[-1], float(r[4]), rtol=1e-4)
    for got, want in zip(bufs[:4], ref[:4]):
        np.testing.assert_allclose(np.asarray(got.to_numpy()), np.asarray(want), rtol=2e-3, atol=1e-5)
    assert losses[-1] < losses[0], losses
    record("MLP training step", f"5 steps match JAX; loss {losses[0]:.4f} -> {losses[-1]:.4f}")


def _best(fn: Callable[[], Any], reps: int = 5) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def test_transfer_bandwidth_vs_cudamemcpy() -> None:
    import cupy as cp
    import cupyx

    n = 256 << 20  # bytes
    host = cupyx.empty_pinned((n // 4,), dtype=np.float32)
    host[:] = np.arange(n // 4, dtype=np.float32)
    dev = cp.empty((n // 4,), dtype=cp.float32)
    back = cupyx.empty_pinned((n // 4,), dtype=np.float32)

    def cp_h2d() -> None:
        dev.set(host)
        cp.cuda.Device().synchronize()

    def cp_d2h() -> None:
        dev.get(out=back)
        cp.cuda.Device().synchronize()

    c = client()
    bufs: list[Any] = []

    def rp_put() -> None:
        bufs[:] = [c.put(host).block_until_ready()]

    def rp_get() -> None:
        bufs[0].to_host()

    t_cp_h2d, t_cp_d2h = _best(cp_h2d), _best(cp_d2h)
    t_rp_put = _best(rp_put)
    t_rp_get = _best(rp_get)
    assert np.array_equal(np.asarray(bufs[0].to_numpy())[:1000], host[:1000])
    gbs = lambda t: n / t / 1e9  # noqa: E731
    r_put, r_get = t_cp_h2d / t_rp_put, t_cp_d2h / t_rp_get
    record(
        "transfer bandwidth (256 MiB, pinned host)",
        f"put {gbs(t_rp_put):.1f} GB/s vs cudaMemcpy H2D {gbs(t_cp_h2d):.1f} GB/s = {r_put:.2f}x; "
        f"to_host {gbs(t_rp_get):.1f} GB/s vs D2H {gbs(t_cp_d2h):.1f} GB/s = {r_get:.2f}x",
    )
    assert r_put >= 0.8, f"put reaches {r_put:.2f}x of cudaMemcpy (acceptance: >= 0.8x)"
    assert r_get >= 0.8, f"to_host reaches {r_get:.2f}x of cudaMemcpy (acceptance: >= 0.8x)"


def test_dlpack_round_trip_with_torch_shares_memory() -> None:
    import torch

    c = client()
    t = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    b = c.from_dlpack(t)
    assert b.device.platform == "cuda"
    t_back = torch.from_dlpack(b)
    assert t_back.data_ptr() == t.data_ptr(), "torch -> rpjrt -> torch copied the tensor"
    np.testing.assert_array_equal(np.asarray(b.to_numpy())[:8], np.arange(8, dtype=np.float32))

    b2 = c.put(np.full((4096,), 3.0, np.float32))
    t2 = torch.from_dlpack(b2)
    assert t2.is_cuda and float(t2.sum()) == 3.0 * 4096
    b3 = c.from_dlpack(t2)
    assert torch.from_dlpack(b3).data_ptr() == t2.data_ptr(), "rpjrt -> torch -> rpjrt copied"
    record("DLPack with torch", f"round trips keep the device pointer ({t.data_ptr():#x}, {t2.data_ptr():#x})")


_PTX_SCALE = r"""
.version 7.0
.target sm_80
.address_size 64
.visible .entry scale2(.param .u64 src, .param .u64 dst, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f1, [%rd6];
    add.f32 %f2, %f1, %f1;
    st.global.f32 [%rd7], %f2;
DONE:
    ret;
}
"""


def test_cuda_driver_helpers() -> None:
    d = driver()
    ctx = d.context(0)
    n = 1 << 16
    src = ctx.alloc(n * 4)
    dst = ctx.alloc(n * 4)
    data = np.arange(n, dtype=np.float32)
    src.copy_from_host(data.tobytes())
    ctx.memset(dst.ptr, 0, n * 4)
    fn = ctx.load_ptx(_PTX_SCALE).function("scale2")
    s = ctx.stream()
    e0, e1 = ctx.event(timing=True), ctx.event(timing=True)
    e0.record(s.handle)
    ctx.launch(fn, (n // 256,), (256,), [("ptr", src.ptr), ("ptr", dst.ptr), ("u32", n)], stream=s.handle)
    e1.record(s.handle)
    s.synchronize()
    out = np.frombuffer(dst.to_bytes(), np.float32)
    np.testing.assert_array_equal(out, 2 * data)
    pinned = ctx.alloc_pinned(n * 4)
    ctx.memcpy_dtoh_async(pinned, dst.ptr, s.handle)
    np.testing.assert_array_equal(np.frombuffer(pinned.to_bytes(), np.float32), 2 * data)
    pinned.write((3 * data).tobytes())
    ctx.memcpy_htod_async(dst.ptr, pinned, s.handle)
    s.synchronize()
    np.testing.assert_array_equal(np.frombuffer(dst.to_bytes(), np.float32), 3 * data)
    ctx.memcpy_dtod(dst.ptr, src.ptr, n * 4)
    np.testing.assert_array_equal(np.frombuffer(ctx.memcpy_dtoh(dst.ptr, n * 4), np.float32), data)
    try:
        ctx.launch(fn, (1,), (2048,), [])
    except rpjrt.InvalidArgumentError as err:
        assert "1024" in str(err)
    else:
        raise AssertionError("a 2048-thread block was accepted")
    try:
        ctx.load_ptx(".version 7.0\n.target sm_80\n.visible .entry broken( { nonsense }")
    except rpjrt.Error as err:
        assert "CUDA_ERROR" in str(err), str(err)
    else:
        raise AssertionError("broken PTX loaded")
    record("CUDA driver helpers", f"PTX kernel, memcpy/memset, stream/events ok ({e1.elapsed_ms(e0):.3f} ms launch)")


def test_ffi_handler_launches_ptx_on_xla_stream() -> None:
    try:
        ffi = importlib.import_module("rpjrt.ffi")
    except ImportError as e:
        raise AssertionError(f"rpjrt.ffi is not in this build ({e}): the FFI check cannot run") from e
    c = client()
    ctx = driver().context(0)
    fn = ctx.load_ptx(_PTX_SCALE).function("scale2")
    seen: dict[str, int] = {}

    def handler(call: Any) -> None:
        (x,), (y,) = call.args, call.rets
        n = x.nbytes // 4
        seen["stream"] = call.stream
        ctx.launch(fn, ((n + 255) // 256,), (256,), [("ptr", x.data), ("ptr", y.data), ("u32", n)], stream=call.stream)

    ffi.register(c, "rpjrt_gpu_scale2", handler, platform="cuda")
    text = """
    func.func public @main(%x: tensor<4096xf32>) -> tensor<4096xf32> {
      %0 = stablehlo.custom_call @rpjrt_gpu_scale2(%x) {api_version = 4 : i32} : (tensor<4096xf32>) -> tensor<4096xf32>
      %1 = stablehlo.add %0, %x : tensor<4096xf32>
      return %1 : tensor<4096xf32>
    }
    """
    exe = c.compile(text)
    x = np.arange(4096, dtype=np.float32)
    (out,) = exe(c.put(x))
    np.testing.assert_array_equal(np.asarray(out.to_numpy()), 3 * x)
    assert seen.get("stream", 0) != 0, "the handler did not get XLA's stream"
    record("FFI + PTX on XLA's stream", f"custom call result right (stream {seen['stream']:#x})")


def _triton_kernel() -> tuple[bytes, str, int, int, int]:
    """A Triton kernel (y = x * 2 + 1) compiled by the triton package: (cubin, name,
    shared memory bytes, number of kernel parameters in its PTX, threads per block)."""
    import re

    import triton
    import triton.language as tl
    from triton.compiler import ASTSource

    @triton.jit  # type: ignore
    def twice_plus_one(x_ptr: Any, y_ptr: Any, n: Any, BLOCK: tl.constexpr) -> None:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)

    src = ASTSource(
        fn=twice_plus_one,
        signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
        constexprs={"BLOCK": 256},
    )
    k = triton.compile(src)
    ptx = k.asm["ptx"]
    entry = re.search(r"\.entry\s+(\w+)\s*\((.*?)\)", ptx, re.S)
    assert entry, "no .entry in Triton's PTX"
    nparams = entry.group(2).count(".param")
    shared = int(getattr(k.metadata, "shared", 0))
    threads = 32 * int(getattr(k.metadata, "num_warps", 4))
    return bytes(k.asm["cubin"]), entry.group(1), shared, nparams, threads


def test_ffi_handler_launches_triton_kernel_on_xla_stream() -> None:
    try:
        ffi = importlib.import_module("rpjrt.ffi")
    except ImportError as e:
        raise AssertionError(f"rpjrt.ffi is not in this build ({e}): the FFI check cannot run") from e
    cubin, name, shared, nparams, threads = _triton_kernel()
    c = client()
    ctx = driver().context(0)
    fn = ctx.load_cubin(cubin).function(name)

    def handler(call: Any) -> None:
        (x,), (y,) = call.args, call.rets
        n = x.nbytes // 4
        args: list[tuple[Any, int | float]] = [("ptr", x.data), ("ptr", y.data), ("i32", n)]
        # Newer Triton appends scratch-pointer parameters; null is right when unused.
        args += [("ptr", 0)] * (nparams - len(args))
        ctx.launch(fn, ((n + 255) // 256,), (threads,), args, shared_mem=shared, stream=call.stream)

    ffi.register(c, "rpjrt_gpu_triton", handler, platform="cuda")
    text = """
    func.func public @main(%x: tensor<5000xf32>) -> tensor<5000xf32> {
      %0 = stablehlo.custom_call @rpjrt_gpu_triton(%x) {api_version = 4 : i32} : (tensor<5000xf32>) -> tensor<5000xf32>
      %1 = stablehlo.multiply %0, %x : tensor<5000xf32>
      return %1 : tensor<5000xf32>
    }
    """
    x = np.linspace(-3, 3, 5000, dtype=np.float32)
    (out,) = c.compile(text)(c.put(x))
    np.testing.assert_allclose(np.asarray(out.to_numpy()), (2 * x + 1) * x, rtol=1e-6)
    record("FFI + Triton on XLA's stream", f"kernel {name} ({nparams} params, {shared} B shared) result right")


class _NotRun(Exception):
    """A check this machine's plugin cannot run: reported as not run, never as passed."""


def not_run(check: str, why: str) -> None:
    record(check, f"NOT RUN: {why}")
    if os.environ.get("PYTEST_CURRENT_TEST"):
        import pytest

        pytest.skip(why)
    raise _NotRun(why)


# y = x * 2 + 1 over blocks of 256, in Triton IR (the tt dialect) as XLA's Triton accepts it.
_TTIR_TWICE_PLUS_ONE = """
module {
  tt.func public @twice_plus_one(%x_ptr: !tt.ptr<f32>, %y_ptr: !tt.ptr<f32>, %n: i32) {
    %c256 = arith.constant 256 : i32
    %pid = tt.get_program_id x : i32
    %start = arith.muli %pid, %c256 : i32
    %range = tt.make_range {end = 256 : i32, start = 0 : i32} : tensor<256xi32>
    %startv = tt.splat %start : i32 -> tensor<256xi32>
    %offs = arith.addi %startv, %range : tensor<256xi32>
    %nv = tt.splat %n : i32 -> tensor<256xi32>
    %mask = arith.cmpi slt, %offs, %nv : tensor<256xi32>
    %xp = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<256x!tt.ptr<f32>>
    %xpo = tt.addptr %xp, %offs : tensor<256x!tt.ptr<f32>>, tensor<256xi32>
    %xv = tt.load %xpo, %mask : tensor<256x!tt.ptr<f32>>
    %two = arith.constant dense<2.000000e+00> : tensor<256xf32>
    %one = arith.constant dense<1.000000e+00> : tensor<256xf32>
    %m = arith.mulf %xv, %two : tensor<256xf32>
    %r = arith.addf %m, %one : tensor<256xf32>
    %yp = tt.splat %y_ptr : !tt.ptr<f32> -> tensor<256x!tt.ptr<f32>>
    %ypo = tt.addptr %yp, %offs : tensor<256x!tt.ptr<f32>>, tensor<256xi32>
    tt.store %ypo, %r, %mask : tensor<256x!tt.ptr<f32>>
    tt.return
  }
}
"""


def test_plugin_compiled_triton_kernel_on_xla_stream() -> None:
    """Triton IR compiled by the plugin's Triton extension (rpjrt.triton, no triton
    package), loaded as PTX with rpjrt.cuda and launched by an FFI handler on XLA's stream."""
    import re

    import rpjrt.triton

    check = "Triton via the plugin, on XLA's stream"
    c = client()
    if not rpjrt.triton.is_available(c):
        not_run(check, f"this CUDA plugin (PJRT {c.plugin.api_version}) has no Triton extension")
    try:
        kernel = rpjrt.triton.compile(c, _TTIR_TWICE_PLUS_ONE, num_warps=4, num_stages=1)
    except rpjrt.InvalidArgumentError as e:
        if "compute_capability" not in str(e):
            raise
        # The device did not say its compute capability: ask JAX for the same GPU's.
        cc = str(jax_mod().devices("gpu")[0].compute_capability)
        kernel = rpjrt.triton.compile(c, _TTIR_TWICE_PLUS_ONE, cc, num_warps=4, num_stages=1)
    ptx, name = kernel.asm_text, kernel.entry_name
    assert ptx and name, f"the plugin returned no PTX entry: {kernel!r}"
    entry = re.search(r"\.entry\s+\w+\s*\((.*?)\)", ptx, re.S)
    assert entry, "no .entry parameters in the plugin's PTX"
    nparams = entry.group(1).count(".param")
    ctx = driver().context(0)
    fn = ctx.load_ptx(ptx).function(name)
    threads = 32 * kernel.num_warps
    ffi = importlib.import_module("rpjrt.ffi")
    seen: dict[str, int] = {}

    def handler(call: Any) -> None:
        (x,), (y,) = call.args, call.rets
        n = x.nbytes // 4
        args: list[tuple[Any, int | float]] = [("ptr", x.data), ("ptr", y.data), ("i32", n)]
        # Newer Triton appends scratch-pointer parameters; null is right when unused.
        args += [("ptr", 0)] * (nparams - len(args))
        seen["stream"] = call.stream
        ctx.launch(fn, ((n + 255) // 256,), (threads,), args, shared_mem=kernel.shared_mem_bytes, stream=call.stream)

    ffi.register(c, "rpjrt_gpu_plugin_triton", handler, platform="cuda")
    text = """
    func.func public @main(%x: tensor<5000xf32>) -> tensor<5000xf32> {
      %0 = stablehlo.custom_call @rpjrt_gpu_plugin_triton(%x) {api_version = 4 : i32} : (tensor<5000xf32>) -> tensor<5000xf32>
      %1 = stablehlo.multiply %0, %x : tensor<5000xf32>
      return %1 : tensor<5000xf32>
    }
    """
    x = np.linspace(-3, 3, 5000, dtype=np.float32)
    (out,) = c.compile(text)(c.put(x))
    np.testing.assert_allclose(np.asarray(out.to_numpy()), (2 * x + 1) * x, rtol=1e-6)
    assert seen.get("stream", 0) != 0, "the handler did not get XLA's stream"
    record(check, f"{kernel!r}: {nparams} params, result right (stream {seen['stream']:#x})")


def test_over_allocation_raises_with_memory_stats() -> None:
    c = client()
    text = """
    func.func public @main() -> tensor<40000000000xf32> {
      %c = stablehlo.constant dense<1.0> : tensor<f32>
      %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<40000000000xf32>
      return %0 : tensor<40000000000xf32>
    }
    """
    try:
        exe = c.compile(text)
        exe()[0].block_until_ready()
    except rpjrt.ResourceExhaustedError as e:
        msg = str(e)
    else:
        raise AssertionError("160 GB on one device did not fail")
    low = msg.lower()
    assert any(k in low for k in ("bytes_in_use", "in use", "limit")), f"no memory stats in: {msg}"
    record("over-allocation", "ResourceExhaustedError: " + msg.replace("\n", " ")[:300])


# ---------------------------------------------------------------------------------------


def _main() -> int:
    tests = [(k, v) for k, v in globals().items() if k.startswith("test_") and callable(v)]
    failed, skipped = [], []
    for name, fn in tests:
        t0 = time.perf_counter()
        try:
            fn()
            print(f"PASS {name} ({time.perf_counter() - t0:.1f}s)", flush=True)
        except _NotRun as why:
            skipped.append(name)
            print(f"NOT RUN {name}: {why}", flush=True)
        except BaseException:
            failed.append(name)
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
            record(name, "FAILED: " + traceback.format_exc().strip().splitlines()[-1][:300])
    passed = len(tests) - len(failed) - len(skipped)
    print(f"{passed} passed, {len(failed)} failed, {len(skipped)} not run", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(_main())
