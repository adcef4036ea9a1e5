"""Triton kernels compiled by the PJRT plugin, without the ``triton`` package.

GPU plugins of some versions carry the Triton extension (``PJRT_Triton_Compile``): Triton
IR (the ``tt`` MLIR dialect, as text or bytecode) goes in, GPU assembly (PTX on CUDA)
comes out, with the shared memory the kernel needs. The compiler is the plugin's own.

    import rpjrt, rpjrt.triton
    client = rpjrt.Client("cuda")
    kernel = rpjrt.triton.compile(client, ttir_text, num_warps=4)   # arch from the device
    fn = rpjrt.cuda.load().context(0).load_ptx(kernel.asm_text).function(kernel.entry_name)

A plugin without the extension (every CPU plugin) raises ``rpjrt.UnsupportedError``
naming ``PJRT_Triton_Compile`` and the extension; bad options raise
``rpjrt.InvalidArgumentError`` naming the option.
"""

from __future__ import annotations

from ._rpjrt import Client, Plugin, TritonKernel, _triton_available, _triton_compile

__all__ = ["TritonKernel", "compile", "is_available"]


def compile(
    target: Client | Plugin,
    module: str | bytes | bytearray,
    arch: str | None = None,
    *,
    num_warps: int = 4,
    num_ctas: int = 1,
    num_stages: int = 3,
) -> TritonKernel:
    """Compile Triton IR ``module`` with the plugin behind ``target`` (a Client or Plugin).

    ``arch`` is a CUDA compute capability (``"9.0"`` or ``"sm_90"``) or another vendor's
    architecture name (``"gfx942"``); None takes the compute capability of the client's
    first addressable device. ``num_warps`` is a power of two from 1 to 32, ``num_ctas``
    a power of two from 1 to 16, ``num_stages`` from 1 to 16. The GIL is released while
    the plugin compiles.
    """
    return _triton_compile(target, module, arch, num_warps, num_ctas, num_stages)


def is_available(target: Client | Plugin) -> bool:
    """Whether the plugin behind ``target`` can compile Triton kernels."""
    return _triton_available(target)
