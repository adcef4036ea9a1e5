"""rpjrt.cuda against a fake CUDA driver that lies (round 23 of the outside probe).

The fake is crates/rpjrt-cuda/tests/fake/fakecuda.c, built here with the system C compiler
(``cc``) into a temporary ``libcuda.so.1``; ``FAKECUDA_MODE`` chooses how it lies. Every case
runs in a child process (a crash there fails the test instead of ending pytest). No GPU is
needed; without ``cc`` these tests fail and say so.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import REPO, fake_plugin_path, run_python

FAKE_SRC = REPO / "crates" / "rpjrt-cuda" / "tests" / "fake" / "fakecuda.c"


@pytest.fixture(scope="module")
def fake_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc")
    if cc is None:
        pytest.fail("the C compiler `cc` is needed to build the fake CUDA driver " + str(FAKE_SRC))
    d = tmp_path_factory.mktemp("fakecuda")
    r = subprocess.run(
        [cc, "-shared", "-fPIC", "-O0", "-o", str(d / "libcuda.so.1"), str(FAKE_SRC)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, f"cc failed to build the fake CUDA driver: {r.stderr}"
    return d


def _run(fake_dir: Path, mode: str, code: str, timeout: float = 60, env: dict[str, str] | None = None) -> str:
    """Runs `code` in a child with the fake driver as `LIB` (and as libcuda.so.1 on the
    loader's path); returns its stdout, failing on a crash or a non-zero exit."""
    lib = fake_dir / "libcuda.so.1"
    prelude = f"import ctypes, rpjrt, rpjrt.cuda\nLIB = {str(lib)!r}\n"
    prelude += "calls = lambda name: ctypes.CDLL(LIB).fake_calls(name.encode())\n"
    r = run_python(
        prelude + code,
        env={"FAKECUDA_MODE": mode, "LD_LIBRARY_PATH": str(fake_dir), **(env or {})},
        timeout=timeout,
    )
    assert r.returncode == 0, f"child exited {r.returncode}: {r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def test_huge_device_to_host_copies_are_refused_not_aborted(fake_dir: Path) -> None:
    out = _run(
        fake_dir,
        "ok",
        """
c = rpjrt.cuda.load(LIB).context(0)
m = c.alloc(16)
assert c.memcpy_dtoh(m.ptr, 16) == b"\\x5a" * 16
assert m.to_bytes() == b"\\x5a" * 16
for n in (1 << 40, 1 << 62, 2**63 + 5, 2**64 - 1):
    try:
        c.memcpy_dtoh(m.ptr, n)
    except rpjrt.Error as e:
        print("dtoh", n, type(e).__name__, str(e))
big = c.alloc(1 << 40)
try:
    big.to_bytes()
except rpjrt.Error as e:
    print("to_bytes", type(e).__name__, str(e))
print("alive", calls("cuMemcpyDtoH"))
""",
    )
    lines = out.splitlines()
    for n in (1 << 40, 1 << 62):
        line = next(l for l in lines if l.startswith(f"dtoh {n} "))
        assert "ResourceExhaustedError" in line and f"{n} bytes" in line, line
    for n in (2**63 + 5, 2**64 - 1):
        line = next(l for l in lines if l.startswith(f"dtoh {n} "))
        assert "InvalidArgumentError" in line and f"{n} bytes is more than any host allocation" in line, line
    line = next(l for l in lines if l.startswith("to_bytes"))
    assert "ResourceExhaustedError" in line and str(1 << 40) in line, line
    # The refused copies never reached the driver (two good copies did).
    assert "alive 2" in out, out


def test_null_pointers_and_handles_with_success_are_refused(fake_dir: Path) -> None:
    cases = {
        "nullhost": ("c.alloc_pinned(16)", "cuMemAllocHost reported success but returned a NULL pointer for 16 bytes"),
        "nulldev": ("c.alloc(64)", "cuMemAlloc reported success but returned device address 0 for 64 bytes"),
        "nullmod": ("c.load_ptx('.entry k() { ret; }')", "cuModuleLoadData reported success but returned a NULL module handle"),
        "nullfunc": ("c.load_ptx('.entry k() { ret; }').function('k')", "returned a NULL function handle for \"k\""),
        "nullstream": ("c.stream()", "cuStreamCreate reported success but returned a NULL stream handle"),
        "nullevent": ("c.event(True)", "cuEventCreate reported success but returned a NULL event handle"),
    }
    for mode, (call, want) in cases.items():
        out = _run(
            fake_dir,
            mode,
            f"""
c = rpjrt.cuda.load(LIB).context(0)
try:
    {call}
except rpjrt.InternalError as e:
    print("ERR", str(e))
""",
        )
        assert "ERR" in out and want in out, (mode, out)
    out = _run(
        fake_dir,
        "nullctx",
        """
try:
    rpjrt.cuda.load(LIB).context(0)
except rpjrt.InternalError as e:
    print("ERR", str(e))
""",
    )
    assert "cuDevicePrimaryCtxRetain reported success but returned a NULL context" in out, out


def test_a_device_name_without_a_terminator_is_read_within_its_buffer(fake_dir: Path) -> None:
    out = _run(fake_dir, "nonul", "print(repr(rpjrt.cuda.load(LIB).device_name(0)))")
    assert out.strip() == repr("A" * 256), out


def test_block_sizes_whose_product_wraps_are_refused(fake_dir: Path) -> None:
    out = _run(
        fake_dir,
        "ok",
        """
c = rpjrt.cuda.load(LIB).context(0)
f = c.load_ptx(".entry k() { ret; }").function("k")
for block in [(2**22, 2**21, 2**21), (2**31, 2**31, 2**31), (2**16, 2**16), (1, 1, 65)]:
    try:
        c.launch(f, (1,), block, [])
    except rpjrt.InvalidArgumentError as e:
        print("REFUSED", str(e))
try:
    c.launch(f, (1, 65536), (32,), [])
except rpjrt.InvalidArgumentError as e:
    print("REFUSED", str(e))
print("launches", calls("cuLaunchKernel"))
c.launch(f, (4,), (256,), [])
print("launches", calls("cuLaunchKernel"))
""",
    )
    refused = [l for l in out.splitlines() if l.startswith("REFUSED")]
    assert len(refused) == 5, out
    assert all("CUDA allows at most 1024" in l for l in refused[:3]), refused
    assert "block z is 65, CUDA allows at most 64" in refused[3], refused
    assert "grid y is 65536, CUDA allows at most 65535" in refused[4], refused
    assert "launches 0" in out and "launches 1" in out, out


def test_a_failed_wait_keeps_the_copy_pending(fake_dir: Path) -> None:
    out = _run(
        fake_dir,
        "evfail1",
        """
c = rpjrt.cuda.load(LIB).context(0)
m = c.alloc(16)
p = c.alloc_pinned(16)
c.memcpy_dtoh_async(p, m.ptr)
try:
    p.to_bytes()
except rpjrt.Error as e:
    print("first", type(e).__name__, "cuEventSynchronize" in str(e))
print("second", p.to_bytes() == b"\\x5a" * 16, calls("cuEventSynchronize"))
p.write(b"x" * 16)
print("third", calls("cuEventSynchronize"))
""",
    )
    assert "first" in out and "True" in out.splitlines()[0], out
    # The second read waited again (a second cuEventSynchronize); once done, no more waits.
    assert "second True 2" in out, out
    assert "third 2" in out, out


def test_driver_waits_release_the_gil(fake_dir: Path) -> None:
    # cuEventSynchronize takes 2 s in this mode, like a long copy.
    out = _run(
        fake_dir,
        "slowev",
        """
import gc, threading, time
c = rpjrt.cuda.load(LIB).context(0)
m = c.alloc(16)
ticks = []
stop = False
def ticker():
    while not stop:
        ticks.append(time.monotonic())
        time.sleep(0.02)
t = threading.Thread(target=ticker)
t.start()
def during(f):
    t0 = time.monotonic()
    f()
    t1 = time.monotonic()
    return t1 - t0, len([x for x in ticks if t0 < x < t1])
p = c.alloc_pinned(16)
c.memcpy_htod_async(m.ptr, p)
print("htod_async", *during(lambda: c.memcpy_htod_async(m.ptr, p)))
print("dtoh_async", *during(lambda: c.memcpy_dtoh_async(p, m.ptr)))
print("to_bytes", *during(p.to_bytes))
# nbytes never waits for the buffer's lock while another thread waits for the device.
c.memcpy_htod_async(m.ptr, p)
w = threading.Thread(target=lambda: c.memcpy_htod_async(m.ptr, p))
w.start(); time.sleep(0.3)
t0 = time.monotonic(); n = p.nbytes; print("nbytes", n, time.monotonic() - t0)
w.join()
e = c.event()
e.record()
print("event", *during(e.synchronize))
def drop():
    global p
    del p
    gc.collect()
print("drop", *during(drop))
stop = True
t.join()
""",
    )
    for what in ("htod_async", "dtoh_async", "to_bytes", "event", "drop"):
        line = next(l for l in out.splitlines() if l.startswith(what + " "))
        took, n = float(line.split()[1]), int(line.split()[2])
        assert took >= 1.5, line  # it did wait for the (slow) event
        assert n >= 20, f"other threads were frozen during {what}: {line}"
    line = next(l for l in out.splitlines() if l.startswith("nbytes"))
    assert line.split()[1] == "16" and float(line.split()[2]) < 0.5, line


def test_new_pinned_memory_is_zeroed(fake_dir: Path) -> None:
    # The fake's cuMemAllocHost fills new memory with 0xAB, as reused memory would hold.
    out = _run(
        fake_dir,
        "ok",
        "c = rpjrt.cuda.load(LIB).context(0)\nprint(c.alloc_pinned(4096).to_bytes() == bytes(4096))",
    )
    assert out.strip() == "True", out


def test_invalid_versions_and_counts_are_named(fake_dir: Path) -> None:
    out = _run(
        fake_dir,
        "negver",
        """
print("summary", rpjrt.cuda.driver_summary())
try:
    rpjrt.cuda.load(LIB).driver_version
except rpjrt.Error as e:
    print("version", str(e))
""",
    )
    assert "the driver reported an invalid CUDA version (-123456)" in out, out
    assert "-123." not in out, out
    assert "returned an invalid (negative) driver version -123456" in out, out
    out = _run(
        fake_dir,
        "negcount",
        """
print("summary", rpjrt.cuda.driver_summary())
d = rpjrt.cuda.load(LIB)
for f in (d.device_count, lambda: d.context(0), lambda: d.device_name(0)):
    try:
        f()
    except rpjrt.Error as e:
        print("count", str(e))
""",
    )
    assert "the driver reported an invalid device count (-5)" in out, out
    assert out.count("invalid (negative) device count -5") == 3, out
    assert "sees -5" not in out, out


def test_a_cuinit_failure_has_one_code(fake_dir: Path) -> None:
    out = _run(
        fake_dir,
        "initweird",
        """
print("summary", rpjrt.cuda.driver_summary())
try:
    rpjrt.cuda.load(LIB)
except rpjrt.Error as e:
    print("load", type(e).__name__, e.code, str(e))
""",
    )
    assert "FAILED_PRECONDITION" in next(l for l in out.splitlines() if l.startswith("summary")), out
    line = next(l for l in out.splitlines() if l.startswith("load"))
    assert line.startswith("load FailedPreconditionError FAILED_PRECONDITION"), line
    assert "cuInit failed" in line and "12345" in line, line


def test_a_hanging_driver_probe_is_bounded_and_named(fake_dir: Path) -> None:
    plugin = fake_plugin_path()
    out = _run(
        fake_dir,
        "inithang",
        f"""
import os, time
t = time.monotonic()
print("summary", rpjrt.cuda.driver_summary(), time.monotonic() - t)
t = time.monotonic()
try:
    rpjrt.Client({str(plugin)!r}, timeout=60)
except rpjrt.Error as e:
    print("client", type(e).__name__, time.monotonic() - t, str(e).replace(chr(10), " "))
os._exit(0)  # the probe's thread is still inside cuInit
""",
        timeout=90,
        env={
            "RPJRT_FAKE_ATTRIBUTES": "cuda_version=int64:13000",
            "RPJRT_FAKE_FAIL": "PJRT_Client_Create:FAILED_PRECONDITION:No visible GPU devices.",
        },
    )
    line = next(l for l in out.splitlines() if l.startswith("summary"))
    assert "rpjrt's probe of the CUDA driver libcuda.so.1" in line and "did not return" in line, line
    assert float(line.split()[-1]) < 15, line
    line = next(l for l in out.splitlines() if l.startswith("client"))
    assert line.split()[1] == "FailedPreconditionError", line
    assert float(line.split()[2]) < 15, line
    assert "No visible GPU devices" in line, line
    assert "rpjrt's probe of the CUDA driver libcuda.so.1" in line, line
    # Not the plugin blamed for rpjrt's own probe.
    assert "the plugin did not return" not in line, line
