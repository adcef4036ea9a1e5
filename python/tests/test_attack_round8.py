"""Regressions of the eighth round of outside probes of the Python package: conversions that
must follow the one rule for numbers wherever a value enters (slots with a spec, numpy
arrays and scalars with ``dtype=``, raw ``|V`` items, DLPack producers), bytes that are no
element of a sub-byte type, checkpoints' type strings and tables, sub-byte sharding,
sessions (their device, restores inside a step, waits that answer Ctrl-C) and the stores'
values and waits; on both plugins."""

from __future__ import annotations

import _thread
import io
import signal
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import rpjrt
from rpjrt import sharding
from rpjrt.distributed import InMemoryStore, TcpStore

from .conftest import handler_session

ADD1 = """func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = stablehlo.constant dense<1.0> : tensor<2xf32>
  %0 = stablehlo.add %x, %c : tensor<2xf32>
  return %0 : tensor<2xf32>
}"""


class _DLPackOnly:
    """A producer that offers only ``__dlpack__`` (as a torch or cupy tensor may)."""

    def __init__(self, a: Any) -> None:
        self._a = a

    def __dlpack__(self, **kw: Any) -> Any:
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self._a.__dlpack_device__()


@pytest.mark.parametrize(
    ("dtype", "value", "why"),
    [
        ("int32", [2.7, -1.9], "float values cannot be stored as int32"),
        ("int32", 7.5, "float values cannot be stored as int32"),
        ("float32", [1e40, 1.0], "overflows float32"),
        ("float16", [70000.0, 1.0], "overflows float16"),
        ("bool", [2, 0], "does not fit in bool"),
        ("int4", [9, 1], "does not fit in int4"),
        ("float8_e4m3fn", [1000.0, 1.0], "overflows float8_e4m3fn"),
        ("float32", [1 + 2j, 0j], "complex values cannot be stored as float32"),
    ],
)
def test_a_slot_with_a_spec_converts_by_the_rule_for_numbers(
    client: rpjrt.Client, dtype: str, value: Any, why: str
) -> None:
    # Slot._conform used numpy's cast: [2.7] became [2], 1e40 became inf, int4 9 wrapped.
    shape = () if np.ndim(value) == 0 else (len(value),)
    slot = rpjrt.Slot("v", (dtype, shape))
    s = rpjrt.Session(client)
    with pytest.raises(rpjrt.InvalidArgumentError, match=why):
        s.bind(slot, value)
    with pytest.raises(rpjrt.InvalidArgumentError, match=why):
        s.bind_many({slot: lambda: value})
        s.buffer("v")
    assert all(state != "ready" for *_, state in s.slots())


def test_a_slot_with_a_spec_takes_exact_values_and_dlpack_producers(client: rpjrt.Client) -> None:
    s = rpjrt.Session(client)
    s.bind(rpjrt.Slot("i", ("int8", (2,))), [-128, 127])
    np.testing.assert_array_equal(s.buffer("i").to_numpy(), np.array([-128, 127], np.int8))
    s.bind(rpjrt.Slot("f", ("float32", (2,))), _DLPackOnly(np.array([1.5, -2.5], np.float32)))
    np.testing.assert_array_equal(s.buffer("f").to_numpy(), np.array([1.5, -2.5], np.float32))


@pytest.mark.parametrize(
    ("value", "dtype", "why"),
    [
        (np.float64(300.0), "int8", "float values cannot be stored as int8"),
        (np.float32("nan"), "int32", "float values cannot be stored as int32"),
        (np.int8(-1), "uint8", "does not fit in uint8"),
        (np.complex64(1 + 2j), "float32", "complex values cannot be stored as float32"),
        (np.float32(1e6), "float16", "overflows float16"),
        (np.array([300.0]), "int8", "float values cannot be stored as int8"),
        (np.array([300, 1]), "int8", "300 at index \\[0\\] does not fit in int8"),
        (np.array([20, -9]), "int4", "does not fit in int4"),
        (np.array([1.0, 1e40]), "float32", "1e\\+40 at index \\[1\\] overflows float32"),
        (np.array([np.inf]), "float8_e4m3fn", "float8_e4m3fn"),
        (np.array([1, 2], np.int64).reshape(2, 1) * 2**40, "float16", "overflows float16"),
    ],
)
def test_numpy_values_with_a_dtype_follow_the_rule_for_numbers(
    client: rpjrt.Client, value: Any, dtype: str, why: str
) -> None:
    # put(np.float64(300.0), dtype="int8") gave 44 and np.float32(nan) into int32 gave
    # -2**31, while execute arguments and binds refused the same values.
    with pytest.raises(rpjrt.InvalidArgumentError, match=why):
        client.put(value, dtype=dtype)


def test_numpy_conversions_that_keep_values_work_and_cast_true_converts_as_numpy_does(
    client: rpjrt.Client,
) -> None:
    ok = [
        (np.array([1, -2, 3], np.int64), "int8"),
        (np.array([0.1, 2.5, -1e30], np.float64), "float32"),
        (np.array([1.0, np.nan, -np.inf], np.float64), "bfloat16"),
        (np.array([1, 0, 1], np.int32), "bool"),
        (np.array([3, -8], np.int16), "int4"),
        (np.array([1.5 + 2j], np.complex128), "complex64"),
        (np.array([7, 8], np.uint8), "float16"),
        (np.arange(6, dtype=np.int8).reshape(2, 3).T, "int32"),
    ]
    for value, dtype in ok:
        got = client.put(value, dtype=dtype).to_numpy()
        want = value.astype(rpjrt.DType(dtype).numpy)
        np.testing.assert_array_equal(got.astype(np.float64) if got.dtype.kind == "V" else got, want)
    wrapped = client.put(np.array([300.0, 2.7]), dtype="int8", cast=True).to_numpy()
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(wrapped, np.array([300.0, 2.7]).astype(np.int8))


def test_raw_void_items_are_reinterpreted_and_text_is_refused(client: rpjrt.Client) -> None:
    # np.load of a numpy.savez'd bfloat16 array gives |V2: put(v, dtype=) raised numpy's
    # own ValueError ("No cast function available").
    h = np.array([1.0, 2.0, -3.5], ml_dtypes.bfloat16)
    v = h.view(np.dtype("V2"))
    np.testing.assert_array_equal(client.put(v, dtype="bfloat16").to_numpy(), h)
    np.testing.assert_array_equal(client.put(v, dtype="int16").to_numpy(), h.view(np.int16))
    with pytest.raises(rpjrt.InvalidArgumentError, match="raw 2-byte items.*float32 \\(4 bytes"):
        client.put(v, dtype="float32")
    with pytest.raises(rpjrt.InvalidArgumentError, match="holds no numbers"):
        client.put(np.array([b"abcd"]), dtype="int32")


def test_dlpack_producers_take_dtype_and_layout(client: rpjrt.Client) -> None:
    # With dtype= or layout= a DLPack-only producer was refused as supporting neither the
    # buffer protocol nor __dlpack__.
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = _DLPackOnly(a)
    np.testing.assert_array_equal(client.put(x, dtype="float32").to_numpy(), a)
    np.testing.assert_array_equal(client.put(x, dtype="float64").to_numpy(), a.astype(np.float64))
    np.testing.assert_array_equal(client.put(x, layout=(0, 1)).to_numpy(), a)
    mesh = sharding.Mesh({"x": 1}, [0])
    np.testing.assert_array_equal(sharding.split(x, mesh, ("x",))[0], a)


def test_bytes_that_are_no_element_of_a_sub_byte_type_are_refused_on_put(client: rpjrt.Client) -> None:
    # The device kept the low bits: float4 bytes 0x11 (-0.5 to ml_dtypes) became 0.5.
    f4 = np.array([0x11, 0x02], np.uint8).view(ml_dtypes.float4_e2m1fn)
    with pytest.raises(rpjrt.InvalidArgumentError, match="element 0 is the byte 0x11, which is no float4_e2m1fn"):
        client.put(f4)
    i4 = np.array([0x7F], np.uint8).view(ml_dtypes.int4)
    with pytest.raises(rpjrt.InvalidArgumentError, match="0x7f, which is no int4 value"):
        client.put(i4)
    # Both forms of a negative int4 are its value: ml_dtypes' (0x0e) and sign-extended (0xfe).
    for byte in (0x0E, 0xFE):
        got = client.put(np.array([byte], np.uint8).view(ml_dtypes.int4)).to_numpy()
        assert int(got[0]) == -2


def test_sub_byte_arrays_split_and_assemble_as_numpy_holds_them(client: rpjrt.Client) -> None:
    # Refused outright: "sub-byte types are packed", though numpy's form is a byte each.
    for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.float4_e2m1fn):
        a = np.array([[0, 1], [1, 0], [0, 1], [1, 1]]).astype(t)
        mesh = sharding.Mesh({"x": 2}, [0, 1])
        shards = sharding.split(a, mesh, ("x",))
        assert [s.shape for s in shards] == [(2, 2), (2, 2)]
        np.testing.assert_array_equal(np.concatenate(shards), a)
        back = sharding.assemble(shards, mesh, ("x",), a.shape)
        assert back.dtype == a.dtype
        np.testing.assert_array_equal(back, a)
        bufs = sharding.shard(client, a, mesh, ("x",))
        np.testing.assert_array_equal(sharding.assemble(bufs, mesh, ("x",), a.shape), a)
    mesh = sharding.Mesh({"x": 2}, [0, 1])
    i4 = np.zeros((2, 2), ml_dtypes.int4)
    u4 = np.zeros((2, 2), ml_dtypes.uint4)
    with pytest.raises(rpjrt.InvalidArgumentError, match="shard 1 is uint4, but the array is int4"):
        sharding.assemble([i4[:1], u4[:1]], mesh, ("x",), (2, 2))


def test_a_session_on_another_device_compiles_its_source_for_that_device(client: rpjrt.Client) -> None:
    d1 = client.devices()[1]
    s = rpjrt.Session(client, device=d1)
    step = s.program(ADD1, inputs=["x"], outputs=["x"])
    s.bind("x", np.zeros(2, np.float32))
    step()
    assert s.buffer("x").device == d1
    np.testing.assert_array_equal(s.buffer("x").to_numpy(), np.ones(2, np.float32))


def _npz(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def _npy(descr: str, shape: tuple[int, ...], data: bytes) -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape!r}, }}"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + data


def test_checkpoints_read_numpys_one_character_type_strings(client: rpjrt.Client, tmp_path: Path) -> None:
    # "<d", "<e", "<i", "?" were refused as naming no PJRT type, though numpy reads them.
    cases = {"<d": np.float64, "<e": np.float16, "<i": np.int32, "?": np.bool_, "f4": np.float32, ">f8": ">f8"}
    for descr, t in cases.items():
        want = np.array([1, 0, 1]).astype(t)
        path = tmp_path / "c.npz"
        _npz(path, {"w.npy": _npy(descr, (3,), want.tobytes())})
        s = rpjrt.Session(client)
        s.restore(path)
        np.testing.assert_array_equal(s.buffer("w").to_numpy(), want)


def test_checkpoint_type_tables_refuse_a_repeated_name_and_raw_messages_name_the_slot_type(
    client: rpjrt.Client, tmp_path: Path
) -> None:
    path = tmp_path / "c.npz"
    bf = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    table = io.BytesIO()
    np.save(table, np.array('{"w": "float16", "w": "bfloat16"}'))
    _npz(path, {"w.npy": _npy("|V2", (2,), bf.tobytes()), "__rpjrt_dtypes__.npy": table.getvalue()})
    with pytest.raises(rpjrt.InvalidArgumentError, match='names slot "w" twice'):
        rpjrt.Session(client).restore(path)
    # A raw member into a slot that already has a type numpy names (float32).
    _npz(path, {"w.npy": _npy("|V4", (2,), np.ones(2, np.float32).tobytes())})
    s = rpjrt.Session(client)
    s.bind("w", np.zeros(2, np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match='slot "w" is float32, which numpy saves by its type string'):
        s.restore(path)
    s2 = rpjrt.Session(client)
    s2.bind("w", np.zeros(2, ml_dtypes.bfloat16))
    with pytest.raises(rpjrt.InvalidArgumentError, match='slot "w" is bfloat16 \\(2 bytes per element\\)'):
        s2.restore(path)


def test_a_restore_from_a_handler_of_the_running_step_is_refused(client: rpjrt.Client, tmp_path: Path) -> None:
    # It was accepted and left the output slots holding the step's result and the others
    # the checkpoint's values.
    act: list[Any] = [lambda: None]

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        act[0]()
        return call.args[0].to_numpy() + 1

    s, step = handler_session(client, f"r8_restore_{id(tmp_path)}", h)
    s.bind_many({"w": np.zeros(4, np.float32), "epoch": np.zeros(1, np.int32)})
    path = tmp_path / "c.npz"
    s.save(path)
    s.bind("epoch", np.full(1, 5, np.int32))
    act[:] = [lambda: s.restore(path)]
    with pytest.raises(rpjrt.Error, match="restore needs the session between steps.*after the step returns"):
        step()
    np.testing.assert_array_equal(s.buffer("epoch").to_numpy(), [5])
    act[:] = [lambda: None]
    s.restore(path)
    np.testing.assert_array_equal(s.buffer("epoch").to_numpy(), [0])


def _assert_ctrl_c_ends(call: Any) -> None:
    """`call()` raises KeyboardInterrupt soon after a Ctrl-C (simulated) 0.3 s into it."""
    # Python takes SIGINT only when it was not ignored at start (a background job of a
    # script, as CI may run the tests, ignores it): take it here for the test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            call()
        timer.join()
        assert time.monotonic() - t0 < 5
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_session_call_waiting_for_another_threads_step_answers_ctrl_c(client: rpjrt.Client) -> None:
    # The wait for the other thread's step held Ctrl-C until the step ended.
    release = threading.Event()

    def h(call: rpjrt.ffi.FfiCall) -> Any:
        release.wait(30)
        return call.args[0].to_numpy()

    s, step = handler_session(client, "r8_slow_step", h)
    s.bind("w", np.zeros(4, np.float32))
    other = threading.Thread(target=step)
    other.start()
    try:
        time.sleep(0.3)
        for call in (lambda: s.buffer("w"), lambda: s.bind("w", np.ones(4, np.float32)), step):
            _assert_ctrl_c_ends(call)
    finally:
        release.set()
        other.join(30)
    np.testing.assert_array_equal(s.buffer("w").to_numpy(), np.zeros(4, np.float32))


def test_store_waits_answer_ctrl_c() -> None:
    # get and barrier waited their whole timeout (for ever with inf) before Ctrl-C counted
    # (finite timeouts here: a regression fails the time bound rather than hanging).
    stores: list[Any] = [InMemoryStore()]
    host = TcpStore.host("127.0.0.1:0", "r8-token")
    stores.append(TcpStore.connect(host.address, "r8-token", 1, timeout=10))
    try:
        for store in stores:
            for call in (
                lambda: store.get("never", timeout=20.0),
                lambda: store.barrier("b", 0, 2, timeout=20),
            ):
                _assert_ctrl_c_ends(call)
            # A key already set is read at once, and waits still end when it arrives.
            store.set("k", b"v")
            assert store.get("k", timeout=1) == b"v"
            threading.Timer(0.2, lambda: store.set("late", b"L")).start()
            assert store.get("late", timeout=10) == b"L"
    finally:
        stores[1].shutdown()
        host.shutdown()


def test_store_values_are_any_bytes_like_object() -> None:
    # TcpStore.set refused bytearray and memoryview, which the other stores take.
    host = TcpStore.host("127.0.0.1:0", "r8-token")
    try:
        for store in (InMemoryStore(), host):
            store.set("a", bytearray(b"xy"))
            store.set("b", memoryview(b"abcd")[1:3])
            store.set("c", np.arange(3, dtype=np.uint8))  # type: ignore[arg-type]
            assert (store.get("a", 1), store.get("b", 1), store.get("c", 1)) == (b"xy", b"bc", b"\x00\x01\x02")
            with pytest.raises(TypeError, match="bytes-like object.*not str"):
                store.set("d", "text")  # type: ignore[arg-type]
    finally:
        host.shutdown()


def test_execute_argument_messages_name_the_call_that_converts(client: rpjrt.Client) -> None:
    # They advised cast=True, which exe() does not take.
    exe = client.compile(
        "func.func public @main(%a: tensor<2xi8>) -> tensor<2xi8> { return %a : tensor<2xi8> }"
    )
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"argument 0: .*300 at index \[0\] .*client\.put\(value, dtype=\.\.\., cast=True\)"):
        exe([300, 1])
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"argument 0: .*float values .*client\.put\(value, dtype=\.\.\., cast=True\) does"):
        exe([1.5, 1])
    (y,) = exe([-128, 127])
    np.testing.assert_array_equal(y.to_numpy(), np.array([-128, 127], np.int8))


def test_a_failure_deep_in_nested_handlers_is_reported_once_not_per_level(client: rpjrt.Client) -> None:
    # Each level wrapped the one below: the cause came after up to 16 wrappers.
    target = "r8_nest_forever"
    text = f"""func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}}"""
    exes: list[rpjrt.Executable] = []

    @rpjrt.ffi.handler(client, target)
    def h(call: rpjrt.ffi.FfiCall) -> Any:
        return exes[0](call.args[0].to_numpy())[0].to_numpy()

    exes.append(client.compile(text))
    with pytest.raises(rpjrt.Error) as info:
        exes[0](np.zeros(2, np.float32))
    msg = str(info.value)
    assert "nested handler errors; the innermost: " in msg, msg
    assert msg.count("Python handler for") == 2, msg
    assert "RESOURCE_EXHAUSTED" in msg, msg
