"""Regressions of the fifth round of outside probes of the Python package (transfers,
DLPack, tracing, Triton), on both plugins. Each gave a misleading error before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import rpjrt
import rpjrt.triton


def test_dlpack_of_a_closed_clients_buffer_says_the_client_is_closed(fresh_client: rpjrt.Client) -> None:
    # Every DLPack failure used to be UnsupportedError, a closed client included.
    b = fresh_client.put(np.arange(4, dtype=np.float32))
    fresh_client.close()
    for attempt in (lambda: np.from_dlpack(b), b.__dlpack__, b.__dlpack_device__):
        with pytest.raises(rpjrt.ClientClosedError):
            attempt()


def test_an_alias_of_a_packed_type_is_refused_up_front(client: rpjrt.Client) -> None:
    # The plugins made it, but no buffer could ever fulfill it ("expected s4[2], got s4[2]").
    with pytest.raises(rpjrt.InvalidArgumentError, match="packed below a byte"):
        client.create_alias_buffer("int4", (2,))
    alias, f = client.create_alias_buffer("int8", (2,))
    f.fulfill(client.put(np.array([3, 4], np.int8)))
    np.testing.assert_array_equal(alias.to_numpy(), [3, 4])


def test_a_trace_left_without_entering_says_so() -> None:
    t = rpjrt.trace()
    with pytest.raises(RuntimeError, match="not recording"):
        t.__exit__(None, None, None)


def test_triton_on_a_plugin_without_the_extension_is_unsupported_not_an_arch_question(client: rpjrt.Client) -> None:
    # The arch used to be asked for first: a CPU device has no compute capability, and
    # naming one only led to the real answer.
    with pytest.raises(rpjrt.UnsupportedError, match="PJRT_Triton_Compile"):
        rpjrt.triton.compile(client, "module {}")
