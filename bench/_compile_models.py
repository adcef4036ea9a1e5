"""The JAX programs of the compile benchmark (b_compile.py), shared with its child process.

- mlp: one SGD step (forward, backward, update) of a 4-layer MLP, width `width`.
- transformer: a stack of `layers` pre-norm transformer blocks (multi-head attention and
  an MLP), forward pass, batch 4 x sequence 128 x model width 256, 4 heads.
"""

from __future__ import annotations

from typing import Any


def mlp(width: int) -> tuple[Any, list[Any]]:
    import jax
    import jax.numpy as jnp

    sizes = [width, width, width, width, 16]

    def loss(params: Any, x: Any, y: Any) -> Any:
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jax.nn.gelu(h)
        return jnp.mean((h - y) ** 2)

    def step(params: Any, x: Any, y: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)], value

    f32 = jnp.float32
    params = [
        (jax.ShapeDtypeStruct((a, b), f32), jax.ShapeDtypeStruct((b,), f32))
        for a, b in zip(sizes[:-1], sizes[1:])
    ]
    args = [params, jax.ShapeDtypeStruct((32, width), f32), jax.ShapeDtypeStruct((32, 16), f32)]
    return step, args


def transformer(layers: int, d: int = 256, heads: int = 4, seq: int = 128) -> tuple[Any, list[Any]]:
    import jax
    import jax.numpy as jnp

    def norm(x: Any, g: Any) -> Any:
        m = jnp.mean(x, axis=-1, keepdims=True)
        v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * g

    def block(x: Any, p: Any) -> Any:
        g1, wqkv, wo, g2, w1, w2 = p
        b, s, _ = x.shape
        h = norm(x, g1) @ wqkv
        q, k, v = jnp.split(h, 3, axis=-1)

        def heads_of(t: Any) -> Any:
            return t.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)

        q, k, v = heads_of(q), heads_of(k), heads_of(v)
        att = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / (d // heads) ** 0.5, axis=-1)
        o = (att @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
        x = x + o @ wo
        return x + jax.nn.gelu(norm(x, g2) @ w1) @ w2

    def forward(params: Any, x: Any) -> Any:
        for p in params:
            x = block(x, p)
        return x

    f32 = jnp.float32

    def s(*shape: int) -> Any:
        return jax.ShapeDtypeStruct(shape, f32)

    params = [(s(d), s(d, 3 * d), s(d, d), s(d), s(d, 4 * d), s(4 * d, d)) for _ in range(layers)]
    return forward, [params, s(4, seq, d)]


def build(name: str) -> tuple[Any, list[Any]]:
    """`mlp-<width>` or `transformer-<layers>`."""
    kind, n = name.rsplit("-", 1)
    if kind == "mlp":
        return mlp(int(n))
    if kind == "transformer":
        return transformer(int(n))
    raise ValueError(name)


def lower_text(name: str) -> str:
    import jax

    f, args = build(name)
    return str(jax.jit(f).lower(*args).as_text(debug_info=False))
