"""Raw copies to host that run while Python does other work, on both CPU plugins."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rpjrt
from rpjrt import transfer


def test_async_raw_reads_give_the_range_later(client: Any) -> None:
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    b = client.put(a)
    copy = transfer.read_raw_async(b, 12, 40)
    assert "40 bytes" in repr(copy)
    assert copy.wait() == a.tobytes()[12:52]
    assert copy.ready
    with pytest.raises(rpjrt.InvalidArgumentError, match="already waited for"):
        copy.wait()
    # Several in flight at once; one dropped unawaited.
    copies = [transfer.read_raw_async(b, i * 64, 64) for i in range(4)]
    transfer.read_raw_async(b, 0, 256)
    assert b"".join(c.wait() for c in copies) == a.tobytes()
    assert transfer.read_raw_async(b, 256, 0).wait() == b""


def test_async_raw_reads_refuse_bad_ranges_and_deleted_buffers(client: Any) -> None:
    b = client.put(np.zeros(4, dtype=np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match="past the buffer's 16 bytes"):
        transfer.read_raw_async(b, 12, 8)
    b.delete()
    with pytest.raises(rpjrt.BufferDeletedError):
        transfer.read_raw_async(b, 0, 4)
