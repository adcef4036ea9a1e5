"""Run a program that JAX lowered to StableHLO, without JAX's runtime.

JAX is only the producer here: `jax.jit(f).lower(...)` gives StableHLO text, and
`jax.export` gives a portable artifact (versioned bytecode). rpjrt compiles either one on
the plugin and runs it; the result is compared with JAX's own.

    python jax_lowered.py [PLUGIN]
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

import rpjrt


def f(a, b):
    return jnp.tanh(a @ b + 1.0)


def main(argv: list[str]) -> int:
    a = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    b = np.random.default_rng(1).normal(size=(8, 3)).astype(np.float32)
    expected = np.asarray(jax.jit(f)(a, b))

    text = jax.jit(f).lower(a, b).as_text()  # StableHLO text
    exported = jax.export.export(jax.jit(f))(a, b)
    artifact = exported.mlir_module_serialized  # StableHLO portable artifact (bytes)

    with rpjrt.Client(argv[1] if len(argv) > 1 else None) as client:
        # An older plugin may not read the newest StableHLO: serialize for the version
        # the plugin reports (a producer-side step; rpjrt never rewrites programs).
        target = client.plugin.stablehlo_version
        if target is not None:
            from jax._src.interpreters import mlir
            from jax._src.lib import _jax

            want = ".".join(map(str, target))
            with mlir.make_ir_context():
                module = _jax.mlir.deserialize_portable_artifact(artifact)
                artifact = _jax.mlir.serialize_portable_artifact(module, want, False)
        for label, program in (("text", text), ("jax.export", artifact)):
            exe = client.compile(program)
            (out,) = exe(a, b)
            got = out.to_numpy()
            err = float(np.max(np.abs(got - expected)))
            print(f"{label:>10}: max |rpjrt - jax| = {err:.2e}")
            assert err < 1e-5
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
