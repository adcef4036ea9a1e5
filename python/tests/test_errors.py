from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import pickle

import pytest

import rpjrt
from rpjrt import _errors

CODES = [
    ("CANCELLED", 1, "CancelledError"),
    ("UNKNOWN", 2, "UnknownError"),
    ("INVALID_ARGUMENT", 3, "InvalidArgumentError"),
    ("DEADLINE_EXCEEDED", 4, "DeadlineExceededError"),
    ("NOT_FOUND", 5, "NotFoundError"),
    ("ALREADY_EXISTS", 6, "AlreadyExistsError"),
    ("PERMISSION_DENIED", 7, "PermissionDeniedError"),
    ("RESOURCE_EXHAUSTED", 8, "ResourceExhaustedError"),
    ("FAILED_PRECONDITION", 9, "FailedPreconditionError"),
    ("ABORTED", 10, "AbortedError"),
    ("OUT_OF_RANGE", 11, "OutOfRangeError"),
    ("UNIMPLEMENTED", 12, "UnimplementedError"),
    ("INTERNAL", 13, "InternalError"),
    ("UNAVAILABLE", 14, "UnavailableError"),
    ("DATA_LOSS", 15, "DataLossError"),
    ("UNAUTHENTICATED", 16, "UnauthenticatedError"),
]


@pytest.mark.parametrize("code,number,clsname", CODES)
def test_one_class_per_code(code: str, number: int, clsname: str) -> None:
    cls = getattr(rpjrt, clsname)
    assert issubclass(cls, rpjrt.Error)
    assert cls.code == code and cls.code_number == number
    assert _errors.error_class(code) is cls
    assert _errors.error_class(code.lower()) is cls
    assert _errors.error_class(number) is cls
    assert _errors.CODES[code] == number
    e = cls("went wrong", entry="PJRT_Client_Compile")
    assert str(e) == "went wrong" and e.message == "went wrong"
    assert e.entry == "PJRT_Client_Compile"
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is cls and e2.entry == e.entry and str(e2) == str(e)


def test_names_do_not_shadow_builtins_or_asyncio() -> None:
    for _, _, clsname in CODES:
        assert not hasattr(builtins, clsname), clsname
    assert rpjrt.CancelledError is not asyncio.CancelledError
    assert not issubclass(rpjrt.CancelledError, asyncio.CancelledError)
    assert not issubclass(rpjrt.CancelledError, concurrent.futures.CancelledError)
    assert not issubclass(rpjrt.Error, BaseException) or issubclass(rpjrt.Error, Exception)


def test_builtin_bases_where_meaning_matches() -> None:
    assert issubclass(rpjrt.InvalidArgumentError, ValueError)
    assert issubclass(rpjrt.NotFoundError, LookupError)
    assert issubclass(rpjrt.OutOfRangeError, IndexError)
    assert issubclass(rpjrt.UnimplementedError, NotImplementedError)


def test_kind_classes() -> None:
    assert issubclass(rpjrt.UnsupportedError, rpjrt.UnimplementedError)
    assert rpjrt.UnsupportedError.code == "UNIMPLEMENTED"
    assert issubclass(rpjrt.PluginLoadError, rpjrt.NotFoundError)
    assert issubclass(rpjrt.ClientClosedError, rpjrt.FailedPreconditionError)
    assert issubclass(rpjrt.BufferDeletedError, rpjrt.FailedPreconditionError)
    assert _errors.error_class("UNIMPLEMENTED", "Unsupported") is rpjrt.UnsupportedError
    assert _errors.error_class("NOT_FOUND", "PluginLoad") is rpjrt.PluginLoadError
    assert _errors.error_class("FAILED_PRECONDITION", "Closed") is rpjrt.ClientClosedError
    assert _errors.error_class("FAILED_PRECONDITION", "Deleted") is rpjrt.BufferDeletedError
    assert _errors.error_class("INTERNAL", "Pjrt") is rpjrt.InternalError
    assert _errors.error_class("INVALID_ARGUMENT", "StructSize") is rpjrt.InvalidArgumentError


def test_unknown_codes_map_to_unknown() -> None:
    assert _errors.error_class("NOPE") is rpjrt.UnknownError
    assert _errors.error_class(99) is rpjrt.UnknownError


def test_all_exported() -> None:
    for name in _errors.__all__:
        if name not in ("error_class", "CODES"):
            assert getattr(rpjrt, name) is getattr(_errors, name)
            assert name in rpjrt.__all__
