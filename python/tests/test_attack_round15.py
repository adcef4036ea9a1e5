"""Round 15 of outside checks: the classes rounds 13 and 14 fixed, attacked again.

- A session loader's failure keeps its kind (a MemoryError, an rpjrt error), as a
  conversion's and a custom-call handler's do; only other exceptions are the refusal of
  the slot's value.
- Temporaries of a killed writer of a long file name (shortened in the temporary) are
  removed like short names' are.
- Event.wait(timeout=) takes seconds by the package's one rule.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import rpjrt

ADD = """func.func public @main(%w: tensor<3xf32>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.add %w, %x : tensor<3xf32>
  return %0 : tensor<3xf32>
}"""


def _raising(exc: BaseException) -> Callable[[], Any]:
    def load() -> Any:
        raise exc

    return load


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (MemoryError("no room for the table"), rpjrt.ResourceExhaustedError),
        (rpjrt.ResourceExhaustedError("the loader's own"), rpjrt.ResourceExhaustedError),
        (KeyError("weights"), rpjrt.NotFoundError),
        (PermissionError("weights.bin"), rpjrt.PermissionDeniedError),
        (ValueError("bad value"), rpjrt.InvalidArgumentError),
    ],
)
def test_a_loaders_failure_keeps_its_kind(
    client: rpjrt.Client, raised: BaseException, expected: type
) -> None:
    s = rpjrt.Session(client)
    step = s.program(ADD, inputs=["w", "x"], outputs=["y"])
    s.bind_many({"w": _raising(raised), "x": np.ones(3, np.float32)})
    for how in (lambda: s.fetch("w"), step):
        with pytest.raises(expected) as err:
            how()
        assert err.value.__cause__ is raised, err.value
        assert 'slot "w"' in str(err.value) or "loader" in str(err.value), err.value


@pytest.mark.parametrize("raised", [KeyboardInterrupt("ki"), SystemExit(3)])
def test_a_loader_interrupted_raises_the_interruption(
    client: rpjrt.Client, raised: BaseException
) -> None:
    s = rpjrt.Session(client)
    s.bind_many({"w": _raising(raised)})
    with pytest.raises(type(raised)) as err:
        s.fetch("w")
    assert err.value is raised


def _dead_pid() -> int:
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(p.stdout)


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs /proc to tell running processes")
def test_a_long_names_orphaned_temporary_is_removed(client: rpjrt.Client, tmp_path: Path) -> None:
    name = "c" * 240 + ".npz"
    dead = _dead_pid()
    suffix = f".{dead}-0.tmp"
    keep = 255 - 1 - len(suffix)
    orphan = tmp_path / ("." + name[:keep] + suffix)
    # The same shortened prefix from another file's writer would also match its first
    # bytes; one of a different name does not.
    other = tmp_path / ("." + ("d" * 240 + ".npz")[:keep] + suffix)
    for f in (orphan, other):
        f.write_bytes(b"half")
        t = time.time() - 3600
        os.utime(f, (t, t))
    s = rpjrt.Session(client)
    s.bind("w", np.ones(2, np.float32))
    s.save(tmp_path / name)
    assert not orphan.exists()
    assert other.exists()
    assert (tmp_path / name).exists()


def test_event_wait_takes_seconds_by_the_one_rule(client: rpjrt.Client) -> None:
    exe = client.compile(ADD)
    x = client.put(np.ones(3, np.float32))
    _, ev = exe.execute_with_events(x, x)
    if ev is None:
        pytest.fail(f"{client!r} handed back no completion event")
    assert ev.wait(5) is True and ev.wait(0.5) is True and ev.wait(None) is True
    with pytest.raises(TypeError, match="timeout must be a number of seconds"):
        ev.wait(True)
    with pytest.raises(TypeError, match="timeout must be a number of seconds"):
        ev.wait("1")
    with pytest.raises(rpjrt.InvalidArgumentError):
        ev.wait(-1.0)

    class Interrupting:
        def __float__(self) -> float:
            raise KeyboardInterrupt("in __float__")

    with pytest.raises(KeyboardInterrupt):
        ev.wait(Interrupting())  # type: ignore[arg-type]
