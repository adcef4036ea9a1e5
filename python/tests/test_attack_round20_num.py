"""Regressions from attack round 20 (data in, numbers).

- F-1: a numpy datetime64 / timedelta64 (or bytes_) *scalar* was put as a uint8 array of
  its raw bytes: numpy exports those scalars through the buffer protocol with format "B".
  numpy scalars and arrays whose dtype holds no numbers are now refused by their dtype on
  every path (put with any copy=, executable arguments, Session.bind, sharding,
  put_streaming), with a message naming the dtype (arrays of datetime64 said only "DLPack
  only supports ...").
- F-2: ``put_streaming`` uploaded a masked array's data without its mask, and so did
  ``client.put`` of an object whose ``__array__`` returns a masked array.
- F-3: numpy timedelta64 values in a list were read through ``int()`` (numpy makes
  timedelta64 a signedinteger): ``ns`` durations became plain int64 values, other units
  raised a bare TypeError naming datetime.timedelta or NoneType.
- float6 bytes with bits 6-7 set were stored as they were; int4/uint4/int2/uint2/float4
  bytes out of their range are refused, and so are float6 ones now.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest

import rpjrt
import rpjrt.sharding as sh
from rpjrt import transfer

MASKED = "a numpy masked array cannot go to a device: its mask would be lost"

# --------------------------------------------------------------------------------------
# F-1: numpy scalars and arrays without numbers are refused by dtype
# --------------------------------------------------------------------------------------

NOT_NUMBERS = [
    np.timedelta64(5, "s"),
    np.timedelta64(5, "ns"),
    np.timedelta64("NaT"),
    np.datetime64("2020-01-01"),
    np.datetime64("NaT"),
    np.bytes_(b"abcd"),
    np.bytes_(b"\x01"),
    np.str_("ab"),
    np.void(b"\x01\x02"),
    np.array((1, 2.0), dtype=[("a", "<i4"), ("b", "<f4")])[()],
]


def _names_dtype(v: Any) -> str:
    return re.escape(f"numpy dtype {np.asarray(v).dtype}") + ".*no PJRT equivalent"


def _id_u8(client: rpjrt.Client, n: int) -> Any:
    return client.compile(
        f"func.func @main(%a: tensor<{n}xui8>) -> tensor<{n}xui8> {{ return %a : tensor<{n}xui8> }}"
    )


@pytest.mark.parametrize("v", NOT_NUMBERS, ids=lambda v: f"{type(v).__name__}-{np.asarray(v).dtype}")
def test_f1_numpy_scalars_without_numbers_are_refused_by_dtype(client: rpjrt.Client, v: Any) -> None:
    for copy in (True, None, False):
        with pytest.raises(rpjrt.InvalidArgumentError, match=_names_dtype(v)):
            client.put(v, copy=copy)
    # As arrays (0-d and 1-d, exported or not through the buffer protocol): the same
    # refusal, naming the dtype (datetime arrays said "DLPack only supports ...").
    for arr in (np.array(v), np.array([v, v])):
        with pytest.raises(rpjrt.InvalidArgumentError, match=_names_dtype(v)) as e:
            client.put(arr)
        assert "DLPack" not in str(e.value)
    # An executable argument, against a parameter of the raw bytes' shape.
    exe = _id_u8(client, memoryview(v).nbytes if _exports(v) else 1)
    with pytest.raises(rpjrt.InvalidArgumentError, match="argument 0: " + _names_dtype(v)):
        exe(v)
    # A session slot.
    with rpjrt.Session(client) as session:
        with pytest.raises(rpjrt.InvalidArgumentError, match='slot "t": ' + _names_dtype(v)):
            session.bind("t", v)
    # Sharding and the streaming upload read it by dtype too.
    with pytest.raises(rpjrt.InvalidArgumentError, match=_names_dtype(v)):
        sh.split(v, sh.Mesh({"x": 1}, [0]), [])
    with pytest.raises(rpjrt.InvalidArgumentError, match=_names_dtype(v)):
        transfer.put_streaming(client, v, progress=False)
    with pytest.raises(rpjrt.InvalidArgumentError, match=_names_dtype(v)):
        transfer.put_streaming(client, np.array([v, v]), progress=False)


def _exports(v: Any) -> bool:
    try:
        memoryview(v)
    except (TypeError, ValueError):
        return False
    return True


def test_f1_datetime_messages_say_what_the_dtype_holds(client: rpjrt.Client) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"timedelta64\[s\].*holds durations"):
        client.put(np.timedelta64(5, "s"))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"datetime64\[D\].*holds dates"):
        client.put(np.array(["2020-01-01"], "datetime64[D]"))
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"numpy dtype object.*Python objects"):
        client.put(np.array([1, "a"], dtype=object))


def test_f1_with_dtype_the_scalar_goes_as_the_array_goes(client: rpjrt.Client) -> None:
    # Durations and text hold no numbers rpjrt converts, with or without dtype=.
    for v in (np.timedelta64(5, "s"), np.datetime64("2020-01-01"), np.bytes_(b"\x05")):
        with pytest.raises(rpjrt.InvalidArgumentError, match="holds no numbers"):
            client.put(v, dtype="uint8")
        with pytest.raises(rpjrt.InvalidArgumentError, match="holds no numbers"):
            client.put(np.array([v]), dtype="uint8")
    # Raw void bytes are reinterpreted with dtype=, as a void array's are.
    raw = np.array([1, 2], np.int16).tobytes()
    got = client.put(np.void(raw[:2]), dtype="int16").to_numpy()
    assert got.shape == () and int(got) == 1
    got = client.put(np.array([raw], "V4").reshape(()), dtype="int32").to_numpy()
    assert int(got) == np.frombuffer(raw, np.int32)[0]


def test_f1_an_array_interface_of_datetimes_is_refused_by_dtype(client: rpjrt.Client) -> None:
    class Holder:
        def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
            return np.array([1, 2], "m8[s]")

    with pytest.raises(rpjrt.InvalidArgumentError, match=re.escape("timedelta64[s]")):
        client.put(Holder())


@pytest.mark.parametrize(
    "v",
    [np.float32(1.5), np.float16(-2.0), np.float64(0.25), np.int8(-3), np.uint64(2**64 - 1),
     np.int64(-(2**63)), np.bool_(True), np.complex64(1 - 2j), np.complex128(3j)],
    ids=lambda v: type(v).__name__,
)
def test_f1_numeric_numpy_scalars_still_go_in(client: rpjrt.Client, v: Any) -> None:
    for copy in (True, None):
        got = client.put(v, copy=copy).to_numpy()
        assert got.dtype == np.asarray(v).dtype and got.shape == ()
        assert got.tobytes() == np.asarray(v).tobytes()


def test_f1_ml_dtypes_scalars_still_go_in(client: rpjrt.Client) -> None:
    for v in (ml_dtypes.bfloat16(1.5), ml_dtypes.float8_e4m3fn(-2.0), ml_dtypes.int4(-3)):
        got = client.put(v).to_numpy()
        assert got.dtype == np.asarray(v).dtype and got.shape == ()
        assert float(got) == float(v)


def test_f1_plain_bytes_keep_their_meaning(client: rpjrt.Client) -> None:
    # Python's bytes (not numpy's bytes_) are raw bytes: uint8, or reinterpreted with dtype=.
    assert client.put(b"\x01\x02").to_numpy().tolist() == [1, 2]
    assert client.put(b"\x01\x00", dtype="int16").to_numpy().tolist() == [1]


# --------------------------------------------------------------------------------------
# F-2: masked arrays everywhere
# --------------------------------------------------------------------------------------


def _masked() -> Any:
    return np.ma.array([1.0, -999.0, 3.0, 4.0], mask=[False, True, False, False], dtype=np.float32)


def _masked_message(client: rpjrt.Client) -> str:
    with pytest.raises(rpjrt.InvalidArgumentError) as e:
        client.put(_masked())
    assert MASKED in str(e.value)
    return str(e.value)


def test_f2_put_streaming_refuses_a_masked_array(client: rpjrt.Client) -> None:
    want = _masked_message(client)
    for m in (_masked(), np.ma.masked_array(np.arange(4, dtype=np.float32)),
              np.ma.masked_array(np.arange(4).astype(ml_dtypes.bfloat16), mask=[False, True, False, False])):
        with pytest.raises(rpjrt.InvalidArgumentError) as e:
            transfer.put_streaming(client, m, progress=False)
        assert str(e.value) == want
        with pytest.raises(rpjrt.InvalidArgumentError) as e:
            transfer.put_streaming(client, m, dtype=m.dtype, shape=m.shape, progress=False)
        assert str(e.value) == want
    # A function source that returns a masked chunk is refused the same way.
    m = _masked()
    with pytest.raises(rpjrt.InvalidArgumentError) as e:
        transfer.put_streaming(client, lambda o, n: m, dtype="float32", shape=[4], progress=False)
    assert str(e.value) == want
    # The filled array goes in.
    b = transfer.put_streaming(client, m.filled(0), progress=False)
    assert b.to_numpy().tolist() == [1.0, 0.0, 3.0, 4.0]


class _ArrayOf:
    def __init__(self, a: Any) -> None:
        self.a = a

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self.a


def test_f2_an_array_interface_that_gives_a_masked_array_is_refused(client: rpjrt.Client) -> None:
    want = _masked_message(client)
    holder = _ArrayOf(_masked())
    exe = client.compile(
        "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> { return %a : tensor<4xf32> }"
    )
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("put", lambda: client.put(holder)),
        ("put copy=None", lambda: client.put(holder, copy=None)),
        ("put copy=False", lambda: client.put(holder, copy=False)),
        ("put dtype=", lambda: client.put(holder, dtype="float64")),
        ("put cast", lambda: client.put(holder, dtype="int32", cast=True)),
        ("argument", lambda: exe(holder)),
        ("split", lambda: sh.split(holder, sh.Mesh({"x": 1}, [0]), ["x"])),
        ("shard", lambda: sh.shard(client, holder, sh.Mesh({"x": 1}, [0]), ["x"])),
    ]
    for what, call in calls:
        with pytest.raises(rpjrt.InvalidArgumentError) as e:
            call()
        assert want in str(e.value), what
    with rpjrt.Session(client) as session:
        with pytest.raises(rpjrt.InvalidArgumentError) as e:
            session.bind("m", holder)
        assert want in str(e.value)
    # An array interface giving an ordinary array still goes in.
    plain = _ArrayOf(np.arange(4, dtype=np.float32))
    assert client.put(plain).to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert exe(plain)[0].to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]


# --------------------------------------------------------------------------------------
# F-3: timedelta64 values in lists
# --------------------------------------------------------------------------------------

NOT_A_NUMBER = "a list must hold only numbers"


@pytest.mark.parametrize(
    "v",
    [np.timedelta64(5, "ns"), np.timedelta64(5, "s"), np.timedelta64(1, "D"), np.timedelta64("NaT"),
     np.timedelta64(5), np.datetime64("2020-01-01")],
    ids=repr,
)
def test_f3_durations_in_lists_are_not_numbers(client: rpjrt.Client, v: Any) -> None:
    name = re.escape(type(v).__name__)
    for lst in ([v, v], [1, v], (v,), [[1, 2], [3, v]]):
        for kw in ({}, {"dtype": "int64"}, {"dtype": "float32", "cast": True}):
            with pytest.raises(rpjrt.InvalidArgumentError, match=f"cannot put a {name} .*{NOT_A_NUMBER}"):
                client.put(lst, **kw)
    # An object array holding them, converted with dtype=, goes through the same rule.
    with pytest.raises(rpjrt.InvalidArgumentError, match=NOT_A_NUMBER):
        client.put(np.array([v, v], dtype=object), dtype="int64")
    exe = client.compile(
        "func.func @main(%a: tensor<2xi64>) -> tensor<2xi64> { return %a : tensor<2xi64> }"
    )
    with pytest.raises(rpjrt.InvalidArgumentError, match=f"argument 0: .*{NOT_A_NUMBER}"):
        exe([v, v])
    with rpjrt.Session(client) as session:
        with pytest.raises(rpjrt.InvalidArgumentError, match=NOT_A_NUMBER):
            session.bind("t", [v, v])


def test_f3_numpy_numbers_in_lists_still_go_in(client: rpjrt.Client) -> None:
    # The dtype numpy.asarray gives them (int64 with uint64 promotes to float64).
    items = [np.int64(5), np.int8(-1), np.uint64(7)]
    got = client.put(items).to_numpy()
    assert got.dtype == np.asarray(items).dtype and got.tolist() == [5, -1, 7]
    got = client.put([np.int64(5), np.int8(-1), np.uint8(7)]).to_numpy()
    assert got.dtype == np.int64 and got.tolist() == [5, -1, 7]
    assert client.put([np.bool_(True), False]).to_numpy().tolist() == [True, False]
    got = client.put([np.float32(0.5), np.float64(1.5), 2.0]).to_numpy()
    assert got.tolist() == [0.5, 1.5, 2.0]


# --------------------------------------------------------------------------------------
# float6: bytes with bits 6-7 set are no value
# --------------------------------------------------------------------------------------

F6 = ["float6_e2m3fn", "float6_e3m2fn"]
BAD = np.array([0x01, 0x40, 0xC1, 0x3F], np.uint8)


def _no_value(name: str, byte: int, index: int) -> str:
    return re.escape(f"element {index} is the byte {byte:#04x}, which is no {name} value (6 bits)")


@pytest.mark.parametrize("name", F6)
def test_f6_bytes_with_high_bits_are_refused_on_every_path(client: rpjrt.Client, name: str) -> None:
    dt = getattr(ml_dtypes, name)
    a = BAD.view(dt)
    for copy in (True, None, False):
        with pytest.raises(rpjrt.InvalidArgumentError, match=_no_value(name, 0x40, 1)):
            client.put(a, copy=copy)
    with pytest.raises(rpjrt.InvalidArgumentError, match=_no_value(name, 0x40, 1)):
        client.put(BAD.tobytes(), dtype=name)
    with pytest.raises(rpjrt.InvalidArgumentError, match=_no_value(name, 0x40, 1)):
        client.put(bytearray(BAD.tobytes()), dtype=name)
    with pytest.raises(rpjrt.InvalidArgumentError, match=_no_value(name, 0x40, 1)):
        client.put(BAD.view(np.dtype("V1")), dtype=name)
    # Strided and reversed views: the element index is the view's.
    with pytest.raises(rpjrt.InvalidArgumentError, match=_no_value(name, 0xC1, 1)):
        client.put(a[::-1])
    with pytest.raises(rpjrt.InvalidArgumentError, match=_no_value(name, 0x40, 1)):
        client.put(np.stack([a, a], axis=1)[:, 1])
    # Only the bytes the view addresses count: a gap byte out of range is no element.
    if _has_f6(client, name):
        assert client.put(a[::3]).tobytes() == bytes([0x01, 0x3F])
    with rpjrt.Session(client) as session:
        with pytest.raises(rpjrt.InvalidArgumentError, match='slot "f": .*' + _no_value(name, 0x40, 1)):
            session.bind("f", a)
    # An executable argument is put (and checked) before its type is compared.
    with pytest.raises(rpjrt.InvalidArgumentError, match="argument 0: .*" + _no_value(name, 0x40, 1)):
        _id_u8(client, 4)(a)
    if not _has_f6(client, name):
        # PJRT 0.81 has no float6: a streaming upload is refused before any chunk is read.
        with pytest.raises(rpjrt.UnsupportedError):
            transfer.put_streaming(client, a, progress=False)
        return
    with pytest.raises(rpjrt.InvalidArgumentError, match=_no_value(name, 0x40, 1)):
        transfer.put_streaming(client, a, progress=False)
    with pytest.raises(rpjrt.InvalidArgumentError, match=_no_value(name, 0x40, 1)):
        transfer.put_streaming(client, a, progress=False, chunk_bytes=1)
    raw = BAD.tobytes()
    with pytest.raises(rpjrt.InvalidArgumentError, match=_no_value(name, 0xC1, 2)):
        transfer.put_streaming(
            client, lambda o, n: raw[o : o + n] if o >= 2 else b"\x00" * n,
            dtype=name, shape=[4], progress=False, chunk_bytes=2,
        )


def _has_f6(client: rpjrt.Client, name: str) -> bool:
    try:
        client.put(np.zeros(1, np.uint8).view(getattr(ml_dtypes, name)))
    except rpjrt.UnsupportedError:  # PJRT 0.81 predates the float6 types
        return False
    return True


@pytest.mark.parametrize("name", F6)
def test_f6_every_value_still_goes_in(client: rpjrt.Client, name: str) -> None:
    dt = getattr(ml_dtypes, name)
    every = np.arange(64, dtype=np.uint8).view(dt)
    if not _has_f6(client, name):
        # PJRT 0.81 predates float6: refused as unsupported, not as out of range.
        with pytest.raises(rpjrt.UnsupportedError, match="needs PJRT 0.114"):
            client.put(every)
        return
    for copy in (True, None):
        assert client.put(every, copy=copy).tobytes() == every.tobytes()
    assert client.put(every[::-1]).tobytes() == every[::-1].tobytes()
    assert client.put(every.tobytes(), dtype=name).tobytes() == every.tobytes()
    assert transfer.put_streaming(client, every, progress=False, chunk_bytes=7).tobytes() == every.tobytes()
    # Numbers converted into float6 are stored by value.
    vals = [0.0, 1.0, -1.5, 7.5]
    got = client.put(vals, dtype=name).to_numpy()
    assert got.astype(np.float32).tolist() == np.array(vals, dt).astype(np.float32).tolist()
