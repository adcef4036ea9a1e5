"""Round 14 regressions: sub-byte custom-call results returned by a Python handler, a plugin
that hangs in PJRT_Client_Destroy at interpreter exit, and plugin timeouts that name the
entry that did not return."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi

from .conftest import fake_plugin_path, run_python

ml_dtypes = pytest.importorskip("ml_dtypes")

_ids = itertools.count()

# (mlir type, dtype, values covering the type's whole range)
SUB_BYTE = [
    ("i4", ml_dtypes.int4, [-8, -7, -1, 0, 3, 7, -2]),
    ("ui4", ml_dtypes.uint4, [0, 15, 1, 8, 7, 3, 9]),
    ("i2", ml_dtypes.int2, [-2, -1, 0, 1, 1, -2, 0]),
    ("ui2", ml_dtypes.uint2, [0, 1, 2, 3, 3, 0, 2]),
]


def _program(target: str, mlir: str, n: int, results: int = 1) -> str:
    t = f"tensor<{n}x{mlir}>"
    outs = ", ".join([t] * results)
    names = ", ".join(f"%0#{k}" if results > 1 else "%0" for k in range(results))
    return f"""func.func public @main(%a: {t}) -> ({outs}) {{
  %0{':' + str(results) if results > 1 else ''} = stablehlo.custom_call @{target}(%a) {{api_version = 4 : i32}} : ({t}) -> ({outs})
  return {names} : {outs}
}}
"""


@pytest.mark.parametrize(("mlir", "dtype", "values"), SUB_BYTE, ids=[s[0] for s in SUB_BYTE])
def test_a_handler_returns_a_sub_byte_result(
    client: rpjrt.Client, mlir: str, dtype: object, values: list[int]
) -> None:
    target = f"r14_ret_{mlir}_{next(_ids)}"
    want = np.array(values, dtype)

    @rpjrt.ffi.handler(client, target)
    def h(call: rpjrt.ffi.FfiCall) -> object:
        return want

    # Odd length: the last byte is half used.
    exe = client.compile(_program(target, mlir, len(values)))
    got = exe(np.zeros(len(values), dtype))[0].to_numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.astype(np.int8), want.astype(np.int8))


def test_a_handler_returns_several_sub_byte_results(client: rpjrt.Client) -> None:
    target = f"r14_multi_{next(_ids)}"
    a = np.array([-1, -7, 3], ml_dtypes.int4)
    b = np.array([5, 6, -8], ml_dtypes.int4)

    @rpjrt.ffi.handler(client, target)
    def h(call: rpjrt.ffi.FfiCall) -> object:
        return (a, b)

    outs = client.compile(_program(target, "i4", 3, results=2))(np.zeros(3, ml_dtypes.int4))
    np.testing.assert_array_equal(outs[0].to_numpy().astype(np.int8), a.astype(np.int8))
    np.testing.assert_array_equal(outs[1].to_numpy().astype(np.int8), b.astype(np.int8))


def test_sub_byte_returns_of_the_wrong_kind_are_refused_by_name(client: rpjrt.Client) -> None:
    cases = [
        # Bytes with bits outside int4's (a .view() of wider data): refused, not cut down.
        (np.array([0x7F, 1, 2], np.uint8).view(ml_dtypes.int4), "outside int4's 4 bits"),
        (np.array([1, 2, 3], np.int8), "int8"),
        (np.array([1, 2], ml_dtypes.int4), "(2,)"),
    ]
    for value, needle in cases:
        target = f"r14_bad_{next(_ids)}"

        @rpjrt.ffi.handler(client, target)
        def h(call: rpjrt.ffi.FfiCall, value: object = value) -> object:
            return value

        exe = client.compile(_program(target, "i4", 3))
        with pytest.raises(rpjrt.InvalidArgumentError) as e:
            exe(np.zeros(3, ml_dtypes.int4))
        assert needle in str(e.value) and "result 0" in str(e.value), e.value


def test_sub_byte_result_views_say_what_works(client: rpjrt.Client) -> None:
    target = f"r14_views_{next(_ids)}"
    seen: list[str] = []

    @rpjrt.ffi.handler(client, target)
    def h(call: rpjrt.ffi.FfiCall) -> None:
        for buf in (call.args[0], call.rets[0]):
            try:
                buf.to_numpy()
            except rpjrt.InvalidArgumentError as e:
                seen.append(str(e))
        # The packed bytes, low nibble first: [-1, -7, 3] -> 0x9f, 0x03.
        call.rets[0].memoryview()[:] = bytes([0x9F, 0x03])

    out = client.compile(_program(target, "i4", 3))(np.zeros(3, ml_dtypes.int4))[0].to_numpy()
    np.testing.assert_array_equal(out.astype(np.int8), [-1, -7, 3])
    assert len(seen) == 2, seen
    assert "read the packed bytes" in seen[0], seen[0]
    assert "return an array" in seen[1] and ".memoryview()" in seen[1], seen[1]


def _exit_script(mode: str) -> str:
    return f"""
import rpjrt
c = rpjrt.Client(FAKE, timeout=5)
print("created", flush=True)
if {mode!r} == "close":
    c.close()
elif {mode!r} == "with":
    with rpjrt.Client(FAKE, timeout=5) as c2:
        pass
print("done", flush=True)
"""


@pytest.mark.parametrize("mode", ["close", "exit", "with"])
def test_a_plugin_hanging_in_client_destroy_does_not_keep_python_from_exiting(mode: str) -> None:
    fake = str(fake_plugin_path())
    t = time.monotonic()
    r = run_python(
        f"FAKE = {fake!r}\n" + _exit_script(mode),
        env={"RPJRT_FAKE_HANG_ON": "PJRT_Client_Destroy"},
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["created", "done"], r.stdout + r.stderr
    assert time.monotonic() - t < 50


@pytest.mark.parametrize(
    ("entry", "code", "named"),
    [
        ("GetPjrtApi", "rpjrt.Client(FAKE)", "it was in GetPjrtApi"),
        ("PJRT_Plugin_Initialize", "rpjrt.Client(FAKE)", "it was in PJRT_Plugin_Initialize"),
        ("PJRT_Plugin_Initialize", "rpjrt.Plugin(FAKE)", "it was in PJRT_Plugin_Initialize"),
        ("PJRT_Client_Create", "rpjrt.Client(FAKE)", "PJRT_Client_Create"),
        ("PJRT_Client_AddressableDevices", "rpjrt.Client(FAKE)", "it was in the client's creation"),
    ],
)
def test_a_timeout_names_the_entry_that_did_not_return(entry: str, code: str, named: str) -> None:
    fake = str(fake_plugin_path())
    r = run_python(
        f"FAKE = {fake!r}\nimport rpjrt\n"
        f"try:\n    {code}\nexcept rpjrt.DeadlineExceededError as e:\n    print('ERR', e)\n",
        env={"RPJRT_FAKE_HANG_ON": entry, "RPJRT_PLUGIN_TIMEOUT": "1"},
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ERR" in r.stdout and named in r.stdout, r.stdout + r.stderr
    assert "within 1 s" in r.stdout, r.stdout


def test_the_cli_timeout_names_the_entry_that_did_not_return() -> None:
    fake = str(fake_plugin_path())
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "--plugin-timeout", "1", "info", fake],
        env={**__import__("os").environ, "RPJRT_FAKE_HANG_ON": "PJRT_Plugin_Initialize"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "No module named rpjrt.__main__" in r.stderr:
        pytest.skip("no python -m rpjrt entry")
    assert r.returncode != 0
    assert "(--plugin-timeout), in PJRT_Plugin_Initialize" in r.stderr, r.stderr
