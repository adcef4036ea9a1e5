"""Shared fixtures: the two real CPU plugins, clients on each, StableHLO fixtures.

Every plugin-facing test runs on BOTH plugins named in ``.deps/plugins.env`` (written by
``scripts/setup.sh``): xla-cpu-pjrt (PJRT 0.81) and lammps-jax-pjrt-cpu (PJRT 0.115).
The environment variables RPJRT_TEST_PLUGIN_OLD / RPJRT_TEST_PLUGIN_NEW override the file.
A missing plugin is an error, never a skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
REPO = PYTHON_DIR.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXAMPLES = PYTHON_DIR / "examples"
PLUGINS_ENV = REPO / ".deps" / "plugins.env"
PLUGIN_KEYS = {"old": "RPJRT_TEST_PLUGIN_OLD", "new": "RPJRT_TEST_PLUGIN_NEW"}


def _read_plugins_env() -> dict[str, str]:
    values: dict[str, str] = {}
    if PLUGINS_ENV.is_file():
        for line in PLUGINS_ENV.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                values[k.strip()] = v.strip()
    return values


def plugin_paths() -> dict[str, str]:
    """{"old": path, "new": path}; fails the run loudly if either is missing."""
    file_values = _read_plugins_env()
    out = {}
    for label, key in PLUGIN_KEYS.items():
        path = os.environ.get(key) or file_values.get(key)
        if not path:
            pytest.fail(
                f"{key} is not set and not in {PLUGINS_ENV}; run scripts/setup.sh",
                pytrace=False,
            )
        if not Path(path).is_file():
            pytest.fail(f"{key}={path}: no such file; run scripts/setup.sh", pytrace=False)
        out[label] = path
    return out


@pytest.fixture(scope="session")
def plugin_paths_all() -> dict[str, str]:
    return plugin_paths()


@pytest.fixture(scope="session", params=["old", "new"])
def plugin_label(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def plugin_path(plugin_label: str, plugin_paths_all: dict[str, str]) -> str:
    return plugin_paths_all[plugin_label]


@pytest.fixture(scope="session")
def client(plugin_path: str) -> Iterator[object]:
    """A client on each plugin (shared by the session; tests must not close it)."""
    import rpjrt

    c = rpjrt.Client(plugin_path)
    yield c
    c.close()


@pytest.fixture()
def fresh_client(plugin_path: str) -> Iterator[object]:
    """A client of the test's own, which it may close."""
    import rpjrt

    c = rpjrt.Client(plugin_path)
    yield c
    c.close()



_FAKE_BUILT: list[Path] = []


def fake_plugin_path() -> Path:
    """The fake plugin (``crates/rpjrt-fake-plugin``), built once per test session so that it
    is never older than the sources the tests expect."""
    if not _FAKE_BUILT:
        subprocess.run(
            ["cargo", "build", "--locked", "-p", "rpjrt-fake-plugin"], cwd=REPO, check=True
        )
        _FAKE_BUILT.append(REPO / "target" / "debug" / "librpjrt_fake_plugin.so")
    return _FAKE_BUILT[0]

def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def handler_session(client: Any, target: str, handler: Any) -> tuple[Any, Any]:
    """A Session and its one step, `w <- custom_call @target(w)` on f32[4], with `handler`
    registered for the target (for tests of what a handler may do to its own session)."""
    import rpjrt

    rpjrt.ffi.register(client, target, handler)
    s = rpjrt.Session(client)
    step = s.program(
        f"""func.func public @main(%w: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.custom_call @{target}(%w) {{api_version = 4 : i32}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}""",
        inputs=["w"],
        outputs=["w"],
    )
    return s, step


def run_python(
    code: str,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    python: str | None = None,
    cwd: str | Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter (for crash-safety and import-isolation tests)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [python or sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=cwd,
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """A skipped test counts as a failure on this tier (a house rule): turn skips into failures."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, and skips count as failures here: {report.longrepr}"


# Scripts that fork start with this (``WAIT_CHILD + script``): ``wait_child(pid, limit)``
# waits up to ``limit`` seconds for child ``pid`` and gives its exit code, or "HUNG" (the
# child killed).
WAIT_CHILD = """
def wait_child(pid, limit=20):
    import os, time
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "HUNG"
"""


def exit_log_library(tmp_path: Path) -> Path:
    """A shared library whose ``start_log(path)`` registers a C exit handler (``atexit``)
    that writes "ran" to ``path``: whether a process ran its own exit handlers."""
    import shutil

    cc = shutil.which("cc")
    if cc is None:
        pytest.fail("the C compiler `cc` is needed to build the test's exit-handler library")
    src = tmp_path / "exitlog.c"
    src.write_text(
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\nstatic char *out;\n"
        "static void write_log(void) { FILE *f = fopen(out, \"w\"); if (f) { fputs(\"ran\", f); fclose(f); } }\n"
        "void start_log(const char *path) { out = strdup(path); atexit(write_log); }\n"
    )
    lib = tmp_path / "libexitlog.so"
    r = subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return lib
