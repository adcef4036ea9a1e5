"""Round 21 (the many-process side): regressions.

- An ``InMemoryStore`` used in a process forked while another thread wrote to it hung
  there for ever; every call of every store is now refused in a fork (or, for Python's
  bounded stores, starts afresh there).
- A peer's ``get(timeout=1)`` on a paused host took the whole I/O timeout, deaf to Ctrl-C;
  ``set``/``try_get`` too.
- A live peer whose only connection was dropped after a timeout was reported as crashed.
- Ctrl-C during ``initialize()`` left its store host running on the port.
- An interrupted wait went on in the background: a barrier's retry was refused, and
  threads and sockets piled up.
- Every use of a barrier left one key per process in the store for ever.
- A process initializing again reached the previous store, still shutting down, and was
  told it had "exited or was killed".
- ``JaxStore`` classified JAX's errors by words anywhere in their text.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import rpjrt
from rpjrt import distributed as d
from rpjrt.distributed import BoundedStore, InMemoryStore, JaxStore, RedisStore, TcpStore, TorchStore

from .conftest import run_python


def _ctrl_c_ends(call: Callable[[], Any], within: float = 2.0) -> float:
    """`call()` raises KeyboardInterrupt within `within` s of a Ctrl-C sent 0.3 s into it;
    returns how long after the Ctrl-C it ended."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # A real SIGINT to this thread (as Ctrl-C sends): it also ends a blocking wait of
        # Python's own, which `_thread.interrupt_main` does not.
        main = threading.main_thread().ident
        assert main is not None and threading.get_ident() == main
        timer = threading.Timer(0.3, lambda: signal.pthread_kill(main, signal.SIGINT))
        t0 = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            call()
        timer.join()
        took = time.monotonic() - t0 - 0.3
        assert took < within, f"ended {took:.2f}s after the Ctrl-C"
        return took
    finally:
        signal.signal(signal.SIGINT, previous)


def _free_addr() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture()
def stores() -> Iterator[list[tuple[str, Any, Any]]]:
    """Each kind of store as (name, process 0's handle, process 1's handle), fresh."""
    hosts = [TcpStore.host("127.0.0.1:0", "tok") for _ in range(2)]
    peers = [TcpStore.connect(h.address, "tok", 1, timeout=10) for h in hosts]
    mem = InMemoryStore()
    yield [("in-memory", mem, mem), ("tcp host", hosts[0], peers[0]), ("tcp peer", peers[1], hosts[1])]
    for s in peers + hosts:
        s.shutdown()


# -- 1. every store in a fork --------------------------------------------------------------

FORK_SCRIPT = r"""
import os, sys, threading, time
import rpjrt
from rpjrt import distributed as d

s = d.InMemoryStore()
big = bytes(100 << 20)
stop = False
def writer():
    while not stop:
        s.set("big", big)
threading.Thread(target=writer, daemon=True).start()
h = d.TcpStore.host("127.0.0.1:0", "tok")
p = d.TcpStore.connect(h.address, "tok", 1, 10.0)

# A bounded store whose every call was left running in the parent (max_stuck reached).
release = threading.Event()
class Slow:
    def set(self, k, v): pass
    def get(self, k, t):
        release.wait(60)
        return b"late"
    def try_get(self, k): return b"v"
    def delete(self, k): return True
b = d.BoundedStore(Slow())
b.max_stuck = 2
for _ in range(2):
    try:
        b.get("k", 0.05)
    except TimeoutError:
        pass
try:
    b.try_get("k")
    raise SystemExit("the parent's bounded store was not full")
except TimeoutError:
    pass
time.sleep(0.3)

for round in range(3):
    pid = os.fork()
    if pid == 0:
        code = 0
        calls = [
            ("set", lambda st: st.set("c", b"x")),
            ("get", lambda st: st.get("small", 1.0)),
            ("try_get", lambda st: st.try_get("small")),
            ("delete", lambda st: st.delete("big")),
            ("barrier", lambda st: st.barrier("b", 0, 2, 1.0)),
        ]
        for name, st in [("in-memory", s), ("host", h), ("peer", p)]:
            for what, fn in calls:
                try:
                    fn(st)
                    print(f"child: {name}.{what} was not refused", flush=True)
                    code = 3
                except rpjrt.FailedPreconditionError as e:
                    if "is a fork of it" not in str(e) or f"pid {os.getpid()}" not in str(e):
                        print(f"child: unclear refusal of {name}.{what}: {e}", flush=True)
                        code = 4
        # The bounded store starts afresh: its calls run (none of the parent's is out here).
        if b.try_get("k") != b"v" or b.delete("k") is not True:
            code = 5
        # A new in-memory store works in the child.
        n = d.InMemoryStore()
        n.set("k", b"v")
        if n.get("k", 1.0) != b"v" or n.delete("k") is not True:
            code = 6
        n.barrier("alone", 0, 1, 1.0)
        os._exit(code)
    t0 = time.monotonic()
    while True:
        r, status = os.waitpid(pid, os.WNOHANG)
        if r:
            break
        if time.monotonic() - t0 > 15:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            print("child hung", flush=True)
            sys.exit(1)
        time.sleep(0.02)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        print("child status", status, flush=True)
        sys.exit(1)
stop = True
release.set()
s.set("k", b"v")
assert s.get("k", 1.0) == b"v"
p.shutdown()
h.shutdown()
print("ok")
"""


def test_every_store_is_refused_in_a_fork_or_starts_afresh_there() -> None:
    # The child's first call on an InMemoryStore another thread was writing to never
    # returned (the lock was held by a thread the child does not have).
    r = run_python(FORK_SCRIPT, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr[-2000:]


# -- 2, 3. a paused host -------------------------------------------------------------------

HOST_SCRIPT = r"""
import sys
from rpjrt import distributed as d
h = d.TcpStore.host("127.0.0.1:0", "tok")
print(h.address, flush=True)
for line in sys.stdin:
    if line.strip() == "barrier":
        try:
            h.barrier("ready", 0, 2, 10.0)
            print("host: barrier passed", flush=True)
        except Exception as e:
            print(f"host: barrier failed: {type(e).__name__}: {e}", flush=True)
    else:
        break
h.shutdown(5.0)
"""


def _pause(proc: subprocess.Popen[str]) -> None:
    """Stops `proc` with SIGSTOP and returns once it is stopped."""
    os.kill(proc.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with open(f"/proc/{proc.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)
    pytest.fail("the host process did not stop")


@pytest.fixture()
def host_process() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOST_SCRIPT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(10)


def test_a_peer_answers_its_timeout_and_ctrl_c_while_the_host_is_paused(
    host_process: subprocess.Popen[str],
) -> None:
    assert host_process.stdout is not None
    addr = host_process.stdout.readline().strip()
    p = TcpStore.connect(addr, "tok", 1, timeout=20)
    try:
        _pause(host_process)
        # get(timeout=1) took the I/O timeout (20 s here) to fail.
        t0 = time.monotonic()
        with pytest.raises(rpjrt.DeadlineExceededError, match="did not answer within"):
            p.get("k", timeout=1)
        assert time.monotonic() - t0 < 4
        # Every call answers Ctrl-C at once (they waited for the I/O timeout first).
        for call in (
            lambda: p.set("k", b"v"),
            lambda: p.try_get("k"),
            lambda: p.delete("k"),
            lambda: p.get("k", timeout=30),
            lambda: p.barrier("b", 1, 2, timeout=30),
        ):
            _ctrl_c_ends(call)
    finally:
        os.kill(host_process.pid, signal.SIGCONT)
        p.shutdown()


def test_a_live_peer_whose_call_timed_out_is_not_reported_as_crashed(
    host_process: subprocess.Popen[str],
) -> None:
    # The peer's only connection was dropped after its I/O timeout; the host then counted
    # it as gone and failed its barrier at once ("lost its connection ... (it exited or
    # crashed)"), while the peer, alive, passed the same barrier.
    assert host_process.stdout is not None and host_process.stdin is not None
    addr = host_process.stdout.readline().strip()
    p = TcpStore.connect(addr, "tok", 1, timeout=0.5)
    try:
        _pause(host_process)
        with pytest.raises(rpjrt.DeadlineExceededError):
            p.try_get("x")
        os.kill(host_process.pid, signal.SIGCONT)
        time.sleep(0.5)  # the host sees the dropped connection close
        host_process.stdin.write("barrier\n")
        host_process.stdin.flush()
        time.sleep(1.0)  # the host's barrier looks at process 1 every 200 ms meanwhile
        p.barrier("ready", 1, 2, timeout=10)
        assert host_process.stdout.readline().strip() == "host: barrier passed"
    finally:
        p.shutdown()


# -- 4. an interrupted initialize ----------------------------------------------------------


def test_an_interrupted_initialize_stops_its_host_and_a_retry_hosts_again() -> None:
    addr = _free_addr()
    _ctrl_c_ends(lambda: d.initialize(0, 2, addr, "tok", timeout=20), within=3)
    host, port = addr.rsplit(":", 1)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=2).close()
    peer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            from rpjrt import distributed as d
            dd = d.initialize(1, 2, {addr!r}, "tok", timeout=15)
            dd.barrier("ready", timeout=15)
            dd.shutdown()
            print("peer ok")
            """)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    dd = d.initialize(0, 2, addr, "tok", timeout=15)
    dd.barrier("ready", timeout=15)
    assert dd.shutdown(15) is True
    out, err = peer.communicate(timeout=30)
    assert peer.returncode == 0 and "peer ok" in out, out + err


# -- 5. interrupted waits ------------------------------------------------------------------


def test_an_interrupted_barrier_gives_its_place_back_and_a_retry_meets(
    stores: list[tuple[str, Any, Any]],
) -> None:
    # The retry was refused ("another thread ... is already waiting") for as long as the
    # given-up wait lasted, and its generation was used up behind the caller's back.
    for name, s0, s1 in stores:
        _ctrl_c_ends(lambda: s0.barrier("ready", 0, 2, timeout=float("inf")))
        for _round in range(2):
            t = threading.Timer(0.3, lambda: s1.barrier("ready", 1, 2, timeout=10))
            t.start()
            s0.barrier("ready", 0, 2, timeout=10)
            t.join()


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_interrupted_waits_leave_no_threads_or_connections_behind(
    stores: list[tuple[str, Any, Any]],
) -> None:
    for name, s0, _ in stores:
        s0.set("warm", b"1")
        assert s0.get("warm", 1) == b"1"
        threads, fds = _threads(), _fds()
        for i in range(5):
            _ctrl_c_ends(lambda: s0.get(f"never-{i}", timeout=float("inf")))
        time.sleep(0.3)
        assert _threads() <= threads + 2, f"{name}: threads {threads} -> {_threads()}"
        assert _fds() <= fds + 4, f"{name}: fds {fds} -> {_fds()}"
        s0.set("after", b"2")
        assert s0.get("after", 1) == b"2"


def test_interrupted_calls_of_a_bounded_store_stay_bounded() -> None:
    # An interrupted get of a Python store left its worker thread running, uncounted:
    # every Ctrl-C added one more.
    release = threading.Event()

    class Blocking:
        def set(self, k: str, v: bytes) -> None:
            pass

        def get(self, k: str, t: float) -> bytes:
            release.wait(60)
            return b"late"

        def try_get(self, k: str) -> bytes | None:
            return None

    def workers() -> int:
        return sum(1 for t in threading.enumerate() if t.name == "rpjrt-store-call")

    b = BoundedStore(Blocking())
    b.max_stuck = 3
    try:
        before = workers()
        for _ in range(3):
            _ctrl_c_ends(lambda: b.get("k", 1e6))
        # Refused at once (a short timeout, so that a regression fails rather than hangs).
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="timed out or were interrupted"):
            b.get("k", 2.0)
        took = time.monotonic() - t0
        assert took < 1, f"the refusal took {took:.2f}s"
        assert workers() <= before + 3, f"workers {before} -> {workers()}"
    finally:
        release.set()
    # Once they returned, calls run again.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            assert b.get("k", 5) == b"late"
            break
        except TimeoutError:
            time.sleep(0.1)
    else:
        pytest.fail("the bounded store stayed full")


# -- 6. barrier keys -----------------------------------------------------------------------


def test_a_barrier_met_at_every_step_keeps_the_store_bounded(
    stores: list[tuple[str, Any, Any]],
) -> None:
    for name, s0, s1 in stores:
        t = threading.Thread(target=lambda: [s1.barrier("step", 1, 2, timeout=10) for _ in range(150)])
        t.start()
        for _ in range(150):
            s0.barrier("step", 0, 2, timeout=10)
        t.join()
        for g in (0, 75, 148):
            for p in (0, 1):
                assert s0.try_get(f"rpjrt:barrier:step:{g}:{p}") is None, (name, g, p)
        assert s0.try_get("rpjrt:barrier:step:149:1") == b"2", name


# -- delete on every store -----------------------------------------------------------------


def test_every_store_deletes_a_key(stores: list[tuple[str, Any, Any]]) -> None:
    for name, s0, s1 in stores:
        s0.set("k", b"v")
        assert s1.delete("k") is True, name
        assert s0.try_get("k") is None, name
        assert s1.delete("k") is False, name

    class Dict:
        def __init__(self) -> None:
            self.d: dict[str, bytes] = {}

        def set(self, k: str, v: bytes) -> None:
            self.d[k] = v

        def get(self, k: str, t: float) -> bytes:
            return self.d[k]

        def try_get(self, k: str) -> bytes | None:
            return self.d.get(k)

        def delete(self, k: str) -> bool:
            return self.d.pop(k, None) is not None

    b = BoundedStore(Dict())
    b.set("k", b"v")
    assert b.delete("k") is True and b.delete("k") is False

    class NoDelete:
        def set(self, k: str, v: bytes) -> None: ...
        def get(self, k: str, t: float) -> bytes: return b""
        def try_get(self, k: str) -> bytes | None: return None

    with pytest.raises(rpjrt.UnimplementedError, match="NoDelete has no delete method"):
        BoundedStore(NoDelete()).delete("k")
    with pytest.raises(TypeError, match="key must be a str"):
        b.delete(5)  # type: ignore[arg-type]

    class Jax:
        def __init__(self) -> None:
            self.d: dict[str, bytes] = {"k": b"v"}

        def key_value_try_get_bytes(self, k: str) -> bytes:
            if k not in self.d:
                raise RuntimeError(f"NOT_FOUND: Config key {k} not found")
            return self.d[k]

        def key_value_delete(self, k: str) -> None:
            self.d.pop(k, None)

    j = JaxStore(Jax())
    assert j.delete("k") is True and j.delete("k") is False

    class Torch:
        def __init__(self) -> None:
            self.d: dict[str, bytes] = {"k": b"v"}

        def set(self, k: str, v: bytes) -> None:
            self.d[k] = v

        def delete_key(self, k: str) -> bool:
            return self.d.pop(k, None) is not None

    t = TorchStore(Torch())
    assert t.delete("k") is True and t.delete("k") is False

    class Redis:
        def __init__(self) -> None:
            self.d: dict[str, bytes] = {"rpjrt:k": b"v"}

        def delete(self, k: str) -> int:
            return 1 if self.d.pop(k, None) is not None else 0

    r = RedisStore(Redis())
    assert r.delete("k") is True and r.delete("k") is False


# -- 7. initializing again -----------------------------------------------------------------

AGAIN = r"""
import os, sys, time
from rpjrt import distributed as d
pid = int(os.environ["RPJRT_PROCESS_ID"])
for rnd in range(2):
    dd = d.initialize(timeout=20)
    dd.barrier("ready", timeout=20)
    if pid == 2:
        time.sleep(0.5)  # one process lingers: process 0's store waits for it
    dd.shutdown(20)
    print(f"round {rnd} ok", flush=True)
"""


def test_a_job_that_initializes_again_reaches_the_next_store() -> None:
    # Process 1 joined the previous store, still shutting down, and was refused as a
    # process that "exited or was killed".
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "launch", "-n", "3", "--timeout", "60", "--",
         sys.executable, "-c", AGAIN],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    for p in range(3):
        assert f"[{p}] round 1 ok" in r.stdout, r.stdout + r.stderr


# -- 9. JAX's errors -----------------------------------------------------------------------


class _JaxErrors:
    def __init__(self, get_error: str, try_get_error: str) -> None:
        self.get_error, self.try_get_error = get_error, try_get_error

    def blocking_key_value_get_bytes(self, key: str, ms: int) -> bytes:
        raise RuntimeError(self.get_error)

    def key_value_try_get_bytes(self, key: str) -> bytes:
        raise RuntimeError(self.try_get_error)

    def key_value_set_bytes(self, key: str, value: bytes, allow_overwrite: bool = True) -> None:
        pass


def test_jax_errors_are_classified_by_their_status_code() -> None:
    stopped = "UNAVAILABLE: The coordination service has stopped: task 1 heartbeat timeout."
    missing_task = "FAILED_PRECONDITION: Task /job:jax_worker/task:0 not found in the cluster"
    s = JaxStore(_JaxErrors(stopped, missing_task))
    # Not a timeout: the service stopped (the text only mentions a timeout).
    with pytest.raises(RuntimeError, match="coordination service has stopped") as e:
        s.get("k", 30.0)
    assert not isinstance(e.value, TimeoutError)
    # Not an absent key: the client is not in the cluster.
    with pytest.raises(RuntimeError, match="not found in the cluster"):
        s.try_get("k")
    s = JaxStore(_JaxErrors(
        "DEADLINE_EXCEEDED: GetKeyValue() timed out with key: k and duration: 1s",
        "NOT_FOUND: Config key k not found",
    ))
    with pytest.raises(TimeoutError, match="was not set within") as t:
        s.get("k", 1.0)
    assert "DEADLINE_EXCEEDED" in str(t.value.__cause__)
    assert s.try_get("k") is None
    assert d._status_code(RuntimeError("INTERNAL: key not found, timed out")) == "INTERNAL"
    assert d._status_code(RuntimeError("no code here: DEADLINE_EXCEEDED")) is None
