"""Round 22 (outside checks of the Python API surface): regressions of the fixes.

- Cycles through Python objects that rpjrt holds from Rust are collectable: a Python
  key-value store that refers back to its Client (the Client holds the store alone, the
  plugin reaches it weakly; ``close()`` releases it); a zero-copy Buffer whose source
  (an ndarray subclass instance) holds the Buffer (``put(copy=False/None)``,
  ``from_dlpack``); a done-callback of a pending alias's ready event that holds the
  alias's own fulfiller. Where the Rust state is shared (a Buffer passed to rpjrt), the
  cycle is kept, and the data stays valid.
- ``exe(x, device=d)`` with a device of another client says so first, without blaming
  "argument 0", as ``put`` and ``compile`` say it.
- dtypes numpy reads are taken (JAX's ``jnp.float32``, any class with a ``dtype``,
  ``b"f4"``), equality is symmetric, and ``numpy.dtype(">f4")`` gets the byte-order message.
- ``bool(buffer)`` as numpy 2 defines it; Buffers compare equal when they are handles of one
  device buffer; ``copy.copy``/``deepcopy`` of Event, PreparedCall and CallOutputs give the
  object itself.
"""

from __future__ import annotations

import copy
import gc
import threading
import weakref
from typing import Any

import numpy as np
import pytest

import rpjrt

from .test_attack_round19_session import _collected

ADD = """func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}"""


class Host(np.ndarray):
    """An ndarray subclass: its instances have a __dict__ that can hold a Buffer."""


def _host(n: int = 1 << 12) -> Host:
    """A Host array of n float32 on a 64-byte boundary (XLA's CPU plugins use host memory
    in place only when it is 64-byte aligned)."""
    raw = np.zeros(n * 4 + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    x = raw[off : off + n * 4].view(np.float32).view(Host)
    x[:] = np.arange(n)
    return x


# 2: a Python kv store that refers back to its Client -----------------------------------


class DictStore:
    """A key-value store in a dict."""

    def __init__(self) -> None:
        self.d: dict[str, bytes] = {}

    def set(self, k: str, v: bytes) -> None:
        self.d[k] = v

    def get(self, k: str, timeout: float) -> bytes:
        return self.d[k]

    def try_get(self, k: str) -> bytes | None:
        return self.d.get(k)


class Worker(DictStore):
    """The store, and the owner of the client made with it."""

    def __init__(self, plugin: str, via: str = "client") -> None:
        super().__init__()
        client = rpjrt.Client(plugin, kv=self, process_id=0, num_processes=1)
        self.ref = weakref.ref(client)
        if via == "client":
            self.client = client
            self.big = client.put(np.ones(1 << 16, np.float32))
        elif via == "device":
            self.dev = client.devices()[0]
        elif via == "buffer":
            self.buf = client.put(np.ones(4, np.float32))
        elif via == "executable":
            self.exe = client.compile(ADD)
        elif via == "outputs":
            self.outs = client.compile(ADD).prepare([[np.ones(2, np.float32)]])()
        else:
            raise AssertionError(via)


@pytest.mark.parametrize("via", ["client", "device", "buffer", "executable", "outputs"])
def test_a_kv_store_that_refers_back_to_its_client_is_collected(plugin_path: str, via: str) -> None:
    for _ in range(3):
        w = Worker(plugin_path, via)
        client_ref, worker_ref = w.ref, weakref.ref(w)
        del w
        assert _collected(worker_ref), f"the store (holding its client through a {via}) leaked"
        assert client_ref() is None, "the client leaked"


def test_a_referenced_client_in_a_store_cycle_stays_open(plugin_path: str) -> None:
    w = Worker(plugin_path)
    client = w.client
    del w
    gc.collect()
    # The cycle is not garbage while the client is held: it was not closed or cleared.
    assert not client.closed
    assert client.put(np.ones(2, np.float32)).to_numpy().tolist() == [1.0, 1.0]
    client.close()


def test_close_releases_the_python_store(plugin_path: str) -> None:
    store = DictStore()
    ref = weakref.ref(store)
    c = rpjrt.Client(plugin_path, kv=store, process_id=0, num_processes=1)
    del store
    gc.collect()
    assert ref() is not None, "an open client must keep its store"
    c.close()
    assert _collected(ref), "close() did not release the store"
    assert c.closed


# 3: zero-copy Buffers whose source holds them ------------------------------------------


@pytest.mark.parametrize(
    "how", ["put_copy_false", "put_copy_none", "from_dlpack", "from_dlpack_none"]
)
def test_a_zero_copy_source_holding_its_buffer_is_collected(client: rpjrt.Client, how: str) -> None:
    for _ in range(5):
        x = _host()
        if how == "put_copy_false":
            x.dev = client.put(x, copy=False)
        elif how == "put_copy_none":
            x.dev = client.put(x, copy=None)
        elif how == "from_dlpack":
            x.dev = client.from_dlpack(x, copy=False)
        else:
            x.dev = client.from_dlpack(x)
        assert x.dev.to_numpy().tolist() == x.tolist()
        xref, bref = weakref.ref(x), weakref.ref(x.dev)
        del x
        assert _collected(xref), f"{how}: the source and its Buffer leaked"
        assert bref() is None


def test_a_zero_copy_buffer_made_from_a_bytearray_subclass_is_collected(
    client: rpjrt.Client,
) -> None:
    class Bytes(bytearray):
        pass

    x = Bytes(np.arange(16, dtype=np.float32).tobytes())
    try:
        x.dev = client.put(x, dtype="float32", copy=None)  # type: ignore[attr-defined]
    except rpjrt.InvalidArgumentError:
        pytest.skip("this plugin does not use an unaligned bytearray in place")
    ref = weakref.ref(x)
    del x
    assert _collected(ref)


def test_from_dlpack_of_numpy_still_uses_the_memory_in_place(client: rpjrt.Client) -> None:
    x = _host(64)
    b = client.from_dlpack(x, copy=False)
    assert b.to_numpy().tolist() == x.tolist()
    assert np.from_dlpack(b).ctypes.data == x.ctypes.data
    ro = np.arange(64, dtype=np.float32)
    ro.flags.writeable = False
    assert client.from_dlpack(ro).to_numpy().tolist() == ro.tolist()


@pytest.mark.parametrize("lend", ["execute", "session", "prepare"])
def test_a_zero_copy_buffer_lent_to_rpjrt_keeps_its_source_and_its_data(
    client: rpjrt.Client, lend: str
) -> None:
    """Once its handle was lent out, the Buffer may not be its device buffer's only holder:
    the cycle is kept (the source is not cleared while that memory may be read), and what
    holds the device buffer still reads the right data after a collection."""
    exe = client.compile(ADD)
    x = _host(2)
    x[:] = [1.0, 2.0]
    x.dev = client.put(x, copy=False)
    keep: Any = None
    if lend == "execute":
        keep = exe(x.dev)
    elif lend == "session":
        keep = rpjrt.Session(client)
        keep.bind("w", x.dev)
    else:
        keep = exe.prepare([[x.dev]])
    xref = weakref.ref(x)
    del x
    for _ in range(3):
        gc.collect()
    assert xref() is not None, "a source whose buffer was lent out must be kept"
    if lend == "execute":
        assert keep[0].to_numpy().tolist() == [2.0, 4.0]
    elif lend == "session":
        assert keep.fetch("w").tolist() == [1.0, 2.0]
    else:
        assert keep()[0][0].to_numpy().tolist() == [2.0, 4.0]
    assert xref().dev.to_numpy().tolist() == [1.0, 2.0]  # type: ignore[union-attr]


# 3: a done-callback of a pending alias that holds the alias's fulfiller ----------------


def test_an_alias_callback_holding_its_fulfiller_is_collected_and_the_alias_cancelled(
    client: rpjrt.Client,
) -> None:
    called: list[object] = []
    for _ in range(5):
        alias, ful = client.create_alias_buffer("float32", [8])
        alias.ready_event().add_done_callback(lambda ev, ful=ful: called.append(ful))
        ref = weakref.ref(ful)
        del ful
        assert _collected(ref), "the fulfiller held by its alias's callback leaked"
        # The collected fulfiller cancelled the alias, so nothing waits forever.
        with pytest.raises(rpjrt.CancelledError):
            alias.ready_event().wait(timeout=10)
    assert called == [], "a callback the collector reclaimed must not run"


def test_alias_callbacks_still_run_when_the_fulfiller_is_dropped_or_used(
    client: rpjrt.Client,
) -> None:
    seen: list[str] = []
    done = threading.Event()

    def record(ev: rpjrt.Event) -> None:
        err = ev.error()
        seen.append("ok" if err is None else type(err).__name__)
        if len(seen) == 2:
            done.set()

    alias, ful = client.create_alias_buffer("float32", [2])
    alias.ready_event().add_done_callback(record)
    del ful  # dropped unused: the alias is cancelled and the callback runs
    alias2, ful2 = client.create_alias_buffer("float32", [2])
    alias2.ready_event().add_done_callback(record)
    ful2.fulfill(client.put(np.ones(2, np.float32)))
    assert done.wait(10), seen
    assert sorted(seen) == ["CancelledError", "ok"]
    assert alias2.to_numpy().tolist() == [1.0, 1.0]


def test_a_fulfiller_kept_alive_keeps_its_alias_callbacks(client: rpjrt.Client) -> None:
    """A cycle through a reachable fulfiller is not garbage: its callback runs later."""
    alias, ful = client.create_alias_buffer("float32", [2])
    got = threading.Event()
    alias.ready_event().add_done_callback(lambda ev, ful=ful: got.set())
    gc.collect()
    assert ful.pending
    ful.fulfill(client.put(np.ones(2, np.float32)))
    assert got.wait(10)


# 4: a device of another client ----------------------------------------------------------


def test_a_foreign_device_keyword_is_named_not_blamed_on_an_argument(plugin_path: str) -> None:
    c1, c2 = rpjrt.Client(plugin_path), rpjrt.Client(plugin_path)
    try:
        ep = c1.compile(ADD, portable=True)
        e = c1.compile(ADD)
        a = np.ones(2, np.float32)
        foreign = c2.devices()[-1]
        with pytest.raises(rpjrt.InvalidArgumentError) as put_err:
            c1.put(a, device=foreign)
        calls = {
            "portable": lambda: ep(a, device=foreign),
            "not portable": lambda: e(a, device=foreign),
            "list argument": lambda: ep([1.0, 2.0], device=foreign),
            "buffer argument": lambda: ep(c1.put(a), device=foreign),
            "execute_with_events": lambda: ep.execute_with_events(a, device=foreign),
            "donate": lambda: ep(c1.put(a), device=foreign, donate=[0]),
        }
        for label, call in calls.items():
            with pytest.raises(rpjrt.InvalidArgumentError) as err:
                call()
            msg = str(err.value)
            assert "argument 0" not in msg, f"{label}: {msg}"
            assert f"(id={foreign.id}) belongs to another client" in msg, f"{label}: {msg}"
            assert msg == str(put_err.value), f"{label}: {msg} differs from put's"
        with pytest.raises(rpjrt.InvalidArgumentError, match="belongs to another client"):
            c1.compile(ADD, device=foreign)
    finally:
        c1.close()
        c2.close()


# 5: dtypes numpy reads --------------------------------------------------------------------


class F32Type:
    """A class with a ``dtype``, as JAX's scalar types are: numpy reads it as float32."""

    dtype = np.dtype("float32")


def test_a_class_with_a_dtype_is_a_dtype_everywhere(client: rpjrt.Client) -> None:
    assert np.dtype(F32Type) == np.float32
    assert rpjrt.dtype(F32Type) is rpjrt.float32
    assert rpjrt.float32 == F32Type and not rpjrt.float64 == F32Type
    assert client.put([1.0], dtype=F32Type).dtype is rpjrt.float32
    alias, ful = client.create_alias_buffer(F32Type, [2])
    assert alias.dtype is rpjrt.float32
    ful.fail("CANCELLED", "unused")
    assert rpjrt.Slot("x", (F32Type, [2])).spec == (rpjrt.float32, (2,))
    assert rpjrt.dtype(b"f4") is rpjrt.float32


def test_jax_scalar_types_are_dtypes_both_ways(client: rpjrt.Client) -> None:
    jnp = pytest.importorskip("jax.numpy")
    assert rpjrt.dtype(jnp.float32) is rpjrt.float32
    assert rpjrt.dtype(jnp.bfloat16) is rpjrt.bfloat16
    assert rpjrt.float32 == jnp.float32 and jnp.float32 == rpjrt.float32
    assert rpjrt.bfloat16 == jnp.bfloat16 and jnp.bfloat16 == rpjrt.bfloat16
    assert rpjrt.float32 != jnp.float64 and not rpjrt.float32 == jnp.int32
    assert client.put([1.0], dtype=jnp.bfloat16).dtype is rpjrt.bfloat16
    alias, ful = client.create_alias_buffer(jnp.float32, [2])
    assert alias.dtype is rpjrt.float32
    ful.fail("CANCELLED", "unused")


def test_a_numpy_dtype_in_the_other_byte_order_gets_the_byte_order_message() -> None:
    with pytest.raises(rpjrt.InvalidArgumentError) as by_name:
        rpjrt.dtype(">f4")
    for spec in (np.dtype(">f4"), np.ones(2, ">f4")):
        with pytest.raises(rpjrt.InvalidArgumentError) as err:
            rpjrt.dtype(spec)
        msg = str(err.value)
        assert "non-native byte order" in msg and "not a dtype rpjrt knows" not in msg, msg
        assert str(by_name.value) in msg
    assert not rpjrt.float32 == np.dtype(">f4")


def test_none_and_unknown_types_are_still_refused() -> None:
    for spec in (None, (float, 2), np.dtype([("a", "f4")]), object):
        with pytest.raises(rpjrt.InvalidArgumentError, match="not a dtype rpjrt knows"):
            rpjrt.dtype(spec)
    assert not rpjrt.float64 == None  # noqa: E711 (numpy reads None as float64; rpjrt not)


# 6: bool, equality and hashing, copies ------------------------------------------------------


def test_bool_of_a_buffer_is_numpys(client: rpjrt.Client) -> None:
    assert bool(client.put(np.float32(0.5))) is True
    assert bool(client.put(np.float32(0.0))) is False
    assert bool(client.put(np.array([[3]], np.int32))) is True
    assert bool(client.put(np.array([False]))) is False
    for shape in [(0, 3), (0,), (2,), (2, 2)]:
        b = client.put(np.zeros(shape, np.float32))
        n = int(np.prod(shape))
        ambiguous = f"The truth value of a buffer with {n} elements is ambiguous"
        with pytest.raises(ValueError, match=ambiguous):
            bool(b)
    with pytest.raises(TypeError, match="0-d"):
        len(client.put(np.float32(1)))
    assert len(client.put(np.zeros((3, 2), np.float32))) == 3


def test_handles_of_one_device_buffer_are_equal_and_hash_alike(client: rpjrt.Client) -> None:
    exe = client.compile(ADD)
    p = exe.prepare([[np.ones(2, np.float32)]])
    o = p()
    x, y = o[0][0], o[0][0]
    assert x is not y and x == y and hash(x) == hash(y) and not x != y
    assert p.argument(0, 0) == p.argument(0, 0)
    assert hash(p.argument(0, 0)) == hash(p.argument(0, 0))
    assert len({x, y, o[0][0]}) == 1
    s = rpjrt.Session(client)
    b = client.put(np.ones(2, np.float32))
    s.bind("w", b)
    assert s.buffer("w") == s.buffer("w") == b
    # Distinct device buffers are unequal, whatever their contents, rank or size.
    assert x != p.argument(0, 0)
    assert client.put(np.float32(1)) != client.put(np.float32(1))
    seven = np.zeros((1,) * 7, np.float32)
    assert client.put(seven) != client.put(seven)
    z = client.put(np.zeros((0,), np.float32))
    assert z == z and z != client.put(np.zeros((0,), np.float32))
    # Anything else is left to its own comparison: numpy compares elementwise.
    eq = b == np.ones(2, np.float32)
    assert isinstance(eq, np.ndarray) and eq.tolist() == [True, True]
    ne = b != np.ones(2, np.float32)
    assert isinstance(ne, np.ndarray) and ne.tolist() == [False, False]
    assert (b == "w") is False and (b != 1) is True
    # Deleting one handle deletes the other: they are one buffer.
    x.delete()
    assert y.is_deleted() and x == y


def test_copies_of_events_prepared_calls_and_outputs_are_the_objects(client: rpjrt.Client) -> None:
    exe = client.compile(ADD)
    p = exe.prepare([[np.ones(2, np.float32)]])
    o = p()
    ev = o[0][0].ready_event()
    for obj in (p, o, ev):
        assert copy.copy(obj) is obj
        assert copy.deepcopy(obj) is obj
    assert copy.deepcopy({"outs": o})["outs"] is o
