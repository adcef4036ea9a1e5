"""Compiling StableHLO fixtures and running them, on one and several devices."""

from __future__ import annotations

import array

import numpy as np
import pytest

import rpjrt

from .conftest import fixture_text


@pytest.fixture(scope="module")
def mul_add(client: rpjrt.Client) -> rpjrt.Executable:
    return client.compile(fixture_text("mul_add.mlir"))


def test_mul_add(client: rpjrt.Client, mul_add: rpjrt.Executable) -> None:
    a = client.put(array.array("f", range(8)))
    b = client.put(array.array("f", [2.0] * 8))
    outs = mul_add(a, b)
    assert isinstance(outs, list) and len(outs) == 1
    (y,) = outs
    assert y.tolist() == [3.0 * i for i in range(8)]
    assert y.device == client.devices()[0]


def test_executable_facts(mul_add: rpjrt.Executable, client: rpjrt.Client) -> None:
    assert mul_add.name == "main" or isinstance(mul_add.name, str)
    assert mul_add.num_outputs == 1 and mul_add.num_replicas == 1 and mul_add.num_partitions == 1
    assert mul_add.input_dtypes == [rpjrt.float32, rpjrt.float32]
    assert mul_add.input_shapes == [(8,), (8,)]
    assert mul_add.output_dtypes == [rpjrt.float32] and mul_add.output_shapes == [(8,)]
    assert mul_add.addressable_devices() == [client.devices()[0]]
    assert mul_add.client is client
    assert repr(mul_add).endswith("(float32[8], float32[8]) -> (float32[8]), devices=[0])")
    fp = mul_add.fingerprint
    assert fp is None or isinstance(fp, str)


def test_host_arguments_are_put_for_you(mul_add: rpjrt.Executable) -> None:
    x = np.arange(8, dtype=np.float32)
    (y,) = mul_add(x, array.array("f", [1.0] * 8))
    np.testing.assert_array_equal(y.to_numpy(), 2 * x)
    (z,) = mul_add([float(i) for i in range(8)], x)  # Python lists take the parameter type
    np.testing.assert_array_equal(z.to_numpy(), x * x + x)
    with pytest.raises(rpjrt.InvalidArgumentError, match="float64\\[8\\].*expects float32"):
        mul_add(x.astype(np.float64), x)  # arrays keep their own type


def test_scalar_zero_size_and_two_outputs(client: rpjrt.Client) -> None:
    (s,) = client.compile(fixture_text("scalar_add.mlir"))(1.25, 2.0)
    assert s.shape == () and s.tolist() == 3.25
    (e,) = client.compile(fixture_text("identity_any.mlir"))(np.zeros(0, np.float32))
    assert e.shape == (0,) and e.tolist() == []
    two = client.compile(fixture_text("two_outputs.mlir"))
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    plus, minus = two(a, np.ones((2, 3), np.int32))
    np.testing.assert_array_equal(plus.to_numpy(), a + 1)
    np.testing.assert_array_equal(minus.to_numpy(), a - 1)


def test_compile_from_bytes_and_buffers(client: rpjrt.Client) -> None:
    text = fixture_text("mul_add.mlir")
    for program in (text.encode(), bytearray(text.encode()), memoryview(text.encode())):
        exe = client.compile(program)  # type: ignore[arg-type]
        assert exe.num_outputs == 1


def test_compile_for_another_device(client: rpjrt.Client) -> None:
    d2 = client.devices()[2]
    exe = client.compile(fixture_text("mul_add.mlir"), device=d2)
    assert exe.addressable_devices() == [d2]
    x = client.put(np.ones(8, np.float32), d2)
    (y,) = exe(x, x)
    assert y.device == d2 and y.tolist() == [2.0] * 8
    (z,) = exe(np.ones(8, np.float32), np.ones(8, np.float32))  # host args go to d2
    assert z.device == d2


def test_portable_executable_runs_on_any_device(client: rpjrt.Client) -> None:
    exe = client.compile(fixture_text("mul_add.mlir"), portable=True)
    for dev in client.devices()[:3]:
        x = client.put(np.full(8, 2.0, np.float32), dev)
        (y,) = exe(x, x, device=dev)
        assert y.device == dev and y.tolist() == [6.0] * 8


def test_donation(client: rpjrt.Client) -> None:
    exe = client.compile(fixture_text("donate.mlir"))
    x = client.put(np.zeros(8, np.float32))
    (y,) = exe(x)
    assert not x.is_deleted() and y.tolist() == [1.0] * 8
    (z,) = exe(x, donate=[0])
    assert x.is_deleted()
    assert z.tolist() == [1.0] * 8
    with pytest.raises(rpjrt.BufferDeletedError):
        x.to_host()
    with pytest.raises(rpjrt.BufferDeletedError, match="argument 0"):
        exe(x)
    with pytest.raises(rpjrt.InvalidArgumentError, match="out of range"):
        exe(z, donate=[3])


def test_all_reduce_over_two_devices(client: rpjrt.Client) -> None:
    d0, d1 = client.devices()[:2]
    exe = client.compile(fixture_text("allreduce.mlir"), num_replicas=2, device_assignment=[[d0], [d1]])
    assert exe.num_replicas == 2 and exe.addressable_devices() == [d0, d1]
    x0 = client.put(array.array("f", [1, 2, 3, 4]), d0)
    x1 = client.put(array.array("f", [10, 20, 30, 40]), d1)
    outs = exe.execute_sharded([[x0], [x1]])
    assert len(outs) == 2
    for dev, (out,) in zip((d0, d1), outs):
        assert out.device == dev
        assert out.tolist() == [11.0, 22.0, 33.0, 44.0]
    with pytest.raises(rpjrt.InvalidArgumentError, match="2 device"):
        exe.execute_sharded([[x0]])


def test_device_assignment_by_id(client: rpjrt.Client) -> None:
    exe = client.compile(fixture_text("allreduce.mlir"), num_replicas=2, device_assignment=[[2], [3]])
    assert [d.id for d in exe.addressable_devices()] == [2, 3]
    outs = exe.execute_sharded([[np.ones(4, np.float32)], [np.ones(4, np.float32)]])
    assert [o[0].tolist() for o in outs] == [[2.0] * 4, [2.0] * 4]


@pytest.mark.parametrize(
    "args,match",
    [
        ((np.ones(8, np.float32),), "takes 2 argument"),
        ((np.ones(8, np.float32),) * 3, "takes 2 argument"),
        ((np.ones(8, np.int32), np.ones(8, np.int32)), "int32\\[8\\].*expects float32\\[8\\]"),
        ((np.ones(4, np.float32), np.ones(4, np.float32)), "float32\\[4\\].*expects float32\\[8\\]"),
        ((object(), np.ones(8, np.float32)), "argument 0"),
    ],
)
def test_bad_arguments(mul_add: rpjrt.Executable, args: tuple[object, ...], match: str) -> None:
    with pytest.raises(rpjrt.InvalidArgumentError, match=match):
        mul_add(*args)


def test_bad_programs(client: rpjrt.Client) -> None:
    with pytest.raises(rpjrt.Error) as info:
        client.compile("this is not StableHLO")
    assert info.value.entry == "PJRT_Client_Compile"
    with pytest.raises(rpjrt.InvalidArgumentError, match="empty"):
        client.compile("")
    with pytest.raises(rpjrt.Error):
        client.compile(b"\x00garbage", format="hlo")
    with pytest.raises(rpjrt.InvalidArgumentError, match="format"):
        client.compile(fixture_text("mul_add.mlir"), format="onnx")  # type: ignore[arg-type]
    with pytest.raises(rpjrt.InvalidArgumentError, match="at least 1"):
        client.compile(fixture_text("mul_add.mlir"), num_replicas=0)
    with pytest.raises(rpjrt.InvalidArgumentError, match="str"):
        client.compile(12)  # type: ignore[arg-type]


def test_outputs_are_independent_of_inputs(client: rpjrt.Client, mul_add: rpjrt.Executable) -> None:
    x = np.arange(8, dtype=np.float32)
    xb = client.put(x)
    (y,) = mul_add(xb, xb)
    x[:] = -1  # the copy was made during put
    np.testing.assert_array_equal(y.to_numpy(), np.arange(8) ** 2 + np.arange(8))


def test_executable_delete_frees_it_for_every_reference(client: rpjrt.Client) -> None:
    exe = client.compile(fixture_text("mul_add.mlir"))
    alias = exe
    a = client.put(array.array("f", range(8)))
    assert not exe.is_deleted() and "devices=[" in repr(exe)
    exe.delete()
    exe.delete()  # a second delete does nothing, as for buffers
    assert alias.is_deleted()
    assert repr(exe) == "rpjrt.Executable(main: (float32[8], float32[8]) -> (float32[8]), deleted)"
    with pytest.raises(rpjrt.FailedPreconditionError, match="executable was deleted"):
        exe(a, a)
    assert a.tolist() == [float(i) for i in range(8)]  # its arguments are untouched


def test_wait_returns_ready_outputs(client: rpjrt.Client, mul_add: rpjrt.Executable) -> None:
    x = np.arange(8, dtype=np.float32)
    xb = client.put(x)
    # All-Buffer arguments (the fast path) and a host argument (the general path).
    for args in ((xb, xb), (x, xb)):
        outs = mul_add(*args, wait=True)
        assert isinstance(outs, list) and len(outs) == 1
        assert outs[0].is_ready()
        np.testing.assert_array_equal(outs[0].to_numpy(), x * x + x)
    two = client.compile(fixture_text("two_outputs.mlir"))
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    plus, minus = two(client.put(a), client.put(np.ones((2, 3), np.int32)), wait=True)
    assert plus.is_ready() and minus.is_ready()
    np.testing.assert_array_equal(minus.to_numpy(), a - 1)


def test_fast_path_checks_like_the_general_one(client: rpjrt.Client, mul_add: rpjrt.Executable) -> None:
    xb = client.put(np.arange(8, dtype=np.float32))
    with pytest.raises(rpjrt.InvalidArgumentError, match="takes 2 argument"):
        mul_add(xb)
    with pytest.raises(rpjrt.InvalidArgumentError, match="takes 2 argument"):
        mul_add(*([xb] * 20))  # more arguments than the fast path holds
    gone = client.put(np.arange(8, dtype=np.float32))
    gone.delete()
    with pytest.raises(rpjrt.BufferDeletedError, match="argument 1"):
        mul_add(xb, gone, wait=True)
    wrong = client.put(np.arange(8, dtype=np.int32))
    with pytest.raises(rpjrt.InvalidArgumentError, match="argument 0 is int32"):
        mul_add(wrong, xb)


def test_two_threads_calling_one_executable(client: rpjrt.Client, mul_add: rpjrt.Executable) -> None:
    import threading

    x = np.arange(8, dtype=np.float32)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            xb = client.put(x + k)
            for i in range(300):
                if i % 2:
                    (y,) = mul_add(xb, xb, wait=True)
                else:
                    (y,) = mul_add(xb, xb)
                    y.block_until_ready()
            np.testing.assert_array_equal(y.to_numpy(), (x + k) * (x + k) + (x + k))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
