"""The distributable wheel alone, in a fresh virtual environment without numpy and without a
Rust toolchain on PATH: it is tagged for old Linux systems, installs, runs the quick start,
and its C++ exception guard still catches a plugin's exception.

The wheel is the one scripts/wheel.sh builds (manylinux_2_28, linked with zig);
RPJRT_TEST_WHEEL names one already built (python/ci.sh builds once and passes it in).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from .conftest import EXAMPLES, REPO

# The newest glibc a wheel may need: manylinux_2_28 (RHEL 8, Debian 10, Ubuntu 18.10+).
NEWEST_GLIBC = (2, 28)

# A PJRT "plugin" whose PJRT_Plugin_Initialize throws a C++ exception through GCC's
# libstdc++, as real plugins do; rpjrt's guard must turn it into an error.
THROWING_PLUGIN = r"""
#include <cstddef>
#include <stdexcept>
namespace {
struct Version { std::size_t struct_size; void* extension_start; int major; int minor; };
struct Api { std::size_t struct_size; void* extension_start; Version version; void* entries[4]; };
void* initialize(void*) { throw std::length_error("thrown by the plugin's libstdc++"); }
// Entries 0-2 are the error functions (unused here), entry 3 is PJRT_Plugin_Initialize.
Api api = {sizeof(Api), nullptr, {sizeof(Version), nullptr, 0, 81},
           {nullptr, nullptr, nullptr, reinterpret_cast<void*>(&initialize)}};
}  // namespace
extern "C" const Api* GetPjrtApi() { return &api; }
"""


def _path_without_rust() -> str:
    """PATH with every folder that holds cargo or rustc removed."""
    keep = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any(os.path.exists(os.path.join(d, tool)) for tool in ("cargo", "rustc", "rustup"))
    ]
    return os.pathsep.join(keep)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("RPJRT_TEST_WHEEL")
    if given:
        path = Path(given)
        assert path.is_file(), f"RPJRT_TEST_WHEEL={given}: no such file"
        return path
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run(
        ["bash", str(REPO / "scripts" / "wheel.sh"), str(out)], capture_output=True, text=True, timeout=3600
    )
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-4000:])
    (whl,) = out.glob("rpjrt-*.whl")
    return whl


@pytest.fixture(scope="module")
def bare_env() -> dict[str, str]:
    """The environment of every command in the fresh venv: no Rust toolchain reachable."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "CARGO_HOME", "RUSTUP_HOME")}
    env["PATH"] = _path_without_rust()
    assert shutil.which("cargo", path=env["PATH"]) is None
    assert shutil.which("rustc", path=env["PATH"]) is None
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path, bare_env: dict[str, str]) -> Path:
    base = getattr(sys, "_base_executable", None) or sys.executable
    root = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([base, "-m", "venv", str(root)], check=True, timeout=300, env=bare_env)
    py = root / "bin" / "python"
    r = subprocess.run(
        [str(py), "-m", "pip", "install", "--no-index", "--disable-pip-version-check", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        env=bare_env,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    return root


def test_wheel_is_abi3_with_no_dependencies(wheel: Path) -> None:
    assert "-cp310-abi3-" in wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "rpjrt/py.typed" in names and "rpjrt/_rpjrt.pyi" in names
    assert any(n.startswith("rpjrt/_rpjrt") and n.endswith(".so") for n in names)
    requires = [ln for ln in meta.splitlines() if ln.startswith("Requires-Dist:")]
    assert all("extra ==" in ln for ln in requires), requires  # only optional extras
    assert "Requires-Python: >=3.10" in meta


def _glibc(tag: str) -> tuple[int, int]:
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_\w+", tag)
    assert m, f"not a manylinux tag: {tag}"
    return int(m.group(1)), int(m.group(2))


def test_wheel_is_tagged_and_audited_for_glibc_2_28(wheel: Path) -> None:
    # The file name's platform tag, then auditwheel's own reading of the library's symbol
    # versions (glibc, libstdc++) against the manylinux policies.
    tag = wheel.name.removesuffix(".whl").split("-")[-1]
    assert _glibc(tag) <= NEWEST_GLIBC, wheel.name
    auditwheel = Path(sys.executable).with_name("auditwheel")
    assert auditwheel.exists(), "auditwheel is missing from the venv (scripts/setup.sh installs it)"
    r = subprocess.run([str(auditwheel), "show", str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    found = re.search(r'consistent with\s+the following platform tag:\s+"([^"]+)"', r.stdout)
    assert found, r.stdout
    assert _glibc(found.group(1)) <= NEWEST_GLIBC, r.stdout


def test_fresh_venv_has_no_numpy(venv: Path, bare_env: dict[str, str]) -> None:
    r = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import numpy"], capture_output=True, timeout=60, env=bare_env
    )
    assert r.returncode != 0


def test_stdlib_hello_in_fresh_venv(venv: Path, plugin_path: str, bare_env: dict[str, str]) -> None:
    r = subprocess.run(
        [str(venv / "bin" / "python"), str(EXAMPLES / "hello_stdlib.py"), plugin_path],
        capture_output=True,
        text=True,
        timeout=300,
        env=bare_env,
        cwd=str(venv),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "a * b + a = [0.0, 3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0]" in r.stdout, r.stdout
    assert "platform: cpu, devices: 4" in r.stdout


def test_readme_quick_start_in_fresh_venv(
    venv: Path, plugin_path: str, bare_env: dict[str, str], tmp_path: Path
) -> None:
    # The README's Python quick start, as written there, with the plugin given by path (the
    # fresh venv has no plugin wheel to find by the name "cpu").
    (tmp_path / "program.mlir").write_text(
        "func.func public @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  %0 = stablehlo.multiply %a, %b : tensor<8xf32>\n"
        "  return %0 : tensor<8xf32>\n}\n"
    )
    script = textwrap.dedent(
        """
        import array, sys, rpjrt

        client = rpjrt.Client(sys.argv[1])
        exe = client.compile(open("program.mlir").read())
        x = client.put(array.array("f", range(8)))
        (y,) = exe(x, x)
        print(y.to_host().tolist())
        """
    )
    r = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script, plugin_path],
        capture_output=True,
        text=True,
        timeout=300,
        env=bare_env,
        cwd=str(tmp_path),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == str([float(i * i) for i in range(8)]), r.stdout


def test_guard_catches_a_libstdcxx_exception_in_fresh_venv(
    venv: Path, bare_env: dict[str, str], tmp_path: Path
) -> None:
    # A wheel linked against another C++ runtime (zig's libc++) cannot catch what a plugin
    # built with GCC throws: the process dies with SIGSEGV instead of raising.
    gxx = shutil.which("g++")
    assert gxx, "g++ is needed to build the throwing test plugin"
    src = tmp_path / "thrower.cpp"
    src.write_text(THROWING_PLUGIN)
    lib = tmp_path / "libthrower.so"
    subprocess.run([gxx, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True, timeout=300)
    script = textwrap.dedent(
        """
        import sys, rpjrt
        try:
            rpjrt.Plugin(sys.argv[1])
        except rpjrt.Error as e:
            print("raised", type(e).__name__, e)
        """
    )
    r = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script, str(lib)],
        capture_output=True,
        text=True,
        timeout=300,
        env=bare_env,
        cwd=str(tmp_path),  # not python/, whose rpjrt source folder would shadow the wheel's
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    assert "raised" in r.stdout and "thrown by the plugin's libstdc++" in r.stdout, r.stdout


def test_console_script_in_fresh_venv(venv: Path, plugin_path: str, bare_env: dict[str, str]) -> None:
    r = subprocess.run(
        [str(venv / "bin" / "rpjrt"), "info", plugin_path], capture_output=True, text=True, timeout=120, env=bare_env
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "PJRT" in r.stdout
