"""Regressions from attack round 22 (API), finding 1: an alias buffer
(``client.create_alias_buffer``) that failed -- ``fulfiller.fail(...)``, or its fulfiller
dropped unused -- or that is still pending and fails later, given NOT donated to a parameter
the program aliases to an output (``tf.aliasing_output``, what JAX's ``donate_argnums``
lowers to) aborted the whole process inside both CPU plugins ("Check failed:
src_buffers[i].IsConcrete()"): the plugin copies such an input at once and cannot copy one
that has no memory. Every way of running a program now raises the alias's own error (as
the same alias donated, or given to a program without aliases, does), and the process
lives on.

Each case runs in a fresh interpreter, so that a regression fails its test instead of
killing pytest.
"""

from __future__ import annotations

import re

import pytest

from .conftest import run_python

CHILD = r'''
import gc, os, sys, threading
import numpy as np, rpjrt
c = rpjrt.Client(os.environ["RPJRT_PLUGIN"])
case = os.environ["CASE"]
PROG = """func.func public @main(%a: tensor<8xf32> {tf.aliasing_output = 0 : i32}) -> tensor<8xf32> {
  %0 = stablehlo.add %a, %a : tensor<8xf32>
  return %0 : tensor<8xf32>
}"""
TWO = """func.func public @main(%a: tensor<8xf32> {tf.aliasing_output = 0 : i32}, %b: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.add %a, %a : tensor<8xf32>
  %1 = stablehlo.add %0, %b : tensor<8xf32>
  return %1 : tensor<8xf32>
}"""
SECOND = """func.func public @main(%x: tensor<8xf32>, %a: tensor<8xf32> {tf.aliasing_output = 1 : i32}) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = stablehlo.add %a, %a : tensor<8xf32>
  return %x, %0 : tensor<8xf32>, tensor<8xf32>
}"""
exe = c.compile(PROG)
al, ful = c.create_alias_buffer("float32", [8])

def fail():
    ful.fail("DATA_LOSS", "no data")

def drop():
    global ful
    del ful
    gc.collect()

def report(get):
    try:
        print("@RESULT", get().tolist(), flush=True)
    except rpjrt.Error as e:
        print("@RAISED", type(e).__name__, e, flush=True)

def launch(call, then):
    try:
        outs = call()
    except rpjrt.Error as e:
        print("@RAISED", type(e).__name__, e, flush=True)
        then()
        return
    then()
    report(lambda: outs[0].block_until_ready())

if case == "failed":
    fail(); launch(lambda: exe(al), lambda: None)
elif case == "dropped":
    drop(); launch(lambda: exe(al), lambda: None)
elif case == "failed_wait":
    fail(); report(lambda: exe(al, wait=True)[0])
elif case == "failed_donated":
    fail(); launch(lambda: exe(al, donate=[0]), lambda: None)
elif case == "failed_unaliased":
    fail()
    plain = c.compile(PROG.replace(" {tf.aliasing_output = 0 : i32}", ""))
    launch(lambda: plain(al), lambda: None)
elif case == "pending_then_fail":
    launch(lambda: exe(al), fail)
elif case == "pending_then_drop":
    launch(lambda: exe(al), drop)
elif case == "second_param":
    two = c.compile(TWO)
    launch(lambda: two(al, al), fail)
elif case == "with_events":
    launch(lambda: exe.execute_with_events(al)[0], fail)
elif case == "sharded":
    launch(lambda: exe.execute_sharded([[al]])[0], fail)
elif case == "portable":
    pe = c.compile(PROG, portable=True)
    launch(lambda: pe(al, device=c.devices()[0]), fail)
elif case == "prepared_failed":
    fail()
    report(lambda: exe.prepare([[al]])(wait=True)[0][0])
elif case == "prepared_pending":
    p = exe.prepare([[al]])
    outs = p(wait=False)
    fail()
    report(lambda: outs[0][0].block_until_ready())
    report(lambda: p(wait=True)[0][0])
elif case == "session_failed":
    fail()
    sess = rpjrt.Session(c)
    sess.bind("w", al)
    prog = sess.program(exe, ["w"], ["v"], donate=False)
    report(lambda: prog()["v"])
elif case == "session_pending":
    sess = rpjrt.Session(c)
    sess.bind("w", al)
    prog = sess.program(exe, ["w"], ["v"], donate=False)
    threading.Timer(0.3, fail).start()
    report(lambda: prog()["v"].block_until_ready())
elif case == "alias_of_failed":
    fail()
    al2, ful2 = c.create_alias_buffer("float32", [8])
    ful2.fulfill(al)
    launch(lambda: exe(al2), lambda: None)
elif case == "every_memory":
    # An alias in each memory of the device, given to parameter 1 (aliased there).
    second = c.compile(SECOND)
    for m in c.devices()[0].memories():
        a, f = c.create_alias_buffer("float32", [8], memory=m)
        outs = second(np.ones(8, np.float32), a)
        f.fail("DATA_LOSS", "no data")
        report(lambda: outs[1].block_until_ready())
elif case == "pending_then_fulfill":
    launch(lambda: exe(al), lambda: ful.fulfill(c.put(np.ones(8, np.float32))))
elif case == "fulfilled":
    ful.fulfill(c.put(np.ones(8, np.float32)))
    launch(lambda: exe(al), lambda: None)
    al.block_until_ready()
    launch(lambda: exe(al), lambda: None)
elif case == "prepared_pending_fulfill":
    p = exe.prepare([[al]])
    ful.fulfill(c.put(np.ones(8, np.float32)))
    report(lambda: p(wait=True)[0][0])
print("@SURVIVED", flush=True)
'''


def run_case(plugin_path: str, case: str) -> list[str]:
    """Runs `case` in a fresh interpreter; its outcome lines, after checking it lived."""
    r = run_python(CHILD, env={"RPJRT_PLUGIN": plugin_path, "CASE": case}, timeout=120)
    assert r.returncode == 0 and "@SURVIVED" in r.stdout, (
        f"case {case}: exit status {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    )
    lines = [l for l in r.stdout.splitlines() if l.startswith(("@RAISED", "@RESULT"))]
    assert lines, f"case {case}: no outcome\n{r.stdout}"
    return lines


FAILING = [
    "failed",
    "dropped",
    "failed_wait",
    "pending_then_fail",
    "pending_then_drop",
    "second_param",
    "alias_of_failed",
    "every_memory",
    "with_events",
    "sharded",
    "portable",
    "prepared_failed",
    "prepared_pending",
    "session_failed",
    "session_pending",
]


@pytest.mark.parametrize("case", FAILING)
def test_a_failed_alias_at_an_aliased_parameter_raises(plugin_path: str, case: str) -> None:
    for line in run_case(plugin_path, case):
        assert line.startswith("@RAISED"), f"{case}: {line}"
        assert "no data" in line or "dropped unfulfilled" in line, f"{case}: {line}"


def _event_error(lines: list[str]) -> list[str]:
    """``lines`` without the entry that reported the event's error: a wait reads it through
    ``PJRT_Event_Await`` or through the ``PJRT_Event_OnReady`` callback, by timing."""
    return [re.sub(r"PJRT_Event_(Await|OnReady|Error) failed", "PJRT_Event_* failed", l) for l in lines]


def test_the_error_is_the_one_a_donated_call_gives(plugin_path: str) -> None:
    failed = _event_error(run_case(plugin_path, "failed"))
    assert failed == _event_error(run_case(plugin_path, "failed_donated"))
    assert failed == _event_error(run_case(plugin_path, "failed_unaliased"))


@pytest.mark.parametrize("case", ["pending_then_fulfill", "fulfilled", "prepared_pending_fulfill"])
def test_fulfilled_aliases_still_compute(plugin_path: str, case: str) -> None:
    for line in run_case(plugin_path, case):
        assert line == "@RESULT " + str([2.0] * 8), f"{case}: {line}"
