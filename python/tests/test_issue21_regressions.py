"""Regressions of an outside attack (issue 21), on both plugins, each case in its own
interpreter (a regression would abort the process: an XLA CHECK on a bad load override, a
zero-size float6 program spelled through an alias)."""

from __future__ import annotations

from .test_attack_regressions import run_case


def test_assemble_refuses_shards_of_another_dtype_or_shape(plugin_path: str) -> None:
    run_case(
        plugin_path,
        r"""
from rpjrt import sharding as sh
mesh = sh.Mesh({"x": 2}, devices=[0, 1])
f, i = np.array([1.5], np.float32), np.array([7], np.int32)
expect(rpjrt.InvalidArgumentError, "shard 1 is int32", sh.assemble, [f, i], mesh, ("x",), (2,))
expect(rpjrt.InvalidArgumentError, "shard 1 has dims [1, 1]", sh.assemble,
       [f, f.reshape(1, 1)], mesh, ("x",), (2,))
assert sh.assemble([f, f], mesh, ("x",), (2,)).tolist() == [1.5, 1.5]
# Buffers too: each shard's own dtype travels with it.
c = rpjrt.Client(plugin)
bufs = [c.put(f), c.put(i)]
expect(rpjrt.InvalidArgumentError, "shard 1 is int32", sh.assemble, bufs, mesh, ("x",), (2,))
print("ok")
""",
    )


def test_load_overrides_are_checked_as_compile_options(plugin_path: str) -> None:
    run_case(
        plugin_path,
        r"""
c = rpjrt.Client(plugin)
data = c.compile(mlir("mul_add.mlir")).serialize()
for bad, fragment in [(-2, "device_ordinal -2"), (-(2**40), "out of range"), (99, "device_ordinal 99")]:
    expect(rpjrt.InvalidArgumentError, fragment, c.load, data, overrides={"device_ordinal": bad})
for name in ["num_replicas", "num_partitions"]:
    expect(rpjrt.InvalidArgumentError, name, c.load, data, overrides={name: 0})
c.load(data, overrides={"device_ordinal": -1})
print("ok")
""",
    )


def test_create_option_names_are_checked(plugin_path: str) -> None:
    run_case(
        plugin_path,
        r"""
for name, fragment in [("", "empty name"), ("a b", "'a b'"), ("x=y", "'x=y'")]:
    expect(rpjrt.InvalidArgumentError, fragment.strip("'"), rpjrt.Client, plugin, options={name: 1})
print("ok")
""",
    )


def test_zero_size_float6_spellings_are_refused(plugin_path: str) -> None:
    run_case(
        plugin_path,
        r"""
c = rpjrt.Client(plugin)
for src in [
    "!e = f6E2M3FN\nfunc.func public @main(%a: tensor<0x3x!e>) -> tensor<0x3x!e> {\n  return %a : tensor<0x3x!e>\n}",
    "func.func public @main(%a: tensor<0 x 3 x f6E3M2FN>) -> tensor<0 x 3 x f6E3M2FN> {\n  return %a : tensor<0 x 3 x f6E3M2FN>\n}",
]:
    expect(rpjrt.InvalidArgumentError, "float6", c.compile, src)
print("ok")
""",
    )
