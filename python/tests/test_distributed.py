"""Multi-process support from Python: stores, launcher detection, adapters, Client(kv=...)."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

import rpjrt
from rpjrt import distributed
from rpjrt._errors import (
    DeadlineExceededError,
    InvalidArgumentError,
    PermissionDeniedError,
    UnavailableError,
)

from .conftest import fake_plugin_path, run_python

LAUNCH_VARS = [
    "RPJRT_PROCESS_ID",
    "RPJRT_NUM_PROCESSES",
    "RPJRT_COORDINATOR",
    "RPJRT_COORDINATOR_PORT",
    "RPJRT_TOKEN",
    "RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_NODELIST",
    "SLURM_JOB_NODELIST",
    "SLURM_STEP_NODELIST",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
]


@pytest.fixture()
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for v in LAUNCH_VARS:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------ stores


def test_in_memory_store() -> None:
    s = distributed.InMemoryStore()
    assert s.try_get("a") is None
    s.set("a", b"\x00\x01")
    assert s.get("a", 1.0) == b"\x00\x01"
    assert s.try_get("a") == b"\x00\x01"
    with pytest.raises(DeadlineExceededError, match='"b"'):
        s.get("b", 0.05)
    with pytest.raises(InvalidArgumentError):
        s.get("a", -1.0)


def test_in_memory_barrier_names_the_missing_process() -> None:
    s = distributed.InMemoryStore()
    errors: list[BaseException] = []

    def run(p: int) -> None:
        try:
            s.barrier("b", p, 3, 0.3)
        except rpjrt.Error as e:
            errors.append(e)

    ts = [threading.Thread(target=run, args=(p,)) for p in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(errors) == 2
    assert all("process 2 of 3" in str(e) for e in errors), errors


def test_a_reused_barrier_name_waits_again() -> None:
    s = distributed.InMemoryStore()
    t = threading.Thread(target=s.barrier, args=("b", 1, 2, 10.0))
    t.start()
    s.barrier("b", 0, 2, 10.0)
    t.join()
    # The second use of "b" is a new round: process 1 has not come to it.
    with pytest.raises(DeadlineExceededError, match="process 1 of 2"):
        s.barrier("b", 0, 2, 0.1)


def test_the_hosts_own_set_obeys_the_entry_limit() -> None:
    host = distributed.TcpStore.host("127.0.0.1:0", "t")
    try:
        with pytest.raises(InvalidArgumentError, match="limit"):
            host.set("k", bytes(64 << 20))
    finally:
        host.shutdown()


def test_tcp_store_host_and_clients() -> None:
    host = distributed.TcpStore.host("127.0.0.1:0", "secret")
    assert host.is_host
    addr = host.address
    c = distributed.TcpStore.connect(addr, "secret", 1, 5.0)
    assert not c.is_host
    c.set("k", b"v")
    assert host.get("k", 5.0) == b"v"
    assert c.try_get("missing") is None
    with pytest.raises(DeadlineExceededError):
        c.get("missing", 0.1)
    with pytest.raises(PermissionDeniedError, match="wrong token"):
        distributed.TcpStore.connect(addr, "guess", 1, 5.0)
    c.shutdown()
    survivor = distributed.TcpStore.connect(addr, "secret", 2, 5.0)
    host.shutdown(0.0)
    port = int(addr.rsplit(":", 1)[1])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    with pytest.raises(UnavailableError, match="process 0"):
        survivor.set("x", b"")
    with pytest.raises(DeadlineExceededError, match="process 0"):
        distributed.TcpStore.connect(addr, "secret", 1, 0.2)


def test_tcp_store_eight_clients_a_thousand_keys_each() -> None:
    host = distributed.TcpStore.host("127.0.0.1:0", "t")
    clients = [distributed.TcpStore.connect(host.address, "t", i + 1, 10.0) for i in range(8)]
    failures: list[str] = []

    def work(i: int) -> None:
        s = clients[i]
        try:
            for k in range(1000):
                s.set(f"c{i}/k{k}", f"{i}:{k}".encode())
            other = (i + 1) % 8
            for k in range(1000):
                if s.get(f"c{other}/k{k}", 30.0) != f"{other}:{k}".encode():
                    failures.append(f"client {i} read a wrong value for c{other}/k{k}")
                if s.try_get(f"c{i}/k{k}") != f"{i}:{k}".encode():
                    failures.append(f"client {i} lost its own c{i}/k{k}")
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(repr(e))

    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert failures == []
    host.shutdown()


# ------------------------------------------------------------------------ launchers


def test_detect_each_launcher(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidArgumentError, match="no launcher"):
        distributed.detect()
    clean_env.setenv("SLURM_PROCID", "3")
    clean_env.setenv("SLURM_NTASKS", "4")
    clean_env.setenv("SLURM_JOB_NODELIST", "gpu[07-09,11],cpu1")
    clean_env.setenv("RPJRT_COORDINATOR_PORT", "7000")
    e = distributed.detect()
    assert (e.source, e.process_id, e.num_processes) == ("slurm", 3, 4)
    assert e.coordinator == "gpu07:7000"
    clean_env.setenv("OMPI_COMM_WORLD_RANK", "1")
    clean_env.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert distributed.detect().source == "openmpi"
    clean_env.setenv("RANK", "0")
    clean_env.setenv("WORLD_SIZE", "2")
    clean_env.setenv("MASTER_ADDR", "10.1.2.3")
    clean_env.setenv("MASTER_PORT", "29500")
    e = distributed.detect()
    assert (e.source, e.coordinator) == ("torchrun", "10.1.2.3:29501")
    clean_env.setenv("RPJRT_PROCESS_ID", "1")
    clean_env.setenv("RPJRT_NUM_PROCESSES", "2")
    clean_env.setenv("RPJRT_TOKEN", "tok")
    e = distributed.detect()
    assert (e.source, e.process_id, e.token) == ("rpjrt", 1, "tok")
    assert distributed.first_host("node[01-04,07]") == "node01"


def test_launch_variables_that_are_not_utf8_are_errors_not_unset(clean_env: pytest.MonkeyPatch) -> None:
    # Read as unset, such a value would quietly make a multi-process job single-process.
    clean_env.setenv("RPJRT_PROCESS_ID", "\udcff")
    clean_env.setenv("RPJRT_NUM_PROCESSES", "2")
    with pytest.raises(InvalidArgumentError, match="RPJRT_PROCESS_ID"):
        distributed.detect()


def test_initialize_explicit_and_from_env(clean_env: pytest.MonkeyPatch) -> None:
    port = free_port()
    d = distributed.initialize(0, 1, f"127.0.0.1:{port}", "t")
    assert (d.process_id, d.num_processes, d.source) == (0, 1, "explicit")
    d.barrier("one", 5.0)
    assert d.shutdown(1.0)
    clean_env.setenv("RPJRT_PROCESS_ID", "0")
    clean_env.setenv("RPJRT_NUM_PROCESSES", "1")
    clean_env.setenv("RPJRT_COORDINATOR", f"127.0.0.1:{free_port()}")
    d = distributed.initialize()
    assert d.source == "rpjrt"
    d.shutdown()
    with pytest.raises(InvalidArgumentError, match="both"):
        distributed.initialize(process_id=0)
    clean_env.delenv("RPJRT_COORDINATOR")
    with pytest.raises(InvalidArgumentError, match="coordinator"):
        distributed.initialize(0, 1)


WORKER = """
import sys
from rpjrt import distributed
d = distributed.initialize(timeout=10.0)
d.store.set(f"hello/{d.process_id}", str(d.process_id).encode())
d.barrier("met", 10.0)
seen = sum(1 for p in range(d.num_processes) if d.store.get(f"hello/{p}", 10.0) == str(p).encode())
d.barrier("done", 10.0)
d.shutdown(10.0)
print(f"process {d.process_id} of {d.num_processes} saw {seen} via {d.source}")
"""


def test_python_processes_rendezvous_under_rpjrt_launch(clean_env: pytest.MonkeyPatch) -> None:
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "launch", "-n", "3", "--", sys.executable, "-c", WORKER],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    for p in range(3):
        assert f"[{p}] process {p} of 3 saw 3 via rpjrt" in r.stdout, r.stdout


JOIN_AND_LEAVE = (
    "import rpjrt.distributed as d; c = d.initialize(timeout=20.0); "
    "print(c.process_id); c.shutdown()"
)


def test_initialize_and_shutdown_alone_pass_under_launch_twenty_times(
    clean_env: pytest.MonkeyPatch,
) -> None:
    # initialize() returns only once every process joined, and process 0's shutdown waits
    # for the others' goodbyes: no process meets a store that is gone.
    import sys

    for i in range(20):
        r = subprocess.run(
            [sys.executable, "-m", "rpjrt", "launch", "-n", "4", "--timeout", "60", "--",
             sys.executable, "-c", JOIN_AND_LEAVE],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, f"run {i}: {r.stdout}{r.stderr}"
        for p in range(4):
            assert f"[{p}] {p}" in r.stdout, f"run {i}: {r.stdout}"


def test_every_submodule_is_an_attribute_after_a_plain_import() -> None:
    names = ["conform", "cuda", "distributed", "ffi", "session", "sharding", "transfer"]
    r = run_python(
        f"""
        import rpjrt
        assert callable(rpjrt.distributed.initialize)
        for name in {names!r}:
            mod = getattr(rpjrt, name)
            assert mod.__name__ == "rpjrt." + name, mod
            assert name in dir(rpjrt), name
        try:
            rpjrt.no_such_module
        except AttributeError as e:
            assert "no_such_module" in str(e)
        else:
            raise SystemExit("no AttributeError")
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


# ----------------------------------------------------------------------------- adapters


class FakeTorchStore:
    """The documented torch.distributed.Store surface: set, get, wait(keys, timedelta), check."""

    def __init__(self) -> None:
        self._d: dict[str, bytes] = {}
        self._cv = threading.Condition()

    def set(self, key: str, value: str | bytes) -> None:
        with self._cv:
            self._d[key] = value.encode() if isinstance(value, str) else bytes(value)
            self._cv.notify_all()

    def get(self, key: str) -> bytes:
        with self._cv:
            return self._d[key]

    def check(self, keys: list[str]) -> bool:
        with self._cv:
            return all(k in self._d for k in keys)

    def wait(self, keys: list[str], timeout: timedelta) -> None:
        with self._cv:
            ok = self._cv.wait_for(
                lambda: all(k in self._d for k in keys), timeout.total_seconds()
            )
        if not ok:
            raise RuntimeError("Socket Timeout")  # what torch's DistStoreError says


class FakeRedis:
    def __init__(self) -> None:
        self.d: dict[str, bytes] = {}

    def set(self, key: str, value: bytes) -> None:
        self.d[key] = value

    def get(self, key: str) -> bytes | None:
        return self.d.get(key)


@pytest.mark.parametrize("make", ["torch", "redis", "memory"])
def test_adapters_behave_like_stores(make: str) -> None:
    store: Any
    if make == "torch":
        store = distributed.TorchStore(FakeTorchStore())
    elif make == "redis":
        store = distributed.RedisStore(FakeRedis())
    else:
        store = distributed.InMemoryStore()
    assert store.try_get("k") is None
    threading.Timer(0.05, lambda: store.set("k", b"late")).start()
    assert store.get("k", 5.0) == b"late"
    assert store.try_get("k") == b"late"
    with pytest.raises((TimeoutError, DeadlineExceededError)):
        store.get("never", 0.05)


def test_jax_adapter_with_the_real_jax_coordination_service() -> None:
    port = free_port()
    r = run_python(
        f"""
        import jax
        jax.distributed.initialize(coordinator_address="127.0.0.1:{port}",
                                   num_processes=1, process_id=0)
        from rpjrt import distributed
        s = distributed.JaxStore()
        assert s.try_get("k") is None
        s.set("k", b"\\x00v")
        s.set("k", b"\\x00w")          # overwrite is allowed
        assert s.get("k", 5.0) == b"\\x00w"
        assert s.try_get("k") == b"\\x00w"
        try:
            s.get("never", 0.1)
        except TimeoutError as e:
            print("timeout:", e)
        jax.distributed.shutdown()
        print("ok")
        """,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "timeout: key 'never'" in r.stdout and "ok" in r.stdout, r.stdout


def test_jax_adapter_without_initialize_says_so() -> None:
    r = run_python(
        """
        from rpjrt import distributed
        try:
            distributed.JaxStore()
        except Exception as e:
            print(type(e).__name__, e)
        """
    )
    assert "FailedPreconditionError" in r.stdout and "jax.distributed.initialize" in r.stdout


# ----------------------------------------------------------------------- Client(kv=...)


def test_cpu_plugins_take_the_store_but_stay_single_process(
    plugin_path: str, plugin_label: str
) -> None:
    calls: list[str] = []

    class Recording:
        def __init__(self) -> None:
            self.inner = distributed.InMemoryStore()

        def set(self, key: str, value: bytes) -> None:
            calls.append("set")
            self.inner.set(key, value)

        def get(self, key: str, timeout: float) -> bytes:
            calls.append("get")
            return self.inner.get(key, timeout)

        def try_get(self, key: str) -> bytes | None:
            calls.append("try_get")
            return self.inner.try_get(key)

    c = rpjrt.Client(plugin_path, kv=Recording(), process_id=1, num_processes=2)
    assert calls == []  # neither CPU plugin rendezvouses
    devs = c.devices()
    assert all(d.is_addressable for d in devs)
    if plugin_label == "old":
        assert c.process_index == 0 and [d.id for d in devs] == [0, 1, 2, 3]
    else:
        assert c.process_index == 1 and [d.id for d in devs] == [2048, 2049, 2050, 2051]
        assert all(d.process_index == 1 for d in devs)
    c.close()


def test_client_kv_arguments_are_checked(plugin_path: str) -> None:
    with pytest.raises(InvalidArgumentError, match="together"):
        rpjrt.Client(plugin_path, kv=distributed.InMemoryStore())
    with pytest.raises(InvalidArgumentError, match="object has no set"):
        rpjrt.Client(plugin_path, kv=object(), process_id=0, num_processes=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="out of range"):
        rpjrt.Client(plugin_path, kv=distributed.InMemoryStore(), process_id=2, num_processes=2)


def test_python_store_serves_the_plugin_through_the_callbacks() -> None:
    """The fake plugin puts and gets a key through the callbacks during client creation;
    a Python store serves them (the GIL is released around creation)."""
    r = run_python(
        f"""
        import threading, rpjrt
        from rpjrt import distributed
        seen = []
        class Store:
            def __init__(self): self.d = {{}}
            def set(self, k, v): seen.append(("set", k, threading.get_ident())); self.d[k] = v
            def get(self, k, t): seen.append(("get", k)); return self.d[k]
            def try_get(self, k): seen.append(("try_get", k)); return self.d.get(k)
        c = rpjrt.Client({str(fake_plugin_path())!r}, options={{"fake_kv_roundtrip": True}},
                         kv=Store(), process_id=0, num_processes=1)
        print(sorted(x[0] for x in seen))
        class Broken(Store):
            def get(self, k, t): raise TimeoutError(f"process 3 never set {{k}}")
        try:
            rpjrt.Client({str(fake_plugin_path())!r}, options={{"fake_kv_roundtrip": True}},
                         kv=Broken(), process_id=0, num_processes=4)
        except rpjrt.Error as e:
            print(type(e).__name__, e)
        class Refusing(Store):
            def set(self, k, v): raise PermissionError("read-only store")
        try:
            rpjrt.Client({str(fake_plugin_path())!r}, options={{"fake_kv_roundtrip": True}},
                         kv=Refusing(), process_id=0, num_processes=1)
        except rpjrt.Error as e:
            print(type(e).__name__, e)
        """
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "['get', 'set', 'try_get']" in r.stdout, r.stdout
    assert "DeadlineExceededError" in r.stdout and "process 3 never set" in r.stdout, r.stdout
    # The exception table custom-call handlers use (errors::code_of_exception).
    assert "PermissionDeniedError" in r.stdout and "read-only store" in r.stdout, r.stdout


def test_two_threads_form_a_two_process_client_through_a_python_store() -> None:
    """Each thread's client creation waits in kv_get for the other's key; that only works
    if creation releases the GIL and each callback takes it for its own call."""
    r = run_python(
        f"""
        import threading, rpjrt
        class Store:
            def __init__(self):
                self.d, self.cv = {{}}, threading.Condition()
            def set(self, k, v):
                with self.cv:
                    self.d[k] = v
                    self.cv.notify_all()
            def get(self, k, t):
                with self.cv:
                    if not self.cv.wait_for(lambda: k in self.d, t):
                        raise TimeoutError(k)
                    return self.d[k]
            def try_get(self, k):
                with self.cv:
                    return self.d.get(k)
        store, out = Store(), {{}}
        def make(p):
            c = rpjrt.Client({str(fake_plugin_path())!r}, options={{"fake_device_count": 2}},
                             kv=store, process_id=p, num_processes=2)
            out[p] = (c.process_index, [(d.id, d.process_index, d.is_addressable)
                                        for d in c.devices()], len(c.addressable_devices()))
        ts = [threading.Thread(target=make, args=(p,)) for p in (0, 1)]
        for t in ts: t.start()
        for t in ts: t.join()
        print(out[0]); print(out[1])
        """,
        env={"RPJRT_FAKE_KV": "1"},
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "(0, [(0, 0, True), (1, 0, True), (2, 1, False), (3, 1, False)], 2)"
    assert lines[1] == "(1, [(0, 0, False), (1, 0, False), (2, 1, True), (3, 1, True)], 2)"


# --------------------------------------------------- stores that never answer (bounded)


class Forever:
    """A store whose methods block until ``release`` is set (for the test: forever)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.hang = True
        self.d: dict[str, bytes] = {}

    def _wait(self) -> None:
        if self.hang:
            self.release.wait()

    def set(self, key: str, value: bytes) -> None:
        self._wait()
        self.d[key] = value

    def get(self, key: str, timeout: float) -> bytes:
        self._wait()
        return self.d[key]

    def try_get(self, key: str) -> bytes | None:
        self._wait()
        return self.d.get(key)


class ForeverRedis(FakeRedis):
    """A redis-py-like client whose GET sleeps forever, as one whose server was paused
    and whose socket has no timeout."""

    def get(self, key: str) -> bytes | None:
        while True:
            time.sleep(3600)


def _ends_within(limit: float, fn: Any, *args: Any) -> BaseException:
    t0 = time.monotonic()
    with pytest.raises(BaseException) as e:
        fn(*args)
    took = time.monotonic() - t0
    assert took < limit, f"{fn} took {took:.2f}s: {e.value!r}"
    return e.value


def test_a_get_on_a_store_that_never_answers_ends_after_its_timeout() -> None:
    inner = Forever()
    store = distributed.BoundedStore(inner, op_timeout=0.3)
    try:
        e = _ends_within(0.5 + distributed.GRACE + 1.0, store.get, "k", 0.5)
        assert isinstance(e, TimeoutError), repr(e)
        assert "key 'k' was not set within 0.5s" in str(e), e
        assert "Forever" in str(e) and "get('k')" in str(e), e
        # set and try_get are bounded by op_timeout.
        for call, args in ((store.set, ("k", b"v")), (store.try_get, ("k",))):
            e = _ends_within(0.3 + 1.0, call, *args)
            assert isinstance(e, TimeoutError) and "Forever" in str(e), repr(e)
        # Nothing stuck: once the store answers again, the next calls work at once, even
        # while the abandoned calls are still blocked in it.
        inner.hang = False
        store.set("k", b"v")
        assert store.get("k", 1.0) == b"v" and store.try_get("k") == b"v"
    finally:
        inner.release.set()


def test_a_redis_client_that_never_answers_cannot_hang_get() -> None:
    store = distributed.RedisStore(ForeverRedis(), prefix="p:", op_timeout=0.3)
    e = _ends_within(0.4 + distributed.GRACE + 1.0, store.get, "k", 0.4)
    assert isinstance(e, TimeoutError) and "key 'k' was not set within 0.4s" in str(e), e
    assert "try_get('k')" in str(e), e
    e = _ends_within(1.5, store.try_get, "k")
    assert isinstance(e, TimeoutError), repr(e)
    store.set("k", b"v")  # set does not go through the blocking GET


def test_abandoned_calls_are_bounded_and_forgotten_once_they_return() -> None:
    inner = Forever()
    store = distributed.BoundedStore(inner, op_timeout=0.05)
    store.max_stuck = 2
    try:
        for _ in range(2):
            with pytest.raises(TimeoutError, match="did not return from try_get"):
                store.try_get("k")
        # Two calls are still out: the next fails at once instead of starting a thread.
        e = _ends_within(0.04, store.try_get, "k")
        assert "2 earlier calls have not returned" in str(e), e
    finally:
        inner.hang = False
        inner.release.set()
    deadline = time.monotonic() + 5
    while store._stuck and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store._stuck == 0
    assert store.try_get("k") is None


def test_a_store_call_raising_passes_its_exception_through() -> None:
    class Raising(Forever):
        def try_get(self, key: str) -> bytes | None:
            raise KeyError(f"no {key} here")

    store = distributed.BoundedStore(Raising())
    with pytest.raises(KeyError, match="no k here"):
        store.try_get("k")
    assert store._stuck == 0


def test_the_client_wraps_a_python_store_and_bounds_its_calls() -> None:
    r = run_python(
        f"""
        import threading, time, rpjrt
        from rpjrt import distributed
        plugin = {str(fake_plugin_path())!r}
        names = []
        class Plain:
            def __init__(self): self.d = {{}}
            def set(self, k, v): names.append(threading.current_thread().name); self.d[k] = v
            def get(self, k, t): return self.d[k]
            def try_get(self, k): return self.d.get(k)
        rpjrt.Client(plugin, options={{"fake_kv_roundtrip": True}}, kv=Plain(),
                     process_id=0, num_processes=1).close()
        print("ran on", names)
        class Hangs(Plain):
            def set(self, k, v): threading.Event().wait()
        t0 = time.monotonic()
        try:
            rpjrt.Client(plugin, options={{"fake_kv_roundtrip": True}},
                         kv=distributed.BoundedStore(Hangs(), op_timeout=0.5),
                         process_id=0, num_processes=1)
        except rpjrt.Error as e:
            print(type(e).__name__, round(time.monotonic() - t0, 1), e)
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ran on ['rpjrt-store-call']" in r.stdout, r.stdout
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("DeadlineExceededError"))
    assert "did not return from set" in line and "Hangs" in line, line
    assert float(line.split()[1]) < 3.0, line


# ------------------------------------------------------------ adapter argument checks


def _adapters() -> list[Any]:
    return [
        distributed.RedisStore(FakeRedis()),
        distributed.TorchStore(FakeTorchStore()),
        distributed.BoundedStore(distributed.InMemoryStore()),
    ]


@pytest.mark.parametrize(
    "bad, exc",
    [(True, TypeError), ("1", TypeError), (None, TypeError), (b"1", TypeError),
     (float("nan"), ValueError), (float("inf"), ValueError), (-1, ValueError),
     (-0.5, ValueError)],
)
def test_adapter_timeouts_are_checked_in_one_place(bad: Any, exc: type) -> None:
    for store in _adapters():
        with pytest.raises(exc, match="timeout"):
            store.get("k", bad)
    with pytest.raises(exc, match="op_timeout"):
        distributed.RedisStore(FakeRedis(), op_timeout=bad)
    with pytest.raises(exc, match="poll"):
        distributed.TorchStore(FakeTorchStore(), poll=bad)


def test_adapter_keys_and_values_are_checked() -> None:
    for store in _adapters():
        with pytest.raises(TypeError, match="key must be a str, not int"):
            store.set(1, b"v")
        with pytest.raises(TypeError, match="key must be a str"):
            store.try_get(b"k")
        with pytest.raises(TypeError, match="value must be bytes-like.*not str"):
            store.set("k", "text")
        with pytest.raises(TypeError, match="value must be bytes-like.*not int"):
            store.set("k", 5)  # bytes(5) would have stored five zero bytes
        store.set("k", bytearray(b"ab"))
        store.set("m", memoryview(b"cd"))
        assert store.get("k", 1.0) == b"ab" and store.try_get("m") == b"cd"
        assert store.get("k", 0) == b"ab"  # a zero timeout still reads once
        assert store.get("k", 1e300) == b"ab"  # finite, if longer than any lock waits
    with pytest.raises(ValueError, match="poll must be a positive"):
        distributed.RedisStore(FakeRedis(), poll=0)
    with pytest.raises(TypeError, match="prefix must be a str"):
        distributed.RedisStore(FakeRedis(), prefix=b"p:")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="has no try_get"):
        distributed.BoundedStore(FakeRedis())


def test_what_a_wrapped_store_returns_must_be_bytes() -> None:
    class Texty(Forever):
        def try_get(self, key: str) -> Any:
            return "text"

    inner = Texty()
    inner.hang = False
    with pytest.raises(TypeError, match="try_get\\('k'\\) returned str, not bytes"):
        distributed.BoundedStore(inner).try_get("k")


def test_rust_store_timeouts_refuse_bools_and_text() -> None:
    s = distributed.InMemoryStore()
    s.set("k", b"v")
    for bad in (True, "1", b"1"):
        with pytest.raises(TypeError, match="timeout must be a number of seconds"):
            s.get("k", bad)
        with pytest.raises(TypeError, match="timeout must be a number of seconds"):
            s.barrier("b", 0, 1, bad)
    with pytest.raises(InvalidArgumentError, match="timeout"):
        s.get("k", float("nan"))
    assert s.get("k", 1) == b"v" and s.get("k") == b"v"
    host = distributed.TcpStore.host("127.0.0.1:0", "t")
    try:
        with pytest.raises(TypeError, match="grace"):
            host.shutdown(False)
    finally:
        host.shutdown()


# ------------------------------------------------------ barriers: world sizes and ids


def test_a_barrier_called_with_two_world_sizes_fails_at_once_on_both_sides() -> None:
    s = distributed.InMemoryStore()
    errors: dict[int, BaseException] = {}

    def run(p: int, n: int) -> None:
        try:
            s.barrier("sizes", p, n, 30.0)
        except rpjrt.Error as e:
            errors[p] = e

    t0 = time.monotonic()
    ts = [threading.Thread(target=run, args=pn) for pn in ((0, 2), (1, 3))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert time.monotonic() - t0 < 5
    assert isinstance(errors[0], InvalidArgumentError), errors
    assert 'barrier "sizes": process 1 arrived with num_processes 3, but this process (0) ' \
        "was called with num_processes 2" in str(errors[0])
    assert "process 0 arrived with num_processes 2" in str(errors[1]), errors


def test_a_tcp_barrier_with_two_world_sizes_fails_at_once() -> None:
    host = distributed.TcpStore.host("127.0.0.1:0", "t")
    peer = distributed.TcpStore.connect(host.address, "t", 1, 5.0)
    try:
        seen: list[BaseException] = []

        def host_side() -> None:
            try:
                host.barrier("b", 0, 3, 30.0)
            except rpjrt.Error as e:
                seen.append(e)

        t = threading.Thread(target=host_side)
        t0 = time.monotonic()
        t.start()
        with pytest.raises(InvalidArgumentError, match="process 0 arrived with num_processes 3"):
            peer.barrier("b", 1, 2, 30.0)
        t.join()
        assert time.monotonic() - t0 < 5
        assert len(seen) == 1 and "process 1 arrived with num_processes 2" in str(seen[0])
    finally:
        peer.shutdown()
        host.shutdown()


@pytest.mark.parametrize(
    "pid, n, words",
    [
        (True, 2, "a bool is not an index"),
        (0, True, "a bool is not an index"),
        (-1, 2, "process_id must be a non-negative integer, not -1"),
        (0, -2, "num_processes must be a non-negative integer, not -2"),
        (0, 0, "num_processes must be at least 1"),
        (2, 2, "process id 2 is out of range for 2 processes"),
        (0, 2**32, "num_processes 4294967296 is above the limit of 4294967295 processes"),
        (0, 2**70, "is above the limit of 4294967295 processes"),
        (-(2**70), 2, "must be a non-negative integer"),
        (1.0, 2, "process_id must be an int, not float"),
        ("0", 2, "process_id must be an int, not str"),
    ],
)
def test_barrier_ids_and_counts_are_refused_before_the_store_is_touched(
    pid: Any, n: Any, words: str
) -> None:
    s = distributed.InMemoryStore()
    with pytest.raises(InvalidArgumentError, match=words.replace("(", "\\(")):
        s.barrier("b", pid, n, 5.0)
    assert s.try_get("rpjrt:barrier-uses:b:0") is None
    assert s.try_get("rpjrt:barrier-uses:b:1") is None


def test_numpy_integers_are_ids() -> None:
    import numpy as np

    s = distributed.InMemoryStore()
    s.barrier("b", np.int64(0), np.uint8(1), 5.0)


# ------------------------------------------ one integer check for ids, counts and env


def test_initialize_refuses_bools_negatives_and_huge_counts(clean_env: pytest.MonkeyPatch) -> None:
    coord = f"127.0.0.1:{free_port()}"
    cases: list[tuple[Any, Any, str]] = [
        (True, 2, "a bool is not an index"),
        (0, False, "a bool is not an index"),
        (-1, 2, "process_id must be a non-negative integer"),
        (0, 2**40, "above the limit of 4294967295 processes"),
        (0, 0, "num_processes must be at least 1"),
        (0, 2.0, "num_processes must be an int, not float"),
    ]
    for p, n, words in cases:
        with pytest.raises(InvalidArgumentError, match=words):
            distributed.initialize(p, n, coord, "t", timeout=0.2)
        # The extension checks the same way for callers that reach it directly.
        with pytest.raises(InvalidArgumentError, match=words):
            distributed._initialize(p, n, coord, "t", 0.2)
    with pytest.raises(InvalidArgumentError, match="largest id|above the limit"):
        distributed.TcpStore.connect(coord, "t", 2**32, 0.1)
    with pytest.raises(InvalidArgumentError, match="a bool is not an index"):
        distributed.TcpStore.connect(coord, "t", True, 0.1)
    assert distributed._int_arg(3, "x") == 3
    assert distributed.MAX_PROCESSES == 2**32 - 1


def test_detect_bounds_the_launchers_counts(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("WORLD_SIZE", "99999999999999999999")
    clean_env.setenv("RANK", "0")
    with pytest.raises(InvalidArgumentError, match="WORLD_SIZE.*above the limit of 4294967295"):
        distributed.detect()
    clean_env.setenv("WORLD_SIZE", "-2")
    with pytest.raises(InvalidArgumentError, match="WORLD_SIZE.*not a non-negative integer"):
        distributed.detect()
    clean_env.setenv("WORLD_SIZE", "0")
    with pytest.raises(InvalidArgumentError, match="at least 1.*torchrun"):
        distributed.detect()
    clean_env.setenv("WORLD_SIZE", "4294967295")
    clean_env.setenv("RANK", "4294967294")
    e = distributed.detect()
    assert (e.process_id, e.num_processes) == (2**32 - 2, 2**32 - 1)


def test_client_ids_and_counts_go_through_the_same_check(plugin_path: str) -> None:
    kv = distributed.InMemoryStore()
    for p, n, words in [
        (True, 2, "a bool is not an index"),
        (0, 0, "at least 1"),
        (0, 2**70, "above the limit"),
        (-1, 2, "non-negative"),
    ]:
        with pytest.raises(InvalidArgumentError, match=words):
            rpjrt.Client(plugin_path, kv=kv, process_id=p, num_processes=n)
