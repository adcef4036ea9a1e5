"""A training step through rpjrt.Session against the same step driven by jax.jit.

Target:
- Session step (parameters fed back in slots and donated) + wait for the loss, vs
  `params, loss = jit(step, donate_argnums=0)(params, x, y)` + wait for the loss: <= 1.0x

Also recorded: the process CPU time per step, Session / JAX (figure session.cpu_vs_jax),
which a loaded machine disturbs far less than the wall clock.

Both run the program JAX lowered (an MLP, 4 parameter arrays, batch 128), on the PJRT
0.115 CPU plugin for rpjrt and on JAX's own CPU client, interleaved in one process.
"""

from __future__ import annotations

import time
from typing import Any

import _harness as h
import _mlp_step


def run(res: h.Results, *, smoke: bool, rust: dict[str, Any] | None) -> None:
    import numpy as np

    import rpjrt

    name = "Session step + wait vs jax.jit(donate_argnums=0) step + wait"
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        res.note("jax is not installed: the Session benchmark needs it for the program")
        res.target(name, value=None, op="<=", threshold=1.0, unit="x", detail="jax not installed")
        return

    reps, iters = (3, 50) if smoke else (21, 1000)

    params, x, y = _mlp_step.data()
    jstep = _mlp_step.jax_step()
    text = jstep.lower(params, x, y).as_text()

    client = rpjrt.Client(h.plugin_path("NEW"))
    session = rpjrt.Session(client)
    names = _mlp_step.NAMES
    prog = session.program(text, inputs=names + ["x", "y"], outputs=names + ["loss"])
    assert prog.donated == names, prog
    session.bind_many(dict(zip(names, params)))
    session.bind_many({"x": x, "y": y})

    jstate = {"params": [jnp.asarray(p) for p in params]}
    jx, jy = jnp.asarray(x), jnp.asarray(y)

    # Same program, same start: the first losses agree.
    prog()
    p1, l1 = jstep(jstate["params"], jx, jy)
    jstate["params"] = p1
    assert np.allclose(session.fetch("loss"), np.asarray(l1), rtol=1e-4), "losses differ"

    def session_step(n: int) -> None:
        for _ in range(n):
            prog()
            session.buffer("loss").block_until_ready()

    def jax_step(n: int) -> None:
        p = jstate["params"]
        for _ in range(n):
            p, loss = jstep(p, jx, jy)
            loss.block_until_ready()
        jstate["params"] = p

    # The same executable called directly, buffers fed back by hand: what the session adds.
    exe = prog.executable
    bufs = {"p": [client.put(p) for p in params]}
    bx, by = client.put(x), client.put(y)

    def direct_step(n: int) -> None:
        p = bufs["p"]
        for _ in range(n):
            *p, loss = exe(*p, bx, by, donate=[0, 1, 2, 3])
            loss.block_until_ready()
        bufs["p"] = p

    # CPU time of the whole process per step, next to the wall clock: on a loaded machine the
    # wall clock mostly measures the scheduler (a step waits for descheduled plugin threads),
    # while the CPU time counts the work itself (all threads), much more repeatably.
    cpu: dict[str, list[float]] = {"session": [], "direct": [], "jax": []}

    def timed(name: str, f: Any) -> Any:
        def g(n: int) -> None:
            c0 = time.process_time_ns()
            f(n)
            cpu[name].append((time.process_time_ns() - c0) / n)

        return g

    t = h.interleaved(
        {"session": timed("session", session_step), "direct": timed("direct", direct_step), "jax": timed("jax", jax_step)},
        reps=reps,
        iters=iters,
    )
    # The warm-up call of each variant is recorded first: drop it.
    cpu = {k: v[-reps:] for k, v in cpu.items()}
    res.figure(
        "session.cpu_vs_jax",
        "process CPU time per step, Session / JAX, per repetition",
        "x",
        h.paired(cpu["session"], cpu["jax"]),
    )
    res.figure("session.step", "rpjrt.Session: step() + loss.block_until_ready()", "ns", h.stats(t["session"]))
    res.figure(
        "session.direct_step",
        "rpjrt: *p, loss = exe(*p, x, y, donate=[0, 1, 2, 3]) + loss.block_until_ready()",
        "ns",
        h.stats(t["direct"]),
    )
    res.figure(
        "session.jax_step",
        f"JAX {jax.__version__}: jit(step, donate_argnums=0) + loss.block_until_ready()",
        "ns",
        h.stats(t["jax"]),
    )
    res.target(
        name,
        value=h.paired(t["session"], t["jax"]),
        op="<=",
        threshold=1.0,
        unit="x",
        detail="MLP 32-64-8, batch 128; rpjrt on the PJRT 0.115 CPU plugin",
        reference=f"JAX {jax.__version__}, same process, interleaved",
    )
    res.figure(
        "session.vs_direct",
        "Session step / the same executable called directly (the session's own cost)",
        "x",
        h.paired(t["session"], t["direct"]),
    )
