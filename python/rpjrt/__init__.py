"""rpjrt: run StableHLO on any PJRT plugin.

    import rpjrt
    with rpjrt.Client("cpu") as client:
        exe = client.compile(stablehlo_text)
        x = client.put(array.array("f", range(8)))
        (y,) = exe(x, x)
        print(y.to_host().tolist())

The package is a thin layer over the rpjrt Rust crate (the ``rpjrt._rpjrt`` extension).
It needs nothing outside the standard library; numpy, ml_dtypes and jax are optional.
"""

from __future__ import annotations

import _thread
import os as _os

# Imported here, on the importing thread: `threading` records the thread that first
# imports it as the main thread, and one first imported on a thread of rpjrt's (by a fork
# hook or a done-callback) would make the interpreter's exit wait for that thread for ever.
import threading as _threading  # noqa: F401

from . import _dtypes as _dtypes_module

# Discovery needs importlib.metadata, json and pathlib (tens of milliseconds to import);
# it is loaded on first use (a Client without a path, or these names), not on import.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from . import conform, cuda, distributed, ffi, session, sharding, transfer, triton
    from ._discovery import PluginInfo, candidates, find_plugin, plugins
    from .session import Session, Slot

_LAZY_DISCOVERY = ("PluginInfo", "candidates", "find_plugin", "plugins")
# Every public submodule is an attribute after a plain `import rpjrt` (as in JAX), imported
# on first use so that `import rpjrt` stays fast.
_SUBMODULES = (
    "conform",
    "cuda",
    "distributed",
    "ffi",
    "session",
    "sharding",
    "transfer",
    "triton",
)


def __getattr__(name: str) -> object:
    if name in _LAZY_DISCOVERY:
        from . import _discovery

        value = getattr(_discovery, name)
        globals()[name] = value
        return value
    # Sessions and sharding use typing; they load on first use too.
    if name in ("Session", "Slot"):
        from . import session as _session

        value = getattr(_session, name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        import importlib

        mod = importlib.import_module(f".{name}", __name__)
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'rpjrt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_DISCOVERY) | set(_SUBMODULES) | {"Session", "Slot"})
from ._dtypes import (
    ALL as _ALL_DTYPES,
)
from ._dtypes import (
    DType,
    bfloat16,
    bool_,
    complex64,
    complex128,
    dtype,
    float4_e2m1fn,
    float6_e2m3fn,
    float6_e3m2fn,
    float8_e3m4,
    float8_e4m3,
    float8_e4m3b11fnuz,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    float16,
    float32,
    float64,
    int1,
    int2,
    int4,
    int8,
    int16,
    int32,
    int64,
    token,
    uint1,
    uint2,
    uint4,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._errors import (
    AbortedError,
    AlreadyExistsError,
    BufferDeletedError,
    ExecutableDeletedError,
    CancelledError,
    ClientClosedError,
    DataLossError,
    DeadlineExceededError,
    Error,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    PluginLoadError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
    UnsupportedError,
)

try:
    from ._rpjrt import (
        AliasFulfiller,
        Buffer,
        Cache,
        CallOutputs,
        Client,
        Device,
        Event,
        Executable,
        Memory,
        OpSharding,
        Plugin,
        PreparedCall,
        SessionProgram,
        Topology,
        Trace,
        __version__,
        _on_rpjrt_thread,
        artifact_stablehlo_version,
        inspect_artifact,
        pooled_memory_stats,
        release_pooled_memory,
        set_pooled_memory_limit,
        set_wait_spin,
        wait_spin,
    )
except ImportError as _e:  # pragma: no cover - a broken install
    if "subinterpreter" in str(_e):
        raise
    raise ImportError(
        f"rpjrt's compiled extension (rpjrt._rpjrt) cannot be imported: {_e}. "
        "Reinstall the wheel for this platform (pip install --force-reinstall rpjrt), "
        "or build it from source with `maturin develop` in python/."
    ) from _e

from ._trace import trace

#: Every dtype rpjrt knows, in PJRT code order.
dtypes: tuple[DType, ...] = _ALL_DTYPES
from_code = _dtypes_module.from_code

_default_client: Client | None = None
_default_lock = _thread.allocate_lock()


def _fresh_default_lock() -> None:
    # A child forked while another thread held the lock (making the default client) would
    # wait for it for ever: that thread does not exist in the child.
    global _default_lock
    _default_lock = _thread.allocate_lock()


def _notifier_loop(next_job: Any) -> None:
    # The loop of an rpjrt notifier thread (see python/src/notify.rs): calls each callable
    # `next_job()` hands over (None ends the loop). The callables run under Python frames
    # only, so that one still running when the interpreter finalizes ends as a daemon
    # thread does; what they raise is reported as unraisable, as a done-callback's is.
    while True:
        job = next_job()
        if job is None:
            return
        function, args = job
        del job
        try:
            function(*args)
        except BaseException as e:  # noqa: BLE001 - reported, as for any done-callback
            next_job.report(e)
            del e
        del function, args


def _import_before_fork() -> None:
    # CPython keeps a lock per module being imported, and a child forked while another
    # thread imports a module finds that lock held for ever. The modules rpjrt imports on
    # first use, possibly on other threads (plugin discovery, at the first Client), are
    # imported now: one another thread is importing is waited for.
    # On a thread of rpjrt's (a done-callback's, an FFI handler's) nothing is imported:
    # the import machinery would run, and record state, on a thread Python did not start.
    if _on_rpjrt_thread():
        return
    import importlib

    for name in ("rpjrt._discovery", "subprocess", "selectors", "warnings"):
        importlib.import_module(name)


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(before=_import_before_fork, after_in_child=_fresh_default_lock)


def default_client() -> Client:
    """The client that module-level helpers use: ``Client()`` made on first use.

    A closed default client is replaced by a new one.
    """
    global _default_client
    with _default_lock:
        if _default_client is None or _default_client.closed:
            _default_client = Client()
        return _default_client


def from_dlpack(
    x: object,
    /,
    *,
    device: Device | None = None,
    copy: bool | None = None,
    client: Client | None = None,
) -> Buffer:
    """A Buffer over a ``__dlpack__`` producer's memory (zero-copy when possible).

    Uses ``device.client`` if a device is given, else ``client``, else :func:`default_client`.
    """
    if device is not None:
        c = device.client
    elif client is not None:
        c = client
    else:
        c = default_client()
    return c.from_dlpack(x, device, copy=copy)


__all__ = [
    "__version__",
    # classes
    "Client",
    "Plugin",
    "Device",
    "Memory",
    "Executable",
    "PreparedCall",
    "CallOutputs",
    "Buffer",
    "Event",
    "AliasFulfiller",
    "Cache",
    "Topology",
    "OpSharding",
    "PluginInfo",
    "Session",
    "SessionProgram",
    "Slot",
    "Trace",
    "sharding",
    # functions
    "plugins",
    "find_plugin",
    "candidates",
    "default_client",
    "from_dlpack",
    "from_code",
    "artifact_stablehlo_version",
    "inspect_artifact",
    "set_wait_spin",
    "wait_spin",
    "trace",
    "release_pooled_memory",
    "pooled_memory_stats",
    "set_pooled_memory_limit",
    # dtypes
    "DType",
    "dtype",
    "dtypes",
    "bool_",
    "int1",
    "int2",
    "int4",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint1",
    "uint2",
    "uint4",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "complex64",
    "complex128",
    "float8_e5m2",
    "float8_e4m3fn",
    "float8_e4m3b11fnuz",
    "float8_e5m2fnuz",
    "float8_e4m3fnuz",
    "float8_e4m3",
    "float8_e3m4",
    "float8_e8m0fnu",
    "float4_e2m1fn",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "token",
    # errors
    "Error",
    "CancelledError",
    "UnknownError",
    "InvalidArgumentError",
    "DeadlineExceededError",
    "NotFoundError",
    "AlreadyExistsError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "AbortedError",
    "OutOfRangeError",
    "UnimplementedError",
    "InternalError",
    "UnavailableError",
    "DataLossError",
    "UnauthenticatedError",
    "UnsupportedError",
    "PluginLoadError",
    "ClientClosedError",
    "BufferDeletedError",
    "ExecutableDeletedError",
]
