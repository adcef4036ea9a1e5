"""rpjrt.trace(): rpjrt's own spans around a block, as a Chrome trace; the plugin's own
profile (the Profiler extension: the fake has it, the CPU plugins do not) beside it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import rpjrt

from .conftest import fake_plugin_path, fixture_text, run_python


def test_trace_records_the_phases_and_writes_a_chrome_trace(client, tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    x = np.ones(8, np.float32)
    with rpjrt.trace(path, client=client) as t:
        exe = client.compile(fixture_text("mul_add.mlir"))
        a = client.put(x)
        for _ in range(3):
            out = exe(a, a)[0]
            np.testing.assert_array_equal(out.to_numpy(), x * x + 1)
    assert t.count("compile") == 1
    assert t.count("execute") == 3
    assert t.count("transfer") == 1
    assert t.count("fetch") >= 3
    ev = [e for e in t.events if e["category"] == "execute"]
    assert set(ev[0]) == {"name", "category", "start_us", "duration_us", "thread", "args"}
    assert ev[0]["name"] == "execute" and ev[0]["args"]["devices"] == 1
    assert isinstance(ev[0]["args"]["program"], str)
    put = next(e for e in t.events if e["category"] == "transfer")
    assert put["args"]["bytes"] == 32
    # The CPU plugins have no Profiler extension: noted, not an error.
    note = t.metadata["plugin_profile"]
    assert note.startswith("none: ") and "Profiler extension" in note, note
    assert t.plugin_profile is None
    doc = json.loads(path.read_text())
    assert doc["displayTimeUnit"] == "ms"
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(t.events)
    assert {e["cat"] for e in xs} >= {"compile", "transfer", "execute", "fetch"}
    assert all({"ts", "dur", "pid", "tid"} <= set(e) for e in xs)
    assert not (tmp_path / "t.plugin.xspace.pb").exists()
    assert "execute=3" in repr(t)


def test_trace_without_a_path_keeps_the_events_and_saves_on_request(client, tmp_path: Path) -> None:
    with rpjrt.trace() as t:
        client.put(np.zeros(4, np.float32)).block_until_ready()
        with pytest.raises(RuntimeError, match="still recording"):
            t.events
    assert t.count("transfer") == 1 and t.count("wait") >= 1
    assert t.metadata["plugin_profile"].startswith("none: no client was given")
    t.save(tmp_path / "later.json")
    assert json.loads((tmp_path / "later.json").read_text())["traceEvents"]
    page = t.to_html()
    embedded = page.split('<script id="trace-data" type="application/json">', 1)[1]
    assert json.loads(embedded.split("</script>", 1)[0])["traceEvents"]
    assert isinstance(t.result, rpjrt.Trace) and len(t.result) == len(t.events)


def test_trace_misuse_raises_clear_errors(client) -> None:
    with rpjrt.trace() as t:
        with pytest.raises(rpjrt.FailedPreconditionError, match="already being recorded"):
            with rpjrt.trace():
                pass
    with pytest.raises(rpjrt.InvalidArgumentError, match='unknown trace category "exec": expected one of load, compile'):
        t.count("exec")
    with pytest.raises(RuntimeError, match="already used"):
        with t:
            pass
    # The block's exception passes through, and the trace is still finished.
    with pytest.raises(ZeroDivisionError):
        with rpjrt.trace() as t2:
            client.put(np.zeros(2, np.float32))
            1 / 0
    assert t2.count("transfer") == 1


def test_python_custom_call_handlers_are_spans(client, plugin_label: str) -> None:
    target = f"trace_py_double_{plugin_label}"

    def double(call: rpjrt.ffi.FfiCall) -> None:
        call.rets[0].memoryview()[:] = (np.asarray(call.args[0]) * 2).tobytes()

    rpjrt.ffi.register(client, target, double)
    exe = client.compile(
        "func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {\n"
        f"  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : "
        "(tensor<8xf32>) -> tensor<8xf32>\n  return %0 : tensor<8xf32>\n}"
    )
    x = client.put(np.arange(8, dtype=np.float32))
    with rpjrt.trace() as t:
        out = exe(x)[0].to_numpy()
    np.testing.assert_array_equal(out, np.arange(8) * 2)
    calls = [e for e in t.events if e["category"] == "custom_call"]
    assert len(calls) == 1 and calls[0]["args"]["target"] == target


def test_the_fakes_profile_is_collected_beside_the_trace(tmp_path: Path) -> None:
    r = run_python(
        f"""
        import json, rpjrt
        c = rpjrt.Client({str(fake_plugin_path())!r})
        with rpjrt.trace({str(tmp_path / "fake.json")!r}, client=c) as t:
            c.put(bytes(16))
        print("NOTE", t.metadata["plugin_profile"])
        print("BYTES", len(t.plugin_profile))
        doc = json.load(open({str(tmp_path / "fake.json")!r}))
        print("FILE", doc["otherData"]["plugin_profile_file"])
        print("KERNELS", sum(1 for e in doc["traceEvents"] if e.get("name") == "fake_kernel"))
        """,
        env={"RPJRT_FAKE_EXTENSIONS": "Layouts,FFI,Profiler"},
    )
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert "3 event(s) from plane(s) /device:FAKE:0" in lines["NOTE"], lines
    assert lines["FILE"] == "fake.plugin.xspace.pb"
    assert lines["KERNELS"] == "3"
    beside = tmp_path / "fake.plugin.xspace.pb"
    assert beside.stat().st_size == int(lines["BYTES"]) > 0
