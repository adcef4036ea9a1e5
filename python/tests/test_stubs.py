"""The type stubs match the extension at runtime and type-check real use."""

from __future__ import annotations

import os
import subprocess
import sys

from .conftest import PYTHON_DIR


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=PYTHON_DIR, capture_output=True, text=True, timeout=600
    )


def test_stubtest() -> None:
    r = _run("-m", "mypy.stubtest", "rpjrt", "--allowlist", "stubtest-allowlist.txt")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_mypy_strict_package_and_usage() -> None:
    r = _run("-m", "mypy", "--strict", "rpjrt", "tests/typing_usage.py")
    assert r.returncode == 0, r.stdout[-4000:]


def test_mypy_rejects_misuse() -> None:
    bad = "import rpjrt\nc = rpjrt.Client()\nc.put(1, copy='yes')\nc.compile(42)\nx: int = c.devices()\n"
    r = _run("-m", "mypy", "--config-file", os.devnull, "--strict", "-c", bad)
    assert r.returncode == 1
    assert r.stdout.count("error:") >= 3, r.stdout
