"""Custom calls (XLA FFI): serve ``stablehlo.custom_call @name(...) {api_version = 4 : i32}``
with a Python function, or with compiled handler code (a PyCapsule, as jax.ffi uses).

    import rpjrt, rpjrt.ffi

    client = rpjrt.Client("cpu")

    @rpjrt.ffi.handler(client, "scale")
    def scale(call):
        x = call.args[0].to_numpy()
        call.rets[0].to_numpy()[:] = 2 * x + call.attrs["offset"]

A handler receives an :class:`FfiCall`: ``args`` and ``rets`` (:class:`FfiBuffer`: shape,
dtype, nbytes, data address, ``memoryview()``, ``to_numpy()``, ``__array__``, ``__dlpack__``),
``attrs`` (the custom call's ``backend_config`` dictionary as Python values), ``stream``,
``user_data`` (the object passed as ``exe(x, ffi_user_data=obj)``), ``state`` (the
instance's state, below), ``target`` and ``runtime_version``. An exception fails the execute call with its type, message and the
innermost traceback frames; a ``BaseException`` that is not an ``Exception``
(``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``, ``BaseExceptionGroup``, a
``BaseException`` subclass of one's own) propagates as itself.
The exception's type picks the status code, and so the :class:`rpjrt.Error` subclass the
caller sees (the same table serves Python key-value stores): an ``rpjrt.Error`` keeps its
code; ``TimeoutError`` is DEADLINE_EXCEEDED, ``IndexError`` OUT_OF_RANGE, ``KeyError`` (any
other ``LookupError``) NOT_FOUND, ``ValueError``/``TypeError`` INVALID_ARGUMENT,
``NotImplementedError`` UNIMPLEMENTED, ``MemoryError`` RESOURCE_EXHAUSTED,
``PermissionError`` PERMISSION_DENIED, ``FileExistsError`` ALREADY_EXISTS,
``ConnectionError`` UNAVAILABLE, anything else UNKNOWN.

The rules a handler lives by:

- Views are copies, as ``jax.pure_callback`` makes them: the first view of a buffer copies an
  argument's bytes (or starts a result zeroed; a result that aliases an argument through
  ``output_operand_aliases`` starts with the argument's values), and what the handler writes
  into a result's views becomes the result when it returns. A result the handler neither
  views nor returns is zeros (an aliasing one keeps the argument's values). A call
  whose results would share memory (two results aliasing one operand), or whose one result
  aliases two operands, is refused before the handler runs, naming the results and operands. A view kept after the call stays readable but is
  detached from the computation (it never reads memory the runtime freed, and writing it
  changes no result); asking a buffer for a new view after the call raises.
- ``__array__`` follows numpy's protocol (``__array__(dtype=None, copy=None)``): no
  ``dtype``, or the buffer's own, gives the view itself (``np.asarray(call.rets[0],
  dtype=np.float32)`` of an f32 result writes the result); another dtype a converted copy,
  detached from the result; ``copy=True`` a fresh copy; ``copy=False`` where only a copy
  could be given raises ``ValueError``.
- The handler returns ``None`` (after writing ``call.rets``) or the results: one array-like
  for a single result, or a tuple/list with one per result (a plain list is one value per
  result even for a single result: return ``np.asarray(values, dtype)`` for one array),
  each exactly of the result's shape and dtype (``None`` in the place of a token result: tokens hold no data, and their
  buffers have no views). A sub-byte result (int4, uint4, int2, uint2) takes an ml_dtypes
  array, which rpjrt packs (its views cannot show packed data; ``memoryview()`` gives the
  packed bytes). Anything else fails the execution with ``InvalidArgumentError``. A bool
  result's bytes become 0 or 1 (nonzero is true), however the handler produced them.
- Views are row-major: a program whose custom call gives the handler's target
  ``operand_layouts``/``result_layouts`` whose elements do not lie in row-major order in
  memory is refused when it is compiled (or loaded), naming the target, the operand or
  result and the layout (size-1 dimensions may be placed anywhere, and a shape with no
  elements has no order: those pass). The check sees the
  handlers registered at that moment: register before compiling (a program compiled while
  its target had no rpjrt handler is not checked again when one is registered later).
- A string attribute that is not UTF-8 fails the call with an error naming the attribute;
  an attribute name that is not UTF-8 fails it too (it is not decoded lossily, which could
  merge distinct names).
- A returned numpy masked array is refused (its mask would be lost), as ``put`` refuses it.
- Registering for a platform the client does not have (``platform="cpuu"``) is refused at
  once, naming the client's platform; ``cpu``/``host`` (any case) name the CPU platform, and
  ``gpu`` a CUDA or ROCm one.
- Replacing a handler that has ``instantiate`` with another one: programs compiled before
  the replacement are refused (``FailedPreconditionError``, "compile the program again")
  rather than hand the new handler the old instantiate function's state. A target first
  registered with ``instantiate`` cannot be replaced by native code (``FailedPreconditionError``:
  use a new name).
- Handlers run with IEEE subnormals, as every Python thread has (the CPU runtime flushes
  them to zero on its threads, and puts that mode back when the handler returns).
- Dropping the last reference to a client, executable or buffer inside a handler is fine:
  its destruction happens on another thread once the handler returns. So is deleting a
  buffer (even one the running program reads): it is refused from then on, and its memory
  is freed on that thread once the program lets go of it.
- A handler may use the Session whose program runs it (bind, and read slots that are not
  outputs of the running step); running a program of that session again from inside the
  handler is refused ("the session is stepping"). Reading a slot that the running step
  writes gives its pre-step value where the step has not yet put its outputs in, and
  otherwise ``FailedPreconditionError`` ("not waited for ... not ready"; see the next
  point): the output is made by the execution waiting for the handler.
- The CPU plugins run a cheap program inline, inside the execute call, but dispatch one
  with real work in it (a large dot) asynchronously: its handler runs later on a plugin
  worker thread, and the plugin runs a device's executions in order. From such a handler
  an execute on a device of the handler's own execution is refused at once with
  ``FailedPreconditionError`` naming the device (it would wait behind the execution that
  waits for the handler, for ever), and so is a wait for a buffer on that device that is
  not ready (after a 1 s grace, which a host transfer finishes within). Executing on
  another device works, and so do nested executes from handlers of programs run inline and
  from instantiate functions. rpjrt cannot tell a plugin's clients apart inside a handler,
  so the refusal holds for that device of every client of the plugin.
- In a replicated program with collectives (``all_reduce`` and the like), a handler that
  raises on some replicas only leaves the other replicas waiting in the collective for
  them; XLA aborts the process after its own timeout (about 40 s on the CPU plugins).
  Handlers in such programs should not raise on some replicas only (rpjrt's own refusals,
  such as the nesting limit, count as raising).
- A handler may execute programs (its own included), up to 16 handlers nested on one
  thread: deeper, the handler is not run and the call fails (the plugins bound the
  executions in flight, 32 per device on the CPU plugins, and a deeper one would wait for
  the enclosing ones for ever); for the same reason a handler's execute is refused while
  16 or more handlers run at once. At most 16 Python handler calls are in progress at
  once: another waits for a place (briefly, while handlers return), and one that waits
  :func:`set_handler_wait_limit` seconds (5 by default) with none of them returning is
  not run and its execute fails, so a handler that waits for a program run on another
  thread (a thread pool) fails past 16 levels instead of hanging. These refusals are
  ``ResourceExhaustedError`` naming "rpjrt's custom-call nesting limit"
  (a limit, not memory: no out-of-memory report, ``hint`` is ``None``). An error passed up
  unchanged through nested handlers reads ``... raised X from N nested handler errors; the
  innermost: ...``, N counting every level below, the innermost error said once; a
  handler that raises its own exception keeps its message whole, whatever it quotes.
- A native handler given as a capsule or an address must point at code: a stray int, or a
  capsule of data, is refused at registration.
- At interpreter exit, running handlers finish; handlers not yet started fail with
  ``CancelledError`` without running Python. Then rpjrt lets go of every Python handler,
  instantiate function and instance state it holds, so the modules they refer to are
  finalized as usual (``__del__`` runs, files left open are flushed).
- An argument's ``__dlpack__`` is read-only, which only versioned DLPack
  (``max_version=(1, 0)``, as ``np.from_dlpack`` asks) can mark; a legacy request (no
  ``max_version``) exports a private writable copy, and one with ``copy=False`` raises
  ``BufferError``.

Per-instance state: ``register(client, name, fn, instantiate=make)`` calls ``make(call)``
once per compiled instance of the custom call (each call site of each compiled program) and
hands what it returned to every execution of that instance as ``call.state``:

    def make(call):                       # at compile time; call.attrs are this site's
        return {"scale": 2.0 * call.attrs["offset"], "calls": 0}

    @rpjrt.ffi.handler(client, "counted", instantiate=make)
    def counted(call):
        call.state["calls"] += 1
        return call.state["scale"] * call.args[0].to_numpy()

The state lives as long as the executable (it is released when the executable is
destroyed). Runtimes without the instantiate stage (XLA FFI older than 0.3) refuse the
registration with an error naming both versions. A name first registered without
``instantiate`` cannot later be given one (``replace=True`` raises
``FailedPreconditionError``; use a new name); the other way round is fine.

Registration is checked at once: a plugin that refuses or silently drops the handler (an
FFI runtime older than the handler) raises here, naming target, platform and versions.
"""

from __future__ import annotations

import fractions
import numbers
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, SupportsFloat, TypeVar, Union, cast

from . import _rpjrt
from ._errors import InvalidArgumentError, UnsupportedError

if TYPE_CHECKING:
    from ._rpjrt import Client, Plugin

#: What registration functions take: a Client (its platform is the default) or a Plugin.
Target = Union["Client", "Plugin"]

FfiBuffer = _rpjrt.FfiBuffer
FfiCall = _rpjrt.FfiCall

__all__ = [
    "FfiBuffer",
    "FfiCall",
    "Registration",
    "handler",
    "is_registered",
    "register",
    "register_jaxlib_cpu_targets",
    "rpjrt_ffi_version",
    "runtime_version",
    "set_handler_wait_limit",
    "unregister",
]

F = TypeVar("F", bound=Callable[..., Any])


class Registration(NamedTuple):
    """What a successful registration found."""

    target: str
    platform: str
    runtime_version: tuple[int, int]
    handler_version: tuple[int, int]


def _is_native(obj: object) -> bool:
    return isinstance(obj, int) or type(obj).__name__ == "PyCapsule"


def register(
    client_or_plugin: Target,
    name: str,
    handler: Any,
    platform: str | None = None,
    *,
    replace: bool = False,
    instantiate: Callable[[FfiCall], Any] | None = None,
) -> Registration:
    """Registers ``handler`` for custom calls to ``name``.

    ``handler`` is a Python callable taking an :class:`FfiCall`, or native handler code:
    a PyCapsule holding an ``XLA_FFI_Handler*`` (the ``jax.ffi.register_ffi_target``
    convention) or its address as an int. ``platform`` defaults to the client's (``cpu``);
    registering a name twice raises ``AlreadyExistsError`` unless ``replace=True``.

    ``instantiate`` gives a Python handler per-instance state: ``instantiate(call)`` runs
    once for each compiled instance of the custom call (when the program is compiled or
    loaded; ``call.stage == "instantiate"``, ``call.attrs`` are that call site's
    attributes, there are no buffers) and returns any object; every execution of that
    instance then sees it as ``call.state``. The state is released when the executable is
    destroyed. An exception in ``instantiate`` fails the compile (or load) with its type
    and message; a ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``...)
    propagates as itself. It needs an XLA FFI runtime of
    version 0.3 or newer (the PJRT 0.115 CPU plugin's is 0.4); on older runtimes (the 0.81
    plugin's 0.2) registering raises ``UnimplementedError`` naming both versions.
    """
    if instantiate is not None and not callable(instantiate):
        raise TypeError(
            f"instantiate must be a callable taking an FfiCall, not {type(instantiate).__name__}"
        )
    _refuse_asynchronous(handler, "handler")
    if instantiate is not None:
        _refuse_asynchronous(instantiate, "instantiate function")
    if _is_native(handler):
        if instantiate is not None:
            raise TypeError(
                "instantiate= is for Python handlers; a native handler implements its own "
                "instantiate stage"
            )
        native = cast(Any, handler)
        r = _rpjrt._ffi_register_native(client_or_plugin, name, native, platform, replace)
    elif callable(handler):
        r = _rpjrt._ffi_register_python(
            client_or_plugin, name, handler, platform, replace, instantiate
        )
    else:
        raise TypeError(
            "an FFI handler is a Python callable, a PyCapsule or an address, "
            f"not {type(handler).__name__}"
        )
    return Registration(*r)


def _refuse_asynchronous(fn: object, role: str) -> None:
    """Refuses an ``async def``, generator or async generator function (or a callable
    object whose ``__call__`` is one): the plugin calls handlers synchronously on its own
    thread and uses what they return at once, so a coroutine or generator in place of the
    result could only fail every execution with a message about the wrong thing."""
    import functools
    import inspect

    plain = inspect.isfunction(fn) or inspect.ismethod(fn)
    call = fn if plain else getattr(type(fn), "__call__", None)
    target = fn if isinstance(fn, functools.partial) else call
    kinds = (
        (inspect.iscoroutinefunction, "an async def function"),
        (inspect.isasyncgenfunction, "an async generator function"),
        (inspect.isgeneratorfunction, "a generator function"),
    )
    for test, what in kinds:
        if target is not None and test(target):
            raise TypeError(
                f"the FFI {role} is {what}: the plugin calls it synchronously on its own "
                "thread and needs the result when it returns; write a plain function "
                "(run asynchronous work before the call, or block on it inside)"
            )


def handler(
    client_or_plugin: Target,
    name: str,
    *,
    platform: str | None = None,
    replace: bool = False,
    instantiate: Callable[[FfiCall], Any] | None = None,
) -> Callable[[F], F]:
    """Decorator: registers the function as the handler of ``name`` and returns it
    (``instantiate`` as for :func:`register`)."""

    def wrap(fn: F) -> F:
        if not callable(fn):
            raise TypeError(
                f"@ffi.handler decorates a Python callable, not {type(fn).__name__}; register "
                "native handler code with ffi.register(client, name, capsule_or_address)"
            )
        register(client_or_plugin, name, fn, platform, replace=replace, instantiate=instantiate)
        return fn

    return wrap


def unregister(client_or_plugin: Target, name: str, platform: str | None = None) -> bool:
    """Removes the handler of ``name``; programs calling it then fail saying so. Returns
    whether a handler was bound. The name can be registered again afterwards."""
    return bool(_rpjrt._ffi_unregister(client_or_plugin, name, platform))


def is_registered(client_or_plugin: Target, name: str, platform: str | None = None) -> bool:
    """Whether ``name`` has a handler on this plugin and platform."""
    return bool(_rpjrt._ffi_is_registered(client_or_plugin, name, platform))


def runtime_version(client_or_plugin: Target) -> tuple[int, int]:
    """The plugin's XLA FFI runtime version, e.g. ``(0, 4)``."""
    major, minor = _rpjrt._ffi_runtime_version(client_or_plugin)
    return (major, minor)


def rpjrt_ffi_version() -> tuple[int, int]:
    """The XLA FFI version rpjrt's own handlers speak."""
    major, minor = _rpjrt._ffi_rpjrt_version()
    return (major, minor)


def set_handler_wait_limit(seconds: SupportsFloat | None = None) -> float:
    """Sets how long a Python handler waits for a place among the 16 Python handler calls
    that may be in progress at once, while none of them returns, before it is refused with
    ``ResourceExhaustedError`` (rpjrt's custom-call nesting limit); returns the previous
    limit in seconds (``None`` only reads it). 5 seconds by default.

    Those 16 handlers each hold one of the plugin's executions in flight, which the CPU
    plugins bound at 32 per device; when they wait for executions started on other threads
    whose handlers need places too, nothing would ever finish, and the refusal ends that.
    Raise the limit when 16 handlers at once are legitimately slower than it (from 0.001 to
    86400 seconds, compared exactly: anything else, a NaN included, raises
    ``InvalidArgumentError`` saying whether it is below, above or not a number).
    ``seconds`` is any real number (``int``, ``float``, numpy numbers, ``Fraction``,
    ``Decimal``...); a ``bool``, an array or a non-number raises an ``InvalidArgumentError``
    that is also a ``TypeError``.
    """
    if seconds is None:
        return float(_rpjrt._ffi_handler_wait_limit(None))
    return float(_rpjrt._ffi_handler_wait_limit(_wait_seconds(seconds)))


class _NotARealNumberError(InvalidArgumentError, TypeError):
    """rpjrt's ``InvalidArgumentError`` for a value that is no real number at all (a bool,
    a string, a complex number...): a ``TypeError`` too, as Python's own checks raise.
    Shown as ``rpjrt.InvalidArgumentError``."""


_NotARealNumberError.__name__ = _NotARealNumberError.__qualname__ = "InvalidArgumentError"
_NotARealNumberError.__module__ = "rpjrt"


def _wait_seconds(seconds: object) -> float:
    """``seconds`` as a float for :func:`set_handler_wait_limit`: a real number (not a bool,
    nor numpy's bool, nor an array) from 0.001 to 86400, checked exactly before it is
    converted (a tiny positive ``Fraction`` is not 0, ``Decimal('sNaN')`` is no number).
    Every refusal is an :class:`InvalidArgumentError` with a short message."""
    np_bool = getattr(sys.modules.get("numpy"), "bool_", None)
    is_bool = isinstance(seconds, bool) or (np_bool is not None and isinstance(seconds, np_bool))
    real = isinstance(seconds, numbers.Real) or (
        not isinstance(seconds, numbers.Complex) and hasattr(type(seconds), "__float__")
    )
    if is_bool or not real or getattr(seconds, "ndim", 0) != 0:
        raise _NotARealNumberError(
            f"the handler wait limit must be a real number of seconds, not "
            f"{type(seconds).__name__}"
        )
    if type(seconds).__module__ == "numpy" and hasattr(seconds, "item"):
        seconds = seconds.item()  # a Python int or float: compared without numpy's casts
    shown, size = repr(seconds), ""
    if len(shown) > 40:
        shown, size = shown[:20] + "..." + shown[-8:], f"{len(shown)} characters, "
    try:
        try:
            # Compared exactly (a Fraction, a Decimal, a huge int), not as a rounded float.
            why = _out_of_range(seconds)
        except TypeError:
            why = _out_of_range(float(cast(SupportsFloat, seconds)))
        if why is None:
            return float(cast(SupportsFloat, seconds))
    except (ArithmeticError, ValueError, TypeError):
        # Decimal's NaNs refuse to be compared (sNaN even to be converted).
        why = "not a number"
    raise InvalidArgumentError(
        f"the handler wait limit must be a number of seconds from 0.001 to 86400, not {shown} "
        f"({size}{why})"
    ) from None


_WAIT_MIN = fractions.Fraction(1, 1000)


def _out_of_range(value: Any) -> str | None:
    """Why ``value`` is not from 0.001 to 86400 (compared with exactly 1/1000, not the
    float nearest it), or None when it is."""
    if value < _WAIT_MIN:
        return "below 0.001"
    if value > 86400:
        return "above 86400"
    if not _WAIT_MIN <= value <= 86400:
        return "not a number"
    return None


def register_jaxlib_cpu_targets(client: Target, *, replace: bool = False) -> list[str]:
    """Registers the CPU custom-call handlers jaxlib ships (its LAPACK kernels), so
    JAX-lowered programs using ``jnp.linalg`` compile and run under rpjrt.

    Returns the target names registered (names that already have a handler are kept).
    Raises ``UnsupportedError`` without jaxlib, and a clear error when the plugin's FFI
    runtime is older than the one jaxlib's handlers were built for (they would be dropped).
    """
    try:
        import jaxlib
        from jaxlib import lapack
    except ImportError as e:
        raise UnsupportedError(f"register_jaxlib_cpu_targets needs jaxlib: {e}") from e
    getattr(lapack, "_lapack").initialize()
    targets = [
        (name, capsule)
        for name, capsule, api_version in lapack.registrations().get("cpu", [])
        if api_version == 1
    ]
    done: list[str] = []
    for name, capsule in targets:
        if not replace and is_registered(client, name):
            continue
        try:
            register(client, name, capsule, replace=replace)
        except Exception as e:
            raise type(e)(
                f"jaxlib {getattr(jaxlib, '__version__', '?')}'s CPU handlers cannot be used with this plugin "
                f"(FFI runtime {'.'.join(map(str, runtime_version(client)))}): {e}"
            ) from e
        done.append(name)
    return done
