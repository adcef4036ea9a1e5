"""Round 28 (r28-disc #1-#3): every foreign library rpjrt loads goes the plugin's way.

The CUDA driver helpers (``rpjrt.cuda.load``) and the driver probe (``driver_summary()``,
behind ``Client("cuda")``'s error) opened ``libcuda.so.1`` with a bare ``dlopen``:

- a truncated library crashed the process inside the loader (SIGBUS);
- a FIFO (given as the path, or found first by the loader's search in ``LD_LIBRARY_PATH``)
  blocked ``dlopen`` for ever, holding the loader's lock;
- a library calling ``exit(0)`` while loading (or inside ``cuInit``) ended the program
  silently with status 0.

Now they share the plugin loader's one path (``rpjrt_raw::guard::open_checked_library``):
the file is checked before the loader sees it, a bare name is checked along the loader's
search, and calls into the library are watched for ``exit()``. Every case runs in a child
process with a timeout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import fake_plugin_path

LOAD = "rpjrt.cuda.load({lib!r})"
SUMMARY = "print('SUMMARY', rpjrt.cuda.driver_summary())"


def _run(stmt: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(
        f"""
        import rpjrt, rpjrt.cuda
        try:
            {stmt}
        except rpjrt.Error as e:
            print("RAISED", type(e).__name__, e)
        print("SCRIPT-CONTINUED")
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, **(env or {})),
    )


def _raised(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-2000:])
    assert "SCRIPT-CONTINUED" in r.stdout, r.stdout
    return r.stdout


def _truncated(tmp_path: Path, size: int, name: str = "libcuda.so.1") -> Path:
    src = fake_plugin_path().read_bytes()
    d = tmp_path / f"trunc{size}"
    d.mkdir()
    lib = d / name
    lib.write_bytes(src[:size])
    return lib


def _driver(tmp_path: Path, name: str, body: str) -> Path:
    """A fake libcuda.so.1 with the probe's four entry points, plus `body`."""
    d = tmp_path / name
    d.mkdir()
    src = d / "drv.c"
    src.write_text(
        "#include <stdlib.h>\n"
        "typedef int CUresult;\n"
        "CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }\n"
        "CUresult cuDeviceGetCount(int *n) { *n = 0; return 0; }\n"
        "CUresult cuGetErrorName(CUresult c, const char **p) { (void)c; *p = \"FAKE\"; return 0; }\n"
        + body
    )
    lib = d / "libcuda.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


# --- 1: a truncated library is refused, never handed to the loader ----------------------


@pytest.mark.parametrize("size", [0, 20, 64, 3000, 100000])
def test_a_truncated_driver_library_raises_naming_the_file(tmp_path: Path, size: int) -> None:
    lib = _truncated(tmp_path, size)
    out = _raised(_run(LOAD.format(lib=str(lib))))
    assert "RAISED FailedPreconditionError" in out, out
    assert f"cannot load the CUDA driver {lib}" in out, out
    assert "truncated" in out or "empty" in out or "shorter than an ELF header" in out, out


def test_a_truncated_library_found_by_the_loaders_search_is_named(tmp_path: Path) -> None:
    lib = _truncated(tmp_path, 3000)
    env = {"LD_LIBRARY_PATH": str(lib.parent)}
    for stmt in ("rpjrt.cuda.load()", SUMMARY):
        out = _raised(_run(stmt, env=env))
        assert "cannot load the CUDA driver libcuda.so.1" in out, (stmt, out)
        assert f"finds {lib} first" in out and "truncated" in out, (stmt, out)


# --- 2: a FIFO (or a device, a directory) is refused without being opened ---------------


def test_a_fifo_given_as_the_driver_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "libcuda.so.1"
    os.mkfifo(fifo)
    link = tmp_path / "link.so"
    link.symlink_to(fifo)
    for path in (fifo, link):
        out = _raised(_run(LOAD.format(lib=str(path)), timeout=30))
        assert f"cannot load the CUDA driver {path}: it is a FIFO (named pipe)" in out, out


@pytest.mark.parametrize("stmt", ["rpjrt.cuda.load()", SUMMARY])
def test_a_fifo_on_the_loaders_search_path_is_refused(tmp_path: Path, stmt: str) -> None:
    fifo = tmp_path / "libcuda.so.1"
    os.mkfifo(fifo)
    out = _raised(_run(stmt, env={"LD_LIBRARY_PATH": f"/nonexistent:{tmp_path}"}, timeout=30))
    assert f"finds {fifo} first, and it is a FIFO (named pipe)" in out, out
    assert "LD_LIBRARY_PATH" in out, out


def test_directories_and_devices_are_refused(tmp_path: Path) -> None:
    (tmp_path / "libcuda.so.1").mkdir()
    out = _raised(_run(LOAD.format(lib=str(tmp_path / "libcuda.so.1"))))
    assert "it is a directory" in out, out
    out = _raised(_run(LOAD.format(lib="/dev/zero")))
    assert "it is a character device" in out, out


def test_a_library_for_another_machine_is_passed_over_as_the_loader_does(tmp_path: Path) -> None:
    # An ELF library for another architecture first on the search path: the loader skips
    # it; so does rpjrt's check, which then finds the FIFO behind it.
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    data = bytearray(fake_plugin_path().read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # EM_AARCH64 (or anything but this machine)
    if os.uname().machine == "aarch64":
        data[18:20] = (62).to_bytes(2, "little")
    (foreign / "libcuda.so.1").write_bytes(bytes(data))
    fifo_dir = tmp_path / "fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "libcuda.so.1")
    out = _raised(_run("rpjrt.cuda.load()", env={"LD_LIBRARY_PATH": f"{foreign}:{fifo_dir}"}, timeout=30))
    assert f"finds {fifo_dir / 'libcuda.so.1'} first, and it is a FIFO" in out, out
    # Alone, it gives the loader's own refusal, not a crash.
    out = _raised(_run("rpjrt.cuda.load()", env={"LD_LIBRARY_PATH": str(foreign)}, timeout=30))
    assert "RAISED FailedPreconditionError" in out and "libcuda.so.1" in out, out


# --- 3: exit() while loading or inside a driver call is reported, status non-zero -------


def test_exit_in_the_drivers_initialiser_is_reported(tmp_path: Path) -> None:
    lib = _driver(
        tmp_path,
        "ctor",
        "__attribute__((constructor)) static void init(void) { exit(0); }\n"
        "CUresult cuInit(unsigned f) { (void)f; return 100; }\n",
    )
    for stmt, env in ((LOAD.format(lib=str(lib)), None), (SUMMARY, {"LD_LIBRARY_PATH": str(lib.parent)})):
        r = _run(stmt, env=env)
        assert r.returncode == 1, (stmt, r.returncode, r.stdout, r.stderr)
        assert "SCRIPT-CONTINUED" not in r.stdout
        assert f"the CUDA driver library {lib} called exit(0) inside its library initialisers" in r.stderr, r.stderr


def test_exit_in_cuinit_is_reported_with_its_status(tmp_path: Path) -> None:
    lib = _driver(tmp_path, "cuinit", "CUresult cuInit(unsigned f) { (void)f; exit(0); }\n")
    # The probe behind driver_summary() resolves only these four entry points.
    r = _run(SUMMARY, env={"LD_LIBRARY_PATH": str(lib.parent)})
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "SCRIPT-CONTINUED" not in r.stdout
    assert f"the CUDA driver library {lib} called exit(0) inside cuInit" in r.stderr, r.stderr
    lib3 = _driver(tmp_path, "cuinit3", "CUresult cuInit(unsigned f) { (void)f; exit(3); }\n")
    r = _run(SUMMARY, env={"LD_LIBRARY_PATH": str(lib3.parent)})
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "called exit(3) inside cuInit" in r.stderr


def test_a_full_fake_driver_calling_exit_in_cuinit_from_cuda_load(tmp_path: Path) -> None:
    # rpjrt.cuda.load resolves all its entry points first: a driver with every one of them
    # (stubs) whose cuInit exits.
    names = subprocess.run(
        ["grep", "-o", r'"cu[A-Za-z0-9_]*"', str(Path(__file__).parents[2] / "crates/rpjrt-cuda/src/raw.rs")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    stubs = "".join(
        f"CUresult {n.strip(chr(34))}(void) {{ return 0; }}\n"
        for n in sorted(set(names))
        if n.strip(chr(34)) not in ("cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuGetErrorName")
    )
    lib = _driver(tmp_path, "full", stubs + "CUresult cuInit(unsigned f) { (void)f; exit(0); }\n")
    r = _run(LOAD.format(lib=str(lib)))
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "SCRIPT-CONTINUED" not in r.stdout
    assert f"the CUDA driver library {lib} called exit(0) inside cuInit" in r.stderr, r.stderr


def test_plugins_still_load_and_report_exit_as_plugins(tmp_path: Path) -> None:
    fake = str(fake_plugin_path())
    r = _run(f"p = rpjrt.Plugin({fake!r}); print('OK', p.api_version)")
    assert "OK" in _raised(r)
    src = tmp_path / "x.c"
    src.write_text(
        "#include <stdlib.h>\n__attribute__((constructor)) static void c(void){ exit(0); }\n"
        "const void* GetPjrtApi(void){ return 0; }\n"
    )
    so = tmp_path / "libx.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    r = _run(f"rpjrt.Plugin({str(so)!r})")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert f"the PJRT plugin {so} called exit(0) inside its library initialisers" in r.stderr
    # A truncated plugin and a FIFO plugin: refused as before.
    lib = _truncated(tmp_path, 3000, "plugin.so")
    assert "truncated" in _raised(_run(f"rpjrt.Plugin({str(lib)!r})"))
    fifo = tmp_path / "p.so"
    os.mkfifo(fifo)
    assert "FIFO" in _raised(_run(f"rpjrt.Plugin({str(fifo)!r})", timeout=30))


def test_no_driver_still_gives_the_loaders_message() -> None:
    out = _raised(_run("rpjrt.cuda.load()", env={"LD_LIBRARY_PATH": ""}))
    assert "cannot load the CUDA driver libcuda.so.1" in out, out
    assert "cannot open shared object file" in out, out
    assert shutil.which("cc"), "the C compiler `cc` builds the fake drivers above"
