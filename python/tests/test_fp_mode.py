"""A result does not depend on where XLA computes it, and text an older plugin's parser
refuses still compiles.

1. XLA folds constant expressions while compiling, on the thread that calls compile; its CPU
   runtime flushes subnormals to zero. rpjrt compiles under the runtime's mode, so a folded
   ``ceil(1e-40)`` gives what the same operation on an argument gives, and what JAX gives;
   the caller's own floating-point mode is unchanged afterwards.
2. The 0.81 plugin's StableHLO 1.13.3 parser refuses an i1 constant in hex with one byte per
   element (today's printer's form); ``Client.compile`` hands it a portable artifact for the
   plugin's version instead (jaxlib), or, without a serializer, raises an error naming the
   version and the way out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rpjrt

import jax  # a test dependency: it must be installed (a skip would count as a failure)
import jax.numpy as jnp
import ml_dtypes

CASES = [
    ("bf16", ml_dtypes.bfloat16, "1.0e-40"),
    ("f32", np.float32, "1.0e-40"),
    ("f64", np.float64, "1.0e-310"),
]


def _program(ty: str, value: str | None) -> str:
    if value is None:
        params, x = f"%x: tensor<{ty}>", ""
    else:
        params, x = "", f"%x = stablehlo.constant dense<{value}> : tensor<{ty}>\n  "
    return f"""func.func public @main({params}) -> (tensor<{ty}>, tensor<{ty}>, tensor<{ty}>) {{
  {x}%n = stablehlo.negate %x : tensor<{ty}>
  %0 = stablehlo.ceil %x : tensor<{ty}>
  %1 = stablehlo.floor %n : tensor<{ty}>
  %2 = stablehlo.tanh %x : tensor<{ty}>
  return %0, %1, %2 : tensor<{ty}>, tensor<{ty}>, tensor<{ty}>
}}
"""


def _ops(x: Any) -> Any:
    return jnp.ceil(x), jnp.floor(-x), jnp.tanh(x)


def _bits(values: Any) -> list[bytes]:
    return [np.asarray(v).tobytes() for v in values]


def _caller_keeps_subnormals() -> bool:
    # numpy computes on this thread: under FTZ/DAZ both products would be 0.
    return bool(np.float64(1e-310) * np.float64(1.0) > 0) and bool(
        np.float32(1e-40) * np.float32(1.0) > 0
    )


@pytest.mark.parametrize("ty,dtype,text", CASES, ids=[c[0] for c in CASES])
def test_folded_and_runtime_subnormals_agree_with_jax(
    client: rpjrt.Client, ty: str, dtype: Any, text: str
) -> None:
    assert _caller_keeps_subnormals()
    x = np.array(float(text), dtype=dtype)
    assert x != 0, "the input is a subnormal, not zero"
    with jax.enable_x64(True):
        arg = jnp.asarray(x)
        jax_runtime = _bits(jax.jit(_ops)(arg))
        jax_folded = _bits(jax.jit(lambda: _ops(jnp.asarray(x)))())
    assert jax_runtime == jax_folded, "JAX itself agrees"

    folded = client.compile(_program(ty, text))
    assert _caller_keeps_subnormals(), "compile left this thread flushing subnormals"
    runtime = client.compile(_program(ty, None))
    got_folded = _bits(b.to_numpy() for b in folded())
    got_runtime = _bits(b.to_numpy() for b in runtime(x))
    assert got_folded == got_runtime
    assert got_folded == jax_folded
    # ceil of a flushed subnormal is 0 (IEEE arithmetic would give 1).
    assert folded()[0].to_numpy() == 0

    loaded = client.load(folded.serialize())
    assert _caller_keeps_subnormals(), "load left this thread flushing subnormals"
    assert _bits(b.to_numpy() for b in loaded()) == jax_folded


HEX_I1 = """func.func public @main() -> tensor<10x10xi8> {{
  %c = stablehlo.constant dense<"0x{hex}"> : tensor<10x10xi1>
  %r = stablehlo.convert %c : (tensor<10x10xi1>) -> tensor<10x10xi8>
  return %r : tensor<10x10xi8>
}}
"""

FLAGS = (np.arange(100) % 3 == 0).reshape(10, 10)


def test_hex_i1_text_runs_on_both_plugins(client: rpjrt.Client) -> None:
    text = HEX_I1.format(hex="".join("01" if f else "00" for f in FLAGS.flat))
    exe = client.compile(text)
    out = exe()[0].to_numpy()
    np.testing.assert_array_equal(out, FLAGS.astype(np.int8))
    # The same as JAX on its own CPU backend.
    np.testing.assert_array_equal(out, np.asarray(jnp.asarray(FLAGS).astype(jnp.int8)))


def test_without_a_serializer_the_error_names_the_version_and_the_way_out(
    plugin_paths_all: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rpjrt._stablehlo

    monkeypatch.setattr(rpjrt._stablehlo, "to_portable", lambda text, target: None)
    text = HEX_I1.format(hex="".join("01" if f else "00" for f in FLAGS.flat))
    with rpjrt.Client(plugin_paths_all["old"]) as old:
        with pytest.raises(rpjrt.Error) as e:
            old.compile(text)
    msg = str(e.value)
    for needle in [
        "StableHLO 1.13.3",
        'serialize_portable_artifact_str(text, "1.13.3")',
        "stablehlo-translate --serialize --target=1.13.3",
        "elements hex data size is invalid",
    ]:
        assert needle in msg, (needle, msg)


def test_to_portable_targets_the_given_version() -> None:
    import rpjrt._stablehlo

    text = HEX_I1.format(hex="".join("01" if f else "00" for f in FLAGS.flat))
    art = rpjrt._stablehlo.to_portable(text, "1.13.3")
    assert art is not None and art.startswith(b"ML\xefR")
    assert art[: len(b"ML\xefR") + 1 + len(b"StableHLO_v1.13.3")].endswith(b"StableHLO_v1.13.3")
    assert rpjrt._stablehlo.to_portable("this is not StableHLO", "1.13.3") is None
