"""Regressions of the ninth round of outside probes (silent wrong answers): where a buffer or
program lands (device= with a multi-device executable, with another device's memory,
on a DLPack import of a Buffer, on an artifact loaded with options) and the device order
of a sharded run; on both plugins."""

from __future__ import annotations

import numpy as np
import pytest

import rpjrt
from rpjrt import sharding, transfer

REPLICA_ID = """func.func @main(%a: tensor<2xf32>) -> (tensor<2xf32>, tensor<ui32>) {
  %r = stablehlo.replica_id : tensor<ui32>
  return %a, %r : tensor<2xf32>, tensor<ui32>
}"""

DOUBLE = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""


def test_a_multi_device_executable_is_not_run_on_one_device(client: rpjrt.Client) -> None:
    # exe(x, device=d) ran one replica alone: replica 1's outputs as if single-device, and
    # a cross-replica collective waited for ever for the replica never launched.
    exe = client.compile(REPLICA_ID, num_replicas=2)
    for d in client.devices()[:2]:
        with pytest.raises(rpjrt.InvalidArgumentError, match="runs on 2 devices and takes one argument list per device") as e:
            exe(np.float32([1, 2]), device=d)
        assert "  " not in str(e.value), str(e.value)
    outs = exe.execute_sharded([[client.put(np.float32([1, 2]), d)] for d in exe.addressable_devices()])
    assert sorted(int(np.asarray(o[1].to_numpy())) for o in outs) == [0, 1]


def test_a_memory_of_another_device_is_refused_with_device(client: rpjrt.Client) -> None:
    # put / put_streaming / alias buffers kept the memory's device, uninitialized the device.
    d0, d1 = client.devices()[:2]
    m1 = d1.memory("device")
    x = np.arange(4, dtype=np.float32)
    why = "is not addressable by"
    with pytest.raises(rpjrt.InvalidArgumentError, match=why):
        client.put(x, d0, memory=m1)
    with pytest.raises(rpjrt.InvalidArgumentError, match=why):
        transfer.put_streaming(client, x, device=d0, memory=m1)
    with pytest.raises(rpjrt.InvalidArgumentError, match=why):
        transfer.uninitialized(client, "float32", (4,), device=d0, memory=m1)
    # Either alone, or both agreeing, still work.
    assert client.put(x, memory=m1).device == d1
    assert client.put(x, d1, memory=m1).device == d1
    assert transfer.uninitialized(client, "float32", (4,), device=d1, memory=m1).device == d1


def test_a_dlpack_import_of_a_buffer_honours_the_device(client: rpjrt.Client) -> None:
    # from_dlpack(b, device=d1) returned b itself, still on device 0.
    d0, d1 = client.devices()[:2]
    b = client.put(np.arange(3, dtype=np.float32), d0)
    assert client.from_dlpack(b, d0) is b
    moved = client.from_dlpack(b, d1)
    assert moved.device == d1
    np.testing.assert_array_equal(moved.to_numpy(), [0, 1, 2])
    with pytest.raises(rpjrt.InvalidArgumentError, match="copy=False cannot move a Buffer"):
        client.from_dlpack(b, d1, copy=False)


def test_an_artifact_loaded_with_options_keeps_or_takes_its_device(client: rpjrt.Client) -> None:
    # Options given at load dropped the artifact's device (device 1 became 0), and a
    # device_ordinal override was accepted and ignored.
    d0, d1 = client.devices()[:2]
    art = client.compile(DOUBLE, device=d1).serialize()
    x = np.ones(4, np.float32)
    for ov, want in (({"num_replicas": 1}, d1), ({"device_ordinal": 1}, d1), ({"device_ordinal": 0}, d0)):
        e = client.load(art, overrides=ov)
        assert e.addressable_devices() == [want], ov
        (y,) = e(client.put(x, want))
        assert y.device == want
        np.testing.assert_array_equal(y.to_numpy(), 2 * x)


def test_run_sharded_refuses_a_mesh_in_another_device_order(client: rpjrt.Client) -> None:
    # The devices were compared as sets: partition k then read another position's shard.
    prog = """func.func @main(%a: tensor<8xf32> {mhlo.sharding = "{devices=[2]<=[2]}"})
    -> (tensor<8xf32> {mhlo.sharding = "{devices=[2]<=[2]}"}) {
  %0 = stablehlo.reverse %a, dims = [0] : tensor<8xf32>
  return %0 : tensor<8xf32>
}"""
    exe = client.compile(prog, num_partitions=2)
    ids = [d.id for d in exe.addressable_devices()]
    x = np.arange(8, dtype=np.float32)
    good = sharding.Mesh({"x": 2}, ids)
    np.testing.assert_array_equal(sharding.run_sharded(exe, [x], good, [("x",)], [("x",)])[0], x[::-1])
    with pytest.raises(ValueError, match="the same devices in another order"):
        sharding.run_sharded(exe, [x], sharding.Mesh({"x": 2}, ids[::-1]), [("x",)], [("x",)])
