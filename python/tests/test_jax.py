"""A JAX-lowered MLP training step, as StableHLO text and as a jax.export artifact.

JAX is only the producer and the reference: rpjrt compiles and runs the program on each
CPU plugin, and the results must match JAX's own within tolerance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rpjrt

import jax  # a test dependency: it must be installed (a skip would count as a failure)
import jax.numpy as jnp


def _mlp(params: Any, x: Any) -> Any:
    (w1, b1), (w2, b2) = params
    h = jnp.tanh(x @ w1 + b1)
    return h @ w2 + b2


def _loss(params: Any, x: Any, y: Any) -> Any:
    return jnp.mean((_mlp(params, x) - y) ** 2)


def _train_step(params: Any, x: Any, y: Any) -> Any:
    loss, grads = jax.value_and_grad(_loss)(params, x, y)
    return loss, jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)


@pytest.fixture(scope="module")
def problem() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    params = (
        (rng.normal(size=(4, 16)).astype(np.float32), np.zeros(16, np.float32)),
        (rng.normal(size=(16, 2)).astype(np.float32), np.zeros(2, np.float32)),
    )
    x = rng.normal(size=(32, 4)).astype(np.float32)
    y = rng.normal(size=(32, 2)).astype(np.float32)
    step = jax.jit(_train_step)
    lowered = step.lower(params, x, y)
    exported = jax.export.export(step)(params, x, y)
    return {
        "args": jax.tree.leaves((params, x, y)),
        "params": params,
        "x": x,
        "y": y,
        "text": lowered.as_text(),
        "artifact": exported.mlir_module_serialized,
        "expected": [np.asarray(v) for v in jax.tree.leaves(step(params, x, y))],
        "step": step,
    }


@pytest.mark.parametrize("form", ["text", "artifact"])
def test_train_step_matches_jax(client: rpjrt.Client, problem: dict[str, Any], form: str) -> None:
    program = problem[form]
    assert isinstance(program, str if form == "text" else bytes)
    exe = client.compile(program)
    assert exe.num_outputs == 5
    assert exe.input_shapes == [tuple(a.shape) for a in problem["args"]]
    outs = exe(*problem["args"])
    assert [o.shape for o in outs] == [e.shape for e in problem["expected"]]
    for got, want in zip(outs, problem["expected"]):
        np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-5, atol=1e-5)


def test_training_loop_stays_on_device(client: rpjrt.Client, problem: dict[str, Any]) -> None:
    """Ten steps feeding the updated parameters back as Buffers; the loss matches JAX's."""
    exe = client.compile(problem["text"])
    params = [client.put(p) for p in jax.tree.leaves(problem["params"])]
    x, y = client.put(problem["x"]), client.put(problem["y"])
    jparams = problem["params"]
    for _ in range(10):
        loss, *params = exe(*params, x, y)
        jloss, jparams = problem["step"](jparams, problem["x"], problem["y"])
        np.testing.assert_allclose(loss.tolist(), float(jloss), rtol=1e-4)
    for got, want in zip(params, jax.tree.leaves(jparams)):
        np.testing.assert_allclose(got.to_numpy(), np.asarray(want), rtol=1e-4, atol=1e-5)


def test_artifact_for_the_plugins_stablehlo_version(client: rpjrt.Client, problem: dict[str, Any]) -> None:
    """Re-serialize the artifact for the version the plugin reports and run it."""
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax

    target = client.plugin.stablehlo_version
    assert target is not None
    with mlir.make_ir_context():
        module = _jax.mlir.deserialize_portable_artifact(problem["artifact"])
        artifact = _jax.mlir.serialize_portable_artifact(module, ".".join(map(str, target)), False)
    outs = client.compile(artifact)(*problem["args"])
    np.testing.assert_allclose(outs[0].tolist(), problem["expected"][0], rtol=1e-5)
