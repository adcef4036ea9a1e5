"""Element types, named as numpy and ml_dtypes name them.

``rpjrt.dtype`` is both the type and its constructor, as in numpy: ``rpjrt.dtype("float32")``
returns the one ``rpjrt.float32`` object. A dtype compares equal to its name and aliases
(``rpjrt.float32 == "float32" == "f32"``), to the numpy dtype and scalar type
(``== numpy.float32``) and to ml_dtypes types (``rpjrt.bfloat16 == ml_dtypes.bfloat16``);
it hashes like its name. numpy is never imported here; comparisons with numpy objects are
made only when numpy is already loaded.

The table itself (names, PJRT codes, widths, formats, aliases, DLPack and XLA FFI codes) is
the Rust crate's ``rpjrt::ElementType`` table, read from the extension; so is the rule for
names it does not list exactly: numpy's meaning for numpy type codes (``"i8"`` and
``"<i8"`` are int64, ``"f4"`` float32), XLA's for XLA spellings (``"s8"`` is int8,
``"bf16"`` bfloat16), and an error for the short names the two read differently
(``"u1"``, ``"u2"``, ``"u4"``, ``"u8"``, ``"f16"``) and for numpy's string type codes
(``"S8"``, ``"U16"``, ``"a8"``: bytes or unicode strings to numpy, which rpjrt has no type
for, though ``"s8"`` and ``"u16"`` are XLA's int8 and uint16).
"""

from __future__ import annotations

import sys

from ._rpjrt import _element_type_from_name, _element_types, _import_failed

# `typing` costs milliseconds to import; the names are only needed by type checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar

__all__ = ["DType", "dtype", "from_code", "from_format", "ALL"]


class DType:
    """One PJRT element type.

    Attributes:
        name: the numpy / ml_dtypes name, e.g. ``"float32"``, ``"bfloat16"``, ``"int4"``.
        code: the PJRT buffer type code (``PJRT_Buffer_Type``), e.g. 11 for float32.
        bits: the width of one element in bits (4 for int4, 16 for bfloat16, 8 for bool).
        itemsize: bytes per element in host memory as numpy stores it (1 for the sub-byte
            types, which numpy / ml_dtypes keep one per byte; 0 for ``token``).
        kind: ``"b"`` bool, ``"i"`` signed, ``"u"`` unsigned, ``"f"`` floating point,
            ``"c"`` complex, ``"V"`` token.
        format: the buffer-protocol (PEP 3118) format string, or ``None`` where there is
            none (bfloat16, the float8/6/4 types, the sub-byte integers, token).
        dlpack: DLPack's ``(code, bits, lanes)``, or ``None`` (token).
        ffi_code: the XLA FFI ``DataType`` number (differs from ``code`` for bfloat16, the
            complex and float8/4 types and token), or ``None`` (the float6 types).
    """

    __slots__ = ("name", "code", "bits", "itemsize", "kind", "format", "dlpack", "ffi_code", "_aliases")

    _by_name: ClassVar[dict[str, DType]] = {}
    _by_code: ClassVar[dict[int, DType]] = {}

    name: str
    code: int
    bits: int
    itemsize: int
    kind: str
    format: str | None
    dlpack: tuple[int, int, int] | None
    ffi_code: int | None
    _aliases: tuple[str, ...]

    def __new__(cls, spec: Any) -> DType:
        return _to_dtype(spec)

    @classmethod
    def _make(
        cls,
        name: str,
        code: int,
        bits: int,
        itemsize: int,
        kind: str,
        format: str | None,
        aliases: tuple[str, ...],
        dlpack: tuple[int, int, int] | None,
        ffi_code: int | None,
    ) -> DType:
        self = object.__new__(cls)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "itemsize", itemsize)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "format", format)
        object.__setattr__(self, "dlpack", dlpack)
        object.__setattr__(self, "ffi_code", ffi_code)
        object.__setattr__(self, "_aliases", aliases)
        cls._by_code[code] = self
        for key in (name, *aliases):
            cls._by_name[key] = self
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("rpjrt.dtype objects are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("rpjrt.dtype objects are immutable")

    def __reduce__(self) -> tuple[object, ...]:
        return (from_code, (self.code,))

    def __copy__(self) -> DType:
        return self

    def __deepcopy__(self, memo: object) -> DType:
        return self

    def __repr__(self) -> str:
        return f"rpjrt.dtype({self.name!r})"

    def __str__(self) -> str:
        return self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, DType):
            return False
        found = _lookup(other)
        return found is self

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    @property
    def is_floating(self) -> bool:
        """True for real floating-point types (float16/32/64, bfloat16, float8/6/4...)."""
        return self.kind == "f"

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    @property
    def is_integer(self) -> bool:
        """True for signed and unsigned integers (not bool)."""
        return self.kind in ("i", "u")

    @property
    def numpy(self) -> Any:
        """The matching ``numpy.dtype`` (imports numpy, and ml_dtypes for its types).

        Raises ``rpjrt.UnsupportedError`` for ``token`` and ``ImportError`` when numpy or
        ml_dtypes is not installed (``pip install 'rpjrt[numpy]'``).
        """
        return _numpy_dtype(self)

    # numpy converts any object with a ``.dtype`` attribute: numpy.dtype(rpjrt.float32)
    # works, and so do numpy.zeros(3, rpjrt.bfloat16) and numpy.dtype("f4") == rpjrt.float32.
    @property
    def dtype(self) -> Any:
        return _numpy_dtype(self)


#: The ``numpy``-style alias: ``rpjrt.dtype("float32")``, ``isinstance(x, rpjrt.dtype)``.
dtype = DType

for _row in _element_types():
    _name, _code, _bits, _itemsize, _kind, _format, _aliases, _dl, _ffi = _row
    DType._make(_name, _code, _bits, _itemsize, _kind, _format, tuple(_aliases), _dl, _ffi)
del _row, _name, _code, _bits, _itemsize, _kind, _format, _aliases, _dl, _ffi

_N = DType._by_name
# fmt: off
bool_: DType = _N["bool"]
int8: DType = _N["int8"]
int16: DType = _N["int16"]
int32: DType = _N["int32"]
int64: DType = _N["int64"]
uint8: DType = _N["uint8"]
uint16: DType = _N["uint16"]
uint32: DType = _N["uint32"]
uint64: DType = _N["uint64"]
float16: DType = _N["float16"]
float32: DType = _N["float32"]
float64: DType = _N["float64"]
bfloat16: DType = _N["bfloat16"]
complex64: DType = _N["complex64"]
complex128: DType = _N["complex128"]
float8_e5m2: DType = _N["float8_e5m2"]
float8_e4m3fn: DType = _N["float8_e4m3fn"]
float8_e4m3b11fnuz: DType = _N["float8_e4m3b11fnuz"]
float8_e5m2fnuz: DType = _N["float8_e5m2fnuz"]
float8_e4m3fnuz: DType = _N["float8_e4m3fnuz"]
int4: DType = _N["int4"]
uint4: DType = _N["uint4"]
token: DType = _N["token"]
int2: DType = _N["int2"]
uint2: DType = _N["uint2"]
float8_e4m3: DType = _N["float8_e4m3"]
float8_e3m4: DType = _N["float8_e3m4"]
float8_e8m0fnu: DType = _N["float8_e8m0fnu"]
float4_e2m1fn: DType = _N["float4_e2m1fn"]
int1: DType = _N["int1"]
uint1: DType = _N["uint1"]
float6_e2m3fn: DType = _N["float6_e2m3fn"]
float6_e3m2fn: DType = _N["float6_e3m2fn"]
# fmt: on
del _N

#: Every dtype, in PJRT code order.
ALL: tuple[DType, ...] = tuple(DType._by_code[c] for c in sorted(DType._by_code))

_BUILTIN_TYPES: dict[type, DType] = {bool: bool_, int: int64, float: float64, complex: complex128}


def from_code(code: int) -> DType:
    """The dtype with PJRT buffer type code ``code``.

    Raises ``rpjrt.InvalidArgumentError`` for a code rpjrt does not know (0 = INVALID too).
    """
    try:
        return DType._by_code[int(code)]
    except KeyError:
        from ._errors import InvalidArgumentError

        raise InvalidArgumentError(f"unknown PJRT buffer type code {code!r}") from None


# Native-size format characters that depend on the platform's C types.
_SIZED_FORMATS = {"l": "i", "L": "u", "n": "i", "N": "u", "c": "u"}


def from_format(fmt: str, itemsize: int) -> DType | None:
    """The dtype of a buffer-protocol format string and item size, or ``None``.

    Accepts native or little-endian byte order ('@', '=', '<'; and '>'/'!' only for
    one-byte items), single-element formats only.
    """
    f = fmt
    if f[:1] in ("@", "=", "<"):
        f = f[1:]
    elif f[:1] in (">", "!"):
        if itemsize != 1 and sys.byteorder == "little":
            return None
        f = f[1:]
    if f in _SIZED_FORMATS:
        kind = _SIZED_FORMATS[f]
        name = ("int" if kind == "i" else "uint") + str(8 * itemsize)
        return DType._by_name.get(name)
    for d in ALL:
        if d.format == f:
            return d if d.itemsize == itemsize else None
    return None


def _lookup(spec: Any) -> DType | None:
    """The dtype that `spec` names, or None; never imports numpy.

    Besides rpjrt's own names: the builtin types, and, when numpy is loaded, numpy dtypes
    and anything that is a type to numpy (``numpy.dtype(spec)`` for a class: numpy's and
    ml_dtypes' scalar types, JAX's ``jnp.float32``, any class with a ``dtype``), in native
    byte order.
    """
    if isinstance(spec, DType):
        return spec
    if isinstance(spec, str):
        d = DType._by_name.get(spec)
        if d is None:
            # The Rust table's rule for everything else (numpy type strings, case, ...).
            code, _why = _element_type_from_name(spec)
            d = None if code is None else DType._by_code.get(code)
        return d
    if isinstance(spec, type) and spec in _BUILTIN_TYPES:
        return _BUILTIN_TYPES[spec]
    nd = _numpy_read(spec, instances=False)
    if nd is None:
        return None
    d = DType._by_name.get(nd.name)
    return d if d is not None and _native_order(nd) else None


def _native_order(nd: Any) -> bool:
    """Whether a numpy dtype is in this machine's byte order (or has none)."""
    return bool(nd.byteorder in ("=", "|", "<" if sys.byteorder == "little" else ">"))


def _numpy_read(spec: Any, instances: bool) -> Any:
    """The numpy dtype ``numpy.dtype(spec)`` gives, or None; only when numpy is loaded
    (never imported here). A numpy dtype is itself; a class is read as numpy reads it; any
    other object only with `instances` (the conversion of a dtype argument, not a
    comparison) and unless it has a ``dtype`` attribute (an array or array-like, read by
    that attribute by the caller). ``None`` is never read (numpy's default float64 is not
    rpjrt's: ``None`` means "not given" throughout rpjrt)."""
    np = sys.modules.get("numpy")
    if np is None or spec is None:
        return None
    try:
        if isinstance(spec, np.dtype):
            return spec
        if not isinstance(spec, type) and (not instances or hasattr(spec, "dtype")):
            return None
        nd = np.dtype(spec)
    except Exception:
        return None
    return nd if isinstance(nd, np.dtype) else None


def _numpy_string_dtype(spec: Any) -> str | None:
    """What numpy string type `spec` is (a numpy dtype or scalar type of kind ``S`` or
    ``U``), for the refusal; None for anything else. Never imports numpy."""
    np = sys.modules.get("numpy")
    if np is None:
        return None
    try:
        nd = spec if isinstance(spec, np.dtype) else None
        if isinstance(spec, type) and issubclass(spec, (np.bytes_, np.str_)):
            nd = np.dtype(spec)
    except Exception:
        return None
    if nd is None or nd.kind not in ("S", "U"):
        return None
    what = "bytes" if nd.kind == "S" else "unicode"
    if isinstance(spec, type):  # numpy.bytes_ / numpy.str_: no length
        return f"{what} string type"
    n = nd.itemsize if nd.kind == "S" else nd.itemsize // 4
    return f"{what} string type of {n} character{'' if n == 1 else 's'}"


def _to_dtype(spec: Any) -> DType:
    d = _lookup(spec)
    if d is None and not isinstance(spec, (str, type)) and hasattr(spec, "dtype"):
        # An array-like (numpy array, rpjrt.Buffer, jax array): its element type.
        d = _lookup(spec.dtype)
    nd = None
    if d is None and not isinstance(spec, str):
        # Whatever else numpy reads as a dtype (b"f4", a numpy scalar type's instance ...).
        nd = _numpy_read(spec, instances=True)
        if nd is None and not isinstance(spec, type) and hasattr(spec, "dtype"):
            nd = _numpy_read(spec.dtype, instances=True)
        if nd is not None and _native_order(nd):
            d = DType._by_name.get(nd.name)
    if d is None:
        from ._errors import InvalidArgumentError

        if isinstance(spec, str):
            raise InvalidArgumentError(_element_type_from_name(spec)[1])
        if nd is not None and nd.name in DType._by_name:
            # A known type in the other byte order: the message a string like ">f4" gets.
            raise InvalidArgumentError(f"{spec!r}: {_element_type_from_name(nd.str)[1]}")
        string = _numpy_string_dtype(spec)
        if string is not None:
            raise InvalidArgumentError(f"{spec!r} is numpy's {string}; rpjrt has no string types")
        known = ", ".join(x.name for x in ALL)
        raise InvalidArgumentError(f"{spec!r} is not a dtype rpjrt knows; known dtypes: {known}")
    return d


_NUMPY_CACHE: dict[int, Any] = {}


def import_failed(module: str, what: str, e: ImportError, hint: str = "") -> ImportError:
    """The error for ``what`` when importing ``module`` (numpy, ml_dtypes) failed with ``e``:
    the extension's one rule (the install hint only when the module is missing; at
    interpreter shutdown, which refuses imports, that reason; otherwise the import's own
    error), with ``e`` as its cause and ``hint`` (what works without it) at its end."""
    err = _import_failed(module, what, e, hint)
    assert isinstance(err, ImportError)
    return err


def _numpy_dtype(d: DType) -> Any:
    cached = _NUMPY_CACHE.get(d.code)
    if cached is not None:
        return cached
    if d.kind == "V":
        from ._errors import UnsupportedError

        raise UnsupportedError("the PJRT token type has no numpy equivalent")
    try:
        import numpy as np
    except ImportError as e:
        raise import_failed("numpy", f"converting rpjrt.{d.name} to a numpy dtype", e) from e
    if d.format is not None:
        nd = np.dtype(d.name)
    else:
        try:
            import ml_dtypes
        except ImportError as e:
            raise import_failed("ml_dtypes", f"rpjrt.{d.name} as a numpy dtype", e) from e
        t = getattr(ml_dtypes, d.name, None)
        if t is None:
            from ._errors import UnsupportedError

            raise UnsupportedError(
                f"ml_dtypes {getattr(ml_dtypes, '__version__', '?')} has no {d.name}; upgrade ml_dtypes"
            )
        nd = np.dtype(t)
    _NUMPY_CACHE[d.code] = nd
    return nd
