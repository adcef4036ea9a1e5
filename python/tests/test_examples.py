"""The examples run on both plugins and print what they promise."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import EXAMPLES

EXPECT = {
    "hello_stdlib.py": "a * b + a = [0.0, 3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0]",
    "numpy_example.py": "bfloat16: bfloat16 [1 3 -4 6.5]",
    "jax_lowered.py": "jax.export: max |rpjrt - jax|",
    "multi_device.py": "cpu:1 [11.0, 22.0, 33.0, 44.0]",
    "dlpack_interop.py": "adopted: rpjrt.Buffer(",
    "async_example.py": "[49.0, 49.0, 49.0, 49.0]",
    "ffi_example.py": "jax.ffi.ffi_call via rpjrt: [36.0, 45.0, 54.0, 63.0]",
    "training_loop.py": "restored: identical",
    "compile_once.py": "cache hit: compiled once, loaded from cache",
    "sharded.py": "reassembled total: -336.0 == numpy: -336.0",
}


def test_every_example_is_covered() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECT)


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_example(name: str, plugin_path: str) -> None:
    r = subprocess.run(
        [sys.executable, str(EXAMPLES / name), plugin_path], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert EXPECT[name] in r.stdout, r.stdout
