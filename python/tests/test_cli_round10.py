"""Round-10 audit of the Python entry points of the CLI (`python -m rpjrt`, the `rpjrt`
console script): a stdout or stderr closed at start is reported as the Rust binary
reports it (never a traceback), and the "not found" search list names each directory once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "crates" / "rpjrt" / "tests" / "fixtures" / "mul_add.mlir"
CLOSED_STDOUT = "descriptor 1 was closed when rpjrt started"


def _console_script() -> str:
    exe = shutil.which("rpjrt", path=os.path.dirname(sys.executable))
    assert exe, "the rpjrt console script is not installed next to this interpreter"
    return exe


ENTRY_POINTS = {
    "python -m rpjrt": [sys.executable, "-m", "rpjrt"],
    "console script": None,  # filled in lazily: it must exist
}


def _command(name: str) -> list[str]:
    return ENTRY_POINTS[name] or [_console_script()]


def _run_closing(fd: int, cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    """Runs `cmd` with descriptor `fd` closed, as `cmd >&-` (fd 1) or `cmd 2>&-` (fd 2)."""
    redirect = ">&-" if fd == 1 else "2>&-"
    return subprocess.run(
        ["bash", "-c", f'"$@" {redirect}', "bash", *cmd],
        capture_output=True,
        text=True,
        timeout=120,
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_stdout_closed_at_start_fails_as_the_binary_does(entry: str, plugin_path: str) -> None:
    r = _run_closing(1, [*_command(entry), "info", plugin_path])
    assert r.returncode == 1, r.stderr
    assert CLOSED_STDOUT in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "AttributeError" not in r.stderr, r.stderr
    # Another verb: the same failure.
    r = _run_closing(1, [*_command(entry), "plugins"])
    assert r.returncode == 1 and CLOSED_STDOUT in r.stderr, r.stderr


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_closed_stdout_is_not_passed_on_to_a_redirected_run(entry: str, plugin_path: str) -> None:
    # `>/dev/null` asks for the output to be dropped: success.
    r = subprocess.run(
        [*_command(entry), "info", plugin_path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_stderr_closed_at_start_keeps_the_exit_code_and_the_output(entry: str, plugin_path: str) -> None:
    # A usage error: the message is lost with stderr, the exit code is the binary's.
    r = _run_closing(2, [*_command(entry), "info", "nosuchplugin"])
    assert r.returncode == 2, (r.returncode, r.stdout)
    # Success: the output arrives whole.
    r = _run_closing(2, [*_command(entry), "info", plugin_path, "--json"])
    assert r.returncode == 0
    assert r.stdout.lstrip().startswith("{") and '"pjrt_version"' in r.stdout, r.stdout


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("verb", ["info", "run"])
def test_the_search_list_names_each_directory_once(entry: str, verb: str) -> None:
    args = ["info", "nosuchplugin"] if verb == "info" else ["run", str(PROGRAM), "--random", "--plugin", "nosuchplugin"]
    env = {k: v for k, v in os.environ.items() if k not in ("RPJRT_PLUGIN", "RPJRT_PLUGIN_PATH")}
    r = subprocess.run([*_command(entry), *args], capture_output=True, text=True, timeout=120, env=env)
    # Every verb: exit 2 for a name nothing matches.
    assert r.returncode == 2, r.stderr
    lines = [line.strip() for line in r.stderr.splitlines() if line.strip().startswith("in: ")]
    assert len(lines) == 1, r.stderr
    dirs = lines[0][len("in: ") :].split(", ")
    assert len(dirs) == len(set(dirs)), f"listed twice: {sorted(d for d in dirs if dirs.count(d) > 1)}"
    assert any(d.endswith("site-packages") for d in dirs), dirs


def test_cli_module_is_this_checkout() -> None:
    import rpjrt._cli

    assert Path(rpjrt._cli.__file__).resolve() == REPO / "python" / "rpjrt" / "_cli.py"
