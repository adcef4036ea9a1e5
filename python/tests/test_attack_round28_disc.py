"""Round 28 (discovery): ``rpjrt.plugins()`` never turns a probe that could not run into a
silent ``pjrt_version=None`` (a RuntimeWarning, and ``PluginInfo.problem`` saying why, as
``rpjrt plugins`` says it in the row's ``problem``); probes run a bounded number at once, so
many plugins under a low ``ulimit -n`` are all read; and discovery reads each wheel's
RECORD once, so plugin modules beside many wheels cost no more than the reading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import fake_plugin_path

_LIMIT = 300


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=_LIMIT, env=full
    )


def _many_plugins(site: Path, n: int) -> None:
    fake = fake_plugin_path()
    for i in range(n):
        d = site / "jax_plugins" / f"p{i:03d}"
        d.mkdir(parents=True)
        try:
            os.link(fake, d / "pjrt_plugin.so")  # a distinct path, no disk use
        except OSError:
            (d / "pjrt_plugin.so").write_bytes(fake.read_bytes())


_REPORT = r"""
import json, sys, warnings
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    ps = rpjrt.plugins()
print(json.dumps({
    "plugins": [{"path": p.path, "pjrt_version": p.pjrt_version, "problem": p.problem} for p in ps],
    "warnings": [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)],
    "repr": [repr(p) for p in ps],
}))
"""


def _report(prelude: str, env: dict[str, str] | None = None) -> dict:
    r = _python(prelude + _REPORT, env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_probe_child_that_cannot_start_is_warned_about_and_said_per_plugin() -> None:
    # sys.executable unusable (an embedded interpreter): every plugin, the working CPU
    # plugins too, came back with pjrt_version None and no warning.
    got = _report("import sys, rpjrt\nsys.executable = ''\n")
    assert got["plugins"], got
    for p in got["plugins"]:
        assert p["pjrt_version"] is None, p
        assert "cannot start a child process to read its PJRT version" in p["problem"], p
        assert "sys.executable is empty" in p["problem"], p
    assert len(got["warnings"]) == 1, got["warnings"]
    assert "cannot start a child process" in got["warnings"][0]
    assert "problem=" in got["repr"][0]


def test_a_start_that_runs_out_of_descriptors_says_ulimit() -> None:
    # Every start refused for want of descriptors (nothing running to give any back).
    prelude = (
        "import errno, subprocess, rpjrt\n"
        "def refuse(*a, **k):\n"
        "    raise OSError(errno.EMFILE, 'Too many open files')\n"
        "subprocess.Popen = refuse\n"
    )
    got = _report(prelude)
    assert got["plugins"], got
    for p in got["plugins"]:
        assert p["pjrt_version"] is None and "ulimit -n" in p["problem"], p
    assert any("ulimit -n" in w for w in got["warnings"]), got["warnings"]


def test_many_plugins_under_a_low_open_files_limit_all_get_their_version(tmp_path: Path) -> None:
    # 150 plugins and RLIMIT_NOFILE 200: 56 came back None, with no warning.
    _many_plugins(tmp_path, 150)
    prelude = (
        "import resource, sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))\n"
        "import rpjrt\n"
    )
    got = _report(prelude)
    mine = [p for p in got["plugins"] if p["path"].startswith(str(tmp_path))]
    assert len(mine) == 150
    assert all(p["pjrt_version"] is not None and p["problem"] is None for p in mine), [
        p for p in mine if p["pjrt_version"] is None
    ][:3]
    assert not got["warnings"], got["warnings"]


def test_a_start_refused_while_others_run_is_tried_again(tmp_path: Path) -> None:
    # Starts fail for want of descriptors only while other probes hold them: each is
    # tried again once one of those has ended, and every version is read.
    _many_plugins(tmp_path, 20)
    prelude = (
        "import errno, subprocess, sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import rpjrt, rpjrt._discovery as d\n"
        "real = subprocess.Popen\n"
        "live = []\n"
        "def limited(*a, **k):\n"
        "    live[:] = [c for c in live if c.poll() is None]\n"
        "    if len(live) >= 3:\n"
        "        raise OSError(errno.EMFILE, 'Too many open files')\n"
        "    c = real(*a, **k)\n"
        "    live.append(c)\n"
        "    return c\n"
        "subprocess.Popen = limited\n"
    )
    got = _report(prelude)
    mine = [p for p in got["plugins"] if p["path"].startswith(str(tmp_path))]
    assert len(mine) == 20
    assert all(p["pjrt_version"] is not None for p in mine), mine
    assert not got["warnings"], got["warnings"]


def test_each_problem_reads_as_the_cli_says_it(tmp_path: Path) -> None:
    # Python's PluginInfo.problem and `rpjrt plugins --json`'s problem, for the same rows:
    # a file that is not a PJRT library, a FIFO, and a config that cannot be read.
    site = tmp_path / "site"
    bad = site / "jax_plugins" / "notaplugin"
    bad.mkdir(parents=True)
    (bad / "pjrt_plugin.so").write_text("not a library\n")
    fifo = tmp_path / "fifo.so"
    os.mkfifo(fifo)
    env = {
        "PJRT_NAMES_AND_LIBRARY_PATHS": f"pipe:{fifo},cfg:{tmp_path / 'missing.json'}",
        "RPJRT_PYTHON": "",
    }
    got = _report(f"import sys\nsys.path.insert(0, {str(site)!r})\nimport rpjrt\n", env)
    py = {p["path"]: p["problem"] for p in got["plugins"]}
    cli_env = dict(os.environ, RPJRT_PLUGIN_PATH=str(site), **env)
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "plugins", "--json"],
        capture_output=True,
        text=True,
        timeout=_LIMIT,
        env=cli_env,
    )
    assert r.returncode == 0, r.stderr
    cli = {row["path"]: row.get("problem") for row in json.loads(r.stdout)["plugins"]}
    wanted = [str(bad / "pjrt_plugin.so"), str(fifo), str(tmp_path / "missing.json")]
    for path in wanted:
        assert path in py and path in cli, (path, sorted(py), sorted(cli))
        assert py[path], (path, py[path])
        assert py[path] == cli[path], (path, py[path], cli[path])


def test_discovery_beside_many_wheels_reads_each_record_once(tmp_path: Path) -> None:
    # 200 plugin modules beside 200 wheels with RECORDs of ~140 KB: candidates('cpu')
    # took 11-12 s (each RECORD read once per module); 20 modules took 1.3 s.
    record = "".join(
        f"pkg/mod{i}/file_{i}.py,sha256=abcdefabcdefabcdefabcdefabcdefabcdefabcdefa,1234\n"
        for i in range(2000)
    )
    for i in range(200):
        d = tmp_path / f"pkg{i}-1.0.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Name: pkg{i}\nVersion: 1.0\n\n")
        (d / "RECORD").write_text(record)
    _many_plugins(tmp_path, 200)
    # One wheel lists its module: found with its package and version.
    (tmp_path / "pkg9-1.0.dist-info" / "RECORD").write_text(record + "jax_plugins/p009/pjrt_plugin.so,,\n")
    code = (
        f"import sys, time; sys.path.insert(0, {str(tmp_path)!r}); import rpjrt\n"
        "t = time.monotonic(); rpjrt.candidates('cpu'); took = time.monotonic() - t\n"
        "found = {p.name: p.package for p in map(rpjrt._discovery._info, rpjrt._rpjrt._discover(sys.path))}\n"
        "print(took, found['p009'], found['p010'])\n"
    )
    r = _python(code)
    assert r.returncode == 0, r.stderr
    took, p009, p010 = r.stdout.split()
    assert float(took) < 3, took
    assert (p009, p010) == ("pkg9", "None")
