"""Round 23 of the outside probe (many processes, stores, rendezvous)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import rpjrt
from rpjrt import distributed as d
from rpjrt._errors import DeadlineExceededError, InvalidArgumentError

from .conftest import fake_plugin_path, run_python

NEW = os.environ.get("RPJRT_TEST_PLUGIN_NEW", "")

OBJECT_VALUES = [
    np.array(["secret", 12345], dtype=object),
    np.array([(1, "x")], dtype=[("a", "<i8"), ("b", "O")]),
    np.array([[None]], dtype=object),
]


def _stores() -> list[tuple[str, object, object]]:
    """(name, store to write, store to read back from) for every kind of store."""
    h = d.TcpStore.host("127.0.0.1:0", "t")
    p = d.TcpStore.connect(h.address, "t", 1, 5.0)
    mem = d.InMemoryStore()
    bounded = d.BoundedStore(d.InMemoryStore())
    return [("memory", mem, mem), ("host", h, p), ("peer", p, h), ("bounded", bounded, bounded)]


def test_an_array_of_python_objects_is_refused_as_a_store_value() -> None:
    stores = _stores()
    try:
        for name, w, _ in stores:
            for v in OBJECT_VALUES:
                with pytest.raises(TypeError, match="object pointers"):
                    w.set("k", v)  # type: ignore[attr-defined]
                # The same TypeError a str gets.
                with pytest.raises(TypeError, match="bytes-like"):
                    w.set("k", v)  # type: ignore[attr-defined]
            assert w.try_get("k") is None, name  # type: ignore[attr-defined]
        # Field names with an O in them are names, not codes: such arrays are data.
        v = np.array([(1, 2)], dtype=[("One", "<i4"), ("O", "<i4")])
        for name, w, r in stores:
            w.set("k2", v)  # type: ignore[attr-defined]
            assert r.get("k2", 5.0) == v.tobytes(), name  # type: ignore[attr-defined]
    finally:
        for name, w, _ in stores:
            if name in ("host", "peer"):
                w.shutdown(0.0)  # type: ignore[attr-defined]


def test_a_wrapped_store_returning_an_array_of_objects_is_its_error() -> None:
    class Store:
        def set(self, key: str, value: bytes) -> None:
            pass

        def get(self, key: str, timeout: float) -> object:
            return np.array([object()], dtype=object)

        def try_get(self, key: str) -> object:
            return np.array([object()], dtype=object)

    b = d.BoundedStore(Store())
    with pytest.raises(TypeError, match="object pointers.*not bytes"):
        b.get("k", 1.0)
    with pytest.raises(TypeError, match="object pointers.*not bytes"):
        b.try_get("k")


def test_a_python_store_handing_the_plugin_an_array_of_objects_fails_the_creation() -> None:
    r = run_python(
        f"""
        import os
        os.environ["RPJRT_FAKE_KV"] = "1"
        import numpy as np
        import rpjrt
        class Store:
            def set(self, key, value):
                pass
            def get(self, key, timeout):
                return np.array(["secret", 12345], dtype=object)
            def try_get(self, key):
                return None
        try:
            rpjrt.Client({str(fake_plugin_path())!r}, options={{"fake_device_count": 2}},
                         kv=Store(), process_id=1, num_processes=2, timeout=60)
        except Exception as e:
            print("REFUSED", type(e).__name__, e)
        else:
            print("ACCEPTED")
        """,
        timeout=120,
    )
    assert "REFUSED" in r.stdout, r.stdout + r.stderr
    assert "object pointers" in r.stdout, r.stdout


def test_explicit_process_options_that_contradict_the_arguments_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="process_id=5 contradicts process_id=1"):
        rpjrt.Client(NEW, options={"process_id": 5}, kv=d.InMemoryStore(), process_id=1,
                     num_processes=2)
    with pytest.raises(InvalidArgumentError, match="node_id=0 contradicts process_id=1"):
        rpjrt.Client(str(fake_plugin_path()), options={"node_id": 0, "num_nodes": 2},
                     kv=d.InMemoryStore(), process_id=1, num_processes=2)
    with pytest.raises(InvalidArgumentError, match="num_nodes is not"):
        rpjrt.Client(str(fake_plugin_path()), options={"node_id": 1},
                     kv=d.InMemoryStore(), process_id=1, num_processes=2)
    # Agreeing options are sent as given.
    c = rpjrt.Client(NEW, options={"process_id": 1}, kv=d.InMemoryStore(), process_id=1,
                     num_processes=2)
    assert c.process_index == 1
    c.close()


def test_a_process_id_the_cpu_plugin_would_wrap_is_refused_naming_its_limit() -> None:
    for pid in (2**20, 2**21, 2**31, 2**32 - 2):
        with pytest.raises(InvalidArgumentError, match=r"2\^20"):
            rpjrt.Client(NEW, kv=d.InMemoryStore(), process_id=pid, num_processes=pid + 1)
    c = rpjrt.Client(NEW, kv=d.InMemoryStore(), process_id=2**20 - 1, num_processes=2**20)
    assert c.process_index == 2**20 - 1
    assert all(x.id >= 0 for x in c.devices())
    c.close()


def test_a_creation_timeout_while_waiting_for_another_process_names_the_key() -> None:
    # Given up on, the creation goes on in the background: in a child process.
    r = run_python(
        f"""
        import os
        os.environ["RPJRT_FAKE_KV"] = "1"
        import rpjrt
        from rpjrt import distributed as d
        try:
            rpjrt.Client({str(fake_plugin_path())!r}, options={{"fake_device_count": 2}},
                         kv=d.InMemoryStore(), process_id=0, num_processes=2, timeout=1)
        except Exception as e:
            print("ERR", type(e).__name__, e)
        os._exit(0)
        """,
        timeout=120,
    )
    out = r.stdout
    assert "ERR DeadlineExceededError" in out, out + r.stderr
    assert 'waiting in the key-value store for key "fake:device:1"' in out, out
    assert "another process" in out and "process 0 of 2" in out, out
    assert "the plugin did not return" not in out, out


def test_a_host_on_port_0_with_peers_to_come_is_refused_at_once() -> None:
    t0 = time.monotonic()
    with pytest.raises(InvalidArgumentError, match="port 0"):
        d.initialize(0, 2, "127.0.0.1:0", "t", timeout=10)
    assert time.monotonic() - t0 < 2
    one = d.initialize(0, 1, "127.0.0.1:0", "t", timeout=5)
    one.shutdown(0)


def test_a_peer_cannot_connect_as_process_0() -> None:
    h = d.TcpStore.host("127.0.0.1:0", "t")
    try:
        with pytest.raises(InvalidArgumentError, match="process 0 is the store's host"):
            d.TcpStore.connect(h.address, "t", 0, 2.0)
    finally:
        h.shutdown(0.0)


def test_two_processes_with_one_id_are_refused() -> None:
    h = d.TcpStore.host("127.0.0.1:0", "t")
    try:
        p = d.TcpStore.connect(h.address, "t", 1, 5.0)
        r = run_python(
            f"""
            from rpjrt import distributed as d
            try:
                d.TcpStore.connect({h.address!r}, "t", 1, 5.0)
            except Exception as e:
                print("ERR", type(e).__name__, e)
            """,
            timeout=60,
        )
        assert "ERR" in r.stdout, r.stdout + r.stderr
        assert "process id 1 is used by more than one process" in r.stdout, r.stdout
        p.shutdown()
    finally:
        h.shutdown(0.0)


def test_rpjrt_coordinator_overrides_a_master_port_rpjrt_cannot_use() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "65535"}
    code = """
        from rpjrt import distributed as d
        try:
            print("OK", d.detect().coordinator)
        except Exception as e:
            print("ERR", e)
        """
    r = run_python(code, env=env)
    assert "MASTER_PORT+1" in r.stdout and "RPJRT_COORDINATOR" in r.stdout, r.stdout + r.stderr
    r = run_python(code, env={**env, "RPJRT_COORDINATOR": "127.0.0.1:40000"})
    assert "OK 127.0.0.1:40000" in r.stdout, r.stdout + r.stderr
