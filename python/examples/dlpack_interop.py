"""Zero-copy exchange with torch (or jax when torch is absent) through DLPack.

    python dlpack_interop.py [PLUGIN]

A Buffer is a DLPack producer (`__dlpack__`, `__dlpack_device__`), so
`torch.from_dlpack(buf)` / `jax.numpy.from_dlpack(buf)` / `numpy.from_dlpack(buf)` share
its memory; `rpjrt.from_dlpack(x)` adopts theirs.
"""

import sys

import numpy as np

import rpjrt


def main(argv: list[str]) -> int:
    try:
        import torch
    except ImportError:
        torch = None

    with rpjrt.Client(argv[1] if len(argv) > 1 else None) as client:
        buf = client.put(np.arange(6, dtype=np.float32).reshape(2, 3))
        host = np.from_dlpack(buf)  # numpy view of the buffer's memory (CPU plugins)
        print("numpy view:", host)

        if torch is not None:
            t = torch.from_dlpack(buf)
            print("torch view:", t)
            back = rpjrt.from_dlpack(torch.arange(4, dtype=torch.int64), client=client)
        else:
            import jax.numpy as jnp

            j = jnp.from_dlpack(buf)
            print("jax array:", j)
            back = rpjrt.from_dlpack(jnp.arange(4, dtype=jnp.int32), client=client)
        print("adopted:", back, back.to_host().tolist())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
