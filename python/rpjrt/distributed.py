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
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

from ._errors import FailedPreconditionError
from ._rpjrt import InMemoryStore, TcpStore, _detect_launch_env, _first_host, _initialize

__all__ = [
    "KvStore",
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
]


class KvStore(Protocol):
    """What a client's ``kv=`` accepts. Methods may be called from any thread.

    An exception a method raises reaches the plugin with the status code its type maps to
    (``TimeoutError`` DEADLINE_EXCEEDED, ``KeyError`` NOT_FOUND, ...: the table
    :mod:`rpjrt.ffi` lists for handlers)."""

    def set(self, key: str, value: bytes, /) -> None:
        """Store ``value`` under ``key`` (replacing any earlier value)."""

    def get(self, key: str, timeout: float, /) -> bytes:
        """Wait up to ``timeout`` seconds for ``key``; raise ``TimeoutError`` after that."""

    def try_get(self, key: str, /) -> bytes | None:
        """The value of ``key`` now, or ``None``."""


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


def detect() -> LaunchEnv:
    """Read the launcher's variables: rpjrt launch (``RPJRT_PROCESS_ID``...), torchrun
    (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` + 1), Open MPI
    (``OMPI_COMM_WORLD_RANK``...), PMI (``PMI_RANK``...), Slurm (``SLURM_PROCID``,
    ``SLURM_NTASKS``, first host of ``SLURM_JOB_NODELIST``), in that order.
    ``RPJRT_COORDINATOR`` and ``RPJRT_TOKEN`` override the coordinator and token."""
    d = _detect_launch_env()
    return LaunchEnv(
        process_id=int(d["process_id"]),
        num_processes=int(d["num_processes"]),
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
        """Wait for every process; the error names the ones that did not come."""
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
    """
    d, store = _initialize(process_id, num_processes, coordinator, token, timeout)
    env = LaunchEnv(
        process_id=int(d["process_id"]),
        num_processes=int(d["num_processes"]),
        coordinator=d["coordinator"],
        token=d["token"],
        source=str(d["source"]),
    )
    return Distributed(env, store)


def _is_timeout(e: BaseException) -> bool:
    text = str(e).lower()
    return isinstance(e, TimeoutError) or "timeout" in text or "timed out" in text or (
        "deadline_exceeded" in text
    )


def _poll_get(try_get: Any, key: str, timeout: float, poll: float) -> bytes:
    """``try_get(key)`` until it gives a value, pausing 1 ms doubling up to ``poll``
    seconds; ``TimeoutError`` naming the key after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        v = try_get(key)
        if v is not None:
            return bytes(v)
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"key {key!r} was not set within {timeout:.1f}s")
        time.sleep(min(pause, left))
        pause = min(pause * 2, poll)


class TorchStore:
    """A ``torch.distributed`` store (``TCPStore``, ``FileStore``, ``HashStore``,
    ``PrefixStore``...) as a :class:`KvStore`, through its ``set``, ``get``, ``check`` and
    ``wait`` methods.

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

    def __init__(self, store: Any, poll: float = 0.01) -> None:
        self._store = store
        self._has_check = callable(getattr(store, "check", None))
        self._poll = poll

    def set(self, key: str, value: bytes) -> None:
        self._store.set(key, value)

    def get(self, key: str, timeout: float) -> bytes:
        return _poll_get(self.try_get, key, timeout, self._poll)

    def try_get(self, key: str) -> bytes | None:
        if self._has_check:
            if not self._store.check([key]):
                return None
            return bytes(self._store.get(key))
        # Missing: the store answers the expected value. Present: its value, unchanged.
        first, second = self._MARKS
        v = bytes(self._store.compare_set(key, first, first))
        if v != first:
            return v
        # Missing, or the value is `first`: the other marker decides.
        v = bytes(self._store.compare_set(key, second, second))
        return None if v == second else v


class JaxStore:
    """JAX's distributed key-value client (the coordination service process 0 hosts) as a
    :class:`KvStore`. Call ``jax.distributed.initialize(...)`` first, or pass the client."""

    def __init__(self, client: Any = None) -> None:
        if client is None:
            from jax._src.distributed import global_state

            client = global_state.client
            if client is None:
                raise FailedPreconditionError(
                    "JAX's distributed client is not running: call jax.distributed.initialize() first"
                )
        self._client = client

    def set(self, key: str, value: bytes) -> None:
        self._client.key_value_set_bytes(key, value, allow_overwrite=True)

    def get(self, key: str, timeout: float) -> bytes:
        try:
            return bytes(self._client.blocking_key_value_get_bytes(key, int(timeout * 1000)))
        except Exception as e:
            if _is_timeout(e):
                raise TimeoutError(f"key {key!r} was not set within {timeout:.1f}s") from e
            raise

    def try_get(self, key: str) -> bytes | None:
        try:
            return bytes(self._client.key_value_try_get_bytes(key))
        except Exception as e:
            if "not_found" in str(e).lower() or "not found" in str(e).lower():
                return None
            raise


class RedisStore:
    """A redis-py client (``redis.Redis``) as a :class:`KvStore`. Keys get ``prefix``;
    ``get`` polls until the key appears or the timeout passes."""

    def __init__(self, redis: Any, prefix: str = "rpjrt:", poll: float = 0.01) -> None:
        self._redis = redis
        self._prefix = prefix
        self._poll = poll

    def set(self, key: str, value: bytes) -> None:
        self._redis.set(self._prefix + key, value)

    def try_get(self, key: str) -> bytes | None:
        v = self._redis.get(self._prefix + key)
        return None if v is None else bytes(v)

    def get(self, key: str, timeout: float) -> bytes:
        return _poll_get(self.try_get, key, timeout, self._poll)
