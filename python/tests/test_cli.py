"""The `rpjrt` console script runs the same CLI as the Rust binary."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import run_python


def test_python_m_rpjrt_help() -> None:
    r = subprocess.run([sys.executable, "-m", "rpjrt", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Usage: rpjrt" in r.stdout and "info" in r.stdout


def test_console_script_info(plugin_path: str, plugin_label: str) -> None:
    exe = shutil.which("rpjrt", path=os.path.dirname(sys.executable))
    assert exe, "the rpjrt console script is not installed next to this interpreter"
    r = subprocess.run([exe, "info", plugin_path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ("0.81" if plugin_label == "old" else "0.115") in r.stdout


def test_console_script_finds_plugin_wheels_itself() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RPJRT_PLUGIN"}
    r = subprocess.run([sys.executable, "-m", "rpjrt", "info"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "PJRT" in r.stdout


def test_cli_errors_are_exit_codes_not_crashes() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "info", "/nonexistent/plugin.so"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1 and "rpjrt:" in r.stderr
    r = subprocess.run([sys.executable, "-m", "rpjrt", "no-such-command"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2


def test_file_names_that_are_not_utf8_reach_the_tool(plugin_path: str, tmp_path: Path) -> None:
    # Python holds such a name with surrogate escapes; the tool must get the same bytes.
    fixtures = Path(__file__).resolve().parents[2] / "crates" / "rpjrt" / "tests" / "fixtures"
    program = os.fsencode(tmp_path) + b"/prog-\xff\xfe.mlir"
    shutil.copy(os.fsencode(fixtures / "mul_add.mlir"), program)
    out = os.fsencode(tmp_path) + b"/out-\xff.npz"
    args = [b"run", program, b"--plugin", os.fsencode(plugin_path), b"-i", b"0=[1,2,3,4,5,6,7,8]", b"-i", b"1=[2,2,2,2,2,2,2,2]:f32"]
    r = subprocess.run([sys.executable, "-m", "rpjrt", *args, b"--out", out], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert os.path.exists(out) and "out0" in r.stdout
    # A plugin named by bytes that are not UTF-8 can only be a path: this one is missing.
    r = subprocess.run([sys.executable, "-m", "rpjrt", "info", b"/nonexistent/cpu\xff"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "cannot load PJRT plugin /nonexistent/cpu" in r.stderr, r.stderr
    # Where only text makes sense, the parser refuses it with a usage error.
    r = subprocess.run([sys.executable, "-m", "rpjrt", "info", "-o", b"\xff=1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "UTF-8" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_import_does_not_pull_numpy(plugin_path: str) -> None:
    r = run_python(
        f"""
        import array, sys
        import rpjrt
        with rpjrt.Client({plugin_path!r}) as c:
            b = c.put(array.array("f", [1, 2, 3]))
            assert b.to_host().tolist() == [1.0, 2.0, 3.0]
            assert b.tolist() == [1.0, 2.0, 3.0] and b.dtype == "float32"
        assert "numpy" not in sys.modules, "numpy was imported"
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_python_m_rpjrt_conform_runs_isolated_checks(plugin_path: str, tmp_path: Path) -> None:
    # The console script's process is the interpreter: conform's children are started as
    # `python -m rpjrt conform-child ...`, and a crash in one is still isolated.
    report = tmp_path / "report.json"
    env = dict(os.environ, RPJRT_CONFORM_TEST_CRASH="buffers.scalar")
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt.conform", plugin_path, "--only", "api.version,buffers.s*", "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 1, r.stderr
    doc = json.loads(report.read_text())
    assert doc["schema"] == "rpjrt-conform" and doc["schema_version"] == 2
    outcomes = {x["name"]: x["outcome"] for x in doc["results"]}
    assert outcomes["buffers.scalar"] == "crash"
    assert outcomes["api.version"] == "pass"
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "conform", plugin_path, "--only", "api.*", "--json", "-"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["summary"]["fail"] == 0


def test_console_script_plugins_and_info_by_name(plugin_paths_all: dict[str, str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RPJRT_PLUGIN", "VIRTUAL_ENV", "RPJRT_PLUGIN_PATH")}
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "plugins", "--json"], capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode == 0, r.stderr
    found = {os.path.realpath(p["path"]): p for p in json.loads(r.stdout)["plugins"]}
    # The CLI finds what Python's discovery finds, through the same Rust code.
    assert found[os.path.realpath(plugin_paths_all["old"])]["source"] == "entry point xla_plugins:xla_cpu_pjrt"
    assert found[os.path.realpath(plugin_paths_all["new"])]["source"] == "package lammps-jax-pjrt-cpu"
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "info", "lammps-jax-pjrt-cpu"], capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode == 0, r.stderr
    assert "0.115" in r.stdout


def test_run_jax_exported_program_with_numpy_files(plugin_path: str, tmp_path: Path) -> None:
    # A jax.export portable artifact, inputs written by numpy (.npy and a compressed .npz),
    # outputs read back by numpy and compared with JAX's own result.
    import jax
    import jax.numpy as jnp
    import numpy as np

    def f(x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jnp.sin(x) * y + 1.0, (x > 0).astype(jnp.int32).sum(axis=0)

    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    y = np.linspace(-1, 1, 4, dtype=np.float32)
    spec = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in (x, y)]
    exported = jax.export.export(jax.jit(f), platforms=["cpu"])(*spec)
    program = tmp_path / "f.mlirbc"
    program.write_bytes(exported.mlir_module_serialized)
    np.save(tmp_path / "x.npy", x)
    np.savez_compressed(tmp_path / "inputs.npz", arg1=y)
    out = tmp_path / "out.npz"
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "run", str(program), "--plugin", plugin_path]
        + ["--input", f"0={tmp_path / 'x.npy'}", "--input", str(tmp_path / "inputs.npz"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    want = [np.asarray(a) for a in jax.jit(f)(x, y)]
    with np.load(out) as got:
        assert sorted(got.files) == ["out0", "out1"]
        np.testing.assert_allclose(got["out0"], want[0], rtol=1e-6)
        assert got["out1"].dtype == np.int32
        np.testing.assert_array_equal(got["out1"], want[1])
    # A wrong dtype from numpy is a one-line usage error.
    np.save(tmp_path / "x64.npy", x.astype(np.float64))
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "run", str(program), "--plugin", plugin_path, "--random"]
        + ["--input", f"0={tmp_path / 'x64.npy'}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "float64" in r.stderr, r.stderr


def test_run_numpy_interop_every_plain_dtype(plugin_path: str, tmp_path: Path) -> None:
    # .npy files numpy writes (big-endian too, 0-d and empty) are read exactly, and
    # numpy reads what rpjrt writes: an identity program returns each input unchanged.
    import numpy as np

    for dtype in ("bool", "int8", "uint16", ">i4", "int64", "float16", "float32", ">f8", "complex64", "complex128"):
        for shape in ((2, 3), (), (0, 4)):
            a = (np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) % 3).astype(dtype)
            np.save(tmp_path / "a.npy", a)
            t = np.dtype(dtype).newbyteorder("=")
            mlir_t = {
                "bool": "i1", "int8": "i8", "uint16": "ui16", "int32": "i32", "int64": "i64",
                "float16": "f16", "float32": "f32", "float64": "f64",
                "complex64": "complex<f32>", "complex128": "complex<f64>",
            }[t.name]
            tensor = f"tensor<{'x'.join(map(str, shape)) + 'x' if shape else ''}{mlir_t}>"
            prog = tmp_path / "id.mlir"
            prog.write_text(
                f"func.func public @main(%a: {tensor}) -> {tensor} {{\n  return %a : {tensor}\n}}\n"
            )
            out = tmp_path / "out.npy"
            r = subprocess.run(
                [sys.executable, "-m", "rpjrt", "run", str(prog), "--plugin", plugin_path]
                + ["--input", f"0={tmp_path / 'a.npy'}", "--out", str(out)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert r.returncode == 0, (dtype, shape, r.stderr)
            got = np.load(out)
            assert got.dtype == t and got.shape == shape, (dtype, shape, got.dtype, got.shape)
            np.testing.assert_array_equal(got, a)


def test_console_script_reports_a_plugin_crash_instead_of_dying() -> None:
    """`info` runs in a child (`python -m rpjrt` again, for the console script): the plugin's
    segfault becomes exit code 1 and a message, and `plugins` lists the broken library."""
    from .conftest import fake_plugin_path

    fake = str(fake_plugin_path())
    env = dict(os.environ, RPJRT_FAKE_CRASH_ON="PJRT_Client_Create")
    exe = shutil.which("rpjrt", path=os.path.dirname(sys.executable))
    assert exe
    r = subprocess.run([exe, "info", fake], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "SIGSEGV" in r.stderr and "the plugin crashed" in r.stderr, r.stderr

    env = dict(os.environ, RPJRT_FAKE_CRASH_ON="GetPjrtApi", RPJRT_PLUGIN=fake)
    r = subprocess.run([exe, "plugins", "--json"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    row = next(p for p in json.loads(r.stdout)["plugins"] if p["source"] == "RPJRT_PLUGIN")
    assert row["pjrt_version"] is None and "crashed" in row["problem"], row
