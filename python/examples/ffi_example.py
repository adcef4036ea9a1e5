"""Custom calls served by Python: a hand-written StableHLO custom call and one lowered by
JAX with `jax.ffi.ffi_call`, both run by rpjrt with a Python handler.

    python ffi_example.py [PLUGIN]
"""

import sys

import numpy as np

import rpjrt
import rpjrt.ffi

HAND_WRITTEN = """func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.custom_call @example_scale(%x) {api_version = 4 : i32,
      backend_config = {offset = 1.5 : f32}} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""


def main(argv: list[str]) -> int:
    client = rpjrt.Client(argv[1] if len(argv) > 1 else None)
    print("FFI runtime", rpjrt.ffi.runtime_version(client))

    @rpjrt.ffi.handler(client, "example_scale")
    def scale(call: rpjrt.ffi.FfiCall) -> None:
        # Views of the argument and result (valid during the call only).
        k = call.user_data if call.user_data is not None else 2.0
        call.rets[0].to_numpy()[:] = k * call.args[0].to_numpy() + call.attrs["offset"]

    exe = client.compile(HAND_WRITTEN)
    x = np.arange(8, dtype=np.float32)
    y = exe(x)[0].to_numpy()
    assert np.array_equal(y, 2 * x + 1.5)
    print("2x + 1.5 =", y.tolist())
    y = exe(x, ffi_user_data=10.0)[0].to_numpy()
    print("10x + 1.5 (user data) =", y.tolist())

    # Per-instance state: `instantiate` runs once per compiled call site (here at compile
    # time) and what it returns is `call.state` at every execution of that site. It needs
    # the instantiate stage (XLA FFI 0.3+); older runtimes refuse, naming both versions.
    def make_state(call: rpjrt.ffi.FfiCall) -> dict[str, float]:
        return {"offset": call.attrs["offset"], "runs": 0}

    def counted(call: rpjrt.ffi.FfiCall) -> np.ndarray:
        call.state["runs"] += 1
        return call.state["runs"] * call.args[0].to_numpy() + call.state["offset"]

    try:
        rpjrt.ffi.register(client, "example_counted", counted, instantiate=make_state)
    except rpjrt.UnimplementedError as e:
        print("no per-instance state here:", e)
    else:
        counted_exe = client.compile(HAND_WRITTEN.replace("example_scale", "example_counted"))
        for runs in (1, 2):
            y = counted_exe(x)[0].to_numpy()
            assert np.array_equal(y, runs * x + 1.5)
        print("stateful handler, second run (2x + 1.5) =", y.tolist())

    # The same kind of call, lowered by JAX: jax.ffi.ffi_call names the target, and the
    # keyword arguments become the call's attributes.
    import jax
    import jax.numpy as jnp

    def f(a):
        scaled = jax.ffi.ffi_call("example_axpy", jax.ShapeDtypeStruct(a.shape, a.dtype))(
            a, alpha=np.float32(3.0)
        )
        return jnp.sum(scaled, axis=0)

    @rpjrt.ffi.handler(client, "example_axpy")
    def axpy(call: rpjrt.ffi.FfiCall) -> None:
        call.rets[0].to_numpy()[:] = call.attrs["alpha"] * call.args[0].to_numpy()

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    text = jax.jit(f).lower(a).as_text()
    out = client.compile(text)(a)[0].to_numpy()
    np.testing.assert_allclose(out, (3.0 * a).sum(axis=0))
    print("jax.ffi.ffi_call via rpjrt:", out.tolist())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
