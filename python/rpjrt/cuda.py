"""NVIDIA GPUs: typed create options for the CUDA PJRT plugin and CUDA driver helpers.

Both come from the ``rpjrt-cuda`` crate in Rust (``rpjrt_cuda``): the plugin's options
(``CudaOptions``) and the driver helpers (``Cuda``).

    import rpjrt, rpjrt.cuda
    client = rpjrt.Client("cuda", options=rpjrt.cuda.options(memory_fraction=0.5, preallocate=False))

    drv = rpjrt.cuda.load()            # opens libcuda.so.1 at run time
    ctx = drv.context(0)
    mem = ctx.alloc(1024)
    fn = ctx.load_ptx(ptx_text).function("my_kernel")
    ctx.launch(fn, grid=(4,), block=(256,), args=[("ptr", mem.ptr), ("i32", 256)])

Nothing here needs CUDA to import: without an NVIDIA driver, :func:`load` raises
``rpjrt.FailedPreconditionError`` naming ``libcuda.so.1`` and the loader's message.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ._rpjrt import (
    CudaContext,
    CudaDriver,
    CudaEvent,
    CudaFunction,
    CudaModule,
    CudaStream,
    DeviceMemory,
    PinnedMemory,
    _cuda_allocators,
    _cuda_driver_summary,
    _cuda_options,
)

__all__ = [
    "ALLOCATORS",
    "CudaContext",
    "CudaDriver",
    "CudaEvent",
    "CudaFunction",
    "CudaModule",
    "CudaStream",
    "DeviceMemory",
    "PinnedMemory",
    "driver_summary",
    "load",
    "options",
]

#: The allocator names the CUDA plugin accepts.
ALLOCATORS: tuple[str, ...] = tuple(_cuda_allocators())


def options(
    *,
    memory_fraction: float | None = None,
    preallocate: bool | None = None,
    allocator: str | None = None,
    visible_devices: Sequence[int] | None = None,
) -> dict[str, str | int | float | bool | list[int]]:
    """Checked create options for the CUDA plugin, for ``Client("cuda", options=...)``.

    ``memory_fraction`` is in (0, 1]; ``allocator`` is one of :data:`ALLOCATORS`;
    ``visible_devices`` lists distinct non-negative device ordinals. Anything else raises
    ``rpjrt.InvalidArgumentError`` saying what was wrong. Unset options are left out.
    """
    devices = None if visible_devices is None else list(visible_devices)
    return _cuda_options(
        memory_fraction=memory_fraction,
        preallocate=preallocate,
        allocator=allocator,
        visible_devices=devices,
    )


def load(path: str | os.PathLike[str] | None = None) -> CudaDriver:
    """Opens the CUDA driver (``libcuda.so.1``, or ``path``) and initialises it."""
    return CudaDriver.load(path)


def driver_summary() -> str:
    """One line on the CUDA driver: loaded with its version and device count, or why not."""
    return _cuda_driver_summary()
