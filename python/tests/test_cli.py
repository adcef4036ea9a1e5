"""The `rpjrt` console script runs the same CLI as the Rust binary."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import run_python


def test_python_m_rpjrt_help() -> None:
    r = subprocess.run([sys.executable, "-m", "rpjrt", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Usage: rpjrt" in r.stdout and "info" in r.stdout


def test_console_script_info(plugin_path: str, plugin_label: str) -> None:
    exe = shutil.which("rpjrt", path=os.path.dirname(sys.executable))
    assert exe, "the rpjrt console script is not installed next to this interpreter"
    r = subprocess.run([exe, "info", plugin_path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ("0.81" if plugin_label == "old" else "0.115") in r.stdout


def test_console_script_finds_plugin_wheels_itself() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RPJRT_PLUGIN"}
    r = subprocess.run([sys.executable, "-m", "rpjrt", "info"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "PJRT" in r.stdout


def test_cli_errors_are_exit_codes_not_crashes() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "info", "/nonexistent/plugin.so"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1 and "rpjrt:" in r.stderr
    r = subprocess.run([sys.executable, "-m", "rpjrt", "no-such-command"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2


def test_import_does_not_pull_numpy(plugin_path: str) -> None:
    r = run_python(
        f"""
        import array, sys
        import rpjrt
        with rpjrt.Client({plugin_path!r}) as c:
            b = c.put(array.array("f", [1, 2, 3]))
            assert b.to_host().tolist() == [1.0, 2.0, 3.0]
            assert b.tolist() == [1.0, 2.0, 3.0] and b.dtype == "float32"
        assert "numpy" not in sys.modules, "numpy was imported"
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_python_m_rpjrt_conform_runs_isolated_checks(plugin_path: str, tmp_path: Path) -> None:
    # The console script's process is the interpreter: conform's children are started as
    # `python -m rpjrt conform-child ...`, and a crash in one is still isolated.
    report = tmp_path / "report.json"
    env = dict(os.environ, RPJRT_CONFORM_TEST_CRASH="buffers.scalar")
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt.conform", plugin_path, "--only", "api.version,buffers.s*", "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 1, r.stderr
    doc = json.loads(report.read_text())
    assert doc["schema"] == "rpjrt-conform" and doc["schema_version"] == 1
    outcomes = {x["name"]: x["outcome"] for x in doc["results"]}
    assert outcomes["buffers.scalar"] == "crash"
    assert outcomes["api.version"] == "pass"
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "conform", plugin_path, "--only", "api.*", "--json", "-"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["summary"]["fail"] == 0


def test_console_script_plugins_and_info_by_name(plugin_paths_all: dict[str, str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RPJRT_PLUGIN", "VIRTUAL_ENV", "RPJRT_PLUGIN_PATH")}
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "plugins", "--json"], capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode == 0, r.stderr
    found = {os.path.realpath(p["path"]): p for p in json.loads(r.stdout)["plugins"]}
    # The CLI finds what Python's discovery finds, through the same Rust code.
    assert found[os.path.realpath(plugin_paths_all["old"])]["source"] == "entry point xla_plugins:xla_cpu_pjrt"
    assert found[os.path.realpath(plugin_paths_all["new"])]["source"] == "package lammps-jax-pjrt-cpu"
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "info", "lammps-jax-pjrt-cpu"], capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode == 0, r.stderr
    assert "0.115" in r.stdout
