"""The store adapters against real servers, each started by the test on 127.0.0.1 with a
free port and stopped afterwards:

* ``RedisStore`` against Debian's ``redis-server`` (with the ``redis`` client from PyPI);
  part of every Python run: a missing ``redis-server`` or ``redis`` module FAILS here.
* ``TorchStore`` against a real ``torch.distributed.TCPStore``, only when
  ``RPJRT_TEST_STORES_TORCH=1`` (the opt-in stores tier, ``scripts/test-stores.sh``, which
  installs torch); there, torch that cannot be imported fails the tier.

Every client is a separate process (``store_worker.py``) with its own adapter, as in a
job: set/get/try_get, a blocking get, a timeout, a 32 MiB value, four processes meeting in
barriers, an absent process, and an rpjrt ``Client(kv=adapter)`` on the fake plugin,
which calls the KV callbacks (alone, and as two processes that exchange their devices).
A redis-server paused with SIGSTOP shows that no call of ``RedisStore`` outlives its bound
when the client (without a socket timeout) would wait for ever. JAX's adapter is tested against JAX's coordination service in test_distributed.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import rpjrt
from rpjrt import distributed

from .conftest import fake_plugin_path

WORKER = Path(__file__).resolve().parent / "store_worker.py"
KINDS = ["redis"] + (["torch"] if os.environ.get("RPJRT_TEST_STORES_TORCH") == "1" else [])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _redis_server(tmp: Path) -> Iterator[int]:
    for port, _proc in _redis_server_process(tmp):
        yield port


def _redis_server_process(tmp: Path) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """A redis-server on a free port of 127.0.0.1: (port, process) until closed."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail("redis-server is not installed (apt-get install redis-server; "
                    "scripts/setup.sh does it)", pytrace=False)
    try:
        import redis
    except ImportError:
        pytest.fail("the redis Python client is not installed (pip install redis; "
                    "scripts/setup.sh does it)", pytrace=False)
    for _attempt in range(5):
        port = free_port()
        log = tmp / f"redis-{port}.log"
        with open(log, "w") as sink:
            proc = subprocess.Popen(
                [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(tmp), "--daemonize", "no",
                 "--loglevel", "warning"],
                stdout=sink, stderr=subprocess.STDOUT, text=True,
            )
        r = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if r.ping():
                    break
            except redis.ConnectionError:
                time.sleep(0.02)
        else:
            _stop(proc)
            out = log.read_text()
            if "in use" in out:
                continue  # someone took the port in between: another one
            pytest.fail(f"redis-server on port {port} did not answer: {out}", pytrace=False)
        try:
            yield port, proc
        finally:
            r.close()
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)  # a paused server cannot stop
            _stop(proc)
        return
    pytest.fail("redis-server found no free port in 5 tries", pytrace=False)


def _torch_server() -> Iterator[int]:
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "torch-server"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline().strip()
    if not line.isdigit():
        err = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
        _stop(proc)
        pytest.fail(f"torch's TCPStore did not start: {line} {err}", pytrace=False)
    try:
        yield int(line)
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            _stop(proc)


@pytest.fixture(scope="module", params=KINDS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[str, int]]:
    kind = str(request.param)
    gen = (_redis_server(tmp_path_factory.mktemp("redis")) if kind == "redis"
           else _torch_server())
    port = next(gen)
    yield kind, port
    for _ in gen:  # runs the generator's clean-up
        pass


def start(server: tuple[str, int], ns: str, action: str, p: int, n: int, *extra: str,
          env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    kind, port = server
    return subprocess.Popen(
        [sys.executable, str(WORKER), kind, str(port), ns, action, str(p), str(n), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )


def finish(procs: list[subprocess.Popen[str]], timeout: float = 120) -> list[str]:
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise AssertionError(f"a store worker hung: {out}{err}") from None
        assert p.returncode == 0, f"store worker failed ({p.returncode}):\n{out}{err}"
        outs.append(out)
    return outs


def ns() -> str:
    return uuid.uuid4().hex[:12]


def test_set_get_try_get_timeout_and_a_large_value(server: tuple[str, int]) -> None:
    (out,) = finish([start(server, ns(), "basic", 0, 1)])
    assert "basic ok" in out, out


def test_four_processes_share_keys_and_meet_in_barriers(server: tuple[str, int]) -> None:
    space = ns()
    outs = finish([start(server, space, "mesh", p, 4) for p in range(4)])
    for p, out in enumerate(outs):
        assert f"mesh {p} ok" in out, out


def test_a_barrier_with_an_absent_process_times_out(server: tuple[str, int]) -> None:
    # Processes 0 and 1 of 3 come; 2 never does.
    space = ns()
    outs = finish([start(server, space, "missing-peer", p, 3) for p in range(2)])
    for out in outs:
        assert "timeout key 'lonely/2' was not set" in out, out


def test_a_client_created_with_the_adapter_serves_the_plugins_kv_calls(
    server: tuple[str, int],
) -> None:
    plugin = str(fake_plugin_path())
    (out,) = finish([start(server, ns(), "client", 0, 1, plugin)])
    assert "roundtrip ok 0" in out, out


def test_two_processes_form_one_client_through_the_adapter(server: tuple[str, int]) -> None:
    plugin = str(fake_plugin_path())
    space = ns()
    outs = finish([start(server, space, "client", p, 2, plugin, env={"RPJRT_FAKE_KV": "1"})
                   for p in range(2)])
    assert "client 0 0 [(0, 0, True), (1, 0, True), (2, 1, False), (3, 1, False)] 2" in outs[0]
    assert "client 1 1 [(0, 0, False), (1, 0, False), (2, 1, True), (3, 1, True)] 2" in outs[1]


def test_a_paused_redis_server_cannot_hang_the_adapter(tmp_path: Path) -> None:
    """``kill -STOP`` on redis-server: the client (no socket timeout) would wait in its
    socket for ever. Each call ends after its bound instead, naming the key and the store,
    a client created through the store fails in time, and once the server runs again the
    same adapter works at once."""
    import redis

    servers = _redis_server_process(tmp_path)
    port, proc = next(servers)
    try:
        client = redis.Redis(host="127.0.0.1", port=port)
        store = distributed.RedisStore(client, prefix=f"{ns()}:", op_timeout=1.0)
        store.set("here", b"v")
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            with pytest.raises(TimeoutError) as e:
                store.get("absent", 1.0)
            took = time.monotonic() - t0
            assert took < 1.0 + distributed.GRACE + 1.0, took
            text = str(e.value)
            assert "key 'absent' was not set within 1.0s" in text, text
            assert f"RedisStore(127.0.0.1:{port}" in text, text
            for call, args in ((store.set, ("k", b"x")), (store.try_get, ("here",))):
                t0 = time.monotonic()
                with pytest.raises(TimeoutError, match=f"127.0.0.1:{port}"):
                    call(*args)
                assert time.monotonic() - t0 < 2.0
            # Through a client's KV callbacks: creation fails in time, not never.
            t0 = time.monotonic()
            with pytest.raises(rpjrt.DeadlineExceededError, match="did not return from set"):
                rpjrt.Client(str(fake_plugin_path()), options={"fake_kv_roundtrip": True},
                             kv=store, process_id=0, num_processes=1)
            assert time.monotonic() - t0 < 3.0
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        # Nothing stuck: the same adapter (and client) serve the next calls.
        assert store.get("here", 5.0) == b"v"
        store.set("after", b"ok")
        assert store.try_get("after") == b"ok"
    finally:
        for _ in servers:  # stops the server
            pass
