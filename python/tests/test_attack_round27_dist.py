"""Round 27 (distributed stores, launchers, misbehaving plugins): regressions.

- A library exporting ``GetPjrtApi`` as data was jumped to (SIGSEGV); now refused, by
  the symbol's type in the file and by the address's mapping.
- A ``GetPjrtApi`` returning unreadable memory (a wild pointer, a table running off its
  mapping, an extension chain pointing nowhere) was read (SIGSEGV); now refused.
- A plugin calling ``exit(0)`` while loading or creating a client ended a Python program
  with status 0, silently; now a message naming the plugin and step, and status 1.
- A barrier counter with a far-off oldest generation deleted keys for hours; a counter at
  ``u64::MAX`` wrapped and was later called "not a number".
- Half of rpjrt's own launcher pair was passed over for another launcher's variables.
- ``BoundedStore(op_timeout=0)`` reported every healthy call as a store not answering
  (and a set that happened as failed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rpjrt import distributed

from .conftest import fake_plugin_path


def _run(code: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, **(env or {})),
    )


def _build(tmp_path: Path, name: str, source: str, suffix: str = ".c") -> str:
    src = tmp_path / f"{name}{suffix}"
    src.write_text(source)
    so = tmp_path / f"lib{name}.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    return str(so)


def _load(so: str) -> subprocess.CompletedProcess[str]:
    return _run(
        f"""
        import rpjrt
        try:
            rpjrt.Plugin({so!r}, timeout=20)
            print("LOADED")
        except rpjrt.PluginLoadError as e:
            print("REFUSED", e)
        print("CONTINUED")
        """
    )


# --- 1: GetPjrtApi must be code --------------------------------------------------------


def test_getpjrtapi_exported_as_data_is_refused(tmp_path: Path) -> None:
    so = _build(tmp_path, "data", "const char GetPjrtApi[64] = {0};\n")
    r = _load(so)
    assert r.returncode == 0, r.stderr
    assert "REFUSED" in r.stdout and "as a data object, not a function" in r.stdout, r.stdout
    assert "CONTINUED" in r.stdout
    # A thread-local variable is no function either.
    so = _build(tmp_path, "tls", "__thread char GetPjrtApi[64];\n")
    r = _load(so)
    assert r.returncode == 0, r.stderr
    assert "as a thread-local variable, not a function" in r.stdout, r.stdout


def test_getpjrtapi_typed_as_function_but_in_data_is_refused(tmp_path: Path) -> None:
    # The file's symbol type can be forged: the address's mapping decides too.
    so = _build(
        tmp_path,
        "forged",
        """
        .data
        .globl GetPjrtApi
        .type GetPjrtApi, @function
    GetPjrtApi:
        .quad 0, 0, 0, 0
        .section .note.GNU-stack,"",@progbits
    """,
        suffix=".s",
    )
    r = _load(so)
    assert r.returncode == 0, r.stderr
    assert "is not in executable memory" in r.stdout, r.stdout


# --- 2: the table must be readable -----------------------------------------------------

_EDGE = r"""
#include <sys/mman.h>
#include <stddef.h>
const void* GetPjrtApi(void){
  char* p = mmap(0, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  munmap(p + 4096, 4096);
  size_t* s = (size_t*)(p + 4096 - SIZE_AT); *s = 2000;
  return s; }
"""

_TABLE = r"""
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
static size_t table[200];
const void* GetPjrtApi(void){
  char* p = mmap(0, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  size_t* t = (size_t*)(p + 4096 - 48);
  t[0] = 40 + 8 * 3; t[1] = EXT; t[2] = 24; t[3] = 0;
  t[4] = ((uint64_t)MINOR << 32) | MAJOR;
  if (OFF_PAGE) { munmap(p + 4096, 4096); return t; }
  for (int i = 0; i < 5; i++) table[i] = t[i];
  table[0] = 40 + 8 * 150;
  return table; }
"""


@pytest.mark.parametrize(
    "name,source,says",
    [
        ("wild", "const void* GetPjrtApi(void){ return (const void*)0xdeadbeef0; }\n",
         "whose struct_size (8 bytes) is not readable memory"),
        ("edge8", _EDGE.replace("SIZE_AT", "8"), "whose header (struct_size 2000)"),
        ("edge48", _TABLE.replace("EXT", "0").replace("MINOR", "60").replace("MAJOR", "0")
         .replace("OFF_PAGE", "1").replace("40 + 8 * 3", "2000"),
         "whose function table (struct_size 2000)"),
        ("ext", _TABLE.replace("EXT", "0xdeadbeef0").replace("MINOR", "60")
         .replace("MAJOR", "0").replace("OFF_PAGE", "0"),
         "its extension chain points at 0xdeadbeef0"),
    ],
)
def test_unreadable_tables_are_refused(tmp_path: Path, name: str, source: str, says: str) -> None:
    so = _build(tmp_path, name, source)
    r = _load(so)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "REFUSED" in r.stdout and says in r.stdout, r.stdout
    assert "not readable memory" in r.stdout, r.stdout


# --- 4: exit() inside a plugin call is not a silent success -----------------------------


@pytest.mark.parametrize("entry", ["GetPjrtApi", "PJRT_Client_Create", "PJRT_Plugin_Initialize"])
def test_a_plugin_calling_exit_is_reported_and_fails(entry: str) -> None:
    fake = str(fake_plugin_path())
    r = _run(
        f"""
        import rpjrt
        c = rpjrt.Client({fake!r}, timeout=20)
        print("SCRIPT-CONTINUED")
        """,
        env={"RPJRT_FAKE_EXIT_ON": entry},
    )
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "SCRIPT-CONTINUED" not in r.stdout
    assert f"the PJRT plugin {fake} called exit(0) inside {entry}" in r.stderr, r.stderr


def test_exit_in_a_library_initialiser_is_reported(tmp_path: Path) -> None:
    so = _build(
        tmp_path,
        "exitctor",
        "#include <stdlib.h>\n__attribute__((constructor)) static void c(void){ exit(0); }\n"
        "const void* GetPjrtApi(void){ return 0; }\n",
    )
    r = _load(so)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert f"the PJRT plugin {so} called exit(0) inside its library initialisers" in r.stderr


def test_a_nonzero_exit_keeps_its_status_and_a_normal_exit_is_untouched(tmp_path: Path) -> None:
    so = _build(
        tmp_path,
        "exit3",
        "#include <stdlib.h>\nconst void* GetPjrtApi(void){ exit(3); }\n",
    )
    r = _load(so)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "called exit(3) inside GetPjrtApi" in r.stderr
    # A program that used a plugin and then exits (with any status) is left alone, and so
    # is a child the plugin's caller forks after loading.
    fake = str(fake_plugin_path())
    r = _run(
        f"""
        import os, sys, rpjrt
        c = rpjrt.Client({fake!r}, timeout=20)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        print("DONE")
        sys.exit(0)
        """
    )
    assert r.returncode == 0 and "DONE" in r.stdout, r.stderr
    assert "called exit" not in r.stderr


# --- 3 and 7: barrier counters from the store ------------------------------------------


def test_far_off_and_limit_counters_are_bounded_and_refused() -> None:
    r = _run(
        """
        import time
        import rpjrt
        import rpjrt.distributed as D
        for s in (D.InMemoryStore(), D.TcpStore.host("127.0.0.1:0", "t")):
            s.set("rpjrt:barrier-uses:b:0", b"100000000000 0")
            t = time.monotonic()
            s.barrier("b", 0, 1, 1.0)
            assert time.monotonic() - t < 3, time.monotonic() - t
            used, left = s.try_get("rpjrt:barrier-uses:b:0").split()
            assert used == b"100000000001" and 0 < int(left) <= 64, (used, left)
            s.set("rpjrt:barrier-uses:c:0", b"18446744073709551615")
            for _ in range(2):
                try:
                    s.barrier("c", 0, 1, 1.0)
                except rpjrt.DataLossError as e:
                    assert "largest count" in str(e) and "not a number" not in str(e), e
                else:
                    raise AssertionError("a counter at u64::MAX was used")
            assert s.try_get("rpjrt:barrier-uses:c:0") == b"18446744073709551615"
        print("OK")
        """,
        timeout=30,
    )
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


# --- 5: half of a launcher pair ---------------------------------------------------------


@pytest.mark.parametrize(
    "extra,says",
    [
        ({"RPJRT_PROCESS_ID": "1", "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
          "MASTER_PORT": "29500"}, "RPJRT_PROCESS_ID is set but RPJRT_NUM_PROCESSES is not"),
        ({"RPJRT_NUM_PROCESSES": "4", "SLURM_PROCID": "0", "SLURM_NTASKS": "2",
          "SLURM_JOB_NODELIST": "n1"}, "RPJRT_NUM_PROCESSES is set but RPJRT_PROCESS_ID is not"),
        ({"RPJRT_PROCESS_ID": "1"}, "RPJRT_PROCESS_ID is set but RPJRT_NUM_PROCESSES is not"),
        ({"RANK": "1", "SLURM_PROCID": "0", "SLURM_NTASKS": "2"},
         "RANK is set but WORLD_SIZE is not"),
    ],
)
def test_half_a_launcher_pair_is_refused(extra: dict[str, str], says: str) -> None:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("RPJRT_", "RANK", "WORLD_SIZE", "MASTER_", "SLURM_", "OMPI_",
                                 "PMI_", "TORCHELASTIC"))}
    r = subprocess.run(
        [sys.executable, "-c",
         "import rpjrt, rpjrt.distributed as D\n"
         "try: print(D.detect())\n"
         "except rpjrt.InvalidArgumentError as e: print('refused:', e)"],
        env=dict(base, **extra), capture_output=True, text=True, timeout=60,
    )
    assert r.stdout.startswith("refused:") and says in r.stdout, r.stdout + r.stderr


# --- 6: op_timeout is a bound above 0 ---------------------------------------------------


@pytest.mark.parametrize("bad", [0, 0.0, -1, float("nan"), float("inf")])
def test_op_timeout_must_be_above_zero(bad: float) -> None:
    with pytest.raises(ValueError, match="op_timeout must be a"):
        distributed.BoundedStore(distributed.InMemoryStore(), op_timeout=bad)
    with pytest.raises(ValueError, match="op_timeout must be a"):
        distributed.RedisStore(object(), op_timeout=bad)


def test_get_timeout_zero_still_means_look_once() -> None:
    inner = distributed.InMemoryStore()
    s = distributed.BoundedStore(inner, op_timeout=1e-3)
    inner.set("k", b"v")
    assert s.get("k", 0) == b"v"


def test_a_call_no_worker_began_is_never_made(monkeypatch: pytest.MonkeyPatch) -> None:
    class Slow(distributed._Worker):
        def _run(self) -> None:
            time.sleep(0.3)
            super()._run()

    monkeypatch.setattr(distributed, "_Worker", Slow)
    monkeypatch.setattr(distributed, "_idle", [])
    inner = distributed.InMemoryStore()
    s = distributed.BoundedStore(inner, op_timeout=0.05)
    with pytest.raises(TimeoutError, match=r"set\('a'\) was not made") as e:
        s.set("a", b"v")
    assert "paused" not in str(e.value)
    time.sleep(0.6)
    assert inner.try_get("a") is None  # the set it reported as not made did not happen
    assert s._stuck == 0  # and nothing is counted as left running
