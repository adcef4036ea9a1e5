"""What a plain call learns about its outputs' readiness while the GIL is released for the
execution, so that `block_until_ready()` afterwards makes no plugin call (issue 24, the
Python execute + wait path)."""

from __future__ import annotations

import rpjrt

from .conftest import fake_plugin_path, run_python

MUL_ADD = """
func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<4xf32>
  %1 = stablehlo.add %0, %b : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""


def test_a_call_remembers_outputs_that_were_ready_on_return() -> None:
    # The fake plugin runs programs inside Execute, so outputs are ready on return. After
    # the calls, every PJRT_Buffer_ReadyEvent fails: a wait that still asked the plugin
    # would raise, one that knows the output is ready does not.
    path = str(fake_plugin_path())
    r = run_python(
        f"""
        import ctypes
        import rpjrt
        c = rpjrt.Client({path!r})
        exe = c.compile({MUL_ADD!r})
        x = c.put([1.0, 2.0, 3.0, 4.0], dtype="float32")
        (y,) = exe(x, x)
        (z,), _ = exe.execute_with_events(x, x)  # no readiness check on this path
        spec = b"RPJRT_FAKE_FAIL=PJRT_Buffer_ReadyEvent:INTERNAL:no more ready events"
        lib = ctypes.CDLL({path!r})
        assert lib.rpjrt_fake_configure(spec, len(spec)) == 0
        assert y.block_until_ready() is y
        assert y.is_ready()
        print("Y", y.to_numpy().tolist())  # the fake's toy compiler returns `a`
        try:
            z.block_until_ready()
        except rpjrt.InternalError as e:
            print("Z", e)
        """
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Y [1.0, 2.0, 3.0, 4.0]" in r.stdout, r.stdout
    assert "Z PJRT_Buffer_ReadyEvent failed with INTERNAL: no more ready events" in r.stdout


def test_a_failed_readiness_check_is_reported_by_the_wait() -> None:
    # The check after the execution swallows its own error; the wait reports it.
    path = str(fake_plugin_path())
    r = run_python(
        f"""
        import rpjrt
        c = rpjrt.Client({path!r})
        exe = c.compile({MUL_ADD!r})
        x = c.put([1.0, 2.0, 3.0, 4.0], dtype="float32")
        (y,) = exe(x, x)
        try:
            y.block_until_ready()
        except rpjrt.InternalError as e:
            print("WAIT", e)
        """,
        env={"RPJRT_FAKE_FAIL": "PJRT_Buffer_ReadyEvent:INTERNAL:no ready event"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WAIT PJRT_Buffer_ReadyEvent failed with INTERNAL: no ready event" in r.stdout, r.stdout


def test_outputs_of_a_call_are_ready_and_correct_on_a_cpu_plugin(client: rpjrt.Client) -> None:
    exe = client.compile(MUL_ADD)
    x = client.put([1.0, 2.0, 3.0, 4.0], dtype="float32")
    outs = [exe(x, x)[0] for _ in range(20)]
    for y in outs:
        assert y.block_until_ready() is y
        assert y.to_numpy().tolist() == [2.0, 6.0, 12.0, 20.0]
