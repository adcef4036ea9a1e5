"""Round 22 (compile cache, artifacts): defects found by outside checks, and the classes
behind them.

A. The compile-cache key hashed the text of ``XLA_FLAGS`` at each compile, not the flags
   XLA compiled with: XLA reads them once per plugin library, when its first client is
   created, and from a file when the value does not start with ``-``. An emptied flags file
   kept the key (the path's text), and flags removed from the environment after the client
   existed moved the key while XLA kept compiling with them: later processes were served
   fast-math builds. The key now covers the flags taken when the plugin's first client was
   created, a flags file's contents included.
B. ``plugin_build`` hashed only the library's size and its first and last 64 KiB. It is now
   SHA-256 over every byte (with a domain prefix), computed at first need and remembered
   per cache directory in a memo file named by the library's identity.
C. ``client.load(art, overrides={"portable": True})`` was always refused: rpjrt copied the
   artifact's recorded device assignment into the overrides, which the plugins refuse with
   ``portable``. Overrides that choose devices are no longer mixed with the recorded ones;
   overrides that contradict each other are refused in rpjrt's words.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import rpjrt

from .conftest import run_python

PROBE = """func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.subtract %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""

ADD = """func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""

FAST = [
    "--xla_cpu_enable_fast_math=true",
    "--xla_cpu_fast_math_honor_nans=false",
    "--xla_cpu_fast_math_honor_infs=false",
]


def _probe(plugin_path: str, cache: Path, env: dict[str, str], after: str = "") -> tuple[int, int, int]:
    """Runs ``PROBE`` on ``[nan, inf, -1, 2]`` through the cache ``cache`` in a fresh
    process with ``env`` (``after`` runs once the client exists): (NaNs out, hits, misses).
    Without fast math two NaNs come out; with the FAST flags none."""
    code = f"""
        import os, numpy as np, rpjrt
        c = rpjrt.Client({plugin_path!r}, cache_dir={str(cache)!r})
        {after}
        exe = c.compile({PROBE!r})
        out = exe(np.array([np.nan, np.inf, -1, 2], np.float32))[0].to_numpy()
        s = c.cache.stats()
        print("R22", int(np.isnan(out).sum()), s["hits"], s["misses"])
        """
    full = {"XLA_FLAGS": "", **env}
    r = run_python(code, env=full, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    line = next(l for l in r.stdout.splitlines() if l.startswith("R22 "))
    nans, hits, misses = (int(x) for x in line.split()[1:])
    return nans, hits, misses


def test_a_flags_file_is_keyed_by_its_contents(plugin_path: str, tmp_path: Path) -> None:
    flags = tmp_path / "xla.flags"
    cache = tmp_path / "cache"
    env = {"XLA_FLAGS": str(flags)}
    flags.write_text("\n".join(FAST) + "\n")
    assert _probe(plugin_path, cache, env) == (0, 0, 1)
    flags.write_text("")
    # Was (0, 1, 0): the fast-math build served to a process without flags.
    assert _probe(plugin_path, cache, env) == (2, 0, 1)
    flags.write_text("\n".join(FAST) + "\n")
    assert _probe(plugin_path, cache, env) == (0, 1, 0)


def test_flags_changed_after_the_first_client_do_not_move_the_key(plugin_path: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    fast = " ".join(FAST)
    # Compiled under the flags (XLA read them when the client was created), keyed so.
    removed = 'os.environ.pop("XLA_FLAGS")'
    assert _probe(plugin_path, cache, {"XLA_FLAGS": fast}, after=removed) == (0, 0, 1)
    # Was (0, 1, 0): that build had been stored under the key without flags.
    assert _probe(plugin_path, cache, {}) == (2, 0, 1)
    # Flags set after the client are not XLA's and not the key's: the plain entry hits.
    late = f'os.environ["XLA_FLAGS"] = {fast!r}'
    assert _probe(plugin_path, cache, {}, after=late) == (2, 1, 0)
    # And the flags given from the start find the first entry.
    assert _probe(plugin_path, cache, {"XLA_FLAGS": fast}) == (0, 1, 0)


def test_plugin_build_is_a_hash_of_the_whole_library(client: rpjrt.Client, plugin_path: str) -> None:
    h = hashlib.sha256(b"rpjrt plugin build v2\0")
    with open(plugin_path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    assert client.artifact_target()["plugin_build"] == h.hexdigest()[:16]


def test_the_build_is_remembered_in_the_cache_directory(plugin_path: str, tmp_path: Path) -> None:
    code = f"""
        import rpjrt
        c = rpjrt.Client({plugin_path!r}, cache_dir={str(tmp_path)!r})
        print("R22", c.artifact_target()["plugin_build"])
        """
    r = run_python(code, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    build = r.stdout.split("R22 ")[1].split()[0]
    memos = [p for p in tmp_path.iterdir() if p.name.startswith(".rpjrt-build-")]
    assert len(memos) == 1, [p.name for p in tmp_path.iterdir()]
    ident = memos[0].name[len(".rpjrt-build-") :]
    check = hashlib.sha256(f"{ident} {build}".encode()).hexdigest()[:16]
    assert memos[0].read_text() == f"{build} {check}\n"
    # A planted memo with a valid check is believed: the library was not hashed again.
    planted = "0123456789abcdef"
    check = hashlib.sha256(f"{ident} {planted}".encode()).hexdigest()[:16]
    memos[0].write_text(f"{planted} {check}\n")
    r = run_python(code, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"R22 {planted}" in r.stdout
    # A damaged one is not, and is rewritten.
    memos[0].write_text(f"{planted} 0000000000000000\n")
    r = run_python(code, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"R22 {build}" in r.stdout
    assert memos[0].read_text().startswith(f"{build} ")


@pytest.fixture()
def four(plugin_path: str) -> rpjrt.Client:
    return rpjrt.Client(plugin_path, options={"cpu_device_count": 4})


def _run(c: rpjrt.Client, exe: rpjrt.Executable, device: int) -> int:
    """Runs ``ADD`` on ones on ``device`` (named for a portable executable); the output's
    device id."""
    d = c.devices()[device]
    x = c.put(np.ones(4, np.float32), d)
    portable = not exe.addressable_devices()
    out = exe(x, x, device=d if portable else None)[0]
    np.testing.assert_array_equal(out.to_numpy(), np.full(4, 2, np.float32))
    return int(out.device.id)


def test_load_with_portable_override(four: rpjrt.Client) -> None:
    for art in [
        four.compile(ADD, device=four.devices()[3]).serialize(),
        four.compile(ADD).serialize(),
        four.compile(ADD, portable=True).serialize(),
    ]:
        exe = four.load(art, overrides={"portable": True})
        assert exe.addressable_devices() == []
        assert _run(four, exe, 1) == 1
        assert _run(four, exe, 2) == 2
        exe = four.load(art, overrides={"device_ordinal": 1})
        assert _run(four, exe, 1) == 1


def test_load_overrides_that_contradict_are_refused_in_rpjrts_words(four: rpjrt.Client) -> None:
    art = four.compile(ADD, device=four.devices()[3]).serialize()
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"portable=true and device_ordinal 1, which contradict"):
        four.load(art, overrides={"portable": True, "device_ordinal": 1})
    # The compiled counts are named, not the rows of an assignment the caller never gave.
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"compiled for 1 replica\(s\) x 1 partition\(s\)") as e:
        four.load(art, overrides={"num_replicas": 2})
    assert "device_assignment has" not in str(e.value)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"compiled for 1 replica\(s\) x 1 partition\(s\)"):
        four.load(art, overrides={"num_partitions": 2, "device_ordinal": 1})
    # Without a placing override the recorded device stays.
    assert _run(four, four.load(art, overrides={}), 3) == 3
    assert _run(four, four.load(art, overrides={"device_ordinal": -1}), 3) == 3
