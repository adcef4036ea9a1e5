"""Round 23 (command line) through Python: ``rpjrt._cli.main`` takes a list of arguments and
refuses one string instead of running the verb its first letter names, and an argument
holding a NUL byte is a usage error naming the argument, not a failure to start a child.

Both checks run in a fresh interpreter (a subprocess, bounded by a timeout), as the console
script does; they stop before the tool runs, so they hold for any built extension.
"""

from __future__ import annotations

import subprocess
import sys

TIMEOUT = 120


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def test_main_refuses_one_string_for_its_arguments():
    p = _python(
        "from rpjrt._cli import main\n"
        "try:\n"
        "    main('plugins')\n"
        "except TypeError as e:\n"
        "    print('TypeError:', e)\n"
        "else:\n"
        "    print('ran')\n"
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("TypeError:"), p.stdout + p.stderr
    assert "takes a list of arguments, not one str" in p.stdout, p.stdout
    assert "main(['plugins'])" in p.stdout, p.stdout
    # Nothing ran: no verb `p`, no listing.
    assert "ran" not in p.stdout.splitlines()[-1], p.stdout


def test_main_refuses_bytes_for_its_arguments():
    p = _python(
        "from rpjrt._cli import main\n"
        "try:\n"
        "    main(b'info')\n"
        "except TypeError as e:\n"
        "    print('TypeError:', e)\n"
    )
    assert p.returncode == 0, p.stderr
    assert "takes a list of arguments, not one bytes" in p.stdout, p.stdout + p.stderr


def test_an_argument_with_a_nul_byte_is_a_usage_error_naming_it():
    for arg in ("'a\\x00b'", "b'a\\x00b'"):
        p = _python(f"from rpjrt._cli import main\nprint('rc', main(['info', {arg}]))\n")
        assert p.returncode == 0, p.stderr
        assert p.stdout.strip().endswith("rc 2"), (arg, p.stdout, p.stderr)
        assert "argument 2" in p.stderr and "holds a NUL byte" in p.stderr, (arg, p.stderr)
        # Not blamed on starting a child process, nor advising to turn supervision off.
        assert "child process" not in p.stderr, p.stderr
        assert "RPJRT_CLI_SUPERVISED" not in p.stderr, p.stderr
