"""Round 27 of outside checks: custom calls (FFI).

1. A custom call in a region of reduce, reduce_window, scatter, select_and_scatter or map
   stopped the process at compile on both CPU plugins (and failed with unrelated errors in
   a sort comparator or an all_reduce / reduce_scatter computation). The compile screen now
   refuses a custom call in any region of those operations, at any depth and through called
   functions, in text and bytecode; while / if / case bodies and called functions still
   work. Compiles run in child processes, so a regression shows as a crashed child.
2. One result aliased to two operands (or two tuple elements) handed the handler the second
   operand's values for the first; now refused before the handler runs.
3. The error after stateful -> stateless -> stateful replacement named the wrong cause.
4. A newer-major FFI runtime gave a false "newer than the runtime's" message.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi
from .conftest import fake_plugin_path

_ids = itertools.count()

CC = (
    "stablehlo.custom_call @r27_cc(%a, %b) {api_version = 4 : i32} "
    ": (tensor<f32>, tensor<f32>) -> tensor<f32>"
)
BODY = "^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    %s = " + CC + "\n    stablehlo.return %s : tensor<f32>"
ADD = "^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    %s = stablehlo.add %a, %b : tensor<f32>\n    stablehlo.return %s : tensor<f32>"
CMP = (
    "^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    %s = " + CC + "\n    %c = stablehlo.compare GT, "
    "%s, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>\n    stablehlo.return %c : tensor<i1>"
)
GE = (
    "^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    %c = stablehlo.compare GE, %a, %b : "
    "(tensor<f32>, tensor<f32>) -> tensor<i1>\n    stablehlo.return %c : tensor<i1>"
)
HELPER = (
    "func.func private @r27_helper(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {\n  %s = "
    + CC + "\n  return %s : tensor<f32>\n}\n"
)
VIA_CALL = (
    "^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    %s = func.call @r27_helper(%a, %b) : "
    "(tensor<f32>, tensor<f32>) -> tensor<f32>\n    stablehlo.return %s : tensor<f32>"
)
IN_WHILE = (
    "^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    %s = stablehlo.while(%i = %a) : tensor<f32>\n"
    "     cond {\n      %c = stablehlo.compare LT, %i, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>\n"
    "      stablehlo.return %c : tensor<i1>\n     } do {\n      %k = stablehlo.custom_call "
    "@r27_cc(%i, %b) {api_version = 4 : i32} : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
    "      stablehlo.return %k : tensor<f32>\n     }\n    stablehlo.return %s : tensor<f32>"
)
REDUCE = """func.func public @main(%x: tensor<8xf32>) -> tensor<f32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = "stablehlo.reduce"(%x, %z) ({ BODY }) {dimensions = array<i64: 0>}
       : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
  return %r : tensor<f32> }"""
SAS = """func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %src = stablehlo.constant dense<1.0> : tensor<4xf32>
  %r = "stablehlo.select_and_scatter"(%x, %src, %z) ({ SEL }, { SCA })
       {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>}
       : (tensor<8xf32>, tensor<4xf32>, tensor<f32>) -> tensor<8xf32>
  return %r : tensor<8xf32> }"""
COLLECTIVE = """func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = "stablehlo.OP"(%x) ({ BODY }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>EXTRA}
       : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32> }"""

# Each case: (program, the enclosing operation the refusal names).
REFUSED = {
    "reduce": (REDUCE.replace("BODY", BODY), "stablehlo.reduce"),
    "reduce_window": (
        """func.func public @main(%x: tensor<8xf32>) -> tensor<4xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = "stablehlo.reduce_window"(%x, %z) ({ BODY })
       {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>}
       : (tensor<8xf32>, tensor<f32>) -> tensor<4xf32>
  return %r : tensor<4xf32> }""".replace("BODY", BODY),
        "stablehlo.reduce_window",
    ),
    "scatter": (
        """func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %i = stablehlo.constant dense<[[1], [3]]> : tensor<2x1xi32>
  %u = stablehlo.constant dense<[10.0, 20.0]> : tensor<2xf32>
  %r = "stablehlo.scatter"(%x, %i, %u) ({ BODY }) {scatter_dimension_numbers =
       #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
       index_vector_dim = 1>} : (tensor<8xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32> }""".replace("BODY", BODY),
        "stablehlo.scatter",
    ),
    "select_and_scatter_select": (
        SAS.replace("SEL", CMP).replace("SCA", ADD), "stablehlo.select_and_scatter"
    ),
    "select_and_scatter_scatter": (
        SAS.replace("SEL", GE).replace("SCA", BODY), "stablehlo.select_and_scatter"
    ),
    "map": (
        """func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = "stablehlo.map"(%x, %x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = CC
    %t = stablehlo.multiply %s, %a : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }) {dimensions = array<i64: 0>} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32> }""".replace("CC", CC),
        "stablehlo.map",
    ),
    # Compiles, but XLA hands the handler the whole f32[8] arrays, not the scalars the
    # program declares.
    "map_call_only": (
        """func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = "stablehlo.map"(%x, %x) ({ BODY }) {dimensions = array<i64: 0>}
       : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32> }""".replace("BODY", BODY),
        "stablehlo.map",
    ),
    "sort": (
        """func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = "stablehlo.sort"(%x) ({ CMP }) {dimension = 0 : i64, is_stable = true}
       : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32> }""".replace("CMP", CMP),
        "stablehlo.sort",
    ),
    "all_reduce": (
        COLLECTIVE.replace("OP", "all_reduce").replace("EXTRA", "").replace("BODY", BODY),
        "stablehlo.all_reduce",
    ),
    "reduce_scatter": (
        COLLECTIVE.replace("OP", "reduce_scatter")
        .replace("EXTRA", ", scatter_dimension = 0 : i64")
        .replace("BODY", BODY),
        "stablehlo.reduce_scatter",
    ),
    "reduce_through_a_call": (HELPER + REDUCE.replace("BODY", VIA_CALL), "stablehlo.reduce"),
    "reduce_around_a_while": (REDUCE.replace("BODY", IN_WHILE), "stablehlo.reduce"),
    "reduce_generic_custom_call": (
        REDUCE.replace("BODY", BODY).replace(
            "stablehlo.custom_call @r27_cc(%a, %b) {",
            '"stablehlo.custom_call"(%a, %b) {call_target_name = "r27_cc", ',
        ),
        "stablehlo.reduce",
    ),
}

_CHILD = r"""
import sys, numpy as np, rpjrt, rpjrt.ffi
client = rpjrt.Client(sys.argv[1])
rpjrt.ffi.register(client, "r27_cc", lambda call: call.args[0].to_numpy() + call.args[1].to_numpy())
code = sys.stdin.buffer.read()
forms = [code]
if sys.argv[2] == "hlo":
    from jax._src.lib import xla_client as xc
    comp = xc._xla.mlir.mlir_module_to_xla_computation(code.decode(), use_tuple_args=False, return_tuple=False)
    forms = [comp.as_serialized_hlo_module_proto()]
if sys.argv[2] == "bytecode":
    import io
    from jax._src.interpreters import mlir as jm
    from jax._src.lib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo as shlo
    with jm.make_ir_context():
        m = ir.Module.parse(code.decode())
        b = io.BytesIO(); m.operation.write_bytecode(b)
        port = shlo.serialize_portable_artifact_str(str(m), "1.10.0")
    forms = [b.getvalue(), port if isinstance(port, bytes) else port.encode("latin1")]
for form in forms:
    try:
        exe = client.compile(form, format="hlo" if sys.argv[2] == "hlo" else None)
    except rpjrt.InvalidArgumentError as e:
        print("REFUSED", str(e).replace("\n", " "))
        continue
    except rpjrt.Error as e:
        print("FAILED", type(e).__name__, str(e).replace("\n", " ")[:300])
        continue
    args = [np.float32(1.0) if n == "s" else np.arange(int(n), dtype=np.float32) for n in sys.argv[3:]]
    print("RAN", [o.to_numpy().tolist() for o in exe(*args)])
"""


def _child(plugin_path: str, text: str, form: str = "text", *arg_sizes: str) -> list[str]:
    """Compiles `text` (as text, or as plain bytecode and a portable artifact) in a child
    with @r27_cc registered (a + b), and runs it on aranges of `arg_sizes` ("s": 1.0)."""
    r = subprocess.run(
        [sys.executable, "-c", _CHILD, plugin_path, form, *arg_sizes],
        input=text.encode(), capture_output=True, timeout=120,
    )
    assert r.returncode == 0, f"child ended with {r.returncode}: {r.stderr.decode()[-800:]}"
    return r.stdout.decode().splitlines()


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_custom_calls_in_reducer_regions_are_refused(plugin_path: str, case: str) -> None:
    text, op = REFUSED[case]
    [out] = _child(plugin_path, text)
    assert out.startswith("REFUSED"), out
    assert "@r27_cc" in out and f"region of {op}" in out, out
    assert "refuses it before compiling" in out, out
    if case == "reduce_through_a_call":
        assert "@r27_helper" in out, out


@pytest.mark.parametrize("case", ["reduce", "sort", "reduce_through_a_call"])
def test_custom_calls_in_reducer_regions_are_refused_in_bytecode(plugin_path: str, case: str) -> None:
    text, op = REFUSED[case]
    outs = _child(plugin_path, text, "bytecode")
    assert len(outs) == 2, outs
    for out in outs:
        assert out.startswith("REFUSED") and f"region of {op}" in out, out


@pytest.mark.parametrize("case", ["reduce", "map_call_only", "reduce_through_a_call", "scatter"])
def test_custom_calls_in_reducer_computations_are_refused_in_hlo(plugin_path: str, case: str) -> None:
    text, op = REFUSED[case]
    [out] = _child(plugin_path, text, "hlo")
    assert out.startswith("REFUSED") and f"@r27_cc sits in a region of {op}" in out, out


WHILE = """func.func public @main(%x: tensor<f32>) -> tensor<f32> {
  %i = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%a = %i, %b = %x) : tensor<i32>, tensor<f32>
   cond {
    %t = stablehlo.constant dense<3> : tensor<i32>
    %c = stablehlo.compare LT, %a, %t : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
   } do {
    %o = stablehlo.constant dense<1> : tensor<i32>
    %n = stablehlo.add %a, %o : tensor<i32>
    %s = stablehlo.custom_call @r27_cc(%b, %b) {api_version = 4 : i32} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    stablehlo.return %n, %s : tensor<i32>, tensor<f32>
   }
  return %r#1 : tensor<f32> }"""

IF = """func.func public @main(%x: tensor<f32>) -> tensor<f32> {
  %p = stablehlo.constant dense<true> : tensor<i1>
  %r = "stablehlo.if"(%p) ({
    %s = stablehlo.custom_call @r27_cc(%x, %x) {api_version = 4 : i32} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    stablehlo.return %s : tensor<f32>
  }, {
    stablehlo.return %x : tensor<f32>
  }) : (tensor<i1>) -> tensor<f32>
  return %r : tensor<f32> }"""

# A reduce with a plain body, a custom call on its result, and one in a function the
# reduce does not call.
BESIDE = HELPER + """func.func public @main(%x: tensor<8xf32>) -> tensor<f32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = "stablehlo.reduce"(%x, %z) ({ ADD }) {dimensions = array<i64: 0>}
       : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
  %s = stablehlo.custom_call @r27_cc(%r, %r) {api_version = 4 : i32} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %h = func.call @r27_helper(%s, %z) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %h : tensor<f32> }""".replace("ADD", ADD)


@pytest.mark.parametrize(
    "case, text, args, want",
    [
        ("while", WHILE, ["s"], [8.0]),  # 1 doubled three times
        ("if", IF, ["s"], [2.0]),
        ("beside", BESIDE, ["8"], [56.0]),  # sum(0..7) = 28, doubled
    ],
)
def test_custom_calls_outside_reducer_regions_still_run(
    plugin_path: str, case: str, text: str, args: list[str], want: list[float]
) -> None:
    [out] = _child(plugin_path, text, "text", *args)
    assert out == f"RAN {want}", out


def test_custom_calls_outside_reducer_computations_still_run_from_hlo(plugin_path: str) -> None:
    assert _child(plugin_path, WHILE, "hlo", "s") == ["RAN [8.0]"]
    assert _child(plugin_path, BESIDE, "hlo", "8") == ["RAN [56.0]"]


def test_while_body_custom_call_in_bytecode_still_compiles(plugin_path: str) -> None:
    outs = _child(plugin_path, WHILE, "bytecode", "s")
    # The portable artifact runs everywhere; plain bytecode from a newer MLIR may be
    # unreadable to a plugin (its own error), but it is never refused by the screen.
    assert outs[1] == "RAN [8.0]", outs
    assert not outs[0].startswith("REFUSED"), outs


# --- 2: one result aliased to two operands ------------------------------------------------


def _alias(out: int, operand: int, element: str = "") -> str:
    return (
        f"#stablehlo.output_operand_alias<output_tuple_indices = [{out}], operand_index = "
        f"{operand}, operand_tuple_indices = [{element}]>"
    )


def _two_results(target: str, operands: str, types: str, aliases: list[str], pre: str = "") -> str:
    return f"""func.func public @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {{{pre}
  %0:2 = stablehlo.custom_call @{target}({operands}) {{api_version = 4 : i32,
      output_operand_aliases = [{", ".join(aliases)}]}} : ({types}) -> (tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
}}"""


def test_one_result_aliased_to_two_operands_is_refused(client: rpjrt.Client) -> None:
    target = f"r27_alias2_{os.getpid()}_{next(_ids)}"
    ran: list[int] = []

    def h(call):  # type: ignore[no-untyped-def]
        ran.append(1)
        return (call.args[0].to_numpy() * 1, call.args[1].to_numpy() * 1)

    rpjrt.ffi.register(client, target, h)
    t4 = "tensor<4xf32>"
    tup = f"tuple<{t4}, {t4}>"
    x = np.arange(4, dtype=np.float32)
    for text in [
        _two_results(target, "%x, %y", f"{t4}, {t4}", [_alias(0, 0), _alias(0, 1)]),
        _two_results(
            target, "%t", tup, [_alias(0, 0, "0"), _alias(0, 0, "1")],
            pre=f"\n  %t = stablehlo.tuple %x, %y : {tup}",
        ),
    ]:
        with pytest.raises(rpjrt.InvalidArgumentError) as e:
            client.compile(text)(x, x + 10)
        msg = str(e.value)
        assert target in msg and "result 0 aliases both operand 0 and operand 1" in msg, msg
        assert "alias each result to one operand at most" in msg, msg
    assert ran == []


def test_an_operand_passed_twice_with_one_alias_still_works(client: rpjrt.Client) -> None:
    target = f"r27_alias1_{os.getpid()}_{next(_ids)}"
    seen: list[list[list[float]]] = []

    def h(call):  # type: ignore[no-untyped-def]
        a, b = (a.to_numpy() for a in call.args)
        seen.append([a.tolist(), b.tolist()])
        return a + b

    rpjrt.ffi.register(client, target, h)
    x = np.arange(4, dtype=np.float32)
    for operand in (0, 1):
        text = f"""func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.custom_call @{target}(%x, %x) {{api_version = 4 : i32,
      output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [],
      operand_index = {operand}, operand_tuple_indices = []>]}}
      : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}"""
        out = client.compile(text)(x)[0].to_numpy()
        np.testing.assert_array_equal(out, 2 * x)
        assert seen[-1] == [x.tolist(), x.tolist()]


# --- 3: stateful -> stateless -> stateful ---------------------------------------------------


def test_state_lost_to_a_stateless_replacement_says_compile_again(
    plugin_paths_all: dict[str, str],
) -> None:
    # Instance state needs XLA FFI 0.3: the PJRT 0.115 plugin.
    client = rpjrt.Client(plugin_paths_all["new"])
    target = f"r27_flip_{os.getpid()}_{next(_ids)}"
    text = f"""func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}"""
    run = lambda call: call.args[0].to_numpy() * call.state  # noqa: E731
    x = np.arange(4, dtype=np.float32)
    rpjrt.ffi.register(client, target, run, instantiate=lambda call: 2.0)
    rpjrt.ffi.register(client, target, lambda call: call.args[0].to_numpy(), replace=True)
    exe = client.compile(text)
    rpjrt.ffi.register(client, target, run, instantiate=lambda call: 3.0, replace=True)
    with pytest.raises(rpjrt.FailedPreconditionError) as e:
        exe(x)
    msg = str(e.value)
    assert "compiled while a handler without state was registered" in msg, msg
    assert "compile the program again" in msg and "first registered" not in msg, msg
    # The remedy works.
    np.testing.assert_array_equal(client.compile(text)(x)[0].to_numpy(), 3 * x)


# --- 4: FFI runtime versions -------------------------------------------------------------


@pytest.mark.parametrize(
    "version, says",
    [
        ("1.0", "their major versions differ (0 vs 1)"),
        ("99.99", "their major versions differ (0 vs 99)"),
        ("-1.5", "not a valid version"),
    ],
)
def test_ffi_version_refusals_state_the_real_reason(version: str, says: str) -> None:
    plugin = str(fake_plugin_path())
    code = f"""
import rpjrt, rpjrt.ffi
P = rpjrt.Plugin({plugin!r})
try:
    print("REGISTERED", rpjrt.ffi.register(P, "r27_major", lambda call: None))
except rpjrt.Error as e:
    print("REFUSED", type(e).__name__, str(e).replace(chr(10), " "))
"""
    env = dict(os.environ, RPJRT_FAKE_FFI_VERSION=version, RPJRT_FAKE_FFI="ok")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr[-800:]
    out = r.stdout.strip()
    assert out.startswith("REFUSED FailedPreconditionError"), out
    assert says in out and "newer than the runtime" not in out, out
    assert "its own version check" in out and f"XLA FFI {version}" in out, out
