"""Round 26 of outside checks: custom-call target names XLA interprets itself.

A handler registered under such a name never ran (the compiler treats the call as its own
operation), and some forms of those calls stopped the process at compile. Registration now
refuses the names, and the compile screen refuses the forms that abort (checked in child
processes, so that a regression shows as a crash of the child, not of the test run).
"""

from __future__ import annotations

import itertools
import os
import sys

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

_ids = itertools.count()

RESERVED = [
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "LayoutConstraint",
    "ShardBarrierFrom", "ShardBarrierTo", "SetBound", "TopK", "SliceToDynamic", "PadToStatic",
    "MoveToHost", "MoveToDevice", "annotate_device_placement", "CreateBuffer", "Unpin",
    "xla.sdy.FuncResultSharding", "xla.sdy.PropagationBarrier", "xla.sdy.anything",
    "__onednn$matmul", "__onednn$softmax",
]


def _call(target: str) -> str:
    return (
        "func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        f'  %0 = stablehlo.custom_call @"{target}"(%x) {{api_version = 4 : i32}} '
        ": (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}"
    )


@pytest.mark.parametrize("target", RESERVED)
def test_register_refuses_names_xla_interprets(client: rpjrt.Client, target: str) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError) as e:
        rpjrt.ffi.register(client, target, lambda call: call.args[0].to_numpy() * 3)
    msg = str(e.value)
    assert repr(target).replace("'", '"') in msg and "XLA interprets itself" in msg, msg
    assert "never run" in msg and "choose another" in msg, msg
    assert not rpjrt.ffi.is_registered(client, target)


@pytest.mark.parametrize(
    "base", ["sharding", "TopK2", "xla.sdyx", "xla_sdy.x", "MyMoveToHost", "__onednn", "PinToDevice"]
)
def test_names_close_to_reserved_ones_still_work(client: rpjrt.Client, base: str) -> None:
    target = f"{base}_{os.getpid()}_{next(_ids)}" if base != "PinToDevice" else base
    calls: list[int] = []

    def handler(call):  # type: ignore[no-untyped-def]
        calls.append(1)
        return call.args[0].to_numpy() * 3

    rpjrt.ffi.register(client, target, handler, replace=True)
    y = client.compile(_call(target))(np.arange(4, dtype=np.float32))[0].to_numpy()
    assert calls and y.tolist() == [0.0, 3.0, 6.0, 9.0]


# Programs the CPU plugins abort on (before the screen): (name, text, minimum PJRT minor).
def _one(sig_in: str, body: str, sig_out: str) -> str:
    return f"func.func public @main(%x: {sig_in}) -> {sig_out} {{\n{body}\n}}"


ABORTING = {
    "topk_one_result": _one(
        "tensor<4xf32>",
        "  %0 = stablehlo.custom_call @TopK(%x) {api_version = 4 : i32} : (tensor<4xf32>) -> "
        "tensor<4xf32>\n  return %0 : tensor<4xf32>",
        "tensor<4xf32>",
    ),
    "topk_k_above_n": _one(
        "tensor<4xf32>",
        "  %0:2 = stablehlo.custom_call @TopK(%x) : (tensor<4xf32>) -> (tensor<8xf32>, "
        "tensor<8xi32>)\n  return %0#0 : tensor<8xf32>",
        "tensor<8xf32>",
    ),
    "slice_to_dynamic_static_result": _one(
        "tensor<4xf32>",
        "  %n = stablehlo.constant dense<2> : tensor<i32>\n"
        "  %0 = stablehlo.custom_call @SliceToDynamic(%x, %n) : (tensor<4xf32>, tensor<i32>) "
        "-> tensor<4xf32>\n  return %0 : tensor<4xf32>",
        "tensor<4xf32>",
    ),
    "pad_to_static_one_result": _one(
        "tensor<4xf32>",
        "  %n = stablehlo.constant dense<2> : tensor<i32>\n"
        "  %0 = stablehlo.custom_call @SliceToDynamic(%x, %n) : (tensor<4xf32>, tensor<i32>) "
        "-> tensor<?xf32, #stablehlo.bounds<4>>\n"
        "  %1 = stablehlo.custom_call @PadToStatic(%0) : (tensor<?xf32, #stablehlo.bounds<4>>) "
        "-> tensor<4xf32>\n  return %1 : tensor<4xf32>",
        "tensor<4xf32>",
    ),
    "onednn_matmul": _call("__onednn$matmul"),
    "func_result_sharding_bare": _call("xla.sdy.FuncResultSharding"),
    "func_result_sharding_unknown_mesh": _one(
        "tensor<4xf32>",
        "  %0 = stablehlo.custom_call @xla.sdy.FuncResultSharding(%x) {mhlo.frontend_attributes "
        '= {xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh, [{}]>]>"}} : (tensor<4xf32>) '
        "-> tensor<4xf32>\n  return %0 : tensor<4xf32>",
        "tensor<4xf32>",
    ),
}

_CHILD = """
import sys, rpjrt
client = rpjrt.Client(sys.argv[1])
try:
    client.compile(sys.stdin.read())
    print("COMPILED")
except rpjrt.InvalidArgumentError as e:
    print("REFUSED", e)
"""


def _compile_in_child(plugin_path: str, text: str) -> str:
    import subprocess

    r = subprocess.run(
        [sys.executable, "-c", _CHILD, plugin_path], input=text, capture_output=True,
        text=True, timeout=120,
    )
    assert r.returncode == 0, f"child ended with {r.returncode}: {r.stderr[-800:]}"
    return r.stdout


@pytest.mark.parametrize("case", sorted(ABORTING))
def test_screen_refuses_forms_that_abort(plugin_label: str, plugin_path: str, case: str) -> None:
    out = _compile_in_child(plugin_path, ABORTING[case])
    if case.startswith("func_result_sharding") and plugin_label == "old":
        # PJRT 0.81 compiles these (as an identity); the screen lets them through there.
        assert out.startswith("COMPILED"), out
        return
    assert out.startswith("REFUSED"), out
    assert "XLA interprets itself" in out and "refuses it before compiling" in out, out


def test_topk_in_its_two_result_form_compiles_and_runs(client: rpjrt.Client) -> None:
    text = _one(
        "tensor<4xf32>",
        "  %0:2 = stablehlo.custom_call @TopK(%x) {largest = true} : (tensor<4xf32>) -> "
        "(tensor<2xf32>, tensor<2xi32>)\n  return %0#0, %0#1 : tensor<2xf32>, tensor<2xi32>",
        "(tensor<2xf32>, tensor<2xi32>)",
    )
    v, i = client.compile(text)(np.array([1, 4, 2, 3], np.float32))
    assert v.to_numpy().tolist() == [4.0, 3.0] and i.to_numpy().tolist() == [1, 3]


def test_func_result_sharding_with_mesh_compiles(client: rpjrt.Client) -> None:
    text = (
        'module @m attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh = '
        '#sdy.mesh<[\\"x\\"=1]>}"}} {\n' + ABORTING["func_result_sharding_unknown_mesh"] + "\n}"
    )
    y = client.compile(text)(np.arange(4, dtype=np.float32))[0].to_numpy()
    assert y.tolist() == [0.0, 1.0, 2.0, 3.0]


_JAX = """
import os, re, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import numpy as np, jax, rpjrt
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from rpjrt import sharding as sh
jax.config.update("jax_use_shardy_partitioner", sys.argv[2] == "1")
try:
    from jax import shard_map
except ImportError:
    from jax.experimental.shard_map import shard_map
client = rpjrt.Client(sys.argv[1], options={"cpu_device_count": 4})
mesh = Mesh(np.array(jax.devices()[:4]), ("x",))
x = np.arange(16, dtype=np.float32).reshape(8, 2)
rows = NamedSharding(mesh, P("x"))
progs = {
    "shard_map": jax.jit(shard_map(lambda b: b * 2 + jax.lax.psum(b.sum(), "x"), mesh=mesh,
                                   in_specs=P("x"), out_specs=P("x"))),
    "constraint": jax.jit(lambda a: jax.lax.with_sharding_constraint(a * 3, rows) + 1,
                          in_shardings=rows, out_shardings=rows),
}
for name, f in progs.items():
    text = f.lower(x).as_text()
    exe = client.compile(text, num_partitions=4)
    m = sh.Mesh({"x": 4}, [d.id for d in exe.addressable_devices()])
    (got,) = sh.run_sharded(exe, [x], m, [("x", None)], [("x", None)])
    ok = np.allclose(got, np.asarray(f(x)))
    print(name, sorted(set(re.findall(r"custom_call @([\\w.$]+)", text))), "OK" if ok else "WRONG")
top = jax.jit(lambda a: jax.lax.top_k(a, 1)[0])
got = client.compile(top.lower(x).as_text())(x)[0].to_numpy()
print("top_k", "OK" if np.allclose(got, np.asarray(top(x))) else "WRONG")
"""


@pytest.mark.parametrize("shardy", ["0", "1"])
def test_jax_sharding_programs_still_compile_and_run(plugin_path: str, shardy: str) -> None:
    import subprocess

    r = subprocess.run(
        [sys.executable, "-c", _JAX, plugin_path, shardy], capture_output=True, text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stderr[-1500:]
    lines = r.stdout.splitlines()
    assert [line.split()[-1] for line in lines] == ["OK", "OK", "OK"], r.stdout
    if shardy == "0":
        # GSPMD lowering: the markers XLA interprets itself pass the screen.
        assert "SPMDFullToShardShape" in lines[0] and "Sharding" in lines[1], r.stdout


def test_screen_reads_target_names_from_bytecode(plugin_path: str) -> None:
    # Plain MLIR bytecode and a portable artifact: shapes are not read there, so TopK is
    # refused in any form (here k above n, which reads past the operand), asking for text.
    code = """
import io, sys, rpjrt
from jax._src.interpreters import mlir as jm
from jax._src.lib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as shlo
text = sys.stdin.read()
with jm.make_ir_context():
    m = ir.Module.parse(text)
    b = io.BytesIO(); m.operation.write_bytecode(b)
    port = shlo.serialize_portable_artifact_str(str(m), shlo.get_minimum_version())
c = rpjrt.Client(sys.argv[1])
for code in (b.getvalue(), port if isinstance(port, bytes) else port.encode("latin1")):
    try:
        c.compile(code); print("COMPILED")
    except rpjrt.InvalidArgumentError as e:
        print("REFUSED", e)
"""
    import subprocess

    r = subprocess.run(
        [sys.executable, "-c", code, plugin_path], input=ABORTING["topk_k_above_n"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr[-800:]
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and all("@TopK" in x and "MLIR text" in x for x in lines), r.stdout
