"""The exceptions rpjrt raises.

Every error is an :class:`Error`. There is one subclass per PJRT status code (the
gRPC/absl canonical codes), named after the code, plus :class:`UnsupportedError` for a
capability the plugin lacks and :class:`PluginLoadError` for a library that cannot be
used as a plugin. The names end in ``Error`` so that none of them shadows a builtin or an
``asyncio`` name (``rpjrt.CancelledError`` is *not* ``asyncio.CancelledError`` and does not
derive from it: a cancelled PJRT operation must not look like a cancelled task).

A few classes also derive from the builtin that Python code conventionally catches for the
same situation: ``InvalidArgumentError`` is a ``ValueError``, ``UnimplementedError`` a
``NotImplementedError``, ``NotFoundError`` a ``LookupError`` and ``OutOfRangeError`` an
``IndexError``... only where the meaning is the same.

An rpjrt error raised while an exception is being handled (in an ``except`` or
``finally`` block) has that exception as its ``__context__``, as a ``raise`` there would.
"""

from __future__ import annotations

__all__ = [
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
    "error_class",
    "CODES",
]


class Error(Exception):
    """Base class of every exception raised by rpjrt.

    Attributes:
        code: the PJRT status code name, e.g. ``"INVALID_ARGUMENT"``.
        code_number: the numeric PJRT status code (``PJRT_Error_Code``), e.g. ``3``.
        entry: the PJRT C API entry that failed (e.g. ``"PJRT_Client_Compile"``), or
            ``None`` when the error did not come from a plugin call.
        message: the message without the entry prefix.
    """

    code: str = "UNKNOWN"
    code_number: int = 2

    def __init__(self, message: str = "", *, entry: str | None = None) -> None:
        super().__init__(message)
        self.message: str = message
        self.entry: str | None = entry

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[object, ...]:
        # Keep `entry` across pickling (multiprocessing, concurrent.futures).
        return (_rebuild, (type(self), self.message, self.entry))


def _rebuild(cls: type[Error], message: str, entry: str | None) -> Error:
    return cls(message, entry=entry)


class CancelledError(Error):
    """The operation was cancelled (PJRT code CANCELLED, 1)."""

    code = "CANCELLED"
    code_number = 1


class UnknownError(Error):
    """An error with no better code (PJRT code UNKNOWN, 2)."""

    code = "UNKNOWN"
    code_number = 2


class InvalidArgumentError(Error, ValueError):
    """An argument was invalid: wrong dtype, shape, count, type... (INVALID_ARGUMENT, 3)."""

    code = "INVALID_ARGUMENT"
    code_number = 3


class DeadlineExceededError(Error):
    """A deadline passed before the operation finished (DEADLINE_EXCEEDED, 4)."""

    code = "DEADLINE_EXCEEDED"
    code_number = 4


class NotFoundError(Error, LookupError):
    """Something requested was not found (NOT_FOUND, 5)."""

    code = "NOT_FOUND"
    code_number = 5


class AlreadyExistsError(Error):
    """Something to be created exists already (ALREADY_EXISTS, 6)."""

    code = "ALREADY_EXISTS"
    code_number = 6


class PermissionDeniedError(Error):
    """The caller may not do this (PERMISSION_DENIED, 7)."""

    code = "PERMISSION_DENIED"
    code_number = 7


class ResourceExhaustedError(Error, MemoryError):
    """Out of device memory or another resource (RESOURCE_EXHAUSTED, 8).

    Also a ``MemoryError``, as numpy raises for an allocation that cannot be made.

    When a device allocation failed (put, execute, compile, copy, transfer), the message
    names the request, the device allocator's figures and a hint, and these attributes
    hold them (otherwise they are ``None``):

    Attributes:
        memory_stats: the allocator's figures (``Device.memory_stats()``'s keys), or
            ``None`` when the plugin reports none.
        device_id: the device the figures are of.
        memory_options: the client's create options that bound memory (name -> value).
        hint: what to change.
    """

    code = "RESOURCE_EXHAUSTED"
    code_number = 8
    memory_stats: dict[str, int | None] | None = None
    device_id: int | None = None
    memory_options: dict[str, str] | None = None
    hint: str | None = None


class FailedPreconditionError(Error):
    """The system is not in a state that allows the operation (FAILED_PRECONDITION, 9)."""

    code = "FAILED_PRECONDITION"
    code_number = 9


class AbortedError(Error):
    """The operation was aborted (ABORTED, 10)."""

    code = "ABORTED"
    code_number = 10


class OutOfRangeError(Error, IndexError):
    """A value was outside its valid range (OUT_OF_RANGE, 11)."""

    code = "OUT_OF_RANGE"
    code_number = 11


class UnimplementedError(Error, NotImplementedError):
    """The plugin does not implement the operation (UNIMPLEMENTED, 12)."""

    code = "UNIMPLEMENTED"
    code_number = 12


class InternalError(Error):
    """An invariant inside the plugin broke (INTERNAL, 13)."""

    code = "INTERNAL"
    code_number = 13


class UnavailableError(Error):
    """The service is unavailable right now (UNAVAILABLE, 14)."""

    code = "UNAVAILABLE"
    code_number = 14


class DataLossError(Error):
    """Data was lost or corrupted (DATA_LOSS, 15)."""

    code = "DATA_LOSS"
    code_number = 15


class UnauthenticatedError(Error):
    """The caller is not authenticated (UNAUTHENTICATED, 16)."""

    code = "UNAUTHENTICATED"
    code_number = 16


class UnsupportedError(UnimplementedError):
    """The plugin lacks an entry point or feature that the request needs.

    Raised before anything reaches the plugin, e.g. when the plugin's PJRT version predates
    the entry, or the plugin leaves the slot empty. Its code is UNIMPLEMENTED.
    """


class PluginLoadError(NotFoundError):
    """A plugin could not be found or loaded, or the library is not a PJRT plugin.

    Raised for a missing file, a library that does not export ``GetPjrtApi``, a plugin
    too old for rpjrt, and when discovery finds no plugin at all. Its code is NOT_FOUND.
    """


class ClientClosedError(FailedPreconditionError):
    """The object belongs to a client that was closed. Its code is FAILED_PRECONDITION."""


class BufferDeletedError(FailedPreconditionError):
    """The buffer was deleted or donated to an execution. Its code is FAILED_PRECONDITION."""


class ExecutableDeletedError(FailedPreconditionError):
    """The executable was deleted (``Executable.delete()``); compile or load it again.
    Its code is FAILED_PRECONDITION.

    A sibling of :class:`BufferDeletedError`, not a subclass: an ``except
    BufferDeletedError`` that re-uploads the arguments of a call must not take a deleted
    executable for a deleted argument. Catch ``FailedPreconditionError`` for both.
    """


_BY_CODE: dict[str, type[Error]] = {
    cls.code: cls
    for cls in (
        CancelledError,
        UnknownError,
        InvalidArgumentError,
        DeadlineExceededError,
        NotFoundError,
        AlreadyExistsError,
        PermissionDeniedError,
        ResourceExhaustedError,
        FailedPreconditionError,
        AbortedError,
        OutOfRangeError,
        UnimplementedError,
        InternalError,
        UnavailableError,
        DataLossError,
        UnauthenticatedError,
    )
}

#: PJRT status code name -> number, in code order.
CODES: dict[str, int] = {
    name: cls.code_number for name, cls in sorted(_BY_CODE.items(), key=lambda kv: kv[1].code_number)
}

# rpjrt::Error variants that have their own class (the rest map by code).
_BY_KIND: dict[str, type[Error]] = {
    "Unsupported": UnsupportedError,
    "PluginLoad": PluginLoadError,
    "Closed": ClientClosedError,
    "Deleted": BufferDeletedError,
    "ExecutableDeleted": ExecutableDeletedError,
}


def error_class(code: str | int, kind: str | None = None) -> type[Error]:
    """The exception class for a PJRT status code (name or number) and an rpjrt error kind.

    ``kind`` is the name of the Rust ``rpjrt::Error`` variant (``"Unsupported"``,
    ``"PluginLoad"``, ``"Closed"``, ``"Deleted"``, ``"Pjrt"``, ...), or
    ``"ExecutableDeleted"`` for a ``Deleted`` error about an executable; a kind with its
    own class wins over the code. Unknown codes map to :class:`UnknownError`. This is the one
    place where the extension module turns a Rust error into a Python class.
    """
    if kind is not None and kind in _BY_KIND:
        return _BY_KIND[kind]
    if isinstance(code, int):
        for cls in _BY_CODE.values():
            if cls.code_number == code:
                return cls
        return UnknownError
    return _BY_CODE.get(code.upper(), UnknownError)


# Tracebacks and reprs name the classes where users import them (``rpjrt.X``); pickling
# finds them there too.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = "rpjrt"
del _name, _obj
