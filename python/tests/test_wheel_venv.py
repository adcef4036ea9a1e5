"""The wheel alone, in a fresh virtual environment without numpy, runs the stdlib example.

Builds the wheel with maturin unless RPJRT_TEST_WHEEL names one already built (CI builds
once and passes it in).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import EXAMPLES, PYTHON_DIR


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("RPJRT_TEST_WHEEL")
    if given:
        path = Path(given)
        assert path.is_file(), f"RPJRT_TEST_WHEEL={given}: no such file"
        return path
    out = tmp_path_factory.mktemp("wheel")
    maturin = Path(sys.executable).with_name("maturin")
    cmd = [str(maturin) if maturin.exists() else "maturin", "build", "--out", str(out)]
    r = subprocess.run(cmd, cwd=PYTHON_DIR, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-4000:]
    (whl,) = out.glob("rpjrt-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    base = getattr(sys, "_base_executable", None) or sys.executable
    root = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([base, "-m", "venv", str(root)], check=True, timeout=300)
    py = root / "bin" / "python"
    r = subprocess.run(
        [str(py), "-m", "pip", "install", "--no-index", "--disable-pip-version-check", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    return root


def test_wheel_is_abi3_with_no_dependencies(wheel: Path) -> None:
    import zipfile

    assert "-cp310-abi3-" in wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "rpjrt/py.typed" in names and "rpjrt/_rpjrt.pyi" in names
    assert any(n.startswith("rpjrt/_rpjrt") and n.endswith(".so") for n in names)
    requires = [ln for ln in meta.splitlines() if ln.startswith("Requires-Dist:")]
    assert all("extra ==" in ln for ln in requires), requires  # only optional extras
    assert "Requires-Python: >=3.10" in meta


def test_fresh_venv_has_no_numpy(venv: Path) -> None:
    r = subprocess.run([str(venv / "bin" / "python"), "-c", "import numpy"], capture_output=True, timeout=60)
    assert r.returncode != 0


def test_stdlib_hello_in_fresh_venv(venv: Path, plugin_path: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = subprocess.run(
        [str(venv / "bin" / "python"), str(EXAMPLES / "hello_stdlib.py"), plugin_path],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=str(venv),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "a * b + a = [0.0, 3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0]" in r.stdout, r.stdout
    assert "platform: cpu, devices: 4" in r.stdout


def test_console_script_in_fresh_venv(venv: Path, plugin_path: str) -> None:
    r = subprocess.run(
        [str(venv / "bin" / "rpjrt"), "info", plugin_path], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "PJRT" in r.stdout
