"""The training step that the Session benchmark (b_session.py) and its callgrind loop
(_cg_py_loop.py) run: an MLP 32-64-8, batch 128, SGD on a mean squared error, lowered by
JAX with the parameters donated."""

from __future__ import annotations

from typing import Any

import _harness as h

NAMES = ["w1", "b1", "w2", "b2"]

#: Where `program_text` keeps the lowered program, so that a loop under valgrind need
#: not import JAX.
CACHE = h.ROOT / "bench" / "out" / "mlp_step.mlir"


def data() -> tuple[list[Any], Any, Any]:
    """Initial parameters, inputs and targets (numpy, seeded)."""
    import numpy as np

    rng = np.random.default_rng(0)
    params = [
        rng.normal(size=(32, 64)).astype(np.float32) * 0.1,
        np.zeros(64, np.float32),
        rng.normal(size=(64, 8)).astype(np.float32) * 0.1,
        np.zeros(8, np.float32),
    ]
    x = rng.normal(size=(128, 32)).astype(np.float32)
    y = rng.normal(size=(128, 8)).astype(np.float32)
    return params, x, y


def jax_step() -> Any:
    """`jax.jit(step, donate_argnums=0)`: `(params, x, y) -> (params, loss)`."""
    import jax
    import jax.numpy as jnp

    def loss_fn(params: Any, x: Any, y: Any) -> Any:
        w1, b1, w2, b2 = params
        h1 = jnp.tanh(x @ w1 + b1)
        return jnp.mean((h1 @ w2 + b2 - y) ** 2)

    def step(params: Any, x: Any, y: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return [p - 0.01 * g for p, g in zip(params, grads)], loss

    return jax.jit(step, donate_argnums=0)


def program_text() -> str:
    """The lowered step (StableHLO text), from the cache file when it is there."""
    if CACHE.exists():
        return CACHE.read_text()
    params, x, y = data()
    text: str = jax_step().lower(params, x, y).as_text()
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    CACHE.write_text(text)
    return text
