"""One process of the real-store tests (test_store_servers.py): hosts a torch TCPStore, or
drives a store adapter against a running server and prints what it saw.

    python store_worker.py torch-server             # host a TCPStore; print its port
    python store_worker.py KIND PORT NS ACTION P N  # KIND redis or torch

Each client process builds its own adapter (as a job's processes would): ``RedisStore``
over ``redis.Redis``, or ``TorchStore`` over a ``TCPStore`` client wrapped in a
``PrefixStore``. ``NS`` keeps each test's keys apart on the shared server. torch is looked
for on ``sys.path`` plus ``RPJRT_TEST_TORCH_PATH`` (appended, so the venv's packages win).
Anything unexpected raises, and the test sees a non-zero exit with the traceback.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from datetime import timedelta
from typing import Any

HOST = "127.0.0.1"


def import_torch_distributed() -> Any:
    extra = os.environ.get("RPJRT_TEST_TORCH_PATH")
    if extra:
        sys.path.append(extra)
    import torch.distributed as dist

    return dist


def torch_server() -> None:
    dist = import_torch_distributed()
    store = dist.TCPStore(HOST, 0, None, True, timedelta(seconds=60))
    print(store.port, flush=True)
    sys.stdin.read()  # until the test closes our stdin


def make_store(kind: str, port: int, ns: str) -> Any:
    from rpjrt import distributed

    if kind == "redis":
        import redis

        return distributed.RedisStore(redis.Redis(host=HOST, port=port), prefix=f"{ns}:")
    if kind == "torch":
        dist = import_torch_distributed()
        tcp = dist.TCPStore(HOST, port, None, False, timedelta(seconds=30))
        return distributed.TorchStore(dist.PrefixStore(ns, tcp))
    raise SystemExit(f"unknown store kind {kind!r}")


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


def basic(store: Any) -> None:
    """set, get, try_get, overwrite, binary values, a blocking get, a timeout, a large value."""
    check(store.try_get("missing") is None, "try_get of a missing key is not None")
    store.set("k", b"\x00one\xff")
    check(store.get("k", 5.0) == b"\x00one\xff", "get after set")
    check(store.try_get("k") == b"\x00one\xff", "try_get after set")
    store.set("k", b"two")
    check(store.get("k", 5.0) == b"two", "get after an overwrite")
    store.set("empty", b"")
    check(store.try_get("empty") == b"", "an empty value reads back as b''")

    # A get that waits for a key another thread sets later.
    timer = threading.Timer(0.3, lambda: store.set("late", b"here"))
    t0 = time.monotonic()
    timer.start()
    got = store.get("late", 10.0)
    waited = time.monotonic() - t0
    timer.join()
    check(got == b"here", f"blocking get returned {got!r}")
    check(0.25 <= waited < 5.0, f"blocking get returned after {waited:.2f}s, not ~0.3s")

    # A get that times out: TimeoutError naming the key, after about the timeout.
    t0 = time.monotonic()
    try:
        store.get("never", 0.3)
    except TimeoutError as e:
        took = time.monotonic() - t0
        check("'never'" in str(e), f"the timeout does not name the key: {e}")
        check(0.25 <= took < 5.0, f"a 0.3 s get gave up after {took:.2f}s")
    else:
        raise AssertionError("get of a key nobody sets did not time out")

    # A large value (32 MiB) round-trips intact.
    big = hashlib.sha256(b"seed").digest() * (1 << 20)
    store.set("big", big)
    back = store.get("big", 30.0)
    check(len(back) == len(big) and back == big, f"a 32 MiB value came back as {len(back)} bytes")
    print("basic ok", flush=True)


def mesh(store: Any, p: int, n: int) -> None:
    """Process p of n: many keys each, read the others' keys, and three barrier rounds
    (each process announces itself, then waits for everyone's announcement)."""
    for k in range(200):
        store.set(f"p{p}/k{k}", f"{p}:{k}".encode())
    for q in range(n):
        for k in range(0, 200, 7):
            v = store.get(f"p{q}/k{k}", 30.0)
            check(v == f"{q}:{k}".encode(), f"process {p} read {v!r} for p{q}/k{k}")
    for gen in range(3):
        if p == n - 1:
            time.sleep(0.2)  # the last one comes late: the others' gets must wait for it
        store.set(f"barrier/{gen}/{p}", b"1")
        for q in range(n):
            store.get(f"barrier/{gen}/{q}", 30.0)
    print(f"mesh {p} ok", flush=True)


def missing_peer(store: Any, p: int, n: int) -> None:
    """A barrier that process n - 1 never reaches: the wait ends in TimeoutError."""
    store.set(f"lonely/{p}", b"1")
    try:
        for q in range(n):
            store.get(f"lonely/{q}", 0.5)
    except TimeoutError as e:
        print(f"timeout {e}", flush=True)
        return
    raise AssertionError("a barrier with an absent process did not time out")


def client(store: Any, p: int, n: int, plugin: str) -> None:
    """A multi-process rpjrt Client over the store: the fake plugin (RPJRT_FAKE_KV=1)
    publishes its devices through the store and reads the other processes' in kv_get."""
    import rpjrt

    if n == 1:
        # One process: the plugin puts a key and reads it back with get and try_get.
        c = rpjrt.Client(plugin, options={"fake_kv_roundtrip": True}, kv=store,
                         process_id=0, num_processes=1)
        print("roundtrip ok", c.process_index, flush=True)
        c.close()
        return
    c = rpjrt.Client(plugin, options={"fake_device_count": 2}, kv=store,
                     process_id=p, num_processes=n)
    devs = [(d.id, d.process_index, d.is_addressable) for d in c.devices()]
    print(f"client {p}", c.process_index, devs, len(c.addressable_devices()), flush=True)
    c.close()


def main(argv: list[str]) -> None:
    if argv[1:] == ["torch-server"]:
        torch_server()
        return
    kind, port, ns, action, p, n = argv[1:7]
    store = make_store(kind, int(port), ns)
    if action == "basic":
        basic(store)
    elif action == "mesh":
        mesh(store, int(p), int(n))
    elif action == "missing-peer":
        missing_peer(store, int(p), int(n))
    elif action == "client":
        client(store, int(p), int(n), argv[7])
    else:
        raise SystemExit(f"unknown action {action!r}")


if __name__ == "__main__":
    main(sys.argv)
