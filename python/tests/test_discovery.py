"""Plugin discovery: environment variables, entry points, namespace packages, known wheels."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import rpjrt
from rpjrt import _discovery

from .conftest import run_python

DISCOVERY_ENV = ("RPJRT_PLUGIN", "PJRT_NAMES_AND_LIBRARY_PATHS", "TPU_LIBRARY_PATH")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in DISCOVERY_ENV:
        monkeypatch.delenv(k, raising=False)


def _fake_lib(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF not really")
    return path


def test_finds_both_installed_cpu_plugins(plugin_paths_all: dict[str, str]) -> None:
    found = {os.path.realpath(p.path): p for p in rpjrt.plugins()}
    old = found[os.path.realpath(plugin_paths_all["old"])]
    new = found[os.path.realpath(plugin_paths_all["new"])]
    assert old.name == "xla_cpu_pjrt" and old.version == "0.0.1" and old.platform == "cpu"
    assert old.source == "entry point xla_plugins:xla_cpu_pjrt"
    assert new.name == "lammps_jax_pjrt_cpu" and new.version == "0.11.2" and new.platform == "cpu"
    assert new.source == "package lammps-jax-pjrt-cpu"
    assert "version='0.11.2'" in repr(new)
    # The PJRT version comes from the library itself.
    assert old.pjrt_version == "0.81" and new.pjrt_version == "0.115"
    assert "pjrt_version='0.115'" in repr(new)


def test_unloadable_library_lists_without_a_pjrt_version(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lib = _fake_lib(tmp_path / "broken.so")
    monkeypatch.setenv("RPJRT_PLUGIN", str(lib))
    first = rpjrt.plugins()[0]
    assert os.path.realpath(first.path) == os.path.realpath(lib)
    assert first.pjrt_version is None


def test_each_file_listed_once() -> None:
    paths = [os.path.realpath(p.path) for p in rpjrt.plugins()]
    assert len(paths) == len(set(paths))


def test_discovery_imports_no_plugin_module() -> None:
    r = run_python(
        """
        import sys, rpjrt
        before = set(sys.modules)
        assert rpjrt.plugins()
        rpjrt.candidates("cpu")
        new = set(sys.modules) - before
        bad = [m for m in new if m.startswith(("xla_plugins", "jax_plugins", "lammps", "libtpu", "jax"))]
        assert not bad, bad
        print("ok")
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_rpjrt_plugin_path_comes_first_and_alone(
    monkeypatch: pytest.MonkeyPatch, plugin_paths_all: dict[str, str]
) -> None:
    monkeypatch.setenv("RPJRT_PLUGIN", plugin_paths_all["new"])
    listed = rpjrt.plugins()
    assert listed[0].source == "RPJRT_PLUGIN"
    assert os.path.realpath(listed[0].path) == os.path.realpath(plugin_paths_all["new"])
    (only,) = rpjrt.candidates()
    assert only.source == "RPJRT_PLUGIN"


def test_rpjrt_plugin_by_name(monkeypatch: pytest.MonkeyPatch, plugin_paths_all: dict[str, str]) -> None:
    monkeypatch.setenv("RPJRT_PLUGIN", "lammps-jax-pjrt-cpu")
    (only,) = rpjrt.candidates()
    assert os.path.realpath(only.path) == os.path.realpath(plugin_paths_all["new"])
    assert os.path.realpath(rpjrt.plugins()[0].path) == os.path.realpath(plugin_paths_all["new"])


def test_rpjrt_plugin_unknown_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RPJRT_PLUGIN", "no-such-plugin")
    with pytest.raises(rpjrt.PluginLoadError, match="no-such-plugin.*from RPJRT_PLUGIN"):
        rpjrt.candidates()


def test_rpjrt_plugin_missing_file_is_still_the_choice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "nope.so"
    monkeypatch.setenv("RPJRT_PLUGIN", str(missing))
    (only,) = rpjrt.candidates()
    assert only.path == str(missing)  # loading it reports the missing file


def test_names_and_library_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    a = _fake_lib(tmp_path / "a" / "libmycuda_pjrt.so")
    b = _fake_lib(tmp_path / "b" / "other.so")
    config = tmp_path / "plug.json"
    config.write_text(json.dumps({"library_path": str(b), "create_options": {"cpu_device_count": 2}}))
    monkeypatch.setenv("PJRT_NAMES_AND_LIBRARY_PATHS", f"cuda:{a},broken,cfg:{config}")
    listed = rpjrt.plugins()
    assert listed[0].name == "cuda" and listed[0].path == str(a) and listed[0].platform == "cuda"
    assert listed[0].source == "PJRT_NAMES_AND_LIBRARY_PATHS" and listed[0].version is None
    assert listed[1].name == "cfg" and listed[1].path == str(b)
    assert listed[1].options == {"cpu_device_count": 2}
    # accelerators come before CPU plugins when nothing is asked for
    assert rpjrt.candidates()[0].name == "cuda"
    assert [p.name for p in rpjrt.candidates("gpu")] == ["cuda"]
    assert rpjrt.find_plugin("cfg").path == str(b)


def test_names_and_library_paths_bad_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "plug.json"
    config.write_text("{}")
    monkeypatch.setenv("PJRT_NAMES_AND_LIBRARY_PATHS", f"x:{config}")
    with pytest.raises(rpjrt.PluginLoadError, match="library_path"):
        rpjrt.candidates("x")
    # The listing shows it (with no version) instead of failing.
    assert [p.pjrt_version for p in rpjrt.plugins() if p.name == "x"] == [None]


def test_namespace_package_found_without_import(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    site = tmp_path / "site"
    lib = _fake_lib(site / "jax_plugins" / "xla_fakecuda" / "xla_cuda_plugin.so")
    # a Python extension next to it is not a plugin
    _fake_lib(site / "jax_plugins" / "xla_fakecuda" / "_helper.cpython-311-x86_64-linux-gnu.so")
    (site / "jax_plugins" / "xla_fakecuda" / "__init__.py").write_text("raise SystemExit('imported!')\n")
    monkeypatch.syspath_prepend(str(site))
    found = [p for p in rpjrt.plugins() if p.name == "xla_fakecuda"]
    assert len(found) == 1
    assert found[0].path == str(lib.resolve())
    assert found[0].source == "namespace package jax_plugins.xla_fakecuda"
    assert found[0].platform == "cuda"
    assert "jax_plugins.xla_fakecuda" not in sys.modules


def test_entry_point_found_through_record(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    site = tmp_path / "site"
    lib = _fake_lib(site / "acme_pjrt" / "libacme_pjrt.so")
    (site / "acme_pjrt" / "__init__.py").write_text("raise SystemExit('imported!')\n")
    info = site / "acme_pjrt-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-pjrt\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text("[jax_plugins]\nacme = acme_pjrt\n")
    (info / "RECORD").write_text(
        "acme_pjrt/__init__.py,,\nacme_pjrt/libacme_pjrt.so,,\nacme_pjrt-1.2.3.dist-info/RECORD,,\n"
    )
    monkeypatch.syspath_prepend(str(site))
    (found,) = [p for p in rpjrt.plugins() if p.name == "acme"]
    assert found.path == str(lib.resolve())
    assert found.version == "1.2.3"
    assert found.package == "acme-pjrt"
    assert found.source == "entry point jax_plugins:acme"
    assert rpjrt.find_plugin("acme-pjrt") == found
    assert "acme_pjrt" not in sys.modules


def test_tpu_library_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lib = _fake_lib(tmp_path / "libtpu.so")
    monkeypatch.setenv("TPU_LIBRARY_PATH", str(lib))
    (tpu,) = [p for p in rpjrt.plugins() if p.source == "TPU_LIBRARY_PATH"]
    assert tpu.platform == "tpu" and tpu.path == str(lib)
    assert rpjrt.candidates()[0] == tpu
    assert rpjrt.candidates("tpu") == [tpu]


def test_nothing_found_says_what_was_searched_and_what_to_install() -> None:
    with pytest.raises(rpjrt.PluginLoadError) as info:
        rpjrt.candidates("cuda")
    msg = str(info.value)
    for piece in (
        "RPJRT_PLUGIN",
        "PJRT_NAMES_AND_LIBRARY_PATHS",
        "jax_plugins",
        "xla_plugins",
        "TPU_LIBRARY_PATH",
        "pip install jax-cuda12-pjrt",
        "xla_cpu_pjrt (cpu)",
    ):
        assert piece in msg, piece
    with pytest.raises(rpjrt.PluginLoadError, match="pip install libtpu"):
        rpjrt.candidates("tpu")


def test_nothing_installed_at_all(tmp_path: Path) -> None:
    # A bare interpreter that sees no plugin wheel: the message names the fix.
    r = run_python(
        """
        import sys
        sys.path[:] = [p for p in sys.path if "site-packages" not in p]
        sys.path.insert(0, %r)
        from rpjrt import _discovery
        try:
            _discovery.candidates()
        except Exception as e:
            print(type(e).__name__)
            print(e)
        """
        % str(Path(rpjrt.__file__).parent.parent),
        env={k: "" for k in DISCOVERY_ENV},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("PluginLoadError\nno PJRT plugin found")
    assert "pip install 'rpjrt[cpu]'" in r.stdout


def test_paths_and_specs(tmp_path: Path, plugin_paths_all: dict[str, str]) -> None:
    p = Path(plugin_paths_all["old"])
    (c,) = rpjrt.candidates(p)
    assert c.path == str(p) and c.source == "argument"
    (c2,) = rpjrt.candidates(str(p))
    assert c2 == c
    assert rpjrt.candidates(c) == [c]
    assert [x.platform for x in rpjrt.candidates("cpu")] == ["cpu"] * len(rpjrt.candidates("cpu"))
    with pytest.raises(rpjrt.InvalidArgumentError):
        rpjrt.candidates(42)
    with pytest.raises(rpjrt.InvalidArgumentError):
        rpjrt.candidates("  ")


def test_a_plugin_path_that_is_not_utf8(tmp_path: Path, plugin_paths_all: dict[str, str]) -> None:
    # Python holds such a name with surrogate escapes; discovery and the loader get its bytes.
    link = os.fsdecode(os.fsencode(tmp_path) + b"/plug-\xff.so")
    os.symlink(plugin_paths_all["old"], link)
    (c,) = rpjrt.candidates(link)
    assert c.path == link and c.source == "argument"
    assert rpjrt.candidates(os.fsencode(link)) == [c]
    with rpjrt.Client(link) as client:
        assert client.put(b"\x01\x02").to_host().tobytes() == b"\x01\x02"
    missing = os.fsdecode(os.fsencode(tmp_path) + b"/missing-\xff.so")
    with pytest.raises(rpjrt.PluginLoadError, match="missing-"):
        rpjrt.Client(missing)
    # A directory that is not UTF-8 keeps its bytes too.
    d = Path(os.fsdecode(os.fsencode(tmp_path) + b"/pkg-\xfe"))
    _fake_lib(d / "libfoo_pjrt_plugin.so")
    assert _discovery._pick_library(d) == d / "libfoo_pjrt_plugin.so"


def test_environment_paths_that_are_not_utf8(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Such a value is a path (it names no platform or plugin), never silently dropped.
    lib = os.fsdecode(os.fsencode(_fake_lib(tmp_path / "d-\udcff" / "libmine_pjrt.so")))
    monkeypatch.setenv("RPJRT_PLUGIN", lib)
    (only,) = rpjrt.candidates()
    assert only.path == lib and only.source == "RPJRT_PLUGIN"
    assert rpjrt.plugins()[0].path == lib
    monkeypatch.delenv("RPJRT_PLUGIN")
    monkeypatch.setenv("PJRT_NAMES_AND_LIBRARY_PATHS", f"mine:{lib}")
    assert rpjrt.find_plugin("mine").path == lib


def test_pick_library_prefers_pjrt_named_files(tmp_path: Path) -> None:
    d = tmp_path / "pkg"
    _fake_lib(d / "libz.so")
    _fake_lib(d / "libfoo_pjrt_plugin.so")
    _fake_lib(d / "_ext.abi3.so")
    assert _discovery._pick_library(d).name == "libfoo_pjrt_plugin.so"  # type: ignore[union-attr]
    assert _discovery._pick_library(tmp_path / "missing") is None


def test_import_does_not_load_discovery_or_typing() -> None:
    # Import time is a benchmark target: discovery's heavy imports wait until first use.
    code = (
        "import sys, rpjrt\n"
        "heavy = [m for m in ('importlib.metadata', 'typing', 'json', 'numpy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert rpjrt.plugins is rpjrt._discovery.plugins\n"
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr


def test_a_fifo_named_by_rpjrt_plugin_is_listed_but_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "libfifo_pjrt.so"
    os.mkfifo(fifo)
    r = run_python(
        """
        import rpjrt
        first = rpjrt.plugins()[0]
        print(first.source, first.pjrt_version)
        """,
        env={"RPJRT_PLUGIN": str(fifo)},
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["RPJRT_PLUGIN", "None"]


@pytest.mark.parametrize("behaviour", ["RPJRT_FAKE_CRASH_ON", "RPJRT_FAKE_HANG_ON"])
def test_plugins_survives_a_library_that_crashes_or_hangs_while_loading(behaviour: str) -> None:
    # Reading a version loads the library; plugins() does it in child processes, so one that
    # crashes the loader or never returns costs only its own answer (None), within the
    # timeout, while the real plugin listed beside it still reports its version.
    from .conftest import fake_plugin_path, plugin_paths

    fake, real = str(fake_plugin_path()), plugin_paths()["new"]
    r = run_python(
        """
import time, rpjrt
t = time.monotonic()
found = {p.name: p.pjrt_version for p in rpjrt.plugins()}
print(found["broken"], found["real"], time.monotonic() - t < 30)
""",
        env={
            "PJRT_NAMES_AND_LIBRARY_PATHS": f"broken:{fake},real:{real}",
            behaviour: "GetPjrtApi",
            "RPJRT_PLUGIN_TIMEOUT": "8",
        },
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["None", "0.115", "True"], r.stdout + r.stderr


def test_a_broken_plugin_config_fails_only_the_lookups_it_could_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # One unreadable .json config in PJRT_NAMES_AND_LIBRARY_PATHS used to fail every
    # lookup and the listing, with a message naming neither the file nor the variable.
    cfg = tmp_path / "broken.json"
    cfg.write_text("[1,2")
    monkeypatch.setenv("PJRT_NAMES_AND_LIBRARY_PATHS", f"mine:{cfg}")
    # Another plugin asked for by platform or name is found as if it were not there.
    assert rpjrt.find_plugin("cpu").platform == "cpu"
    assert rpjrt.find_plugin("xla_cpu_pjrt").name == "xla_cpu_pjrt"
    # Asking for it, or for everything, says what is wrong and where.
    for spec in ("mine", None):
        with pytest.raises(rpjrt.PluginLoadError) as e:
            rpjrt.candidates(spec)
        assert str(cfg) in str(e.value) and "PJRT_NAMES_AND_LIBRARY_PATHS" in str(e.value)
        assert "not valid JSON" in str(e.value)
    # The listing shows it, with no version, next to the others.
    listed = {p.name: p for p in rpjrt.plugins()}
    assert listed["mine"].pjrt_version is None and "xla_cpu_pjrt" in listed
