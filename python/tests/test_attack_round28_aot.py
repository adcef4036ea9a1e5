"""Round 28 (AOT, compile cache, tracing, conformance reports): regressions.

- ``rpjrt trace view`` / ``rpjrt._trace_html`` wrote a blank page (its script threw) for a
  trace holding a ``null`` event or a complete event without a ``name``: the page now gets
  only drawable, normalised events, names what it left out, and its script guards itself.
- ``Executable.fingerprint`` answered None after ``client.close()``, after ``delete()`` and
  when the plugin's fingerprint entry failed; those now raise. None is kept for a plugin
  that offers no fingerprint.
- ``Executable.fingerprint`` is documented as what it is (XLA's fingerprint of the program
  module, which need not change with compile options).
- ``rpjrt conform --diff`` compared and printed integers past 64 bits as floats.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rpjrt
import rpjrt._rpjrt

from .browser import BrowserMissing, chromium, render
from .conftest import REPO, fake_plugin_path, run_python

_PROG = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> { return %a : tensor<4xf32> }"
_GOOD = {"name": "execute", "cat": "execute", "ph": "X", "ts": 0, "dur": 100, "pid": 1, "tid": 1}


def _browser() -> None:
    try:
        chromium()
    except BrowserMissing as e:
        pytest.fail(str(e), pytrace=False)


def _rendered(page: Path) -> str:
    """The value of ``body[data-rendered]`` once Chromium ran the page's script, or a
    failure naming what the page shows instead."""
    dom = render(page, None)
    m = re.search(r'data-rendered="(\d+)"', dom)
    assert m, "the page's script did not finish: " + dom[:2000]
    assert not re.search(r"<body[^>]*data-error", dom), dom[:2000]
    return m.group(1)


# --- 1. trace view ---------------------------------------------------------------------

_ODD_TRACES = {
    "null_event": [_GOOD, None],
    "event_without_name": [{k: v for k, v in _GOOD.items() if k != "name"}],
    "event_with_null_name": [dict(_GOOD, name=None)],
    "odd_values": [
        _GOOD, 5, "x", [], {}, {"ph": 3},
        dict(_GOOD, name=7, cat={"a": 1}, pid={"p": 1}, tid=[2], ts=200),
        dict(_GOOD, name="text ts", ts="5"),
        dict(_GOOD, name="negative", dur=-1),
        dict(_GOOD, name="far", ts=1e300, dur=1e300),
        dict(_GOOD, name="__proto__", cat="constructor", ts=300),
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": None},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": None}},
    ],
}


@pytest.mark.parametrize("case", sorted(_ODD_TRACES))
def test_trace_view_draws_a_trace_with_odd_events(case: str, tmp_path: Path) -> None:
    _browser()
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"traceEvents": _ODD_TRACES[case], "otherData": "text"}))
    page = tmp_path / "t.html"
    p = subprocess.run(
        [sys.executable, "-m", "rpjrt", "trace", "view", str(src), "-o", str(page)],
        capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert int(_rendered(page)) >= 1
    # The in-process function gives the same page.
    page2 = tmp_path / "t2.html"
    page2.write_text(rpjrt._rpjrt._trace_html(src.read_text(), "t"))
    assert _rendered(page2) == _rendered(page)


def test_a_skipped_event_is_named_on_the_page(tmp_path: Path) -> None:
    _browser()
    page = tmp_path / "t.html"
    page.write_text(rpjrt._rpjrt._trace_html(json.dumps({"traceEvents": [_GOOD, None]}), "t"))
    dom = render(page, None)
    assert 'data-rendered="1"' in dom
    assert "traceEvents[1] is null, not an event" in dom


def test_the_page_script_survives_odd_events_it_is_handed_directly(tmp_path: Path) -> None:
    """The script guards itself: a page whose embedded data holds raw odd events (as a page
    saved by an older rpjrt, or edited, may) still draws the good ones."""
    _browser()
    page = rpjrt._rpjrt._trace_html("[]", "t")
    raw = json.dumps({"traceEvents": [_GOOD, None, 3, dict(_GOOD, name=None),
                                      {k: v for k, v in _GOOD.items() if k != "name"},
                                      dict(_GOOD, cat="__proto__", name="constructor"),
                                      {"ph": "M", "name": "thread_name", "args": "x"}],
                      "otherData": 5}).replace("<", "\\u003c")
    page = re.sub(
        r'(<script id="trace-data" type="application/json">).*?(</script>)',
        lambda m: m.group(1) + raw + m.group(2), page, count=1, flags=re.S,
    )
    path = tmp_path / "raw.html"
    path.write_text(page)
    assert _rendered(path) == "4"


# --- 2. fingerprint errors -------------------------------------------------------------

def test_fingerprint_after_close_raises_client_closed(plugin_path: str) -> None:
    c = rpjrt.Client(plugin_path)
    e = c.compile(_PROG)
    before = e.fingerprint
    c.close()
    with pytest.raises(rpjrt.ClientClosedError):
        _ = e.fingerprint
    assert before is None or isinstance(before, str)


def test_fingerprint_after_delete_raises_executable_deleted(plugin_path: str) -> None:
    c = rpjrt.Client(plugin_path)
    e = c.compile(_PROG)
    e.delete()
    with pytest.raises(rpjrt.ExecutableDeletedError):
        _ = e.fingerprint
    c.close()


def _fake_fingerprint(env: dict[str, str]) -> str:
    code = f"""
import rpjrt
c = rpjrt.Client({str(fake_plugin_path())!r})
e = c.compile({_PROG!r})
try:
    print("FP", repr(e.fingerprint))
except Exception as ex:
    print("RAISED", type(ex).__name__, ex)
"""
    p = run_python(code, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_a_plugin_error_from_fingerprint_is_raised_not_none() -> None:
    out = _fake_fingerprint({"RPJRT_FAKE_FAIL": "PJRT_Executable_Fingerprint:INTERNAL:disk on fire"})
    assert out.startswith("RAISED"), out
    assert "disk on fire" in out, out


def test_a_plugin_without_fingerprints_still_gives_none() -> None:
    out = _fake_fingerprint({"RPJRT_FAKE_FAIL": "PJRT_Executable_Fingerprint:UNIMPLEMENTED:none here"})
    assert out == "FP None", out


# --- 3. fingerprint docs ---------------------------------------------------------------

def test_fingerprint_is_documented_as_the_program_module_fingerprint() -> None:
    stub = (REPO / "python" / "rpjrt" / "_rpjrt.pyi").read_text()
    at = stub.index("def fingerprint(self) -> str | None:")
    doc = stub[at: at + 800]
    assert "compiled code" not in doc.split("does not identify")[0], doc
    assert "program module" in doc and "compile options" in doc, doc
    rust = (REPO / "crates" / "rpjrt" / "src" / "client" / "executable.rs").read_text()
    assert "A fingerprint of the compiled code" not in rust
    assert "program" in rust[rust.index("PJRT_Executable_Fingerprint"):][:400]
    assert "compile options" in (REPO / "docs" / "compile-once.md").read_text()


def test_one_program_with_other_options_shares_the_fingerprint(plugin_paths_all: dict[str, str]) -> None:
    """What the docs now say: the value is the program's, not the compiled code's."""
    prog = """
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  %1 = stablehlo.subtract %0, %b : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""
    c = rpjrt.Client(plugin_paths_all["old"])
    plain = c.compile(prog)
    fast = c.compile(prog, env_option_overrides={"xla_cpu_enable_fast_math": True})
    assert plain.fingerprint == fast.fingerprint
    c.close()


# --- 4. conform --diff with wide integers ----------------------------------------------

_REPORT = {
    "schema": "rpjrt-conform", "schema_version": 2, "rpjrt_version": "0.1.0",
    "plugin": {"path": "/x/plugin.so", "pjrt_version": "0.81", "table_size": 984,
               "table_slots": 118, "attributes": {}, "extensions": []},
    "summary": {"pass": 1, "fail": 0, "unsupported": 0, "blocked": 0, "crash": 0, "timeout": 0},
    "results": [{"name": "devices.memory_stats", "group": "devices", "outcome": "pass",
                 "unsupported_by": None, "blocked_by": None, "detail": "",
                 "facts": {"bytes_limit": 0}, "duration_ms": 0.1, "stderr": ""}],
}


def _report(tmp_path: Path, name: str, value: object) -> Path:
    r = copy.deepcopy(_REPORT)
    r["results"][0]["facts"]["bytes_limit"] = value
    p = tmp_path / name
    p.write_text(json.dumps(r))
    return p


def _diff(a: Path, b: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rpjrt.conform", "--diff", str(a), str(b), *extra],
        capture_output=True, text=True, timeout=120,
    )


def test_diff_tells_integers_past_64_bits_apart(tmp_path: Path) -> None:
    a = _report(tmp_path, "a.json", 18446744073709551616)
    b = _report(tmp_path, "b.json", 18446744073709551617)
    p = _diff(a, b, "--json", "-")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)["differences"]
    assert d == [{"a": 18446744073709551616, "b": 18446744073709551617,
                  "what": "check devices.memory_stats: bytes_limit"}]
    text = _diff(a, b)
    assert "A: 18446744073709551616" in text.stdout and "B: 18446744073709551617" in text.stdout
    same = _diff(a, _report(tmp_path, "a2.json", 18446744073709551616), "--json", "-")
    assert json.loads(same.stdout)["differences"] == []


def test_diff_shows_a_wide_negative_integer_as_written(tmp_path: Path) -> None:
    c = _report(tmp_path, "c.json", -9223372036854775809)
    e = _report(tmp_path, "e.json", 5)
    out = tmp_path / "d.json"
    p = _diff(c, e, "--json", str(out))
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["differences"][0]["a"] == -9223372036854775809
    text = _diff(c, e).stdout
    assert "A: -9223372036854775809" in text and "e+18" not in text
