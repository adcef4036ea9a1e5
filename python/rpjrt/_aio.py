"""``await buffer``: wait for a Buffer without blocking the asyncio event loop.

The extension registers a completion callback on the buffer's ready event. The plugin's
thread never touches Python: it passes the callable to the extension's wake-up thread,
which takes the GIL and hands the result to the loop with ``call_soon_threadsafe``. No
thread is parked per await, and no plugin thread ever waits for the GIL (which could
deadlock against a thread that holds the GIL while waiting for the plugin, e.g. while a
client is destroyed).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._rpjrt import Buffer, Event

__all__ = ["wait", "wait_event"]


def _finish(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def wait(buf: Buffer) -> Buffer:
    """Wait until ``buf`` is ready and return it; raises the computation's error."""
    if buf.is_ready():
        return buf.block_until_ready()  # immediate; raises if the computation failed
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    def ready(*_: Any) -> None:  # runs on the extension's wake-up thread, or inline
        try:
            loop.call_soon_threadsafe(_finish, fut)
        except RuntimeError:
            pass  # the loop was closed meanwhile: nobody is waiting any more

    buf._on_ready(ready)  # type: ignore[attr-defined]
    await fut
    return buf.block_until_ready()


async def wait_event(ev: Event) -> None:
    """Wait until ``ev`` completes; raises its error if it failed."""
    if not ev.is_ready():
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def done(_: Event) -> None:  # runs on the extension's wake-up thread
            try:
                loop.call_soon_threadsafe(_finish, fut)
            except RuntimeError:
                pass  # the loop was closed meanwhile: nobody is waiting any more

        ev._on_done(done)  # type: ignore[attr-defined]
        await fut
    ev.wait()  # immediate: raises if the event failed
