"""Round 22 (command line and discovery) through Python: ``rpjrt.plugins()`` never waits
past its time limit, even while a process a plugin's child started holds the child's
pipes; children run the same rpjrt as their parent, also when only a run-time ``sys.path``
entry finds it, and one that cannot import rpjrt is said to be that; the front ends keep
an ignored SIGINT ignored; ``sys.path`` entries that imports skip do not fail discovery;
and the platform is guessed from names, not from the directories a library sits in.

The tests marked "through the extension" exercise Rust code compiled into
``rpjrt._rpjrt`` (discovery, the command line), so they need an extension built from the
current sources.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .conftest import fake_plugin_path, plugin_paths, run_python

PYTHON_DIR = Path(__file__).resolve().parents[1]

# Imported at start-up (``site``) by every interpreter with this directory on PYTHONPATH:
# with HOLD_PIPES_SECONDS set, it leaves a process behind that inherited stdin, stdout and
# stderr, as a plugin starting a daemon does, and records its pid.
SITECUSTOMIZE = """
import os, subprocess
if os.environ.get("HOLD_PIPES_SECONDS"):
    p = subprocess.Popen(["sleep", os.environ["HOLD_PIPES_SECONDS"]], start_new_session=True)
    with open(os.environ["HOLD_PIPES_PIDS"], "a") as f:
        f.write(f"{p.pid}\\n")
"""


def _holding_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    pids = tmp_path / "helpers.pid"
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "HOLD_PIPES_PIDS": str(pids)}, pids


def _kill_helpers(pids: Path) -> int:
    n = 0
    for pid in pids.read_text().split() if pids.exists() else []:
        try:
            os.kill(int(pid), signal.SIGKILL)
            n += 1
        except ProcessLookupError:
            pass
    return n


# The children are started after HOLD_PIPES_SECONDS is set: this interpreter's own
# sitecustomize ran before, with it unset.
PLUGINS_TIMED = """
import os, time, warnings, rpjrt
os.environ["HOLD_PIPES_SECONDS"] = "300"
t = time.monotonic()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    found = {p.name: p.pjrt_version for p in rpjrt.plugins()}
print(round(time.monotonic() - t, 1))
print(found.get("real"), found.get("hung"))
for x in w:
    print("WARNING", x.category.__name__, x.message)
"""


def test_plugins_does_not_wait_for_a_helper_holding_the_childs_pipes(tmp_path: Path) -> None:
    env, pids = _holding_env(tmp_path)
    env.update(
        PJRT_NAMES_AND_LIBRARY_PATHS=f"real:{plugin_paths()['new']}",
        RPJRT_PLUGIN_TIMEOUT="20",
    )
    try:
        r = run_python(PLUGINS_TIMED, env=env, timeout=90)
    finally:
        killed = _kill_helpers(pids)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    # The child answered and exited at once; its helper lives on (300 s) holding the pipe.
    assert float(lines[0]) < 15, r.stdout
    assert lines[1].split() == ["0.115", "None"], r.stdout
    assert killed >= 1, "no helper was started: the test did not test anything"
    assert not any(line.startswith("WARNING") for line in lines), r.stdout


def test_a_child_killed_at_the_limit_is_not_waited_for_either(tmp_path: Path) -> None:
    env, pids = _holding_env(tmp_path)
    env.update(
        PJRT_NAMES_AND_LIBRARY_PATHS=f"hung:{fake_plugin_path()},real:{plugin_paths()['new']}",
        RPJRT_FAKE_HANG_ON="GetPjrtApi",
        RPJRT_PLUGIN_TIMEOUT="3",
    )
    try:
        r = run_python(PLUGINS_TIMED, env=env, timeout=90)
    finally:
        _kill_helpers(pids)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert float(lines[0]) < 15, r.stdout
    assert lines[1].split() == ["0.115", "None"], r.stdout
    # The library that did not answer is named, with the limit, as the CLI names it.
    warned = [line for line in lines if line.startswith("WARNING RuntimeWarning")]
    assert len(warned) == 1, r.stdout
    assert str(fake_plugin_path()) in warned[0] and "did not finish in 3 s" in warned[0], warned


# A working directory where no rpjrt is (the interpreter puts the current directory on
# sys.path, and the tests may run from the package's parent).
_NEUTRAL = tempfile.gettempdir()


def _base_python() -> str:
    """An interpreter that cannot import rpjrt by itself: this virtual environment's base."""
    base = getattr(sys, "_base_executable", sys.executable)
    probe = subprocess.run(
        [base, "-c", "import rpjrt"], capture_output=True, env=_bare_env(), timeout=60, cwd=_NEUTRAL
    )
    assert probe.returncode != 0, (
        f"{base} imports rpjrt by itself: these tests need an interpreter that finds rpjrt "
        "only through a sys.path entry added at run time (run them from a virtual environment)"
    )
    return base


def _bare_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "RPJRT_PLUGIN")}
    env["PATH"] = "/usr/bin:/bin"
    return env


def test_children_import_the_rpjrt_a_run_time_sys_path_entry_found() -> None:
    # As a zipapp, a notebook or an embedded interpreter makes rpjrt importable.
    site = next(p for p in sys.path if p.endswith("site-packages"))
    code = f"""
import sys, warnings
sys.path[:0] = [{str(PYTHON_DIR)!r}, {site!r}]
import rpjrt
warnings.simplefilter("error")
print(sorted(str(p.pjrt_version) for p in rpjrt.plugins() if p.platform == "cpu"))
from rpjrt._cli import main
print("info", main(["info", {plugin_paths()['new']!r}]))
"""
    r = subprocess.run(
        [_base_python(), "-c", code], capture_output=True, text=True, env=_bare_env(), timeout=180, cwd=_NEUTRAL
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "['0.115', '0.81']", r.stdout + r.stderr
    assert lines[-1] == "info 0", r.stdout + r.stderr
    assert "No module named" not in r.stderr, r.stderr


def test_a_child_that_cannot_import_rpjrt_is_said_to_be_one() -> None:
    site = next(p for p in sys.path if p.endswith("site-packages"))
    # The directory the children are told rpjrt came from holds none.
    code = f"""
import sys, warnings
sys.path[:0] = [{str(PYTHON_DIR)!r}, {site!r}]
import rpjrt
from rpjrt import _cli
_cli._import_dir = lambda: "/nonexistent-rpjrt-dir"
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    found = rpjrt.plugins()
print([p.pjrt_version for p in found if p.platform == "cpu"])
for x in w:
    print("WARNING", x.message)
"""
    r = subprocess.run(
        [_base_python(), "-c", code], capture_output=True, text=True, env=_bare_env(), timeout=180, cwd=_NEUTRAL
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "[None, None]", r.stdout
    warned = [line for line in lines if line.startswith("WARNING")]
    assert len(warned) == 1, r.stdout
    assert "cannot import rpjrt" in warned[0] and "/nonexistent-rpjrt-dir" in warned[0], warned


def test_a_verb_child_that_cannot_import_rpjrt_is_not_blamed_on_the_plugin() -> None:
    """Through the extension: the Rust supervisor says the child never started rpjrt."""
    site = next(p for p in sys.path if p.endswith("site-packages"))
    code = f"""
import sys
sys.path[:0] = [{str(PYTHON_DIR)!r}, {site!r}]
from rpjrt import _cli
_cli._import_dir = lambda: "/nonexistent-rpjrt-dir"
print("rc", _cli.main(["info", {plugin_paths()['new']!r}]))
"""
    r = subprocess.run(
        [_base_python(), "-c", code], capture_output=True, text=True, env=_bare_env(), timeout=180, cwd=_NEUTRAL
    )
    assert r.stdout.strip() == "rc 1", r.stdout + r.stderr
    assert "cannot import rpjrt" in r.stderr, r.stderr
    assert "before rpjrt started in it" in r.stderr, r.stderr
    assert "called exit()" not in r.stderr, r.stderr


def test_the_child_command_changes_no_variable_and_finds_this_rpjrt() -> None:
    from rpjrt import _cli

    cmd = _cli._child_command()
    assert cmd[0] == sys.executable and cmd[1] == "-c"
    assert Path(cmd[3]) == PYTHON_DIR
    r = subprocess.run(
        [*cmd, "--version"], capture_output=True, text=True, timeout=60, env=_bare_env()
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("rpjrt "), r.stdout


def test_an_ignored_sigint_stays_ignored_under_the_python_front_ends() -> None:
    scripts = Path(sys.executable).parent
    fronts = [[sys.executable, "-m", "rpjrt"]]
    if (scripts / "rpjrt").exists():
        fronts.append([str(scripts / "rpjrt")])
    for front in fronts:
        p = subprocess.Popen(
            [*front, "launch", "-n", "1", "--", "sleep", "3"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            # As a background job of a non-interactive shell starts.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
        time.sleep(1.5)
        status = Path(f"/proc/{p.pid}/status").read_text()
        ignored = int(next(x for x in status.splitlines() if x.startswith("SigIgn:")).split()[1], 16)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert ignored & (1 << (signal.SIGINT - 1)), (front, hex(ignored))
        assert p.returncode == 0, (front, p.returncode, err)


def test_sys_path_entries_that_imports_skip_do_not_fail_discovery() -> None:
    r = run_python(
        """
        import sys, rpjrt
        from rpjrt._cli import main
        for bad in (b"/tmp", 42, "/tmp/a\\x00b"):
            sys.path.append(bad)
            assert rpjrt.Client("cpu").platform == "cpu"
            assert rpjrt.plugins()
            assert rpjrt.find_plugin("cpu").platform == "cpu"
            assert main(["plugins", "--json"]) == 0
            sys.path.remove(bad)
        print("ok")
        """,
        timeout=180,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "ok", r.stdout


def test_the_platform_is_not_read_from_the_directories_a_plugin_sits_in(tmp_path: Path) -> None:
    """Through the extension: Python's discovery and ``rpjrt plugins --json`` agree, field by
    field, and neither takes ``.../output/`` for a TPU."""
    lib = tmp_path / "output" / "libmine.so"
    lib.parent.mkdir()
    os.link(plugin_paths()["new"], lib)
    env = {"PJRT_NAMES_AND_LIBRARY_PATHS": f"mine:{lib}"}
    r = run_python(
        """
        import json, rpjrt
        mine = next(p for p in rpjrt.plugins() if p.name == "mine")
        print(json.dumps({"platform": mine.platform, "path": mine.path, "source": mine.source}))
        print([p.path for p in rpjrt.candidates("tpu")] if any(
            p.platform == "tpu" for p in rpjrt.plugins()) else "no tpu")
        """,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    python_side = json.loads(r.stdout.splitlines()[0])
    assert python_side["platform"] is None, python_side
    assert r.stdout.splitlines()[1] == "no tpu", r.stdout
    cli = subprocess.run(
        [sys.executable, "-m", "rpjrt", "plugins", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert cli.returncode == 0, cli.stderr
    row = next(p for p in json.loads(cli.stdout)["plugins"] if p["name"] == "mine")
    assert {k: row[k] for k in python_side} == python_side
