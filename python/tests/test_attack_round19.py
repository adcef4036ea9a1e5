"""Round 19: what the outside checks of this round found, and the items an earlier round
left over, on both CPU plugins.

A. A DLPack producer's own refusal to export (jax refuses int4 arrays) reached the caller of
   ``client.from_dlpack`` as the producer's exception, naming neither rpjrt nor what to do:
   it is now ``rpjrt.UnsupportedError`` naming the producer and ``client.put``, with the
   producer's error as its ``__cause__``. rpjrt's own errors stand as they are. It
   suggests ``client.put`` only where the object offers another way in.
B. The interpreter ending while a daemon thread compiled crashed about one process in four
   (SIGSEGV, or "pure virtual method called" on the 0.81 plugin): the plugin's global state
   was torn down under the compile. The exit hook now refuses new compiles and loads and
   waits for running ones (as Python waits for non-daemon threads, keeping the exit
   status); Ctrl-C during that wait ends the process at once with status 130.
C. ``client.load(path)`` and ``inspect_artifact(path)`` read a whole file, holding the GIL,
   before looking at its first bytes: a large file that is not an artifact is now refused
   after its head, and files are read without the GIL.
D. ``client2.put(buffer_of_client1)`` was refused naming client2's own device: a Buffer of
   another client now goes in through the host, copied, as other host data does.
E. ``PreparedCall.argument`` / ``CallOutputs.device`` index arithmetic wrapped for huge
   indexes (``argument(2**63, 0)`` gave argument 0): out of range now.
F. A program with no outputs, dispatched asynchronously (real work before its custom call):
   ``exe(x, ffi_user_data=...)`` returned before the handler ran and freed the user data
   under it (SIGSEGV); ``exe(x, wait=True)`` neither waited nor raised the handler's error.
   Both now wait for the execution's completion event; so does ``PreparedCall(wait=True)``.
H. A handler on a plugin worker thread waiting on ``buffer.ready_event()`` for a buffer
   queued behind its own execution hung (the buffer's own waits were refused): the event
   of a buffer knows its device and is refused the same way.
G. numpy's platform codes for int64/uint64 (``l``, ``L``, ``p``, ``P``, ``int``, ``uint``)
   were unknown element type names; a missing artifact file said "invalid argument" twice.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.ffi


class _Refuses:
    """A DLPack producer that refuses every export, as jax does for int4."""

    def __dlpack__(self, **kw: Any) -> Any:
        raise ValueError("cannot export this one")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def test_a_producers_refusal_is_an_unsupported_error_naming_it(client: rpjrt.Client) -> None:
    with pytest.raises(rpjrt.UnsupportedError, match=r"_Refuses refused to export") as e:
        client.from_dlpack(_Refuses())
    msg = str(e.value)
    assert "ValueError: cannot export this one" in msg and "no other way" in msg, msg
    assert isinstance(e.value.__cause__, ValueError)


def test_jax_int4_from_dlpack_says_what_to_do(client: rpjrt.Client) -> None:
    jnp = pytest.importorskip("jax.numpy")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    j = jnp.asarray(np.array([1, -2, 3, 0], dtype=ml_dtypes.int4))
    with pytest.raises(rpjrt.UnsupportedError, match="refused to export") as e:
        client.from_dlpack(j)
    assert "client.put" in str(e.value)
    # What the message suggests works.
    b = client.put(j)
    np.testing.assert_array_equal(b.to_numpy().astype(np.int8), [1, -2, 3, 0])


def test_rpjrt_errors_from_a_producer_stand(client: rpjrt.Client) -> None:
    b = client.put(np.arange(4, dtype=np.float32))
    b.delete()
    with pytest.raises(rpjrt.Error) as e:
        client.from_dlpack(b)
    assert "refused to export" not in str(e.value)


def test_put_still_goes_through_array_when_numpy_refuses_dlpack(client: rpjrt.Client) -> None:
    """numpy refuses to export bfloat16 through DLPack: put goes on through the array
    protocol (the from_dlpack wording must not reach put's fallback)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16)
    np.testing.assert_array_equal(client.put(a).to_numpy(), a)
    with pytest.raises(rpjrt.UnsupportedError, match="ndarray refused to export"):
        client.from_dlpack(a)


_EXIT_DURING_COMPILE = r"""
import sys, threading, time, rpjrt
c = rpjrt.Client(sys.argv[1])
def work():
    i = 0
    while True:
        try:
            c.compile(
                "func.func public @main(%a: tensor<8xf32>) -> tensor<8xf32> {\n"
                f"  %c = stablehlo.constant dense<{i}.0> : tensor<8xf32>\n"
                "  %0 = stablehlo.add %a, %c : tensor<8xf32>\n"
                "  return %0 : tensor<8xf32>\n}"
            )
        except rpjrt.Error as e:
            assert "process is ending" in str(e), e
            return
        i += 1
threading.Thread(target=work, daemon=True).start()
time.sleep(float(sys.argv[2]))
print("main done", flush=True)
"""


def test_exiting_while_a_daemon_thread_compiles_ends_cleanly(plugin_path: str) -> None:
    for i in range(8):
        r = subprocess.run(
            [sys.executable, "-c", _EXIT_DURING_COMPILE, plugin_path, str(0.3 + 0.1 * i)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0 and "main done" in r.stdout, (r.returncode, r.stderr[-2000:])


def test_load_of_a_large_non_artifact_file_reads_only_its_head(
    client: rpjrt.Client, tmp_path: Any
) -> None:
    import resource
    import time

    p = tmp_path / "big.bin"
    with open(p, "wb") as f:
        f.write(b"NOTANART")
        f.truncate(2 << 30)  # 2 GiB, sparse
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    for call in (client.load, rpjrt.inspect_artifact):
        with pytest.raises(rpjrt.InvalidArgumentError, match="not an rpjrt artifact") as e:
            call(p)
        assert str(p) in str(e.value)
    assert time.perf_counter() - t < 2.0
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 256, grown_mib
    # An artifact file still loads.
    exe = client.compile(
        "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = stablehlo.add %a, %a : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}"
    )
    art = tmp_path / "ok.rpjrt"
    art.write_bytes(exe.serialize())
    again = client.load(art)
    (y,) = again(client.put(np.ones(4, np.float32)), wait=True)
    np.testing.assert_array_equal(y.to_numpy(), np.full(4, 2, np.float32))
    assert rpjrt.inspect_artifact(art)["blob_bytes"] > 0
    # A truncated artifact is refused by its head, naming the file.
    cut = tmp_path / "cut.rpjrt"
    cut.write_bytes(exe.serialize()[:-10])
    with pytest.raises(rpjrt.InvalidArgumentError, match="truncated"):
        client.load(cut)


def test_a_buffer_of_another_client_is_put_through_the_host(plugin_path: str) -> None:
    c1, c2 = rpjrt.Client(plugin_path), rpjrt.Client(plugin_path)
    try:
        b = c1.put(np.arange(3, dtype=np.float32))
        for kw in ({}, {"device": c2.devices()[-1]}):
            got = c2.put(b, **kw)
            assert got.client is c2
            np.testing.assert_array_equal(got.to_numpy(), [0, 1, 2])
        # The copy is c2's own: deleting the source leaves it intact.
        got = c2.put(b)
        b.delete()
        np.testing.assert_array_equal(got.to_numpy(), [0, 1, 2])
    finally:
        c1.close()
        c2.close()


def _side_effect_program(target: str, n: int = 256) -> str:
    # The dot makes the CPU plugins dispatch the program asynchronously: the custom call
    # then runs on a plugin thread after the execute call has returned.
    return (
        f"func.func public @main(%x: tensor<{n}x{n}xf32>) -> () {{\n"
        f"  %d = stablehlo.dot_general %x, %x, contracting_dims = [1] x [0] : "
        f"(tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>\n"
        f"  %s = stablehlo.slice %d [0:1, 0:1] : (tensor<{n}x{n}xf32>) -> tensor<1x1xf32>\n"
        f"  stablehlo.custom_call @{target}(%s) {{api_version = 4 : i32, has_side_effect = true}}"
        " : (tensor<1x1xf32>) -> ()\n  return\n}"
    )


def test_user_data_outlives_a_program_without_outputs(client: rpjrt.Client) -> None:
    import gc
    import time

    seen: list[Any] = []

    def h(call: Any) -> None:
        time.sleep(0.05)
        seen.append(list(call.user_data))

    target = f"r19_zero_out_ud_{id(client)}"
    rpjrt.ffi.register(client, target, h)
    exe = client.compile(_side_effect_program(target))
    x = client.put(np.ones((256, 256), np.float32))
    for i in range(3):
        assert exe(x, ffi_user_data=["payload", i]) == []
        # The call waited for the execution: the handler has run, with the user data.
        assert seen[-1] == ["payload", i], seen
        gc.collect()


def test_wait_true_without_outputs_waits_and_raises(client: rpjrt.Client) -> None:
    import time

    ran: list[int] = []

    def h(call: Any) -> None:
        time.sleep(0.1)
        ran.append(1)
        if len(ran) == 2:
            raise ValueError("the side effect failed")

    target = f"r19_zero_out_err_{id(client)}"
    rpjrt.ffi.register(client, target, h)
    exe = client.compile(_side_effect_program(target))
    x = client.put(np.ones((256, 256), np.float32))
    assert exe(x, wait=True) == [] and ran == [1]
    with pytest.raises(rpjrt.Error, match="the side effect failed"):
        exe(x, wait=True)
    assert ran == [1, 1]


def test_a_prepared_call_without_outputs_waits_and_raises(client: rpjrt.Client) -> None:
    import time

    ran: list[int] = []

    def h(call: Any) -> None:
        time.sleep(0.1)
        ran.append(1)
        if len(ran) == 2:
            raise ValueError("late failure")

    target = f"r19_prep_zero_{id(client)}"
    rpjrt.ffi.register(client, target, h)
    exe = client.compile(_side_effect_program(target))
    x = client.put(np.ones((256, 256), np.float32))
    call = exe.prepare([[x]])
    call(wait=True)
    assert ran == [1]
    with pytest.raises(rpjrt.Error, match="late failure"):
        call(wait=True)
    assert ran == [1, 1]


def test_numpy_platform_codes_name_their_types() -> None:
    for name, want in [("l", "int64"), ("p", "int64"), ("int", "int64"), ("int_", "int64"),
                       ("intp", "int64"), ("L", "uint64"), ("P", "uint64"), ("uint", "uint64"),
                       ("uintp", "uint64")]:
        assert rpjrt.dtype(name) == rpjrt.dtype(want), name
        assert np.dtype(name) == np.dtype(want), name


def test_a_missing_artifact_file_says_so_once(client: rpjrt.Client, tmp_path: Any) -> None:
    p = tmp_path / "nope.rpjrt"
    for call in (client.load, rpjrt.inspect_artifact):
        with pytest.raises(rpjrt.InvalidArgumentError) as e:
            call(p)
        assert str(p) in str(e.value)
        assert str(e.value).count("invalid argument") <= 1, str(e.value)
    p.write_bytes(b"NOTANARTIFACT")
    with pytest.raises(rpjrt.InvalidArgumentError) as e:
        client.load(p)
    assert str(e.value).count("invalid argument") <= 1, str(e.value)


def test_a_worker_thread_handler_waiting_on_a_ready_event_is_refused(plugin_path: str) -> None:
    import time

    c = rpjrt.Client(plugin_path)
    try:
        got: list[Any] = []
        pending: dict[str, Any] = {}

        def h(call: Any) -> None:
            time.sleep(0.2)
            try:
                got.append(pending["b"].ready_event().wait())
            except rpjrt.Error as e:
                got.append(e)

        target = f"r19_worker_event_{id(c)}"
        rpjrt.ffi.register(c, target, h)
        outer = c.compile(_side_effect_program(target))
        n = 256
        dot = c.compile(
            f"func.func public @main(%x: tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32> {{\n"
            f"  %d = stablehlo.dot_general %x, %x, contracting_dims = [1] x [0] : "
            f"(tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>\n"
            "  return %d : tensor<{n}x{n}xf32>\n}".replace("{n}", str(n))
        )
        x = c.put(np.ones((n, n), np.float32))
        outer(x)  # dispatched asynchronously: the handler runs on a plugin worker thread
        pending["b"] = dot(x)[0]  # queued behind it on the same device
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        assert got, "the handler hung waiting on the event"
        assert isinstance(got[0], rpjrt.FailedPreconditionError), got
        assert "worker thread" in str(got[0])
        pending["b"].block_until_ready()
    finally:
        c.close()


def test_a_session_refuses_copies_and_pickling(client: rpjrt.Client) -> None:
    import copy
    import pickle

    s = rpjrt.Session(client)
    s.bind("w", np.ones(4, np.float32))
    for f, what in ((copy.copy, "copied"), (copy.deepcopy, "copied"), (pickle.dumps, "pickled")):
        with pytest.raises(TypeError, match=f"a Session cannot be {what}"):
            f(s)
    # The session is untouched.
    np.testing.assert_array_equal(s.fetch("w"), np.ones(4, np.float32))
    s.close()
