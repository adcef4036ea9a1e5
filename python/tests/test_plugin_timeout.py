"""A plugin that never returns from loading or from creating its client: `Plugin(...)` and
`Client(...)` can be interrupted (Ctrl-C) and given a timeout (`timeout=`, or
RPJRT_PLUGIN_TIMEOUT), instead of blocking the interpreter for good.

The fake plugin hangs where RPJRT_FAKE_HANG_ON says. Each hanging case runs in a fresh
interpreter: the stuck call goes on in the background there, and the interpreter must still
exit normally afterwards.
"""

from __future__ import annotations

import pytest

import rpjrt

from .conftest import fake_plugin_path, run_python


def _run(code: str, **env: str) -> str:
    fake = str(fake_plugin_path())
    r = run_python(f"FAKE = {fake!r}\n" + code, env=env, timeout=90)
    # The process ends normally although a plugin call is still stuck in it.
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_a_load_that_never_returns_times_out_with_an_error_naming_the_plugin() -> None:
    out = _run(
        """
import time, rpjrt
for make in (lambda: rpjrt.Plugin(FAKE, timeout=0.5), lambda: rpjrt.Client(FAKE, timeout=0.5)):
    t = time.monotonic()
    try:
        make()
        print("no error")
    except rpjrt.DeadlineExceededError as e:
        took = time.monotonic() - t
        assert 0.4 <= took < 10, took
        assert FAKE in str(e) and "0.5 s" in str(e) and "restart the process" in str(e), e
        print("deadline", e.code)
""",
        RPJRT_FAKE_HANG_ON="GetPjrtApi",
    )
    assert out.split() == ["deadline", "DEADLINE_EXCEEDED"] * 2, out


def test_a_client_creation_that_never_returns_times_out_and_the_env_sets_the_default() -> None:
    out = _run(
        """
import os, time, rpjrt
p = rpjrt.Plugin(FAKE)
try:
    rpjrt.Client(p, timeout=0.3)
except rpjrt.DeadlineExceededError as e:
    assert "creating a client of plugin" in str(e), e
    print("explicit")
os.environ["RPJRT_PLUGIN_TIMEOUT"] = "0.3"
t = time.monotonic()
try:
    rpjrt.Client(p)
except rpjrt.DeadlineExceededError as e:
    assert time.monotonic() - t < 10
    print("env")
os.environ["RPJRT_PLUGIN_TIMEOUT"] = "soon"
try:
    rpjrt.Client(p)
except ValueError as e:
    assert "RPJRT_PLUGIN_TIMEOUT" in str(e) and "soon" in str(e), e
    print("bad env")
""",
        RPJRT_FAKE_HANG_ON="PJRT_Client_Create",
    )
    assert out.split() == ["explicit", "env", "bad", "env"], out


def test_ctrl_c_interrupts_a_load_that_never_returns() -> None:
    out = _run(
        """
import os, signal, threading, time, rpjrt
# Python leaves SIGINT alone when it starts with it ignored (a job started in the
# background by a shell without job control): install the KeyboardInterrupt handler.
signal.signal(signal.SIGINT, signal.default_int_handler)
threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t = time.monotonic()
try:
    rpjrt.Client(FAKE)
except KeyboardInterrupt:
    took = time.monotonic() - t
    assert took < 10, took
    print("interrupted")
""",
        RPJRT_FAKE_HANG_ON="PJRT_Client_Create",
    )
    assert out.split() == ["interrupted"], out


@pytest.mark.parametrize(
    ("bad", "error"),
    [(0, ValueError), (-1.5, ValueError), (float("nan"), ValueError), (True, TypeError), ("5", TypeError)],
)
def test_bad_timeouts_are_refused_before_anything_is_loaded(bad: object, error: type) -> None:
    with pytest.raises(error, match="timeout"):
        rpjrt.Client(str(fake_plugin_path()), timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(error, match="timeout"):
        rpjrt.Plugin(str(fake_plugin_path()), timeout=bad)  # type: ignore[arg-type]


def test_a_plugin_that_returns_in_time_works_as_without_a_timeout() -> None:
    # An infinite timeout is no limit; a generous one changes nothing.
    for t in (30.0, float("inf"), None):
        c = rpjrt.Client(str(fake_plugin_path()), timeout=t)
        assert c.devices(), c
        b = c.put([1.0, 2.0, 3.0])
        assert b.to_numpy().tolist() == [1.0, 2.0, 3.0]
        c.close()


def test_a_load_stuck_in_the_system_loader_does_not_keep_the_process_from_exiting() -> None:
    # A library whose initializer never returns keeps the loader's lock taken, and a normal
    # exit takes that lock to run finalizers: the process used to hang at exit for good.
    # rpjrt's last exit hook now ends it, with status 1 and a note saying why.
    from .conftest import fake_plugin_path, run_python

    fake = str(fake_plugin_path())
    r = run_python(
        f"""
import rpjrt
try:
    rpjrt.Plugin({fake!r}, timeout=0.5)
except rpjrt.DeadlineExceededError:
    print("deadline", flush=True)
print("script done")
""",
        env={"RPJRT_FAKE_HANG_ON": "dlopen"},
        timeout=60,
    )
    assert r.stdout.split() == ["deadline", "script", "done"], r.stdout + r.stderr
    assert r.returncode == 1, r.stdout + r.stderr
    assert "still inside the system's library loader" in r.stderr, r.stderr
