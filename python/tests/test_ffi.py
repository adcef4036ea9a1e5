"""Custom calls (XLA FFI) served by Python handlers and by jaxlib's native handlers, on
both CPU plugins (FFI runtime 0.2 on the PJRT 0.81 plugin, 0.4 on the 0.115 plugin)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

from .conftest import run_python

_ids = itertools.count()


def _name(base: str) -> str:
    """A fresh target name (registrations are per process and per plugin)."""
    return f"py_{base}_{next(_ids)}"


def _scale_program(target: str, offset: str = "1.5") -> str:
    return f"""func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32,
      backend_config = {{offset = {offset} : f32}}}} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}}
"""


X8 = np.arange(8, dtype=np.float32)


def test_python_handler_two_x_plus_attr(client: rpjrt.Client, plugin_label: str) -> None:
    target = _name("scale")
    seen: list[Any] = []

    @rpjrt.ffi.handler(client, target)
    def scale(call: rpjrt.ffi.FfiCall) -> None:
        seen.append((call.target, call.args[0].shape, call.rets[0].nbytes, call.stage))
        assert call.device_ordinal == 0, call.device_ordinal
        assert call.stream == 0
        x = call.args[0].to_numpy()
        call.rets[0].to_numpy()[:] = 2 * x + call.attrs["offset"]

    out = client.compile(_scale_program(target))(X8)[0].to_numpy()
    np.testing.assert_array_equal(out, 2 * X8 + 1.5)
    assert seen == [(target, (8,), 32, "execute")]
    want_rt = (0, 2) if plugin_label == "old" else (0, 4)
    assert rpjrt.ffi.runtime_version(client) == want_rt


def test_buffer_views(client: rpjrt.Client) -> None:
    target = _name("views")
    kept: list[Any] = []

    def h(call: rpjrt.ffi.FfiCall) -> None:
        a, r = call.args[0], call.rets[0]
        assert a.is_host and not a.writable and r.writable
        assert a.dtype == np.float32 and a.ffi_dtype == 11 and a.data != 0
        mv = a.memoryview()
        assert mv.readonly and mv.nbytes == 32
        np.testing.assert_array_equal(np.asarray(a), X8)
        np.testing.assert_array_equal(np.from_dlpack(a), X8)
        out = r.memoryview()
        out[:] = (np.asarray(a) * 3).tobytes()
        kept.append(a)

    rpjrt.ffi.register(client, target, h)
    out = client.compile(_scale_program(target))(X8)[0].to_numpy()
    np.testing.assert_array_equal(out, 3 * X8)
    with pytest.raises(rpjrt.InvalidArgumentError, match="only valid during the handler call"):
        kept[0].to_numpy()


def test_numpy_views_keep_their_copy(client: rpjrt.Client) -> None:
    """`to_numpy()` gives a read-only array for an argument and a writable one for a result,
    each over the call's copy: the copy cannot be resized away under the array, an array
    kept past the call still reads it, and writes to a result's array become the result."""
    target = _name("npviews")
    kept: list[np.ndarray] = []

    def h(call: rpjrt.ffi.FfiCall) -> None:
        a = call.args[0].to_numpy()
        r = call.rets[0].to_numpy()
        assert a.dtype == np.float32 and a.shape == (8,) and r.shape == (8,)
        assert not a.flags.writeable and r.flags.writeable
        assert a.flags.c_contiguous and r.flags.c_contiguous
        with pytest.raises(ValueError):
            a[0] = 1
        # The copy behind an array cannot shrink while the array lives.
        owner = r.base
        while owner is not None and not isinstance(owner, bytearray):
            owner = getattr(owner, "obj", None) or getattr(owner, "base", None)
        assert isinstance(owner, bytearray)
        with pytest.raises(BufferError):
            owner.clear()
        # Two views of one result share its copy.
        r[:] = a * 4
        np.testing.assert_array_equal(call.rets[0].to_numpy(), 4 * X8)
        kept.extend([a, r])

    rpjrt.ffi.register(client, target, h)
    out = client.compile(_scale_program(target))(X8)[0].to_numpy()
    np.testing.assert_array_equal(out, 4 * X8)
    np.testing.assert_array_equal(kept[0], X8)
    np.testing.assert_array_equal(kept[1], 4 * X8)


ALL_ATTRS = """func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.custom_call @TARGET(%x) {api_version = 4 : i32, backend_config = {
    b = true, i8v = -8 : i8, i16v = -16 : i16, i32v = -32 : i32, i64v = -64 : i64,
    u8v = 8 : ui8, u16v = 16 : ui16, u32v = 32 : ui32, u64v = 64 : ui64,
    f32v = 1.5 : f32, f64v = 2.25 : f64, s = "hello",
    ai32 = array<i32: 1, 2, 3>, ai64 = array<i64: -4, 5>, af32 = array<f32: 0.5, 1.5>,
    af64 = array<f64: 2.5>, d = {inner = 9 : i64, name = "in", deeper = {z = false}}}}
    : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""


def test_every_attribute_kind(client: rpjrt.Client) -> None:
    target = _name("attrs")
    got: dict[str, Any] = {}

    def h(call: rpjrt.ffi.FfiCall) -> None:
        got.update(call.attrs)
        call.rets[0].to_numpy()[:] = 0

    rpjrt.ffi.register(client, target, h)
    client.compile(ALL_ATTRS.replace("TARGET", target))(X8)[0].to_numpy()
    want = {
        "b": True, "i8v": -8, "i16v": -16, "i32v": -32, "i64v": -64, "u8v": 8, "u16v": 16,
        "u32v": 32, "u64v": 64, "f32v": 1.5, "f64v": 2.25, "s": "hello", "ai32": [1, 2, 3],
        "ai64": [-4, 5], "af32": [0.5, 1.5], "af64": [2.5],
        "d": {"inner": 9, "name": "in", "deeper": {"z": False}},
    }  # fmt: skip
    assert got == want
    for k in ("b",):
        assert type(got[k]) is bool
    for k in ("i8v", "i64v", "u64v"):
        assert type(got[k]) is int
    for k in ("f32v", "f64v"):
        assert type(got[k]) is float
    assert type(got["d"]["deeper"]["z"]) is bool


def test_handler_exceptions_map_to_status_codes_by_the_one_table(client: rpjrt.Client) -> None:
    """The same table codes a store's exceptions (test_distributed)."""
    target = _name("codes")
    raising: list[BaseException] = []

    @rpjrt.ffi.handler(client, target)
    def h(call: rpjrt.ffi.FfiCall) -> None:
        raise raising[0]

    exe = client.compile(_scale_program(target))
    cases: list[tuple[BaseException, type[rpjrt.Error]]] = [
        (KeyError("k"), rpjrt.NotFoundError),
        (IndexError("i"), rpjrt.OutOfRangeError),
        (TypeError("t"), rpjrt.InvalidArgumentError),
        (TimeoutError("slow"), rpjrt.DeadlineExceededError),
        (PermissionError("no"), rpjrt.PermissionDeniedError),
        (ConnectionRefusedError("down"), rpjrt.UnavailableError),
        (FileExistsError("there"), rpjrt.AlreadyExistsError),
        (MemoryError(), rpjrt.ResourceExhaustedError),
        (NotImplementedError(), rpjrt.UnimplementedError),
        (rpjrt.AbortedError("stop"), rpjrt.AbortedError),
        (RuntimeError("r"), rpjrt.UnknownError),
    ]
    for exc, cls in cases:
        raising[:] = [exc]
        with pytest.raises(cls) as info:
            exe(X8)[0].to_numpy()
        assert type(info.value) is cls, (exc, info.value)


def test_raising_handler_fails_execute_with_type_message_traceback(
    client: rpjrt.Client,
) -> None:
    target = _name("raises")

    def inner_helper() -> None:
        raise ValueError("offset must be positive")

    @rpjrt.ffi.handler(client, target)
    def h(call: rpjrt.ffi.FfiCall) -> None:
        inner_helper()

    exe = client.compile(_scale_program(target))
    with pytest.raises(rpjrt.InvalidArgumentError) as info:  # ValueError's status code
        exe(X8)[0].to_numpy()
    msg = str(info.value)
    assert "ValueError: offset must be positive" in msg, msg
    assert "inner_helper" in msg and "test_ffi.py" in msg, msg
    # The client keeps working.
    ok = _name("after_raise")
    rpjrt.ffi.register(client, ok, lambda call: call.rets[0].memoryview().cast("B").__setitem__(slice(None), bytes(32)))
    np.testing.assert_array_equal(client.compile(_scale_program(ok))(X8)[0].to_numpy(), 0)


def test_user_data_arrives(client: rpjrt.Client) -> None:
    target = _name("user")
    seen: list[Any] = []

    def h(call: rpjrt.ffi.FfiCall) -> None:
        seen.append(call.user_data)
        k = call.user_data["k"] if call.user_data is not None else 0.0
        call.rets[0].to_numpy()[:] = k * call.args[0].to_numpy()

    rpjrt.ffi.register(client, target, h)
    exe = client.compile(_scale_program(target))
    token = {"k": 4.0}
    np.testing.assert_array_equal(exe(X8, ffi_user_data=token)[0].to_numpy(), 4 * X8)
    assert seen[-1] is token
    np.testing.assert_array_equal(exe(X8)[0].to_numpy(), 0 * X8)
    assert seen[-1] is None


def test_register_twice_replace_and_remove(client: rpjrt.Client) -> None:
    target = _name("rebind")
    rpjrt.ffi.register(client, target, lambda call: call.rets[0].to_numpy().fill(1))
    with pytest.raises(rpjrt.AlreadyExistsError, match=target):
        rpjrt.ffi.register(client, target, lambda call: None)
    exe = client.compile(_scale_program(target))
    np.testing.assert_array_equal(exe(X8)[0].to_numpy(), 1)
    rpjrt.ffi.register(client, target, lambda call: call.rets[0].to_numpy().fill(2), replace=True)
    np.testing.assert_array_equal(exe(X8)[0].to_numpy(), 2)
    assert rpjrt.ffi.unregister(client, target)
    assert not rpjrt.ffi.is_registered(client, target)
    with pytest.raises(rpjrt.Error, match="removed"):
        exe(X8)[0].to_numpy()
    rpjrt.ffi.register(client, target, lambda call: call.rets[0].to_numpy().fill(3))
    np.testing.assert_array_equal(exe(X8)[0].to_numpy(), 3)


def test_many_handlers(client: rpjrt.Client) -> None:
    names = [_name("many") for _ in range(300)]
    for i, n in enumerate(names):
        rpjrt.ffi.register(client, n, lambda call, i=i: call.rets[0].to_numpy().fill(i))
    for i in (0, 150, 299):
        np.testing.assert_array_equal(client.compile(_scale_program(names[i]))(X8)[0].to_numpy(), i)


def test_bad_handlers_are_clear_errors(client: rpjrt.Client) -> None:
    with pytest.raises(TypeError, match="callable"):
        rpjrt.ffi.register(client, _name("bad"), "not a function")
    with pytest.raises(rpjrt.InvalidArgumentError, match="null"):
        rpjrt.ffi.register(client, _name("bad"), 0)
    with pytest.raises(rpjrt.InvalidArgumentError, match="empty"):
        rpjrt.ffi.register(client, "", lambda call: None)


def test_jax_ffi_call_program_runs_with_rpjrt_handler(client: rpjrt.Client) -> None:
    import jax
    import jax.numpy as jnp

    target = _name("jax_axpy")

    def f(x: Any) -> Any:
        y = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, x.dtype))(
            x, alpha=np.float32(3.0)
        )
        return jnp.sin(y) + 1.0

    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    text = jax.jit(f).lower(x).as_text()
    assert f"custom_call @{target}" in text

    @rpjrt.ffi.handler(client, target)
    def axpy(call: rpjrt.ffi.FfiCall) -> None:
        call.rets[0].to_numpy()[:] = call.attrs["alpha"] * call.args[0].to_numpy()

    out = client.compile(text)(x)[0].to_numpy()
    np.testing.assert_allclose(out, np.sin(3.0 * x) + 1.0, rtol=1e-6, atol=1e-6)


def test_custom_calls_found_in_every_program_form(client: rpjrt.Client) -> None:
    """An executable runs without the execute context custom calls need when its source
    names no custom call; one that does must find its handler in text and portable-artifact
    form, compiled and loaded from the compile cache. (Plain MLIR bytecode is not versioned:
    the 0.115 plugin cannot parse jaxlib's for this program at all.)"""
    import tempfile

    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    target = _name("forms")
    calls: list[int] = []

    @rpjrt.ffi.handler(client, target)
    def scale(call: rpjrt.ffi.FfiCall) -> None:
        calls.append(1)
        call.rets[0].to_numpy()[:] = 2 * call.args[0].to_numpy() + call.attrs["offset"]

    text = _scale_program(target)
    with jax_mlir.make_ir_context():
        module = ir.Module.parse(text)
        portable = stablehlo.serialize_portable_artifact_str(str(module), stablehlo.get_current_version())
    forms: dict[str, str | bytes] = {
        "text": text,
        "portable": portable.encode("latin1") if isinstance(portable, str) else bytes(portable),
    }
    x = client.put(X8)
    with tempfile.TemporaryDirectory() as d:
        cache = rpjrt.Cache(d)
        for form, code in forms.items():
            for exe in (client.compile(code), client.compile(code, cache=cache), client.compile(code, cache=cache)):
                before = len(calls)
                out = exe(x)[0].to_numpy()
                np.testing.assert_array_equal(out, 2 * X8 + 1.5, err_msg=form)
                assert len(calls) == before + 1, form
        assert cache.stats()["hits"] == 2
    # A program with no custom call still runs right while handlers are registered.
    plain = client.compile(
        "func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  %0 = stablehlo.add %x, %x : tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n"
    )
    before = len(calls)
    np.testing.assert_array_equal(plain(x)[0].to_numpy(), 2 * X8)
    assert len(calls) == before


LINALG = ["cholesky", "qr", "eigh", "svd", "solve", "lu"]


def _linalg_case(kind: str) -> tuple[Any, list[np.ndarray]]:
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    rng = np.random.default_rng(1)
    a = rng.normal(size=(5, 5)).astype(np.float32)
    spd = (a @ a.T + 5 * np.eye(5)).astype(np.float32)
    b = rng.normal(size=(5, 2)).astype(np.float32)
    fns: dict[str, tuple[Any, list[np.ndarray]]] = {
        "cholesky": (jnp.linalg.cholesky, [spd]),
        "qr": (lambda m: jnp.linalg.qr(m), [a]),
        "eigh": (lambda m: jnp.linalg.eigh(m), [spd]),
        "svd": (lambda m: jnp.linalg.svd(m, full_matrices=False), [a]),
        "solve": (jnp.linalg.solve, [a, b]),
        "lu": (jsl.lu, [a]),
    }
    return fns[kind]


@pytest.fixture(scope="module")
def jaxlib_targets(plugin_label: str, client: rpjrt.Client) -> list[str] | Exception:
    try:
        return rpjrt.ffi.register_jaxlib_cpu_targets(client)
    except rpjrt.Error as e:
        return e


@pytest.mark.parametrize("kind", LINALG)
def test_jnp_linalg_under_rpjrt(
    kind: str, plugin_label: str, client: rpjrt.Client, jaxlib_targets: Any
) -> None:
    import jax

    if plugin_label == "old":
        # The 0.2 FFI runtime cannot take jaxlib's handlers: registration says why.
        assert isinstance(jaxlib_targets, rpjrt.Error)
        msg = str(jaxlib_targets)
        assert "jaxlib" in msg and "0.2" in msg and "newer" in msg, msg
        return
    assert isinstance(jaxlib_targets, list), jaxlib_targets
    fn, args = _linalg_case(kind)
    jitted = jax.jit(fn)
    text = jitted.lower(*args).as_text()
    assert "lapack_" in text
    want = jax.tree.leaves(jitted(*args))
    got = client.compile(text)(*args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.to_numpy(), np.asarray(w), rtol=2e-4, atol=2e-4)


def test_rss_flat_over_many_calls(plugin_path: str) -> None:
    """10,000 calls through a Python handler and 10,000 failing ones: RSS stays flat (a
    generous bound; bench/b_ffi.py measures it precisely)."""
    code = f"""
        import gc, numpy as np, rpjrt, rpjrt.ffi
        def rss():
            for line in open("/proc/self/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        c = rpjrt.Client({plugin_path!r})
        prog = {_scale_program("TARGET")!r}
        def ok(call):
            call.rets[0].to_numpy()[:] = 2 * call.args[0].to_numpy() + call.attrs["offset"]
        def bad(call):
            raise RuntimeError("always fails")
        rpjrt.ffi.register(c, "rss_ok", ok)
        rpjrt.ffi.register(c, "rss_bad", bad)
        e_ok = c.compile(prog.replace("TARGET", "rss_ok"))
        e_bad = c.compile(prog.replace("TARGET", "rss_bad"))
        x = c.put(np.arange(8, dtype=np.float32))
        def run(n):
            for _ in range(n):
                e_ok(x)[0].to_numpy()
                try:
                    e_bad(x)[0].to_numpy()
                except rpjrt.Error:
                    pass
        run(2000)
        gc.collect()
        before = rss()
        run(10000)
        gc.collect()
        print("GROWTH", rss() - before)
    """
    r = run_python(code, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    growth = int(r.stdout.split("GROWTH")[1].split()[0])
    assert growth <= 4 * 1024 * 1024, growth


def test_handler_on_plugin_object(plugin_path: str) -> None:
    """Registration through a Plugin (no client) with an explicit platform."""
    r = run_python(
        f"""
        import numpy as np, rpjrt, rpjrt.ffi
        c = rpjrt.Client({plugin_path!r})
        reg = rpjrt.ffi.register(c.plugin, "via_plugin", lambda call: call.rets[0].to_numpy().fill(5), platform="cpu")
        assert reg.platform == "host", reg
        e = c.compile({_scale_program("via_plugin")!r})
        print(e(np.zeros(8, np.float32))[0].to_numpy().tolist())
        """
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "[5.0, 5.0" in r.stdout


def test_async_client_and_threads_do_not_deadlock(plugin_path: str) -> None:
    """Handlers take the GIL themselves: executions from several Python threads on an
    asynchronous client, with reads of the outputs, finish (in a subprocess, so a deadlock
    fails the test instead of hanging it)."""
    r = run_python(
        f"""
        import threading, numpy as np, rpjrt, rpjrt.ffi
        c = rpjrt.Client({plugin_path!r}, options={{"asynchronous": True}})
        def h(call):
            call.rets[0].to_numpy()[:] = call.args[0].to_numpy() + 1
        rpjrt.ffi.register(c, "threads_h", h)
        e = c.compile({_scale_program("threads_h")!r})
        x = c.put(np.arange(8, dtype=np.float32))
        bad = []
        def work():
            for _ in range(200):
                y = e(x)[0]
                y.block_until_ready()
                if y.to_numpy()[1] != 2.0:
                    bad.append(1)
        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print("done", len(bad))
        """,
        timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "done 0" in r.stdout, r.stdout


def _ctypes_handler(minor: int) -> Any:
    """A native XLA FFI handler made with ctypes that reports FFI version 0.<minor> when
    asked for metadata and otherwise does nothing."""
    import ctypes

    @ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
    def handler(frame: int) -> None:
        ext = ctypes.c_void_p.from_address(frame + 8).value  # extension_start
        while ext:
            ext_type = ctypes.c_int32.from_address(ext + 8).value
            if ext_type == 1:  # metadata extension: its metadata pointer follows the base
                md = ctypes.c_void_p.from_address(ext + 24).value
                assert md is not None
                ctypes.c_int32.from_address(md + 24).value = 0  # api_version.major
                ctypes.c_int32.from_address(md + 28).value = minor  # api_version.minor
                return None
            ext = ctypes.c_void_p.from_address(ext + 16).value  # next
        return None

    return handler


def test_native_handler_versions_are_checked(client: rpjrt.Client, plugin_label: str) -> None:
    import ctypes

    runtime = rpjrt.ffi.runtime_version(client)
    too_new = _ctypes_handler(9)
    addr = ctypes.cast(too_new, ctypes.c_void_p).value
    assert addr is not None
    target = _name("native_new")
    with pytest.raises(rpjrt.FailedPreconditionError) as info:
        rpjrt.ffi.register(client, target, addr)
    msg = str(info.value)
    assert target in msg and "0.9" in msg and f"{runtime[0]}.{runtime[1]}" in msg, msg
    assert not rpjrt.ffi.is_registered(client, target)

    old_enough = _ctypes_handler(1)
    addr = ctypes.cast(old_enough, ctypes.c_void_p).value
    reg = rpjrt.ffi.register(client, _name("native_ok"), addr)
    assert reg.handler_version == (0, 1) and reg.runtime_version == runtime
    test_native_handler_versions_are_checked.keep = (too_new, old_enough)  # type: ignore[attr-defined]


def test_jax_ffi_call_program_runs_with_rust_handler(client: rpjrt.Client) -> None:
    """The same, served by a Rust handler (rpjrt's benchmark handler: y = 2x + offset)."""
    import jax

    target = _name("jax_rust")
    rpjrt._rpjrt._ffi_bench_register_rust(client, target)

    def f(x: Any) -> Any:
        return jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, x.dtype))(
            x, offset=np.float32(0.5)
        ) * 3.0

    x = np.linspace(-2, 2, 8, dtype=np.float32)
    out = client.compile(jax.jit(f).lower(x).as_text())(x)[0].to_numpy()
    np.testing.assert_allclose(out, (2 * x + 0.5) * 3.0, rtol=1e-6)


# ---------------------------------------------------------------- issue 21: hardening


def _sq_then_call(target: str, n: int) -> str:
    """`x*x` (a temporary the runtime frees after the call) through the custom call."""
    return f"""func.func public @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %t = stablehlo.multiply %x, %x : tensor<{n}xf32>
  %0 = stablehlo.custom_call @{target}(%t) {{api_version = 4 : i32}}
      : (tensor<{n}xf32>) -> tensor<{n}xf32>
  return %0 : tensor<{n}xf32>
}}
"""


def test_views_kept_past_the_call_are_detached(plugin_path: str) -> None:
    """Views kept after the handler returns (numpy, memoryview, DLPack of a 64 MiB
    temporary, and a writable result view) neither read freed memory nor change the
    result; new views after the call raise. In a subprocess: a regression is a SIGSEGV."""
    n = 16 * 1024 * 1024
    r = run_python(
        f"""
        import gc, numpy as np, rpjrt, rpjrt.ffi
        c = rpjrt.Client({plugin_path!r})
        kept = {{}}
        def h(call):
            a, r = call.args[0], call.rets[0]
            kept["np"] = a.to_numpy()
            kept["mv"] = a.memoryview()
            kept["dl"] = np.from_dlpack(a)
            kept["ret"] = r.to_numpy()
            kept["ret"][:] = a.to_numpy() + 1
            kept["buf"] = a
        rpjrt.ffi.register(c, "keep", h)
        e = c.compile({_sq_then_call("keep", n)!r})
        x = np.full({n}, 3.0, np.float32)
        y = e(x)[0]
        y.block_until_ready()
        # churn the allocator so freed memory is reused
        junk = [e(x)[0] for _ in range(3)]
        for j in junk:
            j.block_until_ready()
        del junk; gc.collect()
        assert float(kept["np"].sum()) == 9.0 * {n}, kept["np"][:4]
        assert bytes(kept["mv"][:4]) == np.float32(9).tobytes()
        assert float(kept["dl"][-1]) == 9.0
        kept["ret"][:] = 99
        ys = y.to_numpy()
        assert float(ys[0]) == 10.0 and float(ys[-1]) == 10.0, ys[:4]
        try:
            kept["buf"].to_numpy()
        except rpjrt.InvalidArgumentError as err:
            assert "only valid during the handler call" in str(err)
        else:
            raise AssertionError("a new view after the call was allowed")
        print("ok")
        """,
        timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ok" in r.stdout


@pytest.mark.parametrize("asynchronous", [False, True])
def test_handler_dropping_last_references_does_not_hang(
    plugin_path: str, asynchronous: bool
) -> None:
    """A handler that drops the last reference to its client, executable and buffers (on
    the plugin's worker thread, after execute returned): the destruction is deferred off
    that thread instead of waiting for itself."""
    r = run_python(
        f"""
        import gc, threading, numpy as np, rpjrt, rpjrt.ffi
        c = rpjrt.Client({plugin_path!r}, options={{"asynchronous": {asynchronous}}})
        done = threading.Event()
        holder = {{}}
        def h(call):
            call.rets[0].to_numpy()[:] = 1
            holder.clear()
            gc.collect()
            done.set()
        rpjrt.ffi.register(c, "dropper", h)
        # Large enough that the plugin runs it (and the handler) on a worker thread.
        holder["e"] = c.compile({_sq_then_call("dropper", 4 * 1024 * 1024)!r})
        holder["x"] = c.put(np.ones(4 * 1024 * 1024, np.float32))
        holder["c"] = c
        del c
        holder["e"](holder["x"])
        assert done.wait(60), "handler never ran"
        gc.collect()
        print("ok")
        """,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ok" in r.stdout


def test_native_handlers_that_are_not_code_are_refused(plugin_path: str) -> None:
    """A stray int, the address of a Python object, or a capsule that holds data are not
    handler functions: each is refused at registration (before, the plugin called into
    them: SIGSEGV). Names with NUL and an empty platform are refused too."""
    r = run_python(
        f"""
        import datetime, rpjrt, rpjrt.ffi
        c = rpjrt.Client({plugin_path!r})
        data_capsule = datetime.datetime_CAPI
        for bad, why in [(1, "not mapped"), (2**63, "not mapped"), (id(c), "holds no code"),
                         (data_capsule, "holds no code")]:
            try:
                rpjrt.ffi.register(c, "not_code", bad, replace=True)
            except rpjrt.InvalidArgumentError as e:
                assert why in str(e), (bad, e)
            else:
                raise AssertionError(f"{{bad!r}} was registered as a handler")
        for kw in [dict(name="a\\0b"), dict(name="ok", platform="")]:
            try:
                rpjrt.ffi.register(c, kw.pop("name"), lambda call: None, **kw)
            except rpjrt.InvalidArgumentError:
                pass
            else:
                raise AssertionError(f"registered with {{kw}}")
        print("ok")
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ok" in r.stdout


def test_a_handler_recursing_through_its_program_fails_instead_of_hanging(plugin_path: str) -> None:
    """A handler that executes its own program again, without end: each level holds one of
    the plugin's executions in flight (32 on the CPU plugins), and level 33 used to wait for
    the enclosing ones forever. Past 16 levels the handler is not run and the error names
    the nesting; a few levels still work."""
    r = run_python(
        f"""
        import numpy as np, rpjrt, rpjrt.ffi
        c = rpjrt.Client({plugin_path!r})
        box = {{"limit": 3, "depth": 0}}
        def h(call):
            box["depth"] += 1
            x = call.args[0].to_numpy()
            if box["depth"] < box["limit"]:
                (x,) = box["e"](x)
                x = x.to_numpy()
            return x + 1
        rpjrt.ffi.register(c, "recurse", h)
        box["e"] = c.compile({_scale_program("recurse")!r})
        (y,) = box["e"](np.zeros(8, np.float32))
        assert y.to_numpy().tolist() == [3.0] * 8, y.to_numpy()
        box["limit"], box["depth"] = 10**9, 0
        try:
            box["e"](np.zeros(8, np.float32))[0].to_numpy()
        except rpjrt.Error as e:
            assert "nested" in str(e), str(e)[-500:]
        else:
            raise AssertionError("endless nesting returned")
        assert box["depth"] <= 17, box
        print("ok")
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ok" in r.stdout


def test_many_threads_whose_handlers_execute_programs_do_not_deadlock(plugin_path: str) -> None:
    """40 threads run a program whose handler runs another program, all handlers at once:
    their executions fill the plugin's bound on executions in flight (32), and the nested
    ones used to wait for a slot for ever. Nested executions are now refused while 16 or
    more handlers run, so every call returns (with its result, or that error)."""
    r = run_python(
        f"""
        import threading, numpy as np, rpjrt, rpjrt.ffi
        c = rpjrt.Client({plugin_path!r})
        n = 40
        together = threading.Barrier(n)
        def h(call):
            try:
                together.wait(timeout=3)
            except threading.BrokenBarrierError:
                pass
            (y,) = inner(call.args[0].to_numpy())
            return y.to_numpy()
        rpjrt.ffi.register(c, "runs_inner", h)
        outer = c.compile({_scale_program("runs_inner")!r})
        inner = c.compile('''func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
          %0 = stablehlo.add %x, %x : tensor<8xf32>
          return %0 : tensor<8xf32>
        }}''')
        results = []
        def work():
            try:
                results.append(outer(np.ones(8, np.float32))[0].to_numpy().tolist())
            except rpjrt.Error as e:
                results.append(str(e))
        threads = [threading.Thread(target=work, daemon=True) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == n, f"{{n - len(results)}} calls never returned"
        for r in results:
            assert r == [2.0] * 8 or "handlers run" in r, r
        (y,) = outer(np.ones(8, np.float32))
        assert y.to_numpy().tolist() == [2.0] * 8
        print("ok")
        """,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ok" in r.stdout


def test_handler_deleting_the_running_programs_input_does_not_hang(plugin_path: str) -> None:
    """A handler that deletes a buffer its own execution reads (the argument, or an output
    of the previous call passed back in): the buffer is refused from then on and freed once
    the execution lets go of it, instead of the plugin's delete waiting for the execution
    that waits for the handler (it hung on the PJRT 0.115 plugin)."""
    r = run_python(
        f"""
        import numpy as np, rpjrt, rpjrt.ffi
        c = rpjrt.Client({plugin_path!r})
        box = {{}}
        def h(call):
            x = call.args[0].to_numpy()
            box["x"].delete()
            assert box["x"].is_deleted()
            box["x"].delete()                       # deleting again does nothing
            return x + 1
        rpjrt.ffi.register(c, "deleter", h)
        e = c.compile({_scale_program("deleter")!r})
        box["x"] = c.put(np.ones(8, np.float32))
        (y,) = e(box["x"])
        assert y.to_numpy().tolist() == [2.0] * 8, y.to_numpy()
        box["x"] = y                                # the previous output, fed back
        (z,) = e(y)
        assert z.to_numpy().tolist() == [3.0] * 8, z.to_numpy()
        try:
            y.to_numpy()
        except rpjrt.BufferDeletedError:
            pass
        else:
            raise AssertionError("a buffer deleted in a handler is still readable")
        print("ok")
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ok" in r.stdout


@pytest.mark.parametrize("asynchronous", [False, True])
def test_exit_with_pending_handlers_does_not_hang(plugin_path: str, asynchronous: bool) -> None:
    """The script ends while daemon threads keep executing a program whose Python handler
    is running or about to run: the interpreter exits promptly (running handlers finish,
    later ones fail without touching Python), without a PyO3 panic text."""
    r = run_python(
        f"""
        import threading, time, numpy as np, rpjrt, rpjrt.ffi
        c = rpjrt.Client({plugin_path!r}, options={{"asynchronous": {asynchronous}}})
        started = threading.Event()
        def h(call):
            started.set()
            time.sleep(0.1)
            call.rets[0].to_numpy()[:] = 1
        rpjrt.ffi.register(c, "slow", h)
        e = c.compile({_scale_program("slow")!r})
        x = c.put(np.arange(8, dtype=np.float32))
        def work():
            while True:
                e(x)[0].block_until_ready()
        for _ in range(3):
            threading.Thread(target=work, daemon=True).start()
        ys = [e(x)[0] for _ in range(5)]
        assert started.wait(30)
        print("leaving")
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "leaving" in r.stdout
    assert "not initialized" not in r.stderr and "panicked" not in r.stderr, r.stderr[-3000:]


def test_empty_operand_is_host_memory(client: rpjrt.Client) -> None:
    """A zero-size operand (next to a non-empty one: XLA skips a custom call whose results
    are all empty) is host memory of no bytes on both plugins (PJRT 0.81 gives it a null
    address)."""
    target = _name("empty")
    seen: list[Any] = []

    def h(call: rpjrt.ffi.FfiCall) -> None:
        a, r = call.args[0], call.rets[0]
        seen.append((a.is_host, a.nbytes, a.to_numpy().shape, r.is_host, r.to_numpy().shape))
        call.rets[1].to_numpy()[:] = call.args[1].to_numpy()

    rpjrt.ffi.register(client, target, h)
    prog = f"""func.func public @main(%x: tensor<0x3xf32>, %k: tensor<2xf32>)
    -> (tensor<0x3xf32>, tensor<2xf32>) {{
  %0:2 = stablehlo.custom_call @{target}(%x, %k) {{api_version = 4 : i32}}
      : (tensor<0x3xf32>, tensor<2xf32>) -> (tensor<0x3xf32>, tensor<2xf32>)
  return %0#0, %0#1 : tensor<0x3xf32>, tensor<2xf32>
}}
"""
    k = np.array([4, 5], np.float32)
    out = client.compile(prog)(np.zeros((0, 3), np.float32), k)
    assert out[0].to_numpy().shape == (0, 3)
    np.testing.assert_array_equal(out[1].to_numpy(), k)
    assert seen == [(True, 0, (0, 3), True, (0, 3))]


def test_returned_arrays_are_written_or_refused(client: rpjrt.Client) -> None:
    exe_of: dict[str, Any] = {}

    def run(h: Any) -> Any:
        target = _name("ret")
        rpjrt.ffi.register(client, target, h)
        exe_of[target] = client.compile(_scale_program(target))
        return exe_of[target](X8)[0].to_numpy()

    np.testing.assert_array_equal(run(lambda call: call.args[0].to_numpy() * 4), 4 * X8)
    np.testing.assert_array_equal(
        run(lambda call: (np.full(8, 7, np.float32),)), np.full(8, 7, np.float32)
    )
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"returned float64 \(8,\)"):
        run(lambda call: np.zeros(8))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"returned float32 \(3,\)"):
        run(lambda call: np.zeros(3, np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match="returned 2 values"):
        run(lambda call: [X8, X8])
    with pytest.raises(rpjrt.InvalidArgumentError, match="float32"):
        run(lambda call: 42)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_base_exceptions_propagate_as_themselves(
    client: rpjrt.Client, exc: type[BaseException]
) -> None:
    target = _name("interrupt")

    def h(call: rpjrt.ffi.FfiCall) -> None:
        raise exc("stop here")

    rpjrt.ffi.register(client, target, h)
    exe = client.compile(_scale_program(target))
    with pytest.raises(exc, match="stop here"):
        exe(X8)[0].to_numpy()
    with pytest.raises(exc):  # every run re-raises its own exception
        exe(X8)[0].block_until_ready()


def test_non_utf8_string_attribute_is_an_error_naming_it(client: rpjrt.Client) -> None:
    target = _name("utf8")
    rpjrt.ffi.register(client, target, lambda call: None)
    prog = f"""func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32,
      backend_config = {{name = "ok", bad = "a\\FFb"}}}} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}}
"""
    with pytest.raises(rpjrt.InvalidArgumentError, match='attribute "bad" is a string that is not valid UTF-8'):
        client.compile(prog)(X8)[0].to_numpy()


_PROP_TYPES = [
    ("f32", np.float32),
    ("f64", np.float64),
    ("i32", np.int32),
    ("i8", np.int8),
    ("ui16", np.uint16),
    ("i64", np.int64),
    ("i1", np.bool_),
]


def _attr_text(k: str, v: Any) -> str:
    if isinstance(v, bool):
        return f"{k} = {str(v).lower()}"
    if isinstance(v, int):
        return f"{k} = {v} : i64"
    if isinstance(v, float):
        return f"{k} = 0x{np.float32(v).view(np.uint32):08X} : f32"
    return f'{k} = "{v}"'


def test_random_frames_round_trip(client: rpjrt.Client) -> None:
    """Property: random element types and shapes (zero-size and rank 0 included) and random
    attribute dictionaries. Views, returned values and attributes arrive intact; views kept
    past the call stay readable and detached."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    attr_values = st.one_of(
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(min_value=-1e6, max_value=1e6, width=32),
        st.from_regex(r"[a-z0-9 _]{0,12}", fullmatch=True),
    )
    counter = itertools.count()

    @settings(
        max_examples=20,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        ty=st.integers(0, len(_PROP_TYPES) - 1),
        dims=st.lists(st.integers(0, 3), max_size=3),
        attrs=st.dictionaries(st.from_regex(r"a_[a-z0-9_]{0,6}", fullmatch=True), attr_values, max_size=5),
        by_return=st.booleans(),
    )
    def prop(ty: int, dims: list[int], attrs: dict[str, Any], by_return: bool) -> None:
        mlir, npt = _PROP_TYPES[ty]
        shape = f"tensor<{'x'.join(map(str, dims))}{'x' if dims else ''}{mlir}>"
        target = _name(f"prop{next(counter)}")
        seen: dict[str, Any] = {}

        def h(call: rpjrt.ffi.FfiCall) -> Any:
            seen["attrs"] = dict(call.attrs)
            seen["kept"] = call.args[0].to_numpy()
            x, k = call.args[0].to_numpy(), call.args[1].to_numpy()
            assert call.args[0].is_host and call.args[0].nbytes == x.nbytes
            if by_return:
                return (x.copy(), k + 1)
            call.rets[0].to_numpy()[...] = x
            call.rets[1].to_numpy()[...] = k + 1
            return None

        rpjrt.ffi.register(client, target, h)
        cfg = ", ".join(_attr_text(k, v) for k, v in attrs.items())
        prog = f"""func.func public @main(%x: {shape}, %k: tensor<2xf32>) -> ({shape}, tensor<2xf32>) {{
  %0:2 = stablehlo.custom_call @{target}(%x, %k) {{api_version = 4 : i32,
      backend_config = {{{cfg}}}}} : ({shape}, tensor<2xf32>) -> ({shape}, tensor<2xf32>)
  return %0#0, %0#1 : {shape}, tensor<2xf32>
}}
"""
        rng = np.random.default_rng(len(dims) * 7 + ty)
        x = (rng.integers(0, 2, size=dims) if npt is np.bool_ else rng.integers(-50, 50, size=dims)).astype(npt)
        k = np.array([1.5, -2.0], np.float32)
        out = client.compile(prog)(x, k)
        np.testing.assert_array_equal(out[0].to_numpy(), x)
        np.testing.assert_array_equal(out[1].to_numpy(), k + 1)
        np.testing.assert_array_equal(seen["kept"], x)
        assert set(seen["attrs"]) == set(attrs)
        for name, v in attrs.items():
            got = seen["attrs"][name]
            if isinstance(v, float):
                assert got == float(np.float32(v)), (name, got, v)
            else:
                assert got == v and type(got) is type(v), (name, got, v)

    prop()


# ------------------------------------------------- issue 22 item 5: state and stages


def _stateful_program(target: str, offsets: list[str]) -> str:
    """One custom call per offset, each its own instance, their results summed."""
    calls = []
    for i, off in enumerate(offsets):
        calls.append(
            f"""  %c{i} = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32,
      backend_config = {{offset = {off} : f32}}}} : (tensor<8xf32>) -> tensor<8xf32>"""
        )
    acc = "%c0"
    adds = []
    for i in range(1, len(offsets)):
        adds.append(f"  %s{i} = stablehlo.add {acc}, %c{i} : tensor<8xf32>")
        acc = f"%s{i}"
    body = "\n".join(calls + adds)
    return f"""func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
{body}
  return {acc} : tensor<8xf32>
}}
"""


def test_instantiate_gives_each_instance_its_state(
    client: rpjrt.Client, plugin_label: str
) -> None:
    target = _name("stateful")
    made: list[tuple[str, float]] = []

    def make(call: rpjrt.ffi.FfiCall) -> dict[str, Any]:
        assert call.state is None
        made.append((call.stage, call.attrs["offset"]))
        return {"offset": call.attrs["offset"], "calls": 0}

    def run(call: rpjrt.ffi.FfiCall) -> np.ndarray:
        assert call.stage == "execute"
        call.state["calls"] += 1
        return call.args[0].to_numpy() * call.state["calls"] + call.state["offset"]

    if plugin_label == "old":
        with pytest.raises(rpjrt.UnimplementedError, match=r"0\.3 or newer.*is 0\.2"):
            rpjrt.ffi.register(client, target, run, instantiate=make)
        assert not rpjrt.ffi.is_registered(client, target)
        assert made == []
        return
    rpjrt.ffi.register(client, target, run, instantiate=make)
    a = client.compile(_stateful_program(target, ["1.0"]))
    b = client.compile(_stateful_program(target, ["10.0", "100.0"]))
    assert sorted(made) == [("instantiate", 1.0), ("instantiate", 10.0), ("instantiate", 100.0)]
    # Each instance counts its own executions: a's state is not b's.
    for n in (1, 2, 3):
        np.testing.assert_array_equal(a(X8)[0].to_numpy(), X8 * n + 1.0)
    np.testing.assert_array_equal(b(X8)[0].to_numpy(), (X8 + 10.0) + (X8 + 100.0))
    np.testing.assert_array_equal(b(X8)[0].to_numpy(), (2 * X8 + 10.0) + (2 * X8 + 100.0))
    assert len(made) == 3, "instantiate runs once per instance, not per execution"


def test_instance_state_is_released_with_the_executable(
    client: rpjrt.Client, plugin_label: str
) -> None:
    if plugin_label == "old":
        return  # no instantiate stage on FFI 0.2: refusal tested above
    import gc
    import time
    import weakref

    class State:
        pass

    target = _name("released")
    refs: list[weakref.ref[State]] = []

    def make(call: rpjrt.ffi.FfiCall) -> State:
        s = State()
        refs.append(weakref.ref(s))
        return s

    def run(call: rpjrt.ffi.FfiCall) -> np.ndarray:
        assert isinstance(call.state, State)
        return call.args[0].to_numpy()

    rpjrt.ffi.register(client, target, run, instantiate=make)
    exe = client.compile(_scale_program(target))
    np.testing.assert_array_equal(exe(X8)[0].to_numpy(), X8)
    gc.collect()
    assert len(refs) == 1 and refs[0]() is not None, "the executable holds its state"
    del exe
    # A reference dropped without the GIL is released when the interpreter is next entered.
    deadline = time.monotonic() + 10
    while refs[0]() is not None and time.monotonic() < deadline:
        gc.collect()
        rpjrt.ffi.is_registered(client, target)
        time.sleep(0.01)
    assert refs[0]() is None, "the state outlived its executable"


def test_instantiate_exceptions_fail_the_compile(client: rpjrt.Client, plugin_label: str) -> None:
    if plugin_label == "old":
        return  # registration itself is refused there (tested above)
    target = _name("bad_state")

    def make(call: rpjrt.ffi.FfiCall) -> None:
        raise ValueError(f"cannot build state for offset {call.attrs['offset']}")

    rpjrt.ffi.register(client, target, lambda call: None, instantiate=make)
    with pytest.raises(rpjrt.Error) as info:
        client.compile(_scale_program(target, "3.0"))
    text = str(info.value)
    assert "instantiate" in text and "ValueError" in text, text
    assert "cannot build state for offset 3.0" in text, text


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_base_exceptions_in_instantiate_propagate_as_themselves(
    client: rpjrt.Client, plugin_label: str, exc: type[BaseException]
) -> None:
    if plugin_label == "old":
        return  # registration itself is refused there (tested above)
    target = _name("interrupt_state")

    def make(call: rpjrt.ffi.FfiCall) -> None:
        raise exc("stop while instantiating")

    rpjrt.ffi.register(client, target, lambda call: None, instantiate=make)
    with pytest.raises(exc, match="stop while instantiating"):
        client.compile(_scale_program(target))


def test_bad_instantiate_arguments_are_clear_errors(client: rpjrt.Client) -> None:
    with pytest.raises(TypeError, match="instantiate must be a callable"):
        rpjrt.ffi.register(client, _name("x"), lambda call: None, instantiate=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="native handler"):
        rpjrt.ffi.register(client, _name("x"), 1234, instantiate=lambda call: None)


def test_fake_plugin_with_an_old_ffi_runtime_refuses_state_naming_both_versions() -> None:
    from .conftest import fake_plugin_path

    r = run_python(
        f"""
        import rpjrt, rpjrt.ffi
        c = rpjrt.Client({str(fake_plugin_path())!r})
        print("RT", rpjrt.ffi.runtime_version(c))
        rpjrt.ffi.register(c, "plain", lambda call: None)
        try:
            rpjrt.ffi.register(c, "stateful", lambda call: None, instantiate=lambda call: 1)
        except rpjrt.UnimplementedError as e:
            print("REFUSED", e)
        """,
        env={"RPJRT_FAKE_FFI_VERSION": "0.2"},
    )
    assert r.returncode == 0, r.stderr
    assert "RT (0, 2)" in r.stdout, r.stdout
    assert "REFUSED" in r.stdout and "0.3 or newer" in r.stdout, r.stdout
    assert "is 0.2" in r.stdout, r.stdout


def test_python_handler_under_the_fast_call_and_wait(client: rpjrt.Client) -> None:
    # A plain call with Buffer arguments releases the GIL for the execution (and, with
    # wait=True, for the wait): a Python handler, which needs the GIL on the plugin's
    # thread, runs meanwhile instead of deadlocking.
    target = _name("fast")

    @rpjrt.ffi.handler(client, target)
    def scale(call: rpjrt.ffi.FfiCall) -> None:
        call.rets[0].to_numpy()[:] = 2 * call.args[0].to_numpy() + call.attrs["offset"]

    exe = client.compile(_scale_program(target))
    xb = client.put(X8)
    for _ in range(20):
        (y,) = exe(xb, wait=True)
        assert y.is_ready()
        np.testing.assert_array_equal(y.to_numpy(), 2 * X8 + 1.5)
        (z,) = exe(xb)
        np.testing.assert_array_equal(z.block_until_ready().to_numpy(), 2 * X8 + 1.5)
    bad = _name("fast_raises")

    @rpjrt.ffi.handler(client, bad)
    def raises(call: rpjrt.ffi.FfiCall) -> None:
        raise ValueError("no good")

    with pytest.raises(rpjrt.InvalidArgumentError, match="ValueError: no good"):
        client.compile(_scale_program(bad))(xb, wait=True)
