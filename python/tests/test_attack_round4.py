"""Regressions of the fourth round of attacks on the newer half (custom calls, compile-once),
on both plugins. Before its fix, each crashed the process or gave a wrong answer silently."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi
import rpjrt.sharding

_names = itertools.count()


def _target(stem: str) -> str:
    # Targets are registered per plugin for the whole process: a fresh name per test.
    return f"attack4_{stem}_{next(_names)}"


@pytest.mark.parametrize(
    "config",
    ["{v = 3 : index}", "{d = {a = 3 : index}}", '{s = "}", v = 3 :index}', "{a = [1 : i64, 2 : index]}"],
)
def test_an_index_typed_attribute_of_a_handled_call_is_refused_not_a_crash(client: rpjrt.Client, config: str) -> None:
    # The compilers crash the process decoding FFI attributes of type index.
    target = _target("index")
    rpjrt.ffi.register(client, target, lambda call: call.args[0].to_numpy())
    program = f"""func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32,
      backend_config = {config}}} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}}"""
    with pytest.raises(rpjrt.InvalidArgumentError, match=f"@{target}.*index-typed attribute"):
        client.compile(program)
    # The same call with an integer attribute compiles and runs.
    exe = client.compile(program.replace(config, "{v = 3 : i64}"))
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(exe(x)[0].to_numpy(), x)


_ALIASED = """func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = stablehlo.add %x, %x : tensor<8xf32>
  %0 = stablehlo.custom_call @TARGET(%y) {api_version = 4 : i32,
      output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [],
                                operand_index = 0, operand_tuple_indices = []>]}
      : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}"""


def test_an_in_place_result_view_starts_with_the_arguments_values(client: rpjrt.Client) -> None:
    target = _target("inplace")

    def bump(call: rpjrt.ffi.FfiCall) -> None:
        view = call.rets[0].to_numpy()
        seen.append(view.copy())
        view[:2] = 100

    seen: list[np.ndarray] = []
    rpjrt.ffi.register(client, target, bump)
    x = np.arange(8, dtype=np.float32)
    out = client.compile(_ALIASED.replace("TARGET", target))(x)[0].to_numpy()
    np.testing.assert_array_equal(seen[0], 2 * x)
    np.testing.assert_array_equal(out, np.r_[100, 100, 2 * x[2:]].astype(np.float32))


def test_an_in_place_result_left_alone_passes_the_argument_through(client: rpjrt.Client) -> None:
    target = _target("inplace_alone")
    rpjrt.ffi.register(client, target, lambda call: None)
    x = np.arange(8, dtype=np.float32)
    out = client.compile(_ALIASED.replace("TARGET", target))(x)[0].to_numpy()
    np.testing.assert_array_equal(out, 2 * x)


def test_a_result_the_handler_never_writes_is_zeros_not_leftover_memory(client: rpjrt.Client) -> None:
    target = _target("unwritten")

    def second_only(call: rpjrt.ffi.FfiCall) -> None:
        call.rets[1].to_numpy()[:] = 7

    rpjrt.ffi.register(client, target, second_only)
    program = f"""func.func public @main(%x: tensor<4096xf32>) -> (tensor<4096xf32>, tensor<2xi32>) {{
  %0:2 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}}
      : (tensor<4096xf32>) -> (tensor<4096xf32>, tensor<2xi32>)
  return %0#0, %0#1 : tensor<4096xf32>, tensor<2xi32>
}}"""
    exe = client.compile(program)
    # Leave garbage where the runtime will place results: big temporaries, then free them.
    junk = np.full(4096, np.nan, dtype=np.float32)
    for _ in range(5):
        for b in [client.put(junk) for _ in range(8)]:
            b.delete()
        r0, r1 = exe(np.ones(4096, dtype=np.float32))
        assert not np.any(r0.to_numpy()), r0.to_numpy()[:8]
        np.testing.assert_array_equal(r1.to_numpy(), [7, 7])


@pytest.mark.parametrize(("axes", "devices"), [({"x": 2.7}, [0, 1]), ({"x": 2}, [0, 1.9]), ({"x": True}, [0])])
def test_mesh_sizes_and_device_ids_are_integers_not_rounded(axes: dict[str, object], devices: list[object]) -> None:
    with pytest.raises(TypeError, match="must be an integer"):
        rpjrt.sharding.Mesh(axes, devices=devices)  # type: ignore[arg-type]
    # numpy integers are integers.
    assert rpjrt.sharding.Mesh({"x": np.int64(2)}, devices=[np.int32(0), 1]).shape == {"x": 2}  # type: ignore[dict-item]


def test_a_dlpack_producer_that_refuses_is_named_with_its_reason(client: rpjrt.Client) -> None:
    class Refuses:
        def __dlpack__(self, **kwargs: object) -> object:
            raise BufferError("this producer cannot export bfloat16")

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    with pytest.raises(rpjrt.InvalidArgumentError, match="refused to export it \\(this producer cannot export bfloat16\\)") as e:
        client.put(Refuses())
    assert isinstance(e.value.__cause__, BufferError)


def test_an_integer_beyond_64_bits_gets_no_cast_hint(client: rpjrt.Client) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match="nor in 64 bits") as e:
        client.put([2**64, 1], dtype="int32")
    assert "cast=True" not in str(e.value)
    with pytest.raises(rpjrt.InvalidArgumentError, match="cast=True wraps"):
        client.put([2**63, 1], dtype="int32")
