"""``rpjrt.trace()``: record rpjrt's own spans around a block of code.

The recorder, the Chrome trace format and the plugin-profile policy are the core's
(``rpjrt::trace``); this is the context-manager sugar.
"""

from __future__ import annotations

import os

from . import _rpjrt

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any


class trace:
    """Records rpjrt's spans (load, compile, transfer, execute, wait, fetch, custom calls)
    while the ``with`` block runs::

        with rpjrt.trace("trace.json", client=client) as t:
            exe(x)
        print(t.count("execute"), t.events[0])

    With ``path``, the Chrome trace (open it in https://ui.perfetto.dev, or draw it with
    ``rpjrt trace view``) is written when the block ends, also when it raised. With
    ``client``, the client's plugin's own profiler (the PJRT Profiler extension, which the
    CUDA plugins and libtpu have) runs too; its data goes beside the file
    (``trace.plugin.xspace.pb``) and its events into the trace. A plugin without the
    extension is noted in :attr:`metadata` (``plugin_profile``), not an error.

    One recording at a time per process: a nested ``rpjrt.trace()`` raises. The recording
    is the process's that began it: a process forked inside the block records nothing of
    it (its :attr:`events` are empty when it leaves the block, and it writes no file), and
    may begin its own ``rpjrt.trace()``.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, client: Any = None
    ) -> None:
        self._path = None if path is None else os.fspath(path)
        self._client = client
        self._recording: Any = None
        self._trace: _rpjrt.Trace | None = None
        self._pid = 0

    def __enter__(self) -> trace:
        if self._recording is not None or self._trace is not None:
            raise RuntimeError("this rpjrt.trace() was already used; make a new one")
        self._recording = _rpjrt._trace_begin(self._client)
        self._pid = os.getpid()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        recording, self._recording = self._recording, None
        if recording is None:
            raise RuntimeError("this rpjrt.trace() is not recording: use it in a with statement")
        self._trace = recording.finish()
        if self._path is not None and os.getpid() == self._pid:
            self._trace.save(self._path)

    @property
    def result(self) -> _rpjrt.Trace:
        """The finished :class:`rpjrt.Trace` (after the ``with`` block)."""
        if self._trace is None:
            raise RuntimeError(
                "the trace is still recording (or never started): read it after the with block"
            )
        return self._trace

    @property
    def events(self) -> list[dict[str, Any]]:
        """The spans: dicts with ``name``, ``category``, ``start_us``, ``duration_us``,
        ``thread`` and ``args``."""
        return self.result.events

    @property
    def metadata(self) -> dict[str, str]:
        """The trace's metadata (``plugin_profile``, ``command``, ...)."""
        return self.result.metadata

    @property
    def plugin_profile(self) -> bytes | None:
        """The plugin's serialized XSpace, or ``None``."""
        return self.result.plugin_profile

    def count(self, category: str) -> int:
        """How many spans of ``category`` were recorded."""
        return self.result.count(category)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the Chrome trace JSON to ``path`` (the plugin's profile beside it)."""
        self.result.save(os.fspath(path))

    def to_chrome_json(self) -> str:
        """The Chrome trace-event JSON text."""
        return self.result.to_chrome_json()

    def to_html(self) -> str:
        """The self-contained HTML viewer page."""
        return self.result.to_html()

    def __repr__(self) -> str:
        if self._trace is not None:
            return repr(self._trace)
        return "<rpjrt.trace recording>" if self._recording is not None else "<rpjrt.trace>"
