"""Round 21 of the CLI's attack tests, through the Python front end (``python -m rpjrt``,
which runs the CLI compiled into the extension): ``launch`` gives the job's processes the
user's environment, not the front end's settings (``RPJRT_CLI_SELF``, its additions to
``RPJRT_PLUGIN_PATH``); ``conform`` writes a report with ``load_error`` for a plugin that
cannot be loaded; ``run --trace`` writes its trace when stopped by a signal; an output
that cannot be created is refused before the work (exit 2), and ``run -i`` reads files
whose suffix is not lower case.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .conftest import fake_plugin_path, plugin_paths

RPJRT = [sys.executable, "-m", "rpjrt"]

ADD3 = (
    "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n"
    "  %0 = stablehlo.add %x, %x : tensor<3xf32>\n"
    "  return %0 : tensor<3xf32>\n}\n"
)


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        # TF_CPP_MIN_LOG_LEVEL too: an earlier test in this process may have set it (the
        # CLI front end sets it for itself), and it would read as the user's here.
        if k
        not in (
            "RPJRT_PLUGIN",
            "PJRT_NAMES_AND_LIBRARY_PATHS",
            "RPJRT_CLI_SUPERVISED",
            "TF_CPP_MIN_LOG_LEVEL",
        )
    }
    env.update(extra)
    return env


def _launched_env(cwd: Path, **extra: str) -> dict[str, str]:
    r = subprocess.run(
        [*RPJRT, "launch", "-n", "1", "--", "env"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=_env(**extra),
    )
    assert r.returncode == 0, r.stderr
    seen = {}
    for line in r.stdout.splitlines():
        line = line.removeprefix("[0] ")
        k, _, v = line.partition("=")
        seen[k] = v
    return seen


def test_launch_passes_the_users_environment_not_the_front_ends(tmp_path: Path) -> None:
    # RPJRT_CLI_SELF made a standalone rpjrt started by the job run its children as
    # `python -m rpjrt`; RPJRT_PLUGIN_PATH carried sys.path and the launcher's directory.
    env = _launched_env(tmp_path)
    assert "RPJRT_CLI_SELF" not in env, env
    assert "RPJRT_CLI_ADDED_ENV" not in env, env
    assert "RPJRT_PLUGIN_PATH" not in env, env
    assert "TF_CPP_MIN_LOG_LEVEL" not in env, env
    assert env.get("RPJRT_PROCESS_ID") == "0"
    # The user's own values are passed on as they were.
    env = _launched_env(tmp_path, RPJRT_PLUGIN_PATH="/user/plugins", TF_CPP_MIN_LOG_LEVEL="1")
    assert env.get("RPJRT_PLUGIN_PATH") == "/user/plugins", env
    assert env.get("TF_CPP_MIN_LOG_LEVEL") == "1", env
    assert "RPJRT_CLI_SELF" not in env, env


def test_a_binary_started_by_a_python_launch_runs_its_child_as_itself(tmp_path: Path) -> None:
    # The job runs `python -c` that reports what RPJRT_CLI_SELF a child would see.
    code = "import os; print('SELF', os.environ.get('RPJRT_CLI_SELF'))"
    r = subprocess.run(
        [*RPJRT, "launch", "-n", "1", "--", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=_env(),
    )
    assert r.returncode == 0, r.stderr
    assert "SELF None" in r.stdout, r.stdout


def test_conform_writes_a_report_for_a_plugin_that_does_not_load(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    page = tmp_path / "r.html"
    r = subprocess.run(
        [*RPJRT, "conform", str(fake_plugin_path()), "--json", str(report), "--html", str(page)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(RPJRT_FAKE_VERSION="0.56"),
    )
    assert r.returncode == 1, r.stderr
    doc = json.loads(report.read_text())
    assert "PJRT 0.56" in doc["plugin"]["load_error"]
    assert doc["results"] == []
    assert "could not be loaded" in page.read_text()
    # python -m rpjrt.conform, to stdout.
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt.conform", str(fake_plugin_path()), "--json", "-"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(RPJRT_FAKE_VERSION="0.56"),
    )
    assert r.returncode == 1, r.stderr
    assert "load_error" in json.loads(r.stdout)["plugin"]


def test_a_stopped_run_writes_its_trace(tmp_path: Path) -> None:
    prog = tmp_path / "add.mlir"
    prog.write_text(ADD3)
    trace = tmp_path / "t.json"
    p = subprocess.Popen(
        [
            *RPJRT,
            "run",
            str(prog),
            "-i",
            "0=[1,2,3]:f32",
            "--plugin",
            str(fake_plugin_path()),
            "--trace",
            str(trace),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(RPJRT_FAKE_HANG_ON="PJRT_Client_Compile"),
    )
    assert p.stderr is not None
    deadline = time.monotonic() + 60
    for line in p.stderr:
        if "PJRT_Client_Compile: hanging" in line:
            break
        assert time.monotonic() < deadline
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=30)
    assert p.returncode == 143
    doc = json.loads(trace.read_text())
    assert doc["otherData"]["outcome"] == "interrupted (SIGTERM)"


def test_an_output_that_cannot_be_created_is_refused_before_the_work(tmp_path: Path) -> None:
    prog = tmp_path / "add.mlir"
    prog.write_text(ADD3)
    link = tmp_path / "dangling.rpjrt"
    link.symlink_to("/nonexistent-r21/dir/x.rpjrt")
    for out in (str(link), "/proc/self/r21.rpjrt"):
        r = subprocess.run(
            [
                *RPJRT,
                "--plugin-timeout",
                "5",
                "compile",
                str(prog),
                "--plugin",
                str(fake_plugin_path()),
                "-o",
                out,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=_env(RPJRT_FAKE_HANG_ON="GetPjrtApi"),
        )
        assert r.returncode == 2, r.stderr
        assert "--output" in r.stderr and "invalid argument" not in r.stderr, r.stderr


def test_run_reads_input_files_whose_suffix_is_not_lower_case(tmp_path: Path) -> None:
    import numpy as np

    prog = tmp_path / "add.mlir"
    prog.write_text(ADD3)
    np.save(tmp_path / "x.npy", np.arange(3, dtype=np.float32))
    (tmp_path / "x.npy").rename(tmp_path / "X.NPY")
    r = subprocess.run(
        [
            *RPJRT,
            "run",
            str(prog),
            "--plugin",
            plugin_paths()["new"],
            "-i",
            f"0={tmp_path / 'X.NPY'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert r.returncode == 0, r.stderr
    assert "array([0., 2., 4.], dtype=float32)" in r.stdout
