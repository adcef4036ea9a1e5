"""Round 27 of outside checks (the CLI and compile-once), from Python: a compile-cache
entry above RPJRT_MAX_FILE_BYTES is a miss, so an executable from the cache can always be
serialized; a /proc file handed to Client.compile is read, not said to have "grown"; and
the console script refuses a stdout that is one of its input files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import rpjrt

from .conftest import run_python

_ADD = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.add %x, %x : tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""


def test_an_entry_above_the_read_bound_is_a_miss_and_serializes(plugin_path: str, tmp_path: Path) -> None:
    """A hit on such an entry was served, then exe.serialize() (which reads the entry
    again, bounded) raised "cannot be read any more"."""
    code = f"""
import json, os, warnings, rpjrt
warnings.simplefilter("always")
caught = warnings.catch_warnings(record=True)
seen = caught.__enter__()
c = rpjrt.Client({plugin_path!r}, cache_dir={str(tmp_path / "c")!r})
text = {_ADD!r}
first = c.compile(text).serialize()
os.environ["RPJRT_MAX_FILE_BYTES"] = "1K"
exe = c.compile(text)
again = exe.serialize()
stats = c.cache.stats()
c.load(again)
print(json.dumps({{"same": len(first) > 0 and len(again) > 0, "hits": stats["hits"],
                   "warnings": c.cache.take_warnings() + [str(w.message) for w in seen]}}))
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["same"] and doc["hits"] == 0, doc
    assert any("not reading an entry" in w and "RPJRT_MAX_FILE_BYTES" in w for w in doc["warnings"]), doc
    assert any("it is not kept" in w for w in doc["warnings"]), doc


def test_a_proc_file_is_read_not_called_grown(plugin_path: str) -> None:
    c = rpjrt.Client(plugin_path)
    try:
        for p in ["/proc/cpuinfo", "/proc/self/status"]:
            try:
                c.compile(Path(p))
            except Exception as e:  # noqa: BLE001 - any error, as long as it is the right one
                msg = str(e)
                assert "grew past" not in msg and "once it is written" not in msg, msg
            else:
                raise AssertionError(f"{p} compiled")
    finally:
        c.close()


def test_console_script_refuses_a_stdout_that_is_its_input(plugin_path: str, tmp_path: Path) -> None:
    prog = tmp_path / "prog.mlir"
    prog.write_text(_ADD)
    for args in (["compile", str(prog), "-o", "-", "--plugin", plugin_path], ["run", str(prog), "--plugin", plugin_path, "-i", "[1,2,3]"]):
        before = prog.read_bytes()
        with open(prog, "ab") as out:
            r = subprocess.run(
                [sys.executable, "-m", "rpjrt", *args], stdout=out, stderr=subprocess.PIPE, text=True, timeout=120
            )
        assert r.returncode == 2, r.stderr
        assert "stdout is the input file" in r.stderr, r.stderr
        assert prog.read_bytes() == before
