"""Programs the plugins' compilers abort the process on are refused before compiling.

Every case here aborted one of the CPU plugins (a failed CHECK inside XLA) before rpjrt
screened programs; each must now come back as InvalidArgumentError naming the element
type, in text, plain MLIR bytecode and StableHLO portable-artifact form. The compiles run
in a child process, so a case that slips through fails this test instead of killing the
test runner. Programs next to them that the plugins handle must still compile.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

F6 = ["f6E2M3FN", "f6E3M2FN"]
I2 = ["i2", "ui2"]


def _unary(op: str, t: str, shape: str = "4x") -> str:
    ty = f"tensor<{shape}{t}>"
    return f"func.func public @main(%a: {ty}) -> {ty} {{\n  %r = stablehlo.{op} %a : {ty}\n  return %r : {ty}\n}}\n"


def _concat(t: str) -> str:
    a, r = f"tensor<2x3x{t}>", f"tensor<2x6x{t}>"
    return (
        f"func.func public @main(%a: {a}) -> {r} {{\n"
        f"  %r = stablehlo.concatenate %a, %a, dim = 1 : ({a}, {a}) -> {r}\n  return %r : {r}\n}}\n"
    )


def _sort(t: str) -> str:
    ty, s = f"tensor<4x{t}>", f"tensor<{t}>"
    return (
        f"func.func public @main(%a: {ty}) -> {ty} {{\n"
        f'  %r = "stablehlo.sort"(%a) ({{\n  ^bb0(%x: {s}, %y: {s}):\n'
        f"    %c = stablehlo.compare LT, %x, %y : ({s}, {s}) -> tensor<i1>\n"
        f"    stablehlo.return %c : tensor<i1>\n  }}) {{dimension = 0 : i64}} : ({ty}) -> {ty}\n"
        f"  return %r : {ty}\n}}\n"
    )


def _constant(t: str) -> str:
    ty = f"tensor<2x{t}>"
    return f"func.func public @main() -> {ty} {{\n  %c = stablehlo.constant dense<1.0> : {ty}\n  return %c : {ty}\n}}\n"


def _identity(t: str, shape: str) -> str:
    ty = f"tensor<{shape}{t}>"
    return f"func.func public @main(%a: {ty}) -> {ty} {{\n  return %a : {ty}\n}}\n"


def cases() -> list[tuple[str, str, str]]:
    """(name, program text, expectation): expectation is 'refused' or 'compiles' (on the
    0.115 plugin; on 0.81 every float6 program is refused for its PJRT version)."""
    out = []
    for t in F6:
        out += [
            (f"{t} zero-size identity", _identity(t, "0x3x"), "refused"),
            (f"{t} zero-size abs", _unary("abs", t, "0x4x"), "refused"),
            (f"{t} constant", _constant(t), "refused"),
            (f"{t} concatenate", _concat(t), "refused"),
            (f"{t} sort", _sort(t), "refused"),
            (f"{t} identity", _identity(t, "2x3x"), "compiles"),
            (f"{t} abs", _unary("abs", t, "4x"), "compiles"),
        ]
    for t in I2:
        out += [
            (f"{t} concatenate", _concat(t), "refused"),
            (f"{t} negate", _unary("negate", t), "compiles"),
        ]
    out.append(("i4 concatenate", _concat("i4"), "compiles"))
    return out


def _bytecode(text: str) -> tuple[bytes, bytes] | None:
    """The program as plain MLIR bytecode and as a portable artifact, written by jaxlib's
    MLIR; None where this jaxlib cannot write the type."""
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    with jax_mlir.make_ir_context():
        module = ir.Module.parse(text)
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
        try:
            portable = stablehlo.serialize_portable_artifact_str(str(module), stablehlo.get_current_version())
        except ValueError:
            return None
    raw = portable.encode("latin1") if isinstance(portable, str) else bytes(portable)
    return buf.getvalue(), raw


CHILD = """
import json, sys, rpjrt
client = rpjrt.Client(sys.argv[1])
results = {}
for name, path in json.load(open(sys.argv[2])).items():
    code = open(path, "rb").read()
    try:
        client.compile(code)
        results[name] = "compiled"
    except rpjrt.Error as e:
        results[name] = type(e).__name__ + ": " + str(e)
    print(name, flush=True)  # the last name printed is the one that aborted, if any
json.dump(results, open(sys.argv[3], "w"))
"""


@pytest.mark.parametrize("label", ["old", "new"])
def test_known_aborts_are_refused(label: str, plugin_paths_all: dict[str, str], tmp_path: Path) -> None:
    want = {}
    files = {}
    for name, text, expect in cases():
        forms = {"text": text.encode()}
        bc = _bytecode(text)
        if bc is not None:
            forms["bytecode"], forms["portable"] = bc
        for form, code in forms.items():
            key = f"{name} [{form}]"
            path = tmp_path / f"p{len(files)}.mlir"
            path.write_bytes(code)
            files[key] = str(path)
            too_new = label == "old" and name.startswith("f6")
            want[key] = "refused" if too_new else expect
    listing = tmp_path / "programs.json"
    listing.write_text(json.dumps(files))
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, plugin_paths_all[label], str(listing), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"the child died after {proc.stdout.splitlines()[-1:]}: {proc.stderr[-3000:]}"
    got = json.loads(out.read_text())
    assert any(k.endswith("[portable]") for k in got), "no bytecode forms were tried"
    for key, expect in want.items():
        result = got[key]
        if expect == "refused":
            assert result.startswith("InvalidArgumentError") and "rpjrt refuses it before compiling" in result, (
                key,
                result,
            )
            type_name = key.split()[0]
            assert "float6" in result if type_name.startswith("f6") else "int2" in result, (key, result)
        else:
            assert result == "compiled", (key, result)
