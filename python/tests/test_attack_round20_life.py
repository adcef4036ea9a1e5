"""Round 20 (lifecycle and concurrency probe): regressions.

- A TcpStore host or peer used in a process forked after it was made is refused there with
  ``FailedPreconditionError`` naming the fork; its shutdown and drop in the child neither
  panic (joining threads the child does not have) nor say goodbye on the parent's
  connection, so the parent's stores go on working.
- Ctrl-C interrupts ``transfer.read_raw``, ``RawCopy.wait()``, ``Session.save()`` while they
  wait for a buffer that is not ready, and ``TcpStore.shutdown(grace)`` while it waits for
  peers, as it does ``block_until_ready()``.
- RawCopy, AliasFulfiller, InMemoryStore, TcpStore and the Session engine are
  weak-referenceable.
- ``AliasFulfiller.fulfill(x)`` says that it deletes ``x``.
- ``KeyboardInterrupt``/``SystemExit`` raised by a Python key-value store while
  ``Client(kv=...)`` is created propagates as itself (it became ``UnknownError``).
"""

from __future__ import annotations

import _thread
import gc
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rpjrt
from rpjrt.distributed import InMemoryStore, TcpStore

from .conftest import fake_plugin_path, plugin_paths, run_python

STUB = Path(rpjrt.__file__).with_name("_rpjrt.pyi")


@pytest.fixture(scope="module")
def new_client() -> Iterator[Any]:
    """A client of the PJRT 0.115 plugin (alias buffers need PJRT_Client_CreateAliasBuffer)."""
    c = rpjrt.Client(plugin_paths()["new"])
    yield c
    c.close()


# -- TcpStore in a forked child ------------------------------------------------------------

FORK_SCRIPT = r"""
import gc, os, sys
import rpjrt
from rpjrt.distributed import TcpStore

mode = sys.argv[1]
h = TcpStore.host("127.0.0.1:0", "tok")
p = TcpStore.connect(h.address, "tok", 1, 10.0)
h.set("k", b"v")
assert p.get("k", 1.0) == b"v"
pid = os.fork()
if pid == 0:
    code = 0
    try:
        if mode == "use":
            for name, s in [("host", h), ("peer", p)]:
                calls = [
                    ("get", lambda: s.get("k", 1.0)),
                    ("set", lambda: s.set("c", b"child")),
                    ("try_get", lambda: s.try_get("k")),
                    ("barrier", lambda: s.barrier("b", 1, 2, 1.0)),
                    ("shutdown", lambda: s.shutdown()),
                    ("shutdown(grace)", lambda: s.shutdown(5.0)),
                ]
                for what, fn in calls:
                    try:
                        fn()
                        print(f"child: {name}.{what} was not refused", flush=True)
                        code = 3
                    except rpjrt.FailedPreconditionError as e:
                        m = str(e)
                        if "is a fork of it" not in m or f"pid {os.getpid()}" not in m:
                            print(f"child: unclear refusal of {name}.{what}: {m}", flush=True)
                            code = 4
                # What does not talk to the host still answers.
                assert s.address == h.address and s.is_host == (name == "host")
                assert "TcpStore(" in repr(s)
            del s, fn, calls
        if mode in ("use", "drop"):
            # Dropped here, not at the interpreter's exit.
            del h, p
            gc.collect()
    except BaseException as e:
        print("child: unexpected", type(e).__name__, e, flush=True)
        code = 5
    sys.exit(code)  # runs finalisation: what is left of the parent's stores is dropped
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"
# The parent's stores work on: no goodbye on the peer's connection, nothing of the child's.
assert p.get("k", 1.0) == b"v"
p.set("p", b"parent")
assert h.get("p", 1.0) == b"parent"
assert h.try_get("c") is None
assert h.try_get("rpjrt:goodbye:1") is None
p.shutdown()
assert h.shutdown(10.0) is True
print("ok")
"""


@pytest.mark.parametrize("mode", ["use", "drop", "exit"])
def test_a_forked_child_is_refused_its_parents_tcp_stores_and_leaves_them_working(
    mode: str, tmp_path: Path
) -> None:
    # `use`: every call refused in the child, naming the fork (they worked there, and the
    # child's shutdown said goodbye on the parent's connection, which then broke; the
    # host's shutdown panicked joining threads the child does not have). `drop`/`exit`:
    # the child drops the stores itself, or at its exit (the drop panicked there too).
    script = tmp_path / "fork_store.py"
    script.write_text(FORK_SCRIPT)
    r = run_python(
        f"import runpy, sys; sys.argv = ['x', {mode!r}]; runpy.run_path({str(script)!r})",
        timeout=60,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert r.stdout.strip().endswith("ok"), out[-3000:]
    assert "child:" not in r.stdout, out[-3000:]
    assert "panicked" not in out and "PanicException" not in out, out[-3000:]


# -- Ctrl-C while a call waits for a buffer that is not ready -------------------------------


def _assert_ctrl_c_ends(call: Callable[[], object], unblock: Callable[[], object]) -> None:
    """`call()` raises KeyboardInterrupt soon after a Ctrl-C (simulated) 0.3 s into it.
    Should it not answer, `unblock()` ends its wait after 10 s (the test then fails on the
    time taken instead of hanging)."""
    # Python takes SIGINT only when it was not ignored at start (a background job of a
    # script, as CI may run the tests, ignores it): take it here for the test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    safety = threading.Timer(10, unblock)
    try:
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        safety.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            call()
        took = time.monotonic() - t0
        timer.join()
        assert took < 5, f"Ctrl-C answered after {took:.1f} s"
    finally:
        safety.cancel()
        signal.signal(signal.SIGINT, previous)


X = np.arange(8, dtype=np.float32)


def test_read_raw_answers_ctrl_c_while_its_buffer_is_not_ready(new_client: Any) -> None:
    a, f = new_client.create_alias_buffer("float32", [8])
    _assert_ctrl_c_ends(lambda: rpjrt.transfer.read_raw(a, 0, 32), lambda: f.fail("INTERNAL", "x"))
    f.fulfill(new_client.put(X))
    assert rpjrt.transfer.read_raw(a, 0, 32) == X.tobytes()
    assert rpjrt.transfer.read_raw(a, 4, 8) == X.tobytes()[4:12]


def test_raw_copy_wait_answers_ctrl_c_and_the_copy_can_be_waited_for_again(new_client: Any) -> None:
    a, f = new_client.create_alias_buffer("float32", [8])
    copy = rpjrt.transfer.read_raw_async(a, 0, 32)
    assert not copy.ready
    _assert_ctrl_c_ends(copy.wait, lambda: f.fail("INTERNAL", "x"))
    # The interrupted wait left the copy in place: it completes once the alias does.
    f.fulfill(new_client.put(X))
    assert copy.wait() == X.tobytes()
    assert copy.ready
    with pytest.raises(rpjrt.InvalidArgumentError, match="already waited for"):
        copy.wait()


def test_a_raw_copy_of_a_buffer_that_fails_still_reports_the_failure(new_client: Any) -> None:
    # The interruptible wait leaves the buffer's own failure to the copy, as before.
    a, f = new_client.create_alias_buffer("float32", [8])
    copy = rpjrt.transfer.read_raw_async(a, 0, 32)
    threading.Timer(0.2, lambda: f.fail("DATA_LOSS", "the source went away")).start()
    with pytest.raises(rpjrt.Error, match="the source went away"):
        copy.wait()
    b, g = new_client.create_alias_buffer("float32", [8])
    g.fail("DATA_LOSS", "no data here")
    with pytest.raises(rpjrt.Error, match="no data here"):
        rpjrt.transfer.read_raw(b, 0, 32)
    # A deleted buffer is refused by name, at once.
    x = new_client.put(X)
    x.delete()
    with pytest.raises(rpjrt.BufferDeletedError):
        rpjrt.transfer.read_raw(x, 0, 32)
    with pytest.raises(rpjrt.BufferDeletedError):
        rpjrt.transfer.read_raw_async(x, 0, 32)


def test_session_save_answers_ctrl_c_while_a_slot_is_not_ready(new_client: Any, tmp_path: Path) -> None:
    a, f = new_client.create_alias_buffer("float32", [8])
    s = rpjrt.Session(new_client)
    s.bind("x", a)
    s.bind("y", np.ones(3, np.int32))
    path = tmp_path / "c.npz"
    _assert_ctrl_c_ends(lambda: s.save(path), lambda: f.fail("INTERNAL", "x"))
    assert not path.exists()
    # The session is as it was: once the slot is ready, the save goes through.
    f.fulfill(new_client.put(X))
    s.save(path)
    with np.load(path) as z:
        np.testing.assert_array_equal(z["x"], X)
        np.testing.assert_array_equal(z["y"], [1, 1, 1])
    s.close()


def test_tcp_store_host_shutdown_grace_answers_ctrl_c_and_stops_the_host() -> None:
    # The host's wait for a peer that does not leave held Ctrl-C for the whole grace.
    h = TcpStore.host("127.0.0.1:0", "tok")
    p = TcpStore.connect(h.address, "tok", 1, 5.0)
    p.set("k", b"v")
    _assert_ctrl_c_ends(lambda: h.shutdown(60.0), lambda: p.shutdown())
    # Interrupted, the host stopped at once.
    with pytest.raises(rpjrt.FailedPreconditionError, match="shut down"):
        h.get("k", 0.1)
    with pytest.raises(rpjrt.Error):
        p.get("k", 0.5)
    p.shutdown()


# -- weak references -------------------------------------------------------------------------


def test_lifecycle_objects_are_weak_referenceable(new_client: Any) -> None:
    a, f = new_client.create_alias_buffer("float32", [8])
    x = new_client.put(X)
    host = TcpStore.host("127.0.0.1:0", "tok")
    objects: dict[str, Any] = {
        "RawCopy": rpjrt.transfer.read_raw_async(x, 0, 32),
        "AliasFulfiller": f,
        "InMemoryStore": InMemoryStore(),
        "TcpStore": host,
        "_Session": rpjrt.Session(new_client)._s,
    }
    for name in list(objects):
        obj = objects.pop(name)
        assert type(obj).__name__ == name
        r = weakref.ref(obj)
        assert r() is obj, name
        fired: list[str] = []
        finalizer = weakref.finalize(obj, fired.append, name)
        assert finalizer.alive
        if name == "TcpStore":
            host.shutdown()
        if name == "AliasFulfiller":
            f.fulfill(new_client.put(X))
        del obj
        if name == "AliasFulfiller":
            del f
        if name == "TcpStore":
            del host
        gc.collect()
        assert r() is None, f"{name} is still alive"
        assert fired == [name], name
    np.testing.assert_array_equal(a.to_numpy(), X)


# -- AliasFulfiller.fulfill deletes its argument, and says so -------------------------------


def test_fulfill_says_that_it_deletes_its_argument(new_client: Any) -> None:
    doc = rpjrt.AliasFulfiller.fulfill.__doc__ or ""
    assert "deleted" in doc and "BufferDeletedError" in doc, doc
    stub = STUB.read_text()
    at = stub.index("class AliasFulfiller:")
    fulfill = stub[stub.index("def fulfill", at) : stub.index("def fail", at)]
    assert "deleted" in fulfill and "BufferDeletedError" in fulfill, fulfill
    # As said: the argument is deleted, the alias has its contents.
    a, f = new_client.create_alias_buffer("float32", [8])
    x = new_client.put(X)
    f.fulfill(x)
    assert x.is_deleted()
    with pytest.raises(rpjrt.BufferDeletedError):
        x.to_numpy()
    np.testing.assert_array_equal(a.to_numpy(), X)
    # A refused buffer is left as it was.
    b, g = new_client.create_alias_buffer("float32", [8])
    y = new_client.put(np.zeros(4, np.float32))
    with pytest.raises(rpjrt.Error):
        g.fulfill(y)
    assert not y.is_deleted() and g.pending
    g.fail("CANCELLED", "done")
    del b



# -- a Python key-value store's KeyboardInterrupt/SystemExit during Client(kv=...) -----------


class _DictStore:
    def __init__(self) -> None:
        self.d: dict[str, bytes] = {}

    def set(self, key: str, value: bytes) -> None:
        self.d[key] = value

    def get(self, key: str, timeout: float) -> bytes:
        return self.d[key]

    def try_get(self, key: str) -> bytes | None:
        return self.d.get(key)


def _client_on(store: Any) -> Any:
    return rpjrt.Client(
        str(fake_plugin_path()),
        options={"fake_kv_roundtrip": True},
        kv=store,
        process_id=0,
        num_processes=1,
    )


@pytest.mark.parametrize("method", ["set", "get"])
@pytest.mark.parametrize("kind", ["KeyboardInterrupt", "SystemExit"])
def test_a_kv_stores_ctrl_c_or_exit_propagates_as_itself(method: str, kind: str) -> None:
    raised: BaseException = KeyboardInterrupt() if kind == "KeyboardInterrupt" else SystemExit(4)

    def boom(*args: object) -> None:
        raise raised

    store = _DictStore()
    setattr(store, method, boom)
    with pytest.raises(type(raised)) as e:
        _client_on(store)
    assert e.value is raised


def test_a_kv_stores_ordinary_exception_is_still_an_rpjrt_error() -> None:
    def boom(*args: object) -> None:
        raise RuntimeError("store trouble")

    store = _DictStore()
    store.get = boom  # type: ignore[method-assign]
    with pytest.raises(rpjrt.Error, match="the Python store's get raised RuntimeError: store trouble"):
        _client_on(store)
