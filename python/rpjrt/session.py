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
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ._rpjrt import Buffer, Client, Device, Executable, SessionProgram, _Session


class Session:
    """Named slots on one device, and programs that read and write them."""

    __slots__ = ("_s",)

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

    def program(
        self,
        exe_or_source: Executable | str | bytes,
        inputs: Sequence[str],
        outputs: Sequence[str | None],
        *,
        donate: bool = True,
        **compile_options: Any,
    ) -> SessionProgram:
        """A callable program: argument ``k`` comes from slot ``inputs[k]``, output ``k``
        goes to slot ``outputs[k]`` (``None`` discards it).

        ``exe_or_source`` is an Executable, or a program that is compiled here with
        ``client.compile(source, **compile_options)``. ``donate=False`` keeps every input
        buffer valid even where the compiled module would let it be reused.
        """
        if isinstance(exe_or_source, Executable):
            if compile_options:
                raise TypeError("compile options apply only when a source is given")
            exe = exe_or_source
        else:
            exe = self.client.compile(exe_or_source, **compile_options)
        if isinstance(inputs, str) or isinstance(outputs, str):
            raise TypeError("inputs and outputs are sequences of slot names, not one string")
        return self._s.program(exe, list(inputs), list(outputs), donate)

    def bind(self, name: str, value: object) -> None:
        """Puts ``value`` (a Buffer, or anything ``client.put`` takes) into slot ``name``."""
        self._s.bind(name, value)

    def bind_many(self, values: Mapping[str, object]) -> None:
        """Binds several slots. A callable value is a loader: it is called (with no
        arguments) only when a program first needs that slot, and what it returns is bound.
        """
        for name, value in values.items():
            if hasattr(value, "__call__") and not isinstance(value, Buffer):  # noqa: B004
                self._s.bind_lazy(name, value)
            else:
                self._s.bind(name, value)

    def buffer(self, name: str) -> Buffer:
        """The Buffer slot ``name`` holds (running its loader first if it has not run)."""
        return self._s.buffer(name)

    def fetch(self, name: str) -> Any:
        """Slot ``name`` copied to the host as a numpy array."""
        return self._s.buffer(name).to_numpy()

    def slots(self) -> list[tuple[str, Any, tuple[int, ...] | None, str]]:
        """``(name, dtype, shape, state)`` of every slot; state is ``"empty"``,
        ``"pending"`` (a loader that has not run), ``"ready"`` or ``"deleted"``."""
        return self._s.slots()

    def __getitem__(self, name: str) -> Buffer:
        return self.buffer(name)

    def __contains__(self, name: object) -> bool:
        return any(s[0] == name for s in self._s.slots())

    def __iter__(self) -> Iterator[str]:
        return iter([s[0] for s in self._s.slots()])

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes every slot that holds a value to an ``.npz`` file that ``numpy.load``
        reads, atomically (a temporary file renamed over ``path``).

        Slots whose loader has not run are loaded first; empty slots are left out. Each
        member is the slot's name plus ``.npy``, so every name comes back exactly. Dtypes
        numpy cannot name (bfloat16, float8, int4 ...) are stored as ``uint8`` with a
        trailing axis of the item size, and the member ``__rpjrt_dtypes__`` names every
        slot's dtype. The work is done in Rust (``rpjrt_npy::checkpoint::save``).
        """
        self._s.save(path)

    def restore(self, path: str | os.PathLike[str]) -> None:
        """Binds every array saved in ``path`` (by :meth:`save`, or by ``numpy.savez``) to
        the slot of its name, creating slots the session lacks.

        Everything is checked before any slot changes: a dtype or shape that differs from
        the slot's is refused naming the slot (from the member's header, before its data
        is read), a name stored twice is refused naming it, and a damaged file is an error
        naming it. Arrays ``numpy.savez`` stored as raw bytes (bfloat16 ...) take their
        slot's dtype. The work is done in Rust (``rpjrt_npy::checkpoint::restore``).
        """
        self._s.restore(path)

    def __repr__(self) -> str:
        return repr(self._s)


Loader = Callable[[], object]

__all__ = ["Session", "SessionProgram", "Loader"]
