"""Sessions: programs whose inputs and outputs are named slots, for training loops.

    session = rpjrt.Session(client)
    step = session.program(lowered_text, inputs=["w", "x", "y"], outputs=["w", "loss"])
    session.bind("w", w0)                         # uploaded now
    session.bind_many({"x": load_x, "y": y})      # load_x runs when a program first needs x
    for _ in range(100):
        step()                                    # w fed back on device (and donated)
    print(session.fetch("loss"))

The slots live on one device. Calling a program stores its outputs in their slots without
a host copy. A slot a program both reads and writes is donated to the execution when the
compiled module aliases that output to that input (JAX's ``donate_argnums``): the update
happens in place, and a Buffer the caller bound there becomes unusable
(``BufferDeletedError``); other inputs stay valid. Values whose dtype or shape differ from
the slot's are refused at bind time, naming the slot.

Written the way training loops for the reference client are, with :class:`Slot` values
(a name and, optionally, the dtype and shape it must hold) and explicit feedback::

    w, loss = rpjrt.Slot("w", (rpjrt.float32, (4, 2))), rpjrt.Slot("loss")
    with rpjrt.Session(client) as session:      # frees the slots' buffers on exit
        step = session.program(text, inputs=[w, "x", "y"], outputs=["w_next", loss])
        session.bind_many({w: w0, "x": x, "y": y})
        for _ in range(50):
            out = step()                        # {"w_next": Buffer, "loss": Buffer}
            session.feed_back(out, into={"w_next": w})
"""

from __future__ import annotations

import operator
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Union

from ._dtypes import DType
from ._errors import FailedPreconditionError, InvalidArgumentError
from ._rpjrt import Buffer, Client, Device, Executable, SessionProgram, _Session


def _spec_text(spec: tuple[DType, tuple[int, ...]]) -> str:
    return f"{spec[0].name}[{', '.join(map(str, spec[1]))}]"


def _normalise(name: str, raw: object) -> tuple[DType, tuple[int, ...]]:
    """``(DType, shape)`` from a Slot's ``spec`` argument."""
    dtype: Any
    shape: Any
    if hasattr(raw, "dtype") and hasattr(raw, "shape"):
        dtype, shape = getattr(raw, "dtype"), getattr(raw, "shape")
    elif isinstance(raw, (tuple, list)) and len(raw) == 2:
        dtype, shape = raw
    else:
        raise TypeError(f"Slot {name!r}: spec is (dtype, shape) or has .dtype and .shape, not {raw!r}")
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"Slot {name!r}: shape {shape!r} is not a sequence of ints") from None
    try:
        # Any integer (numpy's included, as shapes built from arrays have), but not bool.
        sizes = tuple(operator.index(d) for d in dims if not isinstance(d, bool))
    except TypeError:
        sizes = ()
    if len(sizes) != len(dims) or any(d < 0 for d in sizes):
        raise ValueError(f"Slot {name!r}: shape {shape!r} is not a sequence of sizes >= 0")
    return (DType(dtype), sizes)


class _HasDTypeAndShape(Protocol):
    @property
    def dtype(self) -> Any: ...
    @property
    def shape(self) -> tuple[int, ...]: ...


#: What ``Slot(name, spec)`` takes as ``spec``: ``(dtype, shape)``, or an array-like value
#: with ``dtype`` and ``shape`` (a numpy array, ``jax.ShapeDtypeStruct``, a Buffer).
SpecLike = Union[tuple[Any, Sequence[int]], _HasDTypeAndShape]


class Slot:
    """A slot's name, and optionally the dtype and shape it must hold; immutable and
    hashable (equal when name and spec are).

    ``spec`` is ``(dtype, shape)`` or anything with ``dtype`` and ``shape`` attributes (a
    numpy array, ``jax.ShapeDtypeStruct``, a Buffer); it is kept as
    ``(rpjrt.DType, tuple of ints)``. A Slot is accepted wherever a Session takes a slot
    name; where it carries a spec, programs, values and buffers that differ are refused
    with ``InvalidArgumentError`` naming the slot.
    """

    __slots__ = ("name", "spec")

    name: str
    spec: tuple[DType, tuple[int, ...]] | None

    def __init__(self, name: str, spec: SpecLike | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"a Slot's name is a non-empty str, not {name!r}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "spec", None if spec is None else _normalise(name, spec))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"a Slot is immutable (cannot set {key!r})")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"a Slot is immutable (cannot delete {key!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Slot):
            return NotImplemented
        return (self.name, self.spec) == (other.name, other.spec)

    def __hash__(self) -> int:
        return hash((Slot, self.name, self.spec))

    def __reduce__(self) -> tuple[object, ...]:
        return (Slot, (self.name, self.spec))

    def __repr__(self) -> str:
        if self.spec is None:
            return f"Slot({self.name!r})"
        return f"Slot({self.name!r}, {_spec_text(self.spec)})"

    def _check(self, dtype: Any, shape: Sequence[int] | None, what: str) -> None:
        """Refuses ``(dtype, shape)`` (of ``what``) when it differs from this Slot's spec."""
        if self.spec is None or shape is None:
            return
        got = (DType(dtype), tuple(int(d) for d in shape))
        if got != self.spec:
            raise InvalidArgumentError(
                f"slot {self.name!r} is declared {_spec_text(self.spec)}, but {what} is {_spec_text(got)}"
            )

    def _conform(
        self, value: object, what: str, put: Callable[[object], Buffer] | None = None
    ) -> object:
        """``value`` checked against the spec; Python numbers and lists are made arrays of
        the spec's dtype first. With ``put``, an array-like that is neither a numpy array
        nor a Buffer is put by it and the Buffer returned, its dtype and shape checked too:
        what a put reads (``__array__``, ``__dlpack__``) need not be what the object's
        ``dtype`` and ``shape`` attributes say."""
        if self.spec is None:
            return value
        if hasattr(value, "dtype") and hasattr(value, "shape"):
            v: Any = value
            self._check(v.dtype, v.shape, what)
            if put is not None and not (isinstance(value, Buffer) or _is_numpy_array(value)):
                b = put(value)
                self._check(b.dtype, b.shape, what)
                return b
            return value
        from ._host import as_numpy

        # The rule every put follows: values must be representable (no wrapping, no
        # truncation, nothing overflowing to inf).
        arr, _ = as_numpy(value, self.spec[0])
        self._check(self.spec[0], arr.shape, what)
        return arr


def _is_numpy_array(value: object) -> bool:
    """Whether ``value`` is exactly a numpy array or scalar (whose attributes are its
    data's; a subclass may say otherwise); without numpy imported, nothing is."""
    np = sys.modules.get("numpy")
    return np is not None and (type(value) is np.ndarray or isinstance(value, np.generic))


#: A slot: its name, or a :class:`Slot`.
SlotLike = Union[str, Slot]


def _name(slot: object) -> str:
    if isinstance(slot, Slot):
        return slot.name
    if isinstance(slot, str):
        return slot
    raise TypeError(f"a slot is named by a str or an rpjrt.Slot, not {type(slot).__name__}")


class Session:
    """Named slots on one device, and programs that read and write them."""

    __slots__ = ("_s", "__weakref__")

    def __init__(self, client: Client, device: Device | None = None) -> None:
        self._s = _Session(client, device)

    @property
    def client(self) -> Client:
        return self._s.client

    @property
    def device(self) -> Device:
        """The device the slots live on (the client's first by default)."""
        return self._s.device

    @property
    def uploads(self) -> int:
        """How many host values were uploaded into slots (by binds and by loaders)."""
        return self._s.uploads

    @property
    def loads(self) -> int:
        """How many times a loader ran."""
        return self._s.loads

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran (the end of a ``with`` block)."""
        return self._s.closed

    def close(self) -> None:
        """Deletes the buffer every slot holds (buffers the caller bound, and Buffers
        taken from slots, included: they share the slot), drops the loaders that never ran,
        and refuses any later use of the session or its programs with
        ``FailedPreconditionError``; every slot that held a value or a loader then reads
        ``"deleted"``.

        A buffer that cannot be deleted because a host view of it is open (an array made
        with ``np.from_dlpack``) fails the close, naming its slot: the session is closed
        to every other use, the other slots are freed, and calling ``close()`` again once
        the views are dropped frees the rest. Once a close has freed everything, closing
        again does nothing; after ``client.close()`` (which freed every buffer already) it
        only marks the session closed."""
        self._s._close()

    def __copy__(self) -> Session:
        raise TypeError(
            "a Session cannot be copied: a copy would share its slots (closing one would "
            "close both); make a new Session and bind what it needs"
        )

    def __deepcopy__(self, memo: dict[int, object]) -> Session:
        raise TypeError(
            "a Session cannot be copied: its slots hold device buffers of its client; "
            "save() and restore() carry their values to a new Session"
        )

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError(
            "a Session cannot be pickled: its slots hold device buffers; save() writes "
            "their values to a file that restore() reads into a new Session"
        )

    def __enter__(self) -> Session:
        if self._s.closed:
            raise FailedPreconditionError("this Session was closed; a with block needs an open one")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        # The exception that ended the block is the one the caller must see: a failure to
        # close (a host view of a slot still open, say) is attached to it as a note, not
        # raised in its place. Ctrl-C and SystemExit during close() still propagate.
        try:
            self.close()
        except Exception as close_error:
            _add_note(
                exc,
                f"rpjrt.Session.close() at the end of the with block also failed: "
                f"{type(close_error).__name__}: {close_error}",
            )

    def feed_back(
        self,
        outputs: Mapping[str, object] | Mapping[Slot, object] | Mapping[SlotLike, object],
        into: Mapping[str, SlotLike] | Mapping[Slot, SlotLike] | Mapping[SlotLike, SlotLike] | None = None,
    ) -> None:
        """Routes a step's outputs into slots: each ``{name: value}`` of ``outputs`` (what a
        program call returns, or any values) is bound to slot ``into.get(name, name)``.

        Every destination must be an existing slot (a misspelt name is an error, not a new
        slot), two outputs may not go to one slot, and every value is checked against its
        slot's dtype and shape and against any :class:`Slot` spec before any slot changes.
        All or nothing: the values are bound in one call (as :meth:`bind_many`'s are), so a
        value refused only when it is bound (a deleted Buffer, one on another device, a
        list that does not fit) leaves every slot as it was.
        """
        routes = {_name(k): v for k, v in (into or {}).items()}
        unknown_routes = set(routes) - {_name(k) for k in outputs}
        if unknown_routes:
            raise InvalidArgumentError(
                f"feed_back: into names {sorted(unknown_routes)} that are not among the outputs"
            )
        known = {n: (d, sh) for n, d, sh, _ in self._s.slots()}
        plan: list[tuple[str, object]] = []
        source: dict[str, str] = {}
        for key, value in outputs.items():
            dest = routes.get(_name(key), key)
            name = _name(dest)
            if name not in known:
                raise InvalidArgumentError(
                    f"feed_back: no slot {name!r} in this session (slots: {', '.join(known) or 'none'})"
                )
            if name in source:
                raise InvalidArgumentError(
                    f"feed_back: the outputs {source[name]!r} and {_name(key)!r} both go to slot {name!r}"
                )
            source[name] = _name(key)
            what = f"the output {_name(key)!r} fed back to it"
            for decl in (key, dest):
                if isinstance(decl, Slot):
                    value = decl._conform(value, what, self._put)
            dtype, shape = known[name]
            if shape is not None and hasattr(value, "dtype") and hasattr(value, "shape"):
                Slot(name, (dtype, shape))._check(getattr(value, "dtype"), getattr(value, "shape"), what)
            plan.append((name, value))
        # One call: every value is converted and checked (and uploaded) before any slot
        # changes.
        self._s.bind_all(plan, [])

    def program(
        self,
        exe_or_source: Executable | str | bytes,
        inputs: Sequence[SlotLike],
        outputs: Sequence[SlotLike | None],
        *,
        donate: bool = True,
        **compile_options: Any,
    ) -> SessionProgram:
        """A callable program: argument ``k`` comes from slot ``inputs[k]``, output ``k``
        goes to slot ``outputs[k]`` (``None`` discards it). Slots are names or
        :class:`Slot` values; a Slot's spec is checked against the executable's.

        Calling the program returns this step's outputs that have a slot, ``{slot name:
        Buffer}`` (each shared with its slot, so a later step that donates the slot makes
        it unusable).

        ``exe_or_source`` is an Executable, or a program that is compiled here with
        ``client.compile(source, **compile_options)``. ``donate=False`` keeps every input
        buffer valid even where the compiled module would let it be reused.
        """
        if isinstance(exe_or_source, Executable):
            if compile_options:
                raise TypeError("compile options apply only when a source is given")
            exe = exe_or_source
        else:
            first = self.client.addressable_devices()[0]
            if "device" not in compile_options and self.device != first:
                # Compiled here for the session: for the device its slots live on.
                compile_options["device"] = self.device
            exe = self.client.compile(exe_or_source, **compile_options)
        if isinstance(inputs, (str, Slot)) or isinstance(outputs, (str, Slot)):
            raise TypeError("inputs and outputs are sequences of slot names, not one name")
        for k, slot in enumerate(inputs):
            if isinstance(slot, Slot) and k < len(exe.input_dtypes):
                slot._check(exe.input_dtypes[k], exe.input_shapes[k], f"argument {k} of {exe.name}")
        for k, out in enumerate(outputs):
            if isinstance(out, Slot) and k < len(exe.output_dtypes):
                out._check(exe.output_dtypes[k], exe.output_shapes[k], f"output {k} of {exe.name}")
        return self._s.program(
            exe,
            [_name(i) for i in inputs],
            [None if o is None else _name(o) for o in outputs],
            donate,
        )

    def bind(self, name: SlotLike, value: object) -> None:
        """Puts ``value`` (a Buffer, or anything ``client.put`` takes) into slot ``name``."""
        if isinstance(name, Slot):
            value = name._conform(value, "the value bound to it", self._put)
        self._s.bind(_name(name), value)

    def _put(self, value: object) -> Buffer:
        """``value`` put on the session's device, as binding it would."""
        return self.client.put(value, device=self.device)

    def bind_many(self, values: Mapping[str, object] | Mapping[Slot, object] | Mapping[SlotLike, object]) -> None:
        """Binds several slots, all or nothing: every value is checked (and uploaded)
        before any slot changes. A callable value is a loader: it is called (with no
        arguments) only when a program first needs that slot, and what it returns is bound.

        A :class:`Slot` key with a spec fixes that spec as the slot's now, for a loader too:
        a slot that already holds another dtype or shape is refused here, and whatever
        lands in the slot later (a bind, a restore, the loader's value) is checked against
        it, naming the slot.
        """
        if not isinstance(values, Mapping):
            raise TypeError(
                f"bind_many takes a mapping of slot names to values, not {type(values).__name__}"
            )
        eager: list[tuple[str, object]] = []
        lazy: list[tuple[str, Any, Any]] = []
        for name, value in values.items():
            if hasattr(value, "__call__") and not isinstance(value, Buffer):  # noqa: B004
                spec = name.spec if isinstance(name, Slot) else None
                if isinstance(name, Slot) and name.spec is not None:
                    value = _checked_loader(name, value)
                # The spec goes to the core slot with the loader (its check covers restores
                # and plain-name binds too, not only this loader's value).
                lazy.append((_name(name), value, spec))
            else:
                if isinstance(name, Slot):
                    value = name._conform(value, "the value bound to it", self._put)
                eager.append((_name(name), value))
        # One call: the loaders' names and the client are checked, and the values
        # uploaded, before any slot changes.
        self._s.bind_all(eager, lazy)

    def buffer(self, name: SlotLike) -> Buffer:
        """The Buffer slot ``name`` holds (running its loader first if it has not run)."""
        b = self._s.buffer(_name(name))
        if isinstance(name, Slot):
            name._check(b.dtype, b.shape, "the buffer it holds")
        return b

    def fetch(self, name: SlotLike) -> Any:
        """Slot ``name`` copied to the host as a numpy array. A step that starts on
        another thread during the copy writes a fresh buffer instead of donating the
        slot's, so neither fails."""
        if isinstance(name, Slot):
            self.buffer(name)  # the handle's type and shape, checked against the slot's
        return self._s.fetch_host(_name(name))

    def slots(self) -> list[tuple[str, Any, tuple[int, ...] | None, str]]:
        """``(name, dtype, shape, state)`` of every slot; state is ``"empty"``,
        ``"pending"`` (a loader that has not run), ``"ready"`` or ``"deleted"`` (after
        :meth:`close`, every slot that held a value or a loader)."""
        return self._s.slots()

    def __getitem__(self, name: SlotLike) -> Buffer:
        return self.buffer(name)

    def __contains__(self, name: object) -> bool:
        if isinstance(name, Slot):
            name = name.name
        return any(s[0] == name for s in self._s.slots())

    def __iter__(self) -> Iterator[str]:
        return iter([s[0] for s in self._s.slots()])

    def save(self, path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> None:
        """Writes every slot that holds a value to an ``.npz`` file that ``numpy.load``
        reads, atomically (a temporary file renamed over ``path``).

        Slots whose loader has not run are loaded first; empty slots are left out. Each
        member is the slot's name plus ``.npy``, so every name comes back exactly. Dtypes
        numpy cannot name (bfloat16, float8, int4 ...) are stored as ``uint8`` with a
        trailing axis of the item size, and the member ``__rpjrt_dtypes__`` names every
        slot's dtype. The work is done in Rust (``rpjrt_npy::checkpoint::save``).

        A session closed before the values are taken (by a loader this save runs, or by
        another thread) fails the save with ``FailedPreconditionError``: nothing is written
        (a file already at ``path`` is left as it was), and what the loaders returned is
        freed.
        """
        self._s.save(path)

    def restore(self, path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> None:
        """Binds every array saved in ``path`` (by :meth:`save`, or by ``numpy.savez``) to
        the slot of its name, creating slots the session lacks.

        Everything is checked before any slot changes: a dtype or shape that differs from
        the slot's (one a program fixed, a bind, or a :class:`Slot` spec given with a
        loader) is refused naming the slot (from the member's header, before its data is
        read), a name stored twice is refused naming it, and a damaged file is an error
        naming it. A session closed while the restore runs (from another thread) fails it
        with ``FailedPreconditionError``, and nothing it read stays in the slots. Arrays ``numpy.savez`` stored as raw bytes (bfloat16 ...) take their
        slot's dtype. The work is done in Rust (``rpjrt_npy::checkpoint::restore``).
        """
        self._s.restore(path)

    def __repr__(self) -> str:
        return repr(self._s)


Loader = Callable[[], object]


def _add_note(exc: BaseException, note: str) -> None:
    """PEP 678's ``exc.add_note(note)``; on Python 3.10, which has no ``add_note``, the
    note is appended to ``__notes__`` as 3.11 would (the ``exceptiongroup`` backport and
    pytest show it)."""
    add_note = getattr(exc, "add_note", None)
    try:
        if add_note is not None:
            add_note(note)
        else:
            notes = getattr(exc, "__notes__", None)
            exc.__notes__ = [*notes, note] if isinstance(notes, list) else [note]  # type: ignore[attr-defined]
    except Exception:
        pass  # an exception that takes no attributes keeps propagating as it is


def _checked_loader(slot: Slot, load: Callable[[], object]) -> Callable[[], object]:
    def checked() -> object:
        return slot._conform(load(), "the value its loader returned")

    return checked


__all__ = ["Session", "SessionProgram", "Slot", "SlotLike", "SpecLike", "Loader"]
