"""The CUDA PJRT plugin and rpjrt.cuda on a machine without a GPU.

The plugin (jax-cuda13-pjrt) is installed by scripts/setup.sh into .deps/cuda-plugin and
named by RPJRT_TEST_PLUGIN_CUDA in .deps/plugins.env. Client creation runs in child
processes so a plugin that aborts cannot take pytest with it. On a machine with a GPU these
tests fail on purpose (they check the no-GPU path); the GPU tier is scripts/test-gpu.sh.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rpjrt
import rpjrt.cuda

from .conftest import PLUGINS_ENV, _read_plugins_env


def _cuda_plugin() -> str:
    path = os.environ.get("RPJRT_TEST_PLUGIN_CUDA") or _read_plugins_env().get("RPJRT_TEST_PLUGIN_CUDA")
    assert path, f"RPJRT_TEST_PLUGIN_CUDA is not set nor in {PLUGINS_ENV}: run scripts/setup.sh"
    assert os.path.isfile(path), f"{path} is missing: run scripts/setup.sh"
    return path


def _site_dir() -> str:
    # .../cuda-plugin/jax_plugins/xla_cuda13/xla_cuda_plugin.so -> .../cuda-plugin
    return str(Path(_cuda_plugin()).parents[2])


def _child(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ""  # keep this the no-GPU path on any machine
    env.pop("RPJRT_PLUGIN", None)
    env.pop("PJRT_NAMES_AND_LIBRARY_PATHS", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_site_dir(), env.get("PYTHONPATH")]))
    env["RPJRT_PLUGIN_PATH"] = _site_dir()  # Rust discovery's extra search path
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode >= 0, f"child killed by signal {-r.returncode}: {r.stderr[-2000:]}"
    return r


def test_plugin_loads_and_describes_itself() -> None:
    p = rpjrt.Plugin(_cuda_plugin())
    major, minor = p.api_version
    assert major == 0 and minor >= 100, p.api_version
    assert p.table_slots > 100
    for ext in ("FFI", "Layouts", "Stream", "MemoryDescriptions"):
        assert any(ext in e for e in p.extensions), (ext, p.extensions)
    cuda_version = p.attributes["cuda_version"]
    assert isinstance(cuda_version, int) and cuda_version >= 12000
    assert p.stablehlo_version is not None and p.stablehlo_version[0] == 1


def test_client_creation_fails_cleanly() -> None:
    r = _child(
        f"""
        import rpjrt, rpjrt.cuda
        for opts in (None, rpjrt.cuda.options(memory_fraction=0.5, preallocate=False, allocator="bfc")):
            try:
                rpjrt.Client({_cuda_plugin()!r}, options=opts)
            except rpjrt.FailedPreconditionError as e:
                print("ERR", type(e).__name__, e.entry, str(e).replace(chr(10), " "))
            else:
                raise SystemExit("a CUDA client was created: this machine has a GPU")
        """
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [l for l in r.stdout.splitlines() if l.startswith("ERR")]
    assert len(lines) == 2, r.stdout
    for line in lines:
        assert "FailedPreconditionError PJRT_Client_Create" in line
        assert "No visible GPU devices" in line
        assert "xla_cuda_plugin.so" in line  # which plugin
        assert "libcuda.so.1" in line  # what is missing


def test_discovery_finds_the_cuda_wheel() -> None:
    r = _child(
        """
        import os, rpjrt
        info = rpjrt.find_plugin("cuda")
        print("FOUND", info.platform, info.package, os.path.realpath(info.path))
        try:
            rpjrt.Client("cuda")
        except rpjrt.Error as e:
            print("ERR", type(e).__name__, str(e).replace(chr(10), " "))
        """
    )
    assert r.returncode == 0, r.stderr[-3000:]
    found = next(l for l in r.stdout.splitlines() if l.startswith("FOUND"))
    assert found.split()[1] == "cuda"
    assert found.endswith(os.path.realpath(_cuda_plugin())), found
    err = next(l for l in r.stdout.splitlines() if l.startswith("ERR"))
    assert "FailedPreconditionError" in err and "No visible GPU devices" in err, err


def test_cli_info_fails_cleanly() -> None:
    r = _child(
        f"""
        import sys
        from rpjrt._cli import main
        sys.exit(main(["info", {_cuda_plugin()!r}]))
        """
    )
    assert r.returncode not in (0,) and r.returncode > 0, r
    assert "No visible GPU devices" in r.stderr, r.stderr[-2000:]
    assert "FAILED_PRECONDITION" in r.stderr, r.stderr[-2000:]


def test_options_are_checked() -> None:
    assert rpjrt.cuda.options() == {}
    o = rpjrt.cuda.options(memory_fraction=0.25, preallocate=True, allocator="cuda_async", visible_devices=(1, 0))
    assert o == {"memory_fraction": 0.25, "preallocate": True, "allocator": "cuda_async", "visible_devices": [1, 0]}
    assert rpjrt.cuda.ALLOCATORS == ("default", "platform", "bfc", "cuda_async")
    for bad in (0.0, -1.0, 1.5, float("nan")):
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"memory_fraction must be in \(0, 1\]"):
            rpjrt.cuda.options(memory_fraction=bad)
    with pytest.raises(rpjrt.InvalidArgumentError, match="unknown CUDA allocator 'tlsf'|unknown CUDA allocator \"tlsf\""):
        rpjrt.cuda.options(allocator="tlsf")
    with pytest.raises(rpjrt.InvalidArgumentError, match="device 0 twice"):
        rpjrt.cuda.options(visible_devices=[0, 0])
    with pytest.raises(rpjrt.InvalidArgumentError, match="non-negative"):
        rpjrt.cuda.options(visible_devices=[-1])
    with pytest.raises(rpjrt.InvalidArgumentError, match="empty"):
        rpjrt.cuda.options(visible_devices=[])
    with pytest.raises(rpjrt.InvalidArgumentError, match="no pool"):
        rpjrt.cuda.options(allocator="platform", memory_fraction=0.5)
    with pytest.raises(TypeError):
        rpjrt.cuda.options(preallocate="yes")  # type: ignore[arg-type]


def test_driver_load_names_the_library() -> None:
    with pytest.raises(rpjrt.FailedPreconditionError) as ei:
        rpjrt.cuda.load()
    msg = str(ei.value)
    assert "cannot load the CUDA driver libcuda.so.1" in msg
    assert "cannot open shared object file" in msg  # the loader's own words
    with pytest.raises(rpjrt.FailedPreconditionError, match="missing symbol cuInit"):
        rpjrt.cuda.load("libc.so.6")
    with pytest.raises(rpjrt.FailedPreconditionError) as ei:
        rpjrt.cuda.load(Path("/nonexistent/dir/libcuda.so.1"))
    assert "cannot load the CUDA driver /nonexistent/dir/libcuda.so.1" in str(ei.value)
    assert "libcuda.so.1" in rpjrt.cuda.driver_summary()
