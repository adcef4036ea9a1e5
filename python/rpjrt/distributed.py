"""Many processes: key-value stores, launcher detection, and adapters to existing stores.

A multi-process client rendezvouses through a key-value store that the plugin reaches
through callbacks at client creation::

    import rpjrt
    from rpjrt import distributed

    dist = distributed.initialize()          # rpjrt launch, torchrun, srun, mpirun, or args
    client = rpjrt.Client("cuda", kv=dist.store,
                          process_id=dist.process_id, num_processes=dist.num_processes)
    ...
    dist.shutdown()

Any object with ``set(key, value)``, ``get(key, timeout)`` and ``try_get(key)`` is a store
(:class:`KvStore`). rpjrt ships :class:`InMemoryStore` (threads of one process) and
:class:`TcpStore` (hosted by process 0, joined by the others with a shared token), and
adapts the stores a job may already have: :class:`TorchStore` (a ``torch.distributed``
store), :class:`JaxStore` (JAX's distributed client after ``jax.distributed.initialize``)
and :class:`RedisStore` (a redis-py client). None of torch, jax or redis is needed to
import this module.

Every adapter is a :class:`BoundedStore`: each call to the store it wraps runs on a worker
thread and is waited for with the time the call has left, so a client that never answers
(a paused server, a lost network with no socket timeout) ends a ``get`` with
``TimeoutError`` after its timeout plus :data:`GRACE`, and ``set``/``try_get`` after
``op_timeout``. ``Client(kv=obj)`` wraps any other Python object the same way.
"""

from __future__ import annotations

import math
import numbers
import operator
import os
import queue
import re
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Protocol, TypeVar

from ._errors import FailedPreconditionError, InvalidArgumentError, UnimplementedError
from ._rpjrt import (
    _MAX_PROCESSES,
    InMemoryStore,
    TcpStore,
    _detect_launch_env,
    _first_host,
    _initialize,
)

__all__ = [
    "KvStore",
    "BoundedStore",
    "InMemoryStore",
    "TcpStore",
    "LaunchEnv",
    "Distributed",
    "detect",
    "initialize",
    "first_host",
    "TorchStore",
    "JaxStore",
    "RedisStore",
    "MAX_PROCESSES",
    "DEFAULT_OP_TIMEOUT",
    "GRACE",
]

#: The most processes a job may have: the TCP store's protocol carries a process id in 32
#: bits. Process ids and counts above it are refused wherever rpjrt takes one.
MAX_PROCESSES: int = _MAX_PROCESSES
#: How long an adapter's ``set`` and ``try_get`` may take, in seconds, unless its
#: ``op_timeout`` says otherwise.
DEFAULT_OP_TIMEOUT: float = 30.0
#: What a ``get`` allows the store beyond the caller's timeout, in seconds: the bound on
#: the last reply's round trip. A ``get(key, T)`` ends within about ``T + GRACE``.
GRACE: float = 0.5


# ------------------------------------------------------------------- argument checks


def _int_arg(value: object, what: str) -> int:
    """A process id or process count: an int (or anything with ``__index__``; a bool is
    refused), not negative, at most :data:`MAX_PROCESSES`. The same rule, and the same
    words, as the extension's check of the ids and counts it takes."""
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{value} is not {what} (a bool is not an index)")
    try:
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidArgumentError(
            f"{what} must be an int, not {type(value).__name__}"
        ) from None
    if v < 0:
        raise InvalidArgumentError(f"{what} must be a non-negative integer, not {v}")
    if v > MAX_PROCESSES:
        raise InvalidArgumentError(f"{what} {v} is above the limit of {MAX_PROCESSES} processes")
    return v


def _seconds_arg(value: object, what: str) -> float:
    """A finite, non-negative number of seconds: an int or float (not a bool, not text);
    ``TypeError`` for another type, ``InvalidArgumentError`` (a ``ValueError``) for NaN,
    infinity or a negative value. Both name the parameter."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{what} must be a number of seconds (int or float), not {type(value).__name__}"
        )
    try:
        t = float(value)
    except OverflowError:
        # An int (or a Fraction) beyond a float's range: a value, not a type, at fault.
        raise InvalidArgumentError(
            f"{what} must be a finite, non-negative number of seconds, not a number too "
            "large for a float"
        ) from None
    if not math.isfinite(t) or t < 0:
        raise InvalidArgumentError(
            f"{what} must be a finite, non-negative number of seconds, not {value!r}"
        )
    return t


def _key_arg(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, not {type(key).__name__}")
    return key


def _holds_objects(fmt: str) -> bool:
    """Whether a buffer format holds Python object pointers (``O``), at the top level or in
    a field of a structured format (``T{<i8:a:O:b:}``); field names, between colons, are
    skipped."""
    in_name = False
    for c in fmt:
        if c == ":":
            in_name = not in_name
        elif c == "O" and not in_name:
            return True
    return False


_OBJECTS = " (its buffer holds Python object pointers, format {!r}, not data)"


def _data_bytes(value: object) -> tuple[bytes | None, str]:
    """The bytes of a bytes-like value, copied, or None and why not: for anything else, and
    for a buffer of object pointers (numpy ``dtype=object``), whose bytes are this
    process's addresses."""
    if isinstance(value, bytes):
        return value, ""
    try:
        view = memoryview(value)  # type: ignore[arg-type]
    except TypeError:
        return None, ""
    with view:
        if _holds_objects(view.format):
            return None, _OBJECTS.format(view.format)
        return view.tobytes(), ""


def _value_arg(value: object) -> bytes:
    """A value to store: bytes as they are, any other bytes-like object (bytearray,
    memoryview, an array) copied into bytes; anything else (a str, an int, an array of
    Python objects) is refused."""
    data, why = _data_bytes(value)
    if data is None:
        raise TypeError(
            "value must be bytes-like (bytes, bytearray, memoryview), not "
            f"{type(value).__name__}{why}"
        )
    return data


def _bytes_result(value: object, store: str, what: str) -> bytes:
    """What a wrapped store returned, as bytes; a value that is not bytes-like (or an
    array of Python objects) is the store's error, named (``bytes(5)`` would have made
    five zero bytes of it)."""
    data, why = _data_bytes(value)
    if data is None:
        raise TypeError(f"{store}: {what} returned {type(value).__name__}{why}, not bytes")
    return data


class KvStore(Protocol):
    """What a client's ``kv=`` accepts. Methods may be called from any thread.

    An exception a method raises reaches the plugin with the status code its type maps to
    (``TimeoutError`` DEADLINE_EXCEEDED, ``KeyError`` NOT_FOUND, ...: the table
    :mod:`rpjrt.ffi` lists for handlers). A client wraps any store that is not one of
    rpjrt's in :class:`BoundedStore`, so a method that never returns fails the call after
    its bound instead of hanging client creation."""

    def set(self, key: str, value: bytes, /) -> None:
        """Store ``value`` under ``key`` (replacing any earlier value)."""

    def get(self, key: str, timeout: float, /) -> bytes:
        """Wait up to ``timeout`` seconds for ``key``; raise ``TimeoutError`` after that."""

    def try_get(self, key: str, /) -> bytes | None:
        """The value of ``key`` now, or ``None``."""

    # Optional, not part of what ``kv=`` needs: ``delete(key) -> bool`` removes a key and
    # says whether it was set. rpjrt's stores and adapters have it (:meth:`BoundedStore.delete`).


@dataclass(frozen=True)
class LaunchEnv:
    """Where this process sits in a job, and which launcher said so."""

    process_id: int
    num_processes: int
    #: ``host:port`` where process 0 hosts the store, when known.
    coordinator: str | None
    #: The job's shared secret, when known.
    token: str | None
    #: ``"explicit"``, ``"rpjrt"``, ``"torchrun"``, ``"openmpi"``, ``"pmi"`` or ``"slurm"``.
    source: str

    def __repr__(self) -> str:
        # The token is a secret: a repr lands in logs and tracebacks, so it says only
        # whether there is one.
        token = "None" if self.token is None else "<set>"
        return (
            f"LaunchEnv(process_id={self.process_id}, num_processes={self.num_processes}, "
            f"coordinator={self.coordinator!r}, token={token}, source={self.source!r})"
        )


def detect() -> LaunchEnv:
    """Read the launcher's variables: rpjrt launch (``RPJRT_PROCESS_ID``...), torchrun
    (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` + 1), Open MPI
    (``OMPI_COMM_WORLD_RANK``...), PMI (``PMI_RANK``...), Slurm (``SLURM_PROCID``,
    ``SLURM_NTASKS``, first host of ``SLURM_JOB_NODELIST``), in that order.
    ``RPJRT_COORDINATOR`` and ``RPJRT_TOKEN`` override the coordinator and token."""
    return _launch_env(_detect_launch_env())


def _launch_env(d: dict[str, Any]) -> LaunchEnv:
    return LaunchEnv(
        process_id=_int_arg(d["process_id"], "process_id"),
        num_processes=_int_arg(d["num_processes"], "num_processes"),
        coordinator=d["coordinator"],
        token=d["token"],
        source=str(d["source"]),
    )


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list: ``node[01-04,07]`` gives ``node01``."""
    return _first_host(nodelist)


@dataclass
class Distributed:
    """The result of :func:`initialize`: this process's place and the job's store."""

    env: LaunchEnv
    store: TcpStore

    @property
    def process_id(self) -> int:
        return self.env.process_id

    @property
    def num_processes(self) -> int:
        return self.env.num_processes

    @property
    def source(self) -> str:
        """Which launcher's variables were used (``"explicit"`` for arguments)."""
        return self.env.source

    def barrier(self, name: str, timeout: float = 30.0) -> None:
        """Wait for every process; the error names the ones that did not come, or the
        process that arrived with another process count."""
        self.store.barrier(name, self.process_id, self.num_processes, timeout)

    def shutdown(self, grace: float = 30.0) -> bool:
        """Leave the job. The other processes say goodbye to the store and close it;
        process 0, which hosts it, first waits up to ``grace`` seconds until every other
        process has said goodbye (or lost its connection), so that no peer is cut off.
        Returns whether they all had left in time."""
        return self.store.shutdown(grace if self.store.is_host else 0.0)


def initialize(
    process_id: int | None = None,
    num_processes: int | None = None,
    coordinator: str | None = None,
    token: str | None = None,
    *,
    timeout: float = 30.0,
) -> Distributed:
    """Join the job's TCP store: process 0 hosts it on the coordinator address, the others
    connect (waiting up to ``timeout`` seconds for it). Returns only once every process has
    joined (waiting up to ``timeout`` again); the error names the processes that did not.

    With ``process_id`` and ``num_processes`` given, those are used (``source`` is
    ``"explicit"``; the coordinator and token default to ``RPJRT_COORDINATOR`` and
    ``RPJRT_TOKEN``). Otherwise :func:`detect` reads the launcher's variables, and
    ``coordinator``/``token`` override what it found.

    ``process_id`` and ``num_processes`` must be ints (not bools), ``0 <= process_id <
    num_processes <= MAX_PROCESSES``; anything else is refused before any connection.

    Ctrl-C ends the wait, and the store it made is stopped before ``KeyboardInterrupt`` is
    raised (process 0's port is free again for a retry). A process that calls it again
    after its ``shutdown`` (a job's next round) waits, within ``timeout``, until process 0
    has replaced the store it left with a new one.
    """
    p = None if process_id is None else _int_arg(process_id, "process_id")
    n = None if num_processes is None else _int_arg(num_processes, "num_processes")
    d, store = _initialize(p, n, coordinator, token, timeout)
    return Distributed(_launch_env(d), store)


# ------------------------------------------------------------------- bounded calls
#
# A call into a store's client runs on a worker thread; the caller waits for it with the
# time the call has left. A call that does not return in time is abandoned: its worker
# finishes it whenever the client returns (and then serves other calls), and nothing of it
# is reused before that, so the next call starts clean (redis-py, for one, takes another
# connection from its pool while the stuck one is still out).

_T = TypeVar("_T")


class _Call:
    __slots__ = ("fn", "args", "done", "lock", "started", "finished", "abandoned", "on_late",
                 "value", "error")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...],
                 on_late: Callable[[], None]) -> None:
        self.fn, self.args, self.on_late = fn, args, on_late
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.started = self.finished = self.abandoned = False
        self.value: Any = None
        self.error: BaseException | None = None


class _Worker:
    """A daemon thread that runs calls one at a time, and waits among the idle workers
    between them (a minute at most, then it ends)."""

    IDLE_EXIT = 60.0
    MAX_IDLE = 8

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="rpjrt-store-call", daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                call = self.jobs.get(timeout=self.IDLE_EXIT)
            except queue.Empty:
                with _pool_lock:
                    if self in _idle:
                        _idle.remove(self)
                        return
                continue  # taken from the idle list just now: its call is on the way
            with call.lock:
                # One given up on before it began is never made: its caller was told so.
                call.started = not call.abandoned
            if call.started:
                try:
                    call.value = call.fn(*call.args)
                except BaseException as e:  # noqa: BLE001 - handed to the caller
                    call.error = e
            with call.lock:
                call.finished = True
                late = call.abandoned and call.started
            call.done.set()
            if late:
                call.on_late()
            del call
            with _pool_lock:
                if len(_idle) >= self.MAX_IDLE:
                    return
                _idle.append(self)


_pool_lock = threading.Lock()
_idle: list[_Worker] = []
#: Every bounded store of this process, for the fork handler.
_stores: weakref.WeakSet[BoundedStore] = weakref.WeakSet()


def _forget_workers() -> None:
    # A forked child has none of its parent's threads: no idle worker, no call still out
    # (a count of its parent's stuck calls would refuse its calls for ever), and no lock
    # one of them held at the fork.
    global _pool_lock
    _pool_lock = threading.Lock()
    _idle.clear()
    for store in list(_stores):
        store._stuck = 0
        store._stuck_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


#: What :func:`_run_bounded` says of a call that did not return in time.
_NOT_STARTED, _RUNNING = "not started", "running"


def _run_bounded(fn: Callable[..., _T], args: tuple[Any, ...], bound: float,
                 on_abandon: Callable[[], None],
                 on_late: Callable[[], None]) -> tuple[str | None, _T | None]:
    """Runs ``fn(*args)`` on a worker thread and waits up to ``bound`` seconds:
    ``(None, result)``, or ``(_RUNNING, None)`` when it began but did not return in time
    (then ``on_abandon`` runs now, and ``on_late`` once the call does return), or
    ``(_NOT_STARTED, None)`` when no worker had begun it yet (it is then never made). Its
    exception is raised here. A wait interrupted (Ctrl-C) abandons the call the same way
    before the interrupt goes on, so that calls left running stay counted (and bounded)."""
    call = _Call(fn, args, on_late)
    with _pool_lock:
        worker = _idle.pop() if _idle else None
    (worker or _Worker()).jobs.put(call)
    try:
        # A wait beyond what the lock takes (1e300 s is a finite timeout) waits that long.
        call.done.wait(min(bound, threading.TIMEOUT_MAX))
    except BaseException:
        with call.lock:
            if not call.finished:
                call.abandoned = True
                if call.started:
                    on_abandon()
        raise
    with call.lock:
        if not call.finished:
            call.abandoned = True
            if not call.started:
                return _NOT_STARTED, None
            on_abandon()
            return _RUNNING, None
    error, value = call.error, call.value
    del call
    if error is not None:
        try:
            raise error
        finally:
            del error
    return None, value


#: The status code an error's text starts with (``DEADLINE_EXCEEDED: ...``), as XLA and
#: JAX write their errors.
_STATUS_PREFIX = re.compile(r"\s*([A-Z][A-Z_]*[A-Z]):")


def _status_code(e: BaseException) -> str | None:
    """The canonical status code an error names first (``"NOT_FOUND"``), or ``None``. Only
    the code that starts the message counts: a message that merely mentions a timeout or
    something not found deeper in its text (``UNAVAILABLE: ... heartbeat timeout``) keeps
    its own code."""
    code = getattr(e, "code", None)
    if isinstance(code, str) and code.isupper():
        return code
    m = _STATUS_PREFIX.match(str(e))
    return m.group(1) if m else None


def _is_timeout(e: BaseException) -> bool:
    return isinstance(e, TimeoutError) or _status_code(e) == "DEADLINE_EXCEEDED"


class BoundedStore:
    """A :class:`KvStore` whose every call returns within a bound, whatever the store it
    wraps does: ``get(key, timeout)`` within ``timeout`` plus :data:`GRACE`, ``set`` and
    ``try_get`` within ``op_timeout`` seconds. A call that runs out raises
    ``TimeoutError`` naming the key and the store.

    Each call to the wrapped store runs on a worker thread (the caller waits with the
    time left), so this holds when the store blocks in a socket that has no timeout. A
    call that did not return is left to finish on its own; while ``max_stuck`` such calls
    are still out, further calls fail at once rather than start more threads.

    The arguments are checked here, once for every adapter: ``key`` a ``str``, ``value``
    bytes-like, ``timeout`` a finite non-negative int or float (``TypeError`` or
    ``ValueError`` naming the parameter; 0 looks once without waiting); ``op_timeout``
    the same but above 0 (it bounds one call, which takes some time); and what the store
    returns must be bytes-like (or ``None`` from ``try_get``). A call that no worker
    thread began within its bound is never made (its ``TimeoutError`` says so).

    ``BoundedStore(obj)`` wraps any object with ``set``, ``get`` and ``try_get``
    (``Client(kv=obj)`` does so itself). The adapters (:class:`RedisStore`,
    :class:`TorchStore`, :class:`JaxStore`) are bounded stores that call their client
    through ``_set``, ``_try_get`` and ``_get``.
    """

    #: Calls that may be left running before further calls fail at once.
    max_stuck = 16

    def __init__(self, store: Any = None, *, op_timeout: float = DEFAULT_OP_TIMEOUT) -> None:
        if type(self) is BoundedStore:
            for m in ("set", "get", "try_get"):
                if not callable(getattr(store, m, None)):
                    raise TypeError(
                        f"a store needs set, get and try_get methods; "
                        f"{type(store).__name__} has no {m}"
                    )
        self._target = store
        self._op_timeout = _bound_arg(op_timeout, "op_timeout")
        self._stuck = 0
        self._stuck_lock = threading.Lock()
        _stores.add(self)

    def __repr__(self) -> str:
        return self._name()

    def _name(self) -> str:
        """How errors name this store (the wrapped object's type: its repr might block)."""
        t = type(self._target)
        return f"{type(self).__name__}({t.__module__}.{t.__qualname__})"

    # -------------------------------------------------------------- the KvStore face

    def set(self, key: str, value: bytes) -> None:
        """Store ``value`` (bytes-like) under ``key`` (a ``str``), within ``op_timeout``."""
        key = _key_arg(key)
        value = _value_arg(value)
        self._call(self._set, (key, value), self._op_timeout, f"set({key!r})")

    def try_get(self, key: str) -> bytes | None:
        """The value of ``key`` now, or ``None``; within ``op_timeout``."""
        key = _key_arg(key)
        what = f"try_get({key!r})"
        v = self._call(self._try_get, (key,), self._op_timeout, what)
        return None if v is None else _bytes_result(v, self._name(), what)

    def get(self, key: str, timeout: float) -> bytes:
        """Wait up to ``timeout`` seconds for ``key``; ``TimeoutError`` naming the key and
        the store after that (at most :data:`GRACE` later if the store does not answer)."""
        key = _key_arg(key)
        return self._get(key, _seconds_arg(timeout, "timeout"))

    def delete(self, key: str) -> bool:
        """Remove ``key``; whether it was set. Within ``op_timeout``. A wrapped object
        without a ``delete`` method is refused (``UnimplementedError``, a
        ``NotImplementedError``)."""
        key = _key_arg(key)
        return bool(self._call(self._delete, (key,), self._op_timeout, f"delete({key!r})"))

    # ------------------------------------------------------------ what adapters define

    def _set(self, key: str, value: bytes) -> None:
        self._target.set(key, value)

    def _delete(self, key: str) -> bool:
        delete = getattr(self._target, "delete", None)
        if not callable(delete):
            raise UnimplementedError(
                f"{self._name()} cannot delete keys: "
                f"{type(self._target).__name__} has no delete method"
            )
        return bool(delete(key))

    def _try_get(self, key: str) -> Any:
        return self._target.try_get(key)

    def _get(self, key: str, timeout: float) -> bytes:
        what = f"get({key!r})"
        v = self._call(self._target.get, (key, timeout), timeout + GRACE, what,
                       waiting=(key, timeout))
        return _bytes_result(v, self._name(), what)

    # ------------------------------------------------------------------- the helpers

    def _call(self, fn: Callable[..., Any], args: tuple[Any, ...], bound: float, what: str,
              waiting: tuple[str, float] | None = None) -> Any:
        """``fn(*args)`` within ``bound`` seconds, or ``TimeoutError`` naming ``what`` and
        this store (and, for a get, the key and its timeout)."""
        with self._stuck_lock:
            stuck = self._stuck
        if stuck >= self.max_stuck:
            raise TimeoutError(
                f"{self._name()}: {stuck} earlier calls have not returned (they timed out "
                f"or were interrupted: the store does not answer); {what} was not started"
            )
        late, value = _run_bounded(fn, args, bound, self._abandoned, self._returned)
        if late == _NOT_STARTED:
            # Nothing of the store is known: the call was never made (so a set did not
            # happen), because no thread could begin it within the bound.
            raise TimeoutError(
                f"{self._name()}: {what} was not made: no worker thread began it within "
                f"{bound:g}s (this process is too busy for that bound; the store was not "
                f"reached, and a set did not take effect)"
            )
        if late is not None:
            lead = (f"key {waiting[0]!r} was not set within {waiting[1]:.1f}s: "
                    if waiting else "")
            raise TimeoutError(
                f"{lead}{self._name()} did not return from {what} within {bound:.1f}s "
                f"(the store does not answer: its server may be paused, overloaded or "
                f"unreachable)"
            )
        return value

    def _abandoned(self) -> None:
        with self._stuck_lock:
            self._stuck += 1

    def _returned(self) -> None:
        with self._stuck_lock:
            self._stuck -= 1

    def _poll_get(self, key: str, timeout: float, poll: float) -> bytes:
        """``try_get(key)`` until it gives a value, pausing 1 ms doubling up to ``poll``
        seconds; ``TimeoutError`` naming the key and the store after ``timeout`` seconds,
        each ``try_get`` bounded by the time left plus :data:`GRACE`."""
        deadline = time.monotonic() + timeout
        pause = 0.001
        what = f"try_get({key!r})"
        while True:
            left = deadline - time.monotonic()
            v = self._call(self._try_get, (key,), max(left, 0.0) + GRACE, what,
                           waiting=(key, timeout))
            if v is not None:
                return _bytes_result(v, self._name(), what)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"key {key!r} was not set within {timeout:.1f}s ({self._name()})"
                )
            time.sleep(min(pause, left))
            pause = min(pause * 2, poll)


def _bound_arg(value: object, what: str) -> float:
    """A bound on how long one call to a store may take (``op_timeout``) or a pause
    between calls (``poll``): as :func:`_seconds_arg`, and above 0. A wait's ``timeout``
    may be 0 (look once, do not wait); a call cannot be made in no time at all, so a bound
    of 0 would only report a healthy store as not answering."""
    t = _seconds_arg(value, what)
    if t <= 0:
        raise InvalidArgumentError(
            f"{what} must be a positive number of seconds (above 0), not {value!r}: it bounds "
            "how long one call to the store may take"
        )
    return t


def _poll_arg(poll: object) -> float:
    return _bound_arg(poll, "poll")


class TorchStore(BoundedStore):
    """A ``torch.distributed`` store (``TCPStore``, ``FileStore``, ``HashStore``,
    ``PrefixStore``...) as a :class:`KvStore`, through its ``set``, ``get``, ``check`` and
    ``wait`` methods; every call bounded (:class:`BoundedStore`).

    ``get`` polls ``try_get`` (pausing up to ``poll`` seconds) rather than blocking in the
    store's ``wait``: a torch store client serves one request at a time, so a thread
    blocked in ``wait`` would hold back every other thread's ``set`` on the same store
    until the wait timed out (and on torch 1.x a ``wait`` that timed out leaves a late
    reply on the connection that spoils the next request).

    Stores of torch 1.x have no ``check``; there ``try_get`` uses ``compare_set`` with the
    same expected and desired value, which never creates a missing key and leaves an
    existing one as it is (two such calls with different marker values tell a missing key
    from one that holds the marker)."""

    _MARKS = (b"\x00rpjrt:absent:1\x00", b"\x00rpjrt:absent:2\x00")

    def __init__(self, store: Any, poll: float = 0.01, *,
                 op_timeout: float = DEFAULT_OP_TIMEOUT) -> None:
        super().__init__(store, op_timeout=op_timeout)
        self._store = store
        self._has_check = callable(getattr(store, "check", None))
        self._poll = _poll_arg(poll)

    def _set(self, key: str, value: bytes) -> None:
        self._store.set(key, value)

    def _delete(self, key: str) -> bool:
        return bool(self._store.delete_key(key))

    def _get(self, key: str, timeout: float) -> bytes:
        return self._poll_get(key, timeout, self._poll)

    def _try_get(self, key: str) -> bytes | None:
        if self._has_check:
            if not self._store.check([key]):
                return None
            return _bytes_result(self._store.get(key), self._name(), f"get({key!r})")
        # Missing: the store answers the expected value. Present: its value, unchanged.
        first, second = self._MARKS
        v = bytes(self._store.compare_set(key, first, first))
        if v != first:
            return v
        # Missing, or the value is `first`: the other marker decides.
        v = bytes(self._store.compare_set(key, second, second))
        return None if v == second else v


class JaxStore(BoundedStore):
    """JAX's distributed key-value client (the coordination service process 0 hosts) as a
    :class:`KvStore`, every call bounded (:class:`BoundedStore`). Call
    ``jax.distributed.initialize(...)`` first, or pass the client."""

    #: The longest wait JAX's client takes, in milliseconds (a C ``int``).
    _MAX_MS = 2**31 - 1

    def __init__(self, client: Any = None, *, op_timeout: float = DEFAULT_OP_TIMEOUT) -> None:
        if client is None:
            from jax._src.distributed import global_state

            client = global_state.client
            if client is None:
                raise FailedPreconditionError(
                    "JAX's distributed client is not running: call jax.distributed.initialize() first"
                )
        super().__init__(client, op_timeout=op_timeout)
        self._client = client

    def _set(self, key: str, value: bytes) -> None:
        self._client.key_value_set_bytes(key, value, allow_overwrite=True)

    def _get(self, key: str, timeout: float) -> bytes:
        ms = min(int(timeout * 1000), self._MAX_MS)
        what = f"get({key!r})"
        try:
            v = self._call(self._client.blocking_key_value_get_bytes, (key, ms),
                           timeout + GRACE, what, waiting=(key, timeout))
        except TimeoutError:
            raise
        except Exception as e:
            if _is_timeout(e):
                raise TimeoutError(
                    f"key {key!r} was not set within {timeout:.1f}s ({self._name()})"
                ) from e
            raise
        return _bytes_result(v, self._name(), what)

    def _try_get(self, key: str) -> bytes | None:
        try:
            return bytes(self._client.key_value_try_get_bytes(key))
        except Exception as e:
            # Only a NOT_FOUND status is an absent key: any other error (a client that
            # lost its service, one "not found in the cluster") is the store's error.
            if _status_code(e) == "NOT_FOUND":
                return None
            raise

    def _delete(self, key: str) -> bool:
        # JAX's delete says nothing: whether the key was set is looked up first. (JAX
        # also removes the keys under ``key + "/"``, as a directory.)
        was = self._try_get(key) is not None
        self._client.key_value_delete(key)
        return was


class RedisStore(BoundedStore):
    """A redis-py client (``redis.Redis``) as a :class:`KvStore`. Keys get ``prefix``;
    ``get`` polls until the key appears or the timeout passes. Every call is bounded
    (:class:`BoundedStore`), so a client without a socket timeout facing a server that
    stopped answering still ends each call in time."""

    def __init__(self, redis: Any, prefix: str = "rpjrt:", poll: float = 0.01, *,
                 op_timeout: float = DEFAULT_OP_TIMEOUT) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
        super().__init__(redis, op_timeout=op_timeout)
        self._redis = redis
        self._prefix = prefix
        self._poll = _poll_arg(poll)

    def _name(self) -> str:
        where = ""
        try:
            kw = self._redis.connection_pool.connection_kwargs
            if "host" in kw:
                where = f"{kw['host']}:{kw.get('port', 6379)}, "
            elif "path" in kw:
                where = f"{kw['path']}, "
        except Exception:  # noqa: BLE001 - not a redis-py client: the type names it
            return super()._name()
        return f"RedisStore({where}prefix {self._prefix!r})"

    def _set(self, key: str, value: bytes) -> None:
        self._redis.set(self._prefix + key, value)

    def _delete(self, key: str) -> bool:
        return bool(self._redis.delete(self._prefix + key))

    def _try_get(self, key: str) -> bytes | None:
        return self._redis.get(self._prefix + key)  # type: ignore[no-any-return]

    def _get(self, key: str, timeout: float) -> bytes:
        return self._poll_get(key, timeout, self._poll)
