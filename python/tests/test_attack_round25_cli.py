"""Round 25 (the CLI and many processes) through Python: a store's wait given as an int
too large for a float (``10**400``) is a wait, not a wrong type; a second ``initialize``
as process 0 on the address this same process hosts its store says so, instead of
blaming another process; and ``python -m rpjrt rendezvous --plugin`` puts the plugin's
client creation under ``RPJRT_PLUGIN_TIMEOUT``, as every verb does.

Each check that starts a server or a plugin runs in a fresh interpreter (a subprocess,
bounded by a timeout).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from fractions import Fraction

import pytest

import rpjrt
from rpjrt import distributed

from .conftest import fake_plugin_path

TIMEOUT = 120


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full,
        timeout=TIMEOUT,
    )


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --- 7d: a wait too large for a float ----------------------------------------------------


@pytest.mark.parametrize("huge", [10**400, Fraction(10**400)])
def test_a_wait_too_large_for_a_float_is_a_wait_not_a_wrong_type(huge):
    # It said "timeout must be a number of seconds (int or float), not int".
    m = distributed.InMemoryStore()
    m.set("k", b"v")
    assert m.get("k", huge) == b"v"
    host = distributed.TcpStore.host("127.0.0.1:0", "tok")
    try:
        host.set("k", b"w")
        assert host.get("k", huge) == b"w"
    finally:
        host.shutdown()


def test_a_negative_wait_too_large_for_a_float_is_refused_as_negative():
    m = distributed.InMemoryStore()
    m.set("k", b"v")
    with pytest.raises(rpjrt.InvalidArgumentError, match="non-negative"):
        m.get("k", -(10**400))
    # Text is still a wrong type.
    with pytest.raises(TypeError, match="timeout must be a number of seconds"):
        m.get("k", "10")


def test_the_python_side_refuses_a_wait_too_large_for_a_float_by_its_value():
    # The pure-Python check (a bounded store's timeouts) raised a bare OverflowError.
    with pytest.raises(rpjrt.InvalidArgumentError, match="too large for a float"):
        distributed._seconds_arg(10**400, "timeout")
    with pytest.raises(TypeError, match="timeout must be a number of seconds"):
        distributed._seconds_arg("1", "timeout")


# --- 7e: initialize twice in one process ---------------------------------------------------


def test_a_second_initialize_in_the_same_process_says_this_process_hosts_the_store():
    port = _free_port()
    code = (
        "from rpjrt import distributed as d\n"
        f"a = d.initialize(0, 1, '127.0.0.1:{port}', 't', timeout=5)\n"
        "try:\n"
        f"    d.initialize(0, 1, '127.0.0.1:{port}', 't', timeout=5)\n"
        "    print('no error')\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e)\n"
        "a.shutdown(0)\n"
        # Once shut down, the address is free for the next store.
        f"b = d.initialize(0, 1, '127.0.0.1:{port}', 't', timeout=5)\n"
        "print('again ok')\n"
        "b.shutdown(0)\n"
    )
    p = _python(code)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "this process hosts a store there already" in p.stdout, p.stdout
    assert "another process hosts" not in p.stdout, p.stdout
    assert "again ok" in p.stdout, p.stdout


# --- 1: python -m rpjrt rendezvous --plugin under RPJRT_PLUGIN_TIMEOUT ---------------------


def test_python_m_rpjrt_rendezvous_gives_up_on_a_hanging_client_creation():
    fake = str(fake_plugin_path())
    args = [
        sys.executable, "-m", "rpjrt", "rendezvous", "--process-id", "0",
        "--num-processes", "1", "--coordinator", "127.0.0.1:0", "--plugin", fake,
        "--timeout", "30",
    ]
    env = dict(os.environ, RPJRT_PLUGIN_TIMEOUT="1", RPJRT_FAKE_HANG_ON="PJRT_Client_Create")
    try:
        p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("rendezvous --plugin still waits on the hanging client creation at 30 s")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "did not return within 1.0s (RPJRT_PLUGIN_TIMEOUT)" in p.stderr, p.stderr
    assert "PJRT_Client_Create: hanging" in p.stderr, p.stderr
