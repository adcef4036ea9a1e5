"""Round 26 (the CLI and compile-once) through Python: a huge file given as a path to
``Client.compile``, ``Client.load(..., bare=True)``, ``artifact_stablehlo_version``,
``OpSharding.from_bytes`` or ``python -m rpjrt compile`` is refused before it is read (it
aborted the interpreter); ``env_option_overrides`` encode to the same bytes every time, so
one program with one set of options has one cache key; an entry larger than the cache's
bound is said not to be kept; a link at the plugin-build memo is not written through; and
``python -m rpjrt compile -o X --cache-dir X`` is refused up front.

Each check that could abort, or that needs fresh hash seeds, runs in a fresh interpreter (a
subprocess, bounded by a timeout). Huge files are sparse (no disk used).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import plugin_paths

TIMEOUT = 120

ADD = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.add %x, %x : tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""

OVERRIDES = {
    "xla_cpu_enable_fast_math": False,
    "xla_cpu_fast_math_honor_nans": True,
    "xla_cpu_fast_math_honor_infs": True,
}


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full,
        timeout=TIMEOUT,
    )


def _new() -> str:
    return plugin_paths()["new"]


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


# --- 1: huge files ------------------------------------------------------------------------


def test_python_entry_points_refuse_a_huge_file_before_reading_it(tmp_path):
    big = _sparse(tmp_path / "big.mlir", 100 << 30)
    code = f"""
        import pathlib, rpjrt
        big = pathlib.Path({str(big)!r})
        c = rpjrt.Client({_new()!r})
        calls = {{
            "compile": lambda: c.compile(big),
            "load bare": lambda: c.load(big, bare=True),
            "artifact_stablehlo_version": lambda: rpjrt.artifact_stablehlo_version(big),
            "OpSharding.from_bytes": lambda: rpjrt.OpSharding.from_bytes(big),
        }}
        for name, call in calls.items():
            try:
                call()
            except rpjrt.InvalidArgumentError as e:
                print(name, "::", e)
            else:
                print(name, ":: no error")
    """
    p = _python(code)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = dict(line.split(" :: ", 1) for line in p.stdout.splitlines() if " :: " in line)
    assert set(lines) == {"compile", "load bare", "artifact_stablehlo_version", "OpSharding.from_bytes"}, p.stdout
    for name, msg in lines.items():
        assert "107374182400 bytes (100.0 GiB)" in msg, (name, msg)
        assert "RPJRT_MAX_FILE_BYTES" in msg, (name, msg)
    assert "16777216 bytes (16.0 MiB)" in lines["OpSharding.from_bytes"]
    assert "4294967296 bytes (4.0 GiB)" in lines["compile"]


def test_an_opsharding_file_within_its_bound_is_read(tmp_path):
    # A bound for what the file is, not a refusal of every file: a small file is decoded
    # (and refused as no OpSharding by the decoder, not by its size).
    f = tmp_path / "s.pb"
    f.write_bytes(b"\xff\xff\xff")
    code = f"""
        import pathlib, rpjrt
        try:
            rpjrt.OpSharding.from_bytes(pathlib.Path({str(f)!r}))
        except rpjrt.InvalidArgumentError as e:
            print("refused:", e)
    """
    p = _python(code)
    assert p.returncode == 0, p.stderr
    assert "refused:" in p.stdout and "larger than" not in p.stdout, p.stdout


def test_python_m_rpjrt_compile_refuses_a_huge_program(tmp_path):
    big = _sparse(tmp_path / "big.mlir", 100 << 30)
    p = subprocess.run(
        [sys.executable, "-m", "rpjrt", "compile", str(big), "-o", str(tmp_path / "o.rpjrt"),
         "--plugin", _new()],
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert p.returncode == 2, p.stdout + p.stderr
    assert "107374182400 bytes (100.0 GiB)" in p.stderr, p.stderr
    assert "SIGABRT" not in p.stderr and "crashed" not in p.stderr, p.stderr


# --- 2: deterministic options, one cache key ----------------------------------------------


@pytest.mark.parametrize("label", ["old", "new"])
def test_overrides_give_one_cache_key_across_compiles_and_processes(tmp_path, label):
    # The PJRT 0.81 plugin has no PJRT_Executable_GetCompileOptions: `compile_options()`
    # is then the bytes rpjrt encoded, which must be one byte string. (The 0.115 plugin
    # answers with its own encoding, whose map order is XLA's, not rpjrt's.)
    cache_dir = tmp_path / "cache"
    plugin = plugin_paths()[label]
    code = f"""
        import json, warnings, rpjrt
        warnings.simplefilter("ignore")
        c = rpjrt.Client({plugin!r})
        cache = rpjrt.Cache({str(cache_dir)!r})
        opts = set()
        for ov in ({OVERRIDES!r}, dict(reversed(list({OVERRIDES!r}.items()))), {OVERRIDES!r}):
            e = c.compile({ADD!r}, env_option_overrides=ov, cache=cache)
            opts.add(e.compile_options())
        s = cache.stats()
        print(json.dumps({{"hits": s["hits"], "misses": s["misses"], "options": len(opts)}}))
    """
    results = []
    for seed in ("1", "2", "3"):
        p = _python(code, {"PYTHONHASHSEED": seed})
        assert p.returncode == 0, p.stdout + p.stderr
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    counts = [(r["hits"], r["misses"]) for r in results]
    assert counts == [(2, 1), (3, 0), (3, 0)], results
    if label == "old":
        assert all(r["options"] == 1 for r in results), results
    entries = [f for f in os.listdir(cache_dir) if f.endswith(".rpjrtexe")]
    assert len(entries) == 1, entries


# --- 8b: an entry larger than the bound ---------------------------------------------------


def test_an_entry_larger_than_the_bound_is_said_not_to_be_kept(tmp_path):
    cache_dir = tmp_path / "cache"
    code = f"""
        import warnings, rpjrt
        c = rpjrt.Client({_new()!r})
        cache = rpjrt.Cache({str(cache_dir)!r}, max_bytes=1000)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            c.compile({ADD!r}, cache=cache)
        print("WARN", [str(x.message) for x in w])
        print("WRITES", cache.stats()["writes"])
    """
    p = _python(code)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "is larger than the cache's bound (1000 bytes" in p.stdout, p.stdout
    assert "WRITES 0" in p.stdout, p.stdout
    assert not [f for f in os.listdir(cache_dir) if f.endswith(".rpjrtexe")]


# --- 3: the plugin-build memo -------------------------------------------------------------


def test_a_link_at_the_build_memo_is_not_written_through(tmp_path):
    cache_dir = tmp_path / "cache"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    code = f"""
        import warnings, rpjrt
        warnings.simplefilter("ignore")
        c = rpjrt.Client({_new()!r}, cache_dir={str(cache_dir)!r})
        c.compile({ADD!r})
    """
    p = _python(code)
    assert p.returncode == 0, p.stderr
    memos = [f for f in os.listdir(cache_dir) if f.startswith(".rpjrt-build-")]
    assert len(memos) == 1, os.listdir(cache_dir)
    memo = cache_dir / memos[0]
    memo.unlink()
    memo.symlink_to("../victim.txt")
    p = _python(code)
    assert p.returncode == 0, p.stderr
    assert victim.read_text() == "keep me\n"
    assert not memo.is_symlink() and memo.is_file()


# --- 7: an output that is the cache directory ---------------------------------------------


def test_python_m_rpjrt_compile_refuses_an_output_that_is_the_cache_dir(tmp_path):
    prog = tmp_path / "add.mlir"
    prog.write_text(ADD)
    x = tmp_path / "x"
    env = dict(os.environ)
    env.pop("RPJRT_CACHE_DIR", None)
    p = subprocess.run(
        [sys.executable, "-m", "rpjrt", "compile", str(prog), "-o", str(x), "--plugin", _new(),
         "--cache-dir", str(x)],
        capture_output=True, text=True, timeout=TIMEOUT, env=env,
    )
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"--output {x} and --cache-dir {x} name the same path" in p.stderr, p.stderr
    assert not x.exists()
