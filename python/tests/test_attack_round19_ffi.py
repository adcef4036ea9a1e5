"""Round 19 (outside test of custom calls), on both CPU plugins.

A program with real work before its custom call (a 256x256 dot) is dispatched
asynchronously by the CPU plugins, and its handler runs on a plugin worker thread after
the execute call returned. The plugin runs a device's executions in order, so:

2. such a handler that executes a program on the same device is refused at once (it used
   to wait for ever); on another device it works, as nested executes from handlers of
   inline (cheap) programs do;
2b. such a handler waiting for a buffer on its own device that is not ready (an output of
   the Session step that runs it) is refused at once instead of waiting for ever.
5. Attribute names that are not UTF-8 are refused, not merged.
7. A handler returning a numpy masked array is refused, as ``put`` refuses one.
8. A replaced stateful handler never gets the state of the one it replaced.
9. A stateful target cannot be replaced by native code.
10. Registering for a platform the client does not have is refused at once.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

_ids = itertools.count()
N = 256


def _name(base: str) -> str:
    """A fresh target name (registrations are per process and per plugin)."""
    return f"r19_{base}_{next(_ids)}"


def _async_program(target: str) -> str:
    """A dot before the custom call: the CPU plugins dispatch it asynchronously."""
    return f"""func.func public @main(%x: tensor<{N}x{N}xf32>) -> tensor<4xf32> {{
  %d = stablehlo.dot_general %x, %x, contracting_dims = [1] x [0] : (tensor<{N}x{N}xf32>, tensor<{N}x{N}xf32>) -> tensor<{N}x{N}xf32>
  %s = stablehlo.slice %d [0:1, 0:4] : (tensor<{N}x{N}xf32>) -> tensor<1x4xf32>
  %r = stablehlo.reshape %s : (tensor<1x4xf32>) -> tensor<4xf32>
  %0 = stablehlo.custom_call @{target}(%r) {{api_version = 4 : i32}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}"""


def _cheap_program(target: str) -> str:
    return f"""func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}"""


ADD = """func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""

ONES = np.ones((N, N), np.float32)


@pytest.fixture(scope="module", params=["old", "new"])
def two_devices(request: pytest.FixtureRequest, plugin_paths_all: dict[str, str]) -> rpjrt.Client:
    """A client with two CPU devices on each plugin."""
    return rpjrt.Client(plugin_paths_all[request.param], options={"cpu_device_count": 2})


# ------------------------------------------- 2: nested execute from a worker-thread handler


def test_worker_thread_handler_executing_on_its_device_is_refused_at_once(
    client: rpjrt.Client,
) -> None:
    inner = client.compile(ADD)
    seen: list[str] = []

    def h(call: rpjrt.ffi.FfiCall) -> np.ndarray:
        try:
            inner(call.args[0].to_numpy())[0].to_numpy()
        except rpjrt.FailedPreconditionError as e:
            seen.append(str(e))
            raise
        return call.args[0].to_numpy()

    t = _name("nested")
    rpjrt.ffi.register(client, t, h)
    outer = client.compile(_async_program(t))
    with pytest.raises(rpjrt.FailedPreconditionError, match="plugin worker thread"):
        outer(ONES)[0].to_numpy()
    assert len(seen) == 1
    msg = seen[0]
    assert "device 0" in msg and "in order" in msg and "another device" in msg
    assert repr(t) in msg or f'"{t}"' in msg
    # The client stays usable.
    np.testing.assert_array_equal(inner(np.ones(4, np.float32))[0].to_numpy(), 2.0)


@pytest.mark.parametrize("outer_dev,inner_dev", [(0, 1), (1, 0), (1, 1)])
def test_worker_thread_handler_device_is_compared_exactly(
    two_devices: rpjrt.Client, outer_dev: int, inner_dev: int
) -> None:
    c = two_devices
    inner = c.compile(ADD, device=c.devices()[inner_dev])

    def h(call: rpjrt.ffi.FfiCall) -> np.ndarray:
        return inner(call.args[0].to_numpy())[0].to_numpy()

    t = _name("dev")
    rpjrt.ffi.register(c, t, h)
    outer = c.compile(_async_program(t), device=c.devices()[outer_dev])
    x = c.put(ONES, device=c.devices()[outer_dev])
    if outer_dev == inner_dev:
        with pytest.raises(rpjrt.FailedPreconditionError, match=f"device {outer_dev}"):
            outer(x)[0].to_numpy()
    else:
        np.testing.assert_array_equal(outer(x)[0].to_numpy(), 2.0 * N)


def test_inline_handler_may_still_execute_on_its_device(client: rpjrt.Client) -> None:
    inner = client.compile(ADD)
    t = _name("inline")
    rpjrt.ffi.register(client, t, lambda call: inner(call.args[0].to_numpy())[0].to_numpy())
    outer = client.compile(_cheap_program(t))
    np.testing.assert_array_equal(outer(np.ones(4, np.float32))[0].to_numpy(), 2.0)
    # Through a prepared call too.
    p = outer.prepare([[client.put(np.ones(4, np.float32))]])
    np.testing.assert_array_equal(p()[0][0].to_numpy(), 2.0)


def test_instantiate_may_execute(plugin_paths_all: dict[str, str]) -> None:
    # The instantiate stage needs FFI 0.3 or newer: the new plugin.
    client = rpjrt.Client(plugin_paths_all["new"])
    inner = client.compile(ADD)

    def inst(call: rpjrt.ffi.FfiCall) -> dict:
        return {"v": float(inner(np.ones(4, np.float32))[0].to_numpy()[0])}

    t = _name("inst")
    rpjrt.ffi.register(
        client, t, lambda call: call.args[0].to_numpy() + call.state["v"], instantiate=inst
    )
    out = client.compile(_async_program(t))(ONES)[0].to_numpy()
    np.testing.assert_array_equal(out, N + 2.0)


# ------------------------------------------------------------- 2b: session read in a handler


def test_worker_thread_handler_reading_its_steps_output_does_not_hang(
    client: rpjrt.Client,
) -> None:
    s = rpjrt.Session(client)
    got: list[object] = []

    def h(call: rpjrt.ffi.FfiCall) -> np.ndarray:
        try:
            got.append(float(s.buffer("m").to_numpy()[0, 0]))
        except rpjrt.FailedPreconditionError as e:
            got.append(str(e))
        return call.args[0].to_numpy() + 1

    t = _name("sess")
    rpjrt.ffi.register(client, t, h)
    step = s.program(
        f"""func.func public @main(%w: tensor<4xf32>, %m: tensor<{N}x{N}xf32>) -> (tensor<4xf32>, tensor<{N}x{N}xf32>) {{
  %d = stablehlo.dot_general %m, %m, contracting_dims = [1] x [0] : (tensor<{N}x{N}xf32>, tensor<{N}x{N}xf32>) -> tensor<{N}x{N}xf32>
  %s = stablehlo.slice %d [0:1, 0:4] : (tensor<{N}x{N}xf32>) -> tensor<1x4xf32>
  %r = stablehlo.reshape %s : (tensor<1x4xf32>) -> tensor<4xf32>
  %a = stablehlo.add %w, %r : tensor<4xf32>
  %0 = stablehlo.custom_call @{t}(%a) {{api_version = 4 : i32}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %d : tensor<4xf32>, tensor<{N}x{N}xf32>
}}""",
        inputs=["w", "m"],
        outputs=["w", "m"],
    )
    s.bind("w", np.zeros(4, np.float32))
    s.bind("m", ONES)
    step()
    s.buffer("w").to_numpy()
    assert len(got) == 1
    # Either the pre-step value, or a clear refusal naming why.
    if isinstance(got[0], str):
        assert "not ready" in got[0] and "worker thread" in got[0] and "Session" in got[0]
    else:
        assert got[0] == 1.0


# ------------------------------------------------------------- 5: non-UTF-8 attribute names


@pytest.mark.parametrize("nested", [False, True])
def test_attribute_names_that_are_not_utf8_are_refused(client: rpjrt.Client, nested: bool) -> None:
    got: list[dict] = []

    def h(call: rpjrt.ffi.FfiCall) -> None:
        got.append(dict(call.attrs))
        call.rets[0].to_numpy()[:] = 0

    t = _name("names")
    rpjrt.ffi.register(client, t, h)
    attrs = '"\\FF" = 1 : i32, "\\FE" = 2 : i32, "\\E9" = 3 : i32'
    cfg = f"d = {{{attrs}}}" if nested else attrs
    e = client.compile(
        f"""func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.custom_call @{t}(%x) {{api_version = 4 : i32,
      backend_config = {{{cfg}}}}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}"""
    )
    with pytest.raises(rpjrt.InvalidArgumentError, match="attribute name is not valid UTF-8"):
        e(np.zeros(4, np.float32))[0].to_numpy()
    assert got == []


# ----------------------------------------------------------------------- 7: masked returns


@pytest.mark.parametrize("dtype", ["float32", "int4"])
def test_returned_masked_array_is_refused(client: rpjrt.Client, dtype: str) -> None:
    import ml_dtypes

    dt = np.dtype(ml_dtypes.int4) if dtype == "int4" else np.dtype(dtype)
    ty = "tensor<4xi4>" if dtype == "int4" else "tensor<4xf32>"
    ret = np.ma.masked_array(np.array([1, 7, 3, 7]).astype(dt), mask=[0, 1, 0, 1])
    t = _name("masked")
    rpjrt.ffi.register(client, t, lambda call: ret)
    e = client.compile(
        f"""func.func public @main(%x: {ty}) -> {ty} {{
  %0 = stablehlo.custom_call @{t}(%x) {{api_version = 4 : i32}} : ({ty}) -> {ty}
  return %0 : {ty}
}}"""
    )
    with pytest.raises(rpjrt.InvalidArgumentError, match="masked array.*result 0.*mask"):
        e(np.zeros(4, dt))[0].to_numpy()


# --------------------------------------------------- 8, 9: replacing a stateful handler


def test_replaced_stateful_handler_never_gets_the_old_state(plugin_paths_all: dict[str, str]) -> None:
    c = rpjrt.Client(plugin_paths_all["new"])  # instantiate needs FFI 0.3+
    t = _name("restate")
    seen: list[object] = []
    rpjrt.ffi.register(
        c, t, lambda call: call.args[0].to_numpy() + call.state["v"], instantiate=lambda call: {"v": 1.0}
    )
    old = c.compile(_cheap_program(t))
    np.testing.assert_array_equal(old(np.ones(4, np.float32))[0].to_numpy(), 2.0)

    def h2(call: rpjrt.ffi.FfiCall) -> np.ndarray:
        seen.append(call.state)
        return call.args[0].to_numpy() * call.state["v"]

    # Same shape of state: only a registration stamp tells them apart.
    rpjrt.ffi.register(c, t, h2, replace=True, instantiate=lambda call: {"v": 10.0})
    np.testing.assert_array_equal(c.compile(_cheap_program(t))(np.ones(4, np.float32))[0].to_numpy(), 10.0)
    with pytest.raises(rpjrt.FailedPreconditionError, match="handler this one replaced.*compile the program again"):
        old(np.ones(4, np.float32))[0].to_numpy()
    assert seen == [{"v": 10.0}]


def test_stateful_target_cannot_be_replaced_by_native_code(plugin_paths_all: dict[str, str]) -> None:
    import ctypes

    c = rpjrt.Client(plugin_paths_all["new"])
    t = _name("tonative")
    rpjrt.ffi.register(c, t, lambda call: call.args[0].to_numpy(), instantiate=lambda call: 1)

    @ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
    def native(frame: int) -> None:
        return None

    addr = ctypes.cast(native, ctypes.c_void_p).value
    with pytest.raises(rpjrt.FailedPreconditionError, match="per-instance state.*new target name"):
        rpjrt.ffi.register(c, t, addr, replace=True)
    # The Python handler stays in place.
    np.testing.assert_array_equal(c.compile(_cheap_program(t))(np.ones(4, np.float32))[0].to_numpy(), 1.0)


# ------------------------------------------------------------------ 10: unknown platforms


@pytest.mark.parametrize("platform", ["cpuu", "cuda", "nonsense", " cpu"])
def test_registering_for_a_platform_the_client_lacks_is_refused(client: rpjrt.Client, platform: str) -> None:
    t = _name("plat")
    with pytest.raises(rpjrt.InvalidArgumentError, match="not this client's") as info:
        rpjrt.ffi.register(client, t, lambda call: None, platform=platform)
    assert '"cpu"' in str(info.value) or "'cpu'" in str(info.value) or "host" in str(info.value)
    assert not rpjrt.ffi.is_registered(client, t)


@pytest.mark.parametrize("platform", ["cpu", "CPU", "host", "Host"])
def test_the_cpu_platform_keeps_its_names(client: rpjrt.Client, platform: str) -> None:
    t = _name("plat_ok")
    rpjrt.ffi.register(client, t, lambda call: call.args[0].to_numpy() + 1, platform=platform)
    np.testing.assert_array_equal(client.compile(_cheap_program(t))(np.ones(4, np.float32))[0].to_numpy(), 2.0)
