"""Round 24 (command line) through Python: ``RPJRT_PLUGIN_TIMEOUT`` that is not UTF-8 is
refused as a bad value (it was taken for unset: no limit, so a hanging plugin was waited on
for ever), and ``rpjrt._cli.main`` takes ``pathlib.Path`` and ``bytes`` arguments (they
raised a ``TypeError`` naming no argument), while another type is a ``TypeError`` naming
the argument.

Each check runs in a fresh interpreter (a subprocess, bounded by a timeout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .conftest import fake_plugin_path, plugin_paths

TIMEOUT = 120


def _python_env(code: str, env: dict[bytes, bytes]) -> subprocess.CompletedProcess[str]:
    full = dict(os.environb)
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full,
        timeout=TIMEOUT,
    )


def test_a_non_utf8_plugin_timeout_is_refused_not_taken_for_unset():
    fake = str(fake_plugin_path())
    code = (
        "import rpjrt\n"
        "try:\n"
        f"    rpjrt.Client({fake!r})\n"
        "except rpjrt.InvalidArgumentError as e:\n"
        "    print('refused:', e)\n"
    )
    p = _python_env(
        code,
        {b"RPJRT_PLUGIN_TIMEOUT": b"1\xff", b"RPJRT_FAKE_HANG_ON": b"GetPjrtApi"},
    )
    assert p.returncode == 0, p.stderr
    assert "refused:" in p.stdout, p.stdout + p.stderr
    assert "RPJRT_PLUGIN_TIMEOUT must be a number of seconds" in p.stdout, p.stdout
    assert "not UTF-8" in p.stdout, p.stdout


def test_the_cli_refuses_a_non_utf8_plugin_timeout():
    fake = str(fake_plugin_path())
    code = f"from rpjrt._cli import main\nprint('rc', main(['info', {fake!r}]))\n"
    p = _python_env(
        code,
        {b"RPJRT_PLUGIN_TIMEOUT": b"\xff2", b"RPJRT_FAKE_HANG_ON": b"GetPjrtApi"},
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith("rc 2"), p.stdout + p.stderr
    assert "RPJRT_PLUGIN_TIMEOUT" in p.stderr, p.stderr


def test_main_takes_paths_and_bytes_as_arguments():
    new = plugin_paths()["new"]
    code = (
        "import os, pathlib\n"
        "from rpjrt._cli import main\n"
        f"print('rc', main(['info', pathlib.Path({new!r}), '--json']))\n"
        f"print('rc', main([b'info', os.fsencode({new!r}), b'--json']))\n"
    )
    p = _python_env(code, {})
    assert p.returncode == 0, p.stderr
    assert "TypeError" not in p.stdout + p.stderr, p.stdout + p.stderr
    assert [line for line in p.stdout.splitlines() if line.startswith("rc ")] == [
        "rc 0",
        "rc 0",
    ], p.stdout + p.stderr
    # Each printed the plugin's information as JSON.
    text = p.stdout
    first = json.JSONDecoder().raw_decode(text[text.index("{") :])[0]
    assert first["platform"] == "cpu", first


def test_main_names_an_argument_of_another_type():
    code = (
        "from rpjrt._cli import main\n"
        "try:\n"
        "    main(['info', 3])\n"
        "except TypeError as e:\n"
        "    print('TypeError:', e)\n"
    )
    p = _python_env(code, {})
    assert p.returncode == 0, p.stderr
    assert "TypeError: rpjrt._cli.main: argument 2, 3, is a int" in p.stdout, p.stdout
