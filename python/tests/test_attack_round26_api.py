"""Round 26 of outside checks: the core Python API used as a demanding JAX/PyTorch user
would (host copies that cannot be allocated, sub-byte shapes past 2**63 bits, daemon
threads inside Python code rpjrt calls at exit, JAX conversion of a Buffer)."""

from __future__ import annotations

import operator
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rpjrt
import rpjrt.transfer as T


_LIMITED = """
def vm():
    return int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
"""


def _child(plugin_path: str, body: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    code = "import os, sys, time, threading, resource\nimport numpy as np, rpjrt\n"
    code += "from rpjrt import transfer as T\n" + _LIMITED
    code += f"c = rpjrt.Client({plugin_path!r})\n" + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )


# -- 1. host copies that cannot be allocated ----------------------------------------------



@pytest.mark.parametrize("how", ["tobytes", "to_host", "tolist", "to_numpy"])
def test_a_host_copy_that_cannot_be_allocated_is_resource_exhausted(plugin_path: str, how: str) -> None:
    # int4[5 << 30]: 2.5 GiB on the device, 5 GiB as a host array; only 4 GiB more may be
    # mapped. tobytes/to_host/tolist aborted the process (Rust's infallible allocation).
    r = _child(
        plugin_path,
        f"""
        b = T.uninitialized(c, "int4", [5 << 30])
        resource.setrlimit(resource.RLIMIT_AS, (vm() + (4 << 30), resource.RLIM_INFINITY))
        try:
            b.{how}()
            print("returned")
        except MemoryError as e:
            print(type(e).__name__, isinstance(e, rpjrt.Error), str(e)[:200])
        """,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith(("ResourceExhaustedError True", "MemoryError")), last
    if how != "to_numpy":  # numpy's own allocation there
        assert "int4[5368709120]" in last, last


@pytest.mark.parametrize("how", ["tobytes", "out_F"])
def test_a_strided_or_byte_copy_of_a_float_buffer_fails_cleanly_under_a_limit(plugin_path: str, how: str) -> None:
    r = _child(
        plugin_path,
        f"""
        b = T.uninitialized(c, "float32", [32768, 12288])
        out = np.empty((32768, 12288), np.float32, order="F")
        resource.setrlimit(resource.RLIMIT_AS, (vm() + (1 << 30), resource.RLIM_INFINITY))
        try:
            b.tobytes() if {how!r} == "tobytes" else b.to_numpy(out=out)
            print("returned")
        except rpjrt.ResourceExhaustedError as e:
            print("ResourceExhaustedError", str(e)[:200])
        """,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("ResourceExhaustedError") and "float32[32768, 12288]" in last, last


# -- 2. sub-byte shapes of more than 2**63 - 1 bits ---------------------------------------

N = 2**31


@pytest.mark.parametrize(
    "dtype,shape",
    [("int4", [N, N]), ("uint2", [2**63 - 1]), ("float4_e2m1fn", [N, N]), ("int2", [2**62, 2]), ("uint8", [2**61])],
)
def test_shapes_past_2_pow_63_bits_are_refused_for_every_buffer_kind(
    client: rpjrt.Client, dtype: str, shape: list[int]
) -> None:
    for make in (
        lambda: T.uninitialized(client, dtype, shape),
        lambda: T.error_buffer(client, dtype, shape, "INTERNAL", "x"),
        lambda: T.default_layout(client, dtype, shape),
    ):
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"is more than 2\*\*63 - 1 bits"):
            make()
    # Just under the limit: the plugin decides (no size error from rpjrt's check).
    T.default_layout(client, "int4", [2**60])


def test_programs_with_tensors_past_2_pow_63_bits_are_refused_before_compiling(client: rpjrt.Client) -> None:
    t = f"tensor<{N}x{N}xi4>"
    param = f"""func.func public @main(%a: {t}) -> tensor<1x1xi4> {{
      %0 = stablehlo.slice %a [{N-1}:{N}, {N-1}:{N}] : ({t}) -> tensor<1x1xi4>
      return %0 : tensor<1x1xi4>
    }}"""
    output = f"""func.func public @main(%a: tensor<i4>) -> {t} {{
      %0 = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<i4>) -> {t}
      return %0 : {t}
    }}"""
    for prog in (param, output):
        with pytest.raises(rpjrt.InvalidArgumentError, match=r"i4\[2147483648, 2147483648\] is more than 2\*\*63 - 1 bits"):
            client.compile(prog)
    # A program of a legal int4 shape still compiles and runs.
    ok = output.replace(t, "tensor<2x3xi4>")
    assert client.compile(ok).output_shapes == [(2, 3)]


# -- 3. daemon threads inside Python code that rpjrt calls, at exit -----------------------

_DAEMON = """
def slow_bytes(offset, n):
    time.sleep(0.05)
    return bytes(n)
class LazyArray:
    def __array__(self, dtype=None, copy=None):
        time.sleep(0.05)
        return np.ones(1024, np.float32)
def loop(f):
    def run():
        while True:
            f()
    threading.Thread(target=run, daemon=True).start()
    time.sleep(0.3)
    print("main done", flush=True)
"""


@pytest.mark.parametrize(
    "call",
    [
        "loop(lambda: c.put(LazyArray()))",
        "exe = c.compile(open(os.path.join(os.environ['FIX'], 'identity_any.mlir')).read()"
        ".replace('0xf32', '1024xf32'))\nloop(lambda: exe(LazyArray()))",
        "loop(lambda: T.put_streaming(c, slow_bytes, dtype='uint8', shape=[1 << 16], chunk_bytes=4096, progress=False))",
        "loop(lambda: T.put_streaming(c, np.zeros(1 << 16, np.uint8), chunk_bytes=4096, "
        "progress=lambda d, t: time.sleep(0.05), progress_threshold=0))",
    ],
    ids=["put_array_like", "exe_arg_array_like", "put_streaming", "put_streaming_progress"],
)
def test_a_daemon_thread_inside_a_python_callback_lets_the_process_exit_cleanly(plugin_path: str, call: str) -> None:
    import os

    fixtures = os.path.join(os.path.dirname(__file__), "fixtures")
    for _ in range(3):
        r = subprocess.run(
            [sys.executable, "-c", f"import os, sys, time, threading\nimport numpy as np, rpjrt\n"
             f"from rpjrt import transfer as T\nc = rpjrt.Client({plugin_path!r})\n" + _DAEMON + call + "\n"],
            capture_output=True, text=True, timeout=60, env={**os.environ, "FIX": fixtures},
        )
        assert r.returncode == 0, (r.returncode, r.stderr[-1500:])
        assert r.stdout.strip().splitlines() == ["main done"], r.stdout
        assert "FATAL" not in r.stderr, r.stderr[-1500:]


# -- 4. JAX conversion, scalars, minor notes ----------------------------------------------


def test_jax_converts_a_buffer(client: rpjrt.Client) -> None:
    import jax.numpy as jnp
    b = client.put(np.arange(3, dtype=np.int16))
    for f in (jnp.asarray, jnp.array):
        a = f(b)
        assert a.dtype == np.int16 and a.tolist() == [0, 1, 2]
    assert jnp.add(jnp.asarray(b), 1).tolist() == [1, 2, 3]
    assert jnp.asarray(client.put(np.float32(1.5))).shape == ()


def test_a_one_element_buffer_converts_to_python_numbers_as_numpy_does(client: rpjrt.Client) -> None:
    f = client.put(np.float32(2.5))
    i = client.put(np.int32(7))
    z = client.put(np.complex64(1 + 2j))
    assert float(f) == 2.5 and int(f) == 2 and complex(f) == 2.5
    assert int(i) == 7 and operator.index(i) == 7 and [10, 20, 30, 40, 50, 60, 70, 80][i] == 80
    assert complex(z) == 1 + 2j
    with pytest.raises(TypeError):
        operator.index(f)  # numpy: only integer arrays are indices
    assert np.array([f, f]).tolist() == [2.5, 2.5]
    with pytest.raises(TypeError):
        float(client.put(np.arange(3, dtype=np.float32)))


def test_the_donate_refusal_says_what_is_accepted(client: rpjrt.Client) -> None:
    import os

    src = open(os.path.join(os.path.dirname(__file__), "fixtures", "identity_any.mlir")).read()
    exe = client.compile(src.replace("0xf32", "4xf32"))
    x = np.ones(4, np.float32)
    with pytest.raises(rpjrt.InvalidArgumentError, match="not set .*range, numpy array"):
        exe(x, donate={0})
    exe(client.put(x), donate=range(1))


def test_topology_has_an_informative_repr(client: rpjrt.Client) -> None:
    t = client.topology()
    r = repr(t)
    assert r.startswith("rpjrt.Topology(platform=") and "devices=" in r, r
    assert "object at 0x" not in r
