"""Out-of-memory diagnostics (the fake plugin's limited allocator), Device.memory_stats,
and rpjrt.Event (buffer readiness, execution completion) on the fake and both CPU plugins."""

from __future__ import annotations

import asyncio
import threading

import pytest

import rpjrt
from rpjrt import InvalidArgumentError, UnsupportedError

from .conftest import fake_plugin_path, run_python

MUL_ADD = """
func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<4xf32>
  %1 = stablehlo.add %0, %b : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""


def test_over_allocating_on_the_fake_raises_resource_exhausted_with_the_figures() -> None:
    r = run_python(
        f"""
        import rpjrt
        c = rpjrt.Client({str(fake_plugin_path())!r}, options={{"memory_fraction": 0.5}})
        d = c.devices()[0]
        s = d.memory_stats()
        assert s["bytes_in_use"] == 0 and s["bytes_limit"] == 4096, s
        try:
            c.put(bytes(8192), device=d)
        except rpjrt.ResourceExhaustedError as e:
            assert isinstance(e, MemoryError)
            print("PUT", e.entry, e.device_id, e.memory_stats, e.memory_options)
            print("HINT", e.hint)
            print("MSG", str(e).replace(chr(10), " | "))
        x = c.put(bytes(3000), device=d)
        assert d.memory_stats()["bytes_in_use"] == 3000
        exe = c.compile('func.func public @main(%a: tensor<3000xui8>) -> tensor<3000xui8> '
                        '{{ return %a : tensor<3000xui8> }}')
        try:
            exe(x)
        except rpjrt.ResourceExhaustedError as e:
            print("EXEC", e.entry, e.memory_stats["bytes_in_use"])
            print("EMSG", str(e).replace(chr(10), " | "))
        """,
        env={"RPJRT_FAKE_MEMORY_LIMIT": "4096"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "PUT PJRT_Client_BufferFromHostBuffer 0 {'bytes_in_use': 0," in out, out
    assert "'bytes_limit': 4096" in out and "{'memory_fraction': '0.5'}" in out, out
    assert "HINT the request alone" in out and "memory_fraction=0.5" in out, out
    assert "in use 0 bytes, limit 4.0 KiB (4096 bytes)" in out, out
    assert "request: uint8[8192], 8192 bytes, on device 0" in out, out
    assert "EXEC PJRT_LoadedExecutable_Execute 3000" in out, out
    assert "in use 2.9 KiB (3000 bytes), limit 4.0 KiB (4096 bytes)" in out, out


def test_cpu_plugins_say_why_they_report_no_memory_stats(client: rpjrt.Client) -> None:
    d = client.devices()[0]
    with pytest.raises(UnsupportedError, match="reports no allocator figures.*UNIMPLEMENTED"):
        d.memory_stats()


def test_a_buffer_ready_event_is_future_shaped(client: rpjrt.Client) -> None:
    b = client.put([1.0, 2.0, 3.0], dtype="float32")
    ev = b.ready_event()
    assert isinstance(ev, rpjrt.Event)
    assert ev.wait() is True
    assert ev.wait(timeout=0) is True
    assert ev.is_ready() and ev.done()
    assert ev.error() is None
    assert repr(ev) == "rpjrt.Event(buffer float32[3] ready, done)"
    called = threading.Event()
    seen: list[object] = []

    def done(e: rpjrt.Event) -> None:
        seen.append(e)
        called.set()

    ev.add_done_callback(done)
    assert called.wait(10)
    assert seen == [ev]
    assert asyncio.run(_await(ev)) is None
    with pytest.raises(InvalidArgumentError, match="timeout"):
        ev.wait(timeout=-1)
    with pytest.raises(InvalidArgumentError, match="callable"):
        ev.add_done_callback(3)  # type: ignore[arg-type]


async def _await(ev: rpjrt.Event) -> None:
    return await ev


def test_execute_with_events_returns_the_outputs_and_a_completion_event(
    client: rpjrt.Client,
) -> None:
    exe = client.compile(MUL_ADD)
    x = client.put([1.0, 2.0, 3.0, 4.0], dtype="float32")
    outs, ev = exe.execute_with_events(x, x)
    assert [o.tolist() for o in outs] == [[2.0, 6.0, 12.0, 20.0]]
    # Both CPU plugins hand back completion events.
    assert ev is not None
    assert ev.wait(timeout=30) is True
    assert repr(ev) == "rpjrt.Event(execution of main on device 0, done)"
    assert ev.error() is None


def test_a_failed_event_carries_its_error_to_every_waiter() -> None:
    r = run_python(
        f"""
        import asyncio, threading, rpjrt
        c = rpjrt.Client({str(fake_plugin_path())!r})
        b = c.put(bytes(8))
        ev = b.ready_event()
        print("READY", ev.is_ready(), repr(ev))
        err = ev.error()
        print("ERROR", type(err).__name__, err)
        try:
            ev.wait()
        except rpjrt.InternalError as e:
            print("WAIT", e)
        got = threading.Event()
        ev.add_done_callback(lambda e: (print("CALLBACK", e is ev), got.set()))
        assert got.wait(10)
        async def main():
            await ev
        try:
            asyncio.run(main())
        except rpjrt.InternalError as e:
            print("AWAIT", e)
        """,
        env={"RPJRT_FAKE_EVENT_ERROR": "PJRT_Buffer_ReadyEvent:INTERNAL:boom"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "READY True rpjrt.Event(buffer uint8[8] ready, failed: INTERNAL)" in out, out
    assert "ERROR InternalError" in out and "boom" in out, out
    assert "WAIT" in out and "CALLBACK True" in out and "AWAIT" in out, out
