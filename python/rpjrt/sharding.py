"""Sharded arrays: split host arrays into per-device shards along the axes of a device
mesh, run an SPMD program on them, and put the outputs back together.

    mesh = rpjrt.sharding.Mesh({"x": 2, "y": 2}, devices=[0, 1, 2, 3])
    shards = rpjrt.sharding.shard(client, a, mesh, ("x", None))   # one Buffer per device
    outs = rpjrt.sharding.run_sharded(exe, [a, b], mesh, in_specs=[("x", None), None],
                                      out_specs=[("x", None)])

This module moves data; it never decides a sharding. The mesh and the specs are the ones
the program was lowered with (in JAX: the ``Mesh`` and the ``PartitionSpec`` of each
argument and result). A spec has one entry per leading dimension: ``None`` (not split), a
mesh axis name, or a tuple of axis names (split along several, major first); mesh axes a
spec does not name hold copies. Mesh position ``k`` (row-major over the axes) runs the
program's partition ``k``: compile with ``device_assignment=[mesh.device_ids]`` when the
devices are not the first ones in order.

Where the plugin reports the shardings a program was compiled with (the Shardings
extension), :func:`run_sharded` checks each spec against them and refuses one that would
hand a partition another partition's block, naming the argument or output.

Modules that use the Shardy dialect (``sdy``) are compiled with the Shardy partitioner
automatically (GSPMD cannot read them); :func:`uses_shardy` says whether a module does.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Union

from ._dtypes import DType, _numpy_dtype
from ._errors import InvalidArgumentError, ResourceExhaustedError, UnsupportedError
from ._rpjrt import (
    Buffer,
    Client,
    Device,
    Executable,
    OpSharding,
    _shard_assemble,
    _shard_check,
    _global_signature,
    _shard_global_dims,
    _shard_split,
    _uses_shardy,
)

#: One spec entry: not split, split along one mesh axis, or along several (major first).
SpecEntry = Union[None, str, Sequence[str]]
Spec = Union[None, Sequence[SpecEntry]]


#: The largest integer a size, count or id of this API may be (they are 64-bit signed).
_MAX_INT = 2**63 - 1


def _whole(v: object, what: str) -> int:
    """An integer argument: ints and what ``__index__`` makes one (numpy integers); floats
    and bools are refused rather than rounded."""
    if isinstance(v, bool):
        raise TypeError(f"{what} must be an integer, not a bool")
    try:
        return operator.index(v)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {v!r}") from None


class Mesh:
    """Devices arranged on named axes, like JAX's ``Mesh``: ``axes`` maps each axis name
    to its size (major to minor, in order); ``devices`` lists the devices (or their ids)
    in row-major mesh order."""

    __slots__ = ("axes", "device_ids")

    def __init__(self, axes: Mapping[str, int], devices: Sequence[int | Device]) -> None:
        self.axes: tuple[tuple[str, int], ...] = tuple(
            (str(k), _whole(v, f"the size of axis {k!r}")) for k, v in axes.items()
        )
        for k, (name, size) in enumerate(self.axes):
            if not 1 <= size <= _MAX_INT:
                raise InvalidArgumentError(
                    f"mesh axis {k} must have a name and a size of at least 1 and at most "
                    f"2**63-1: axis {name!r} has size {size}"
                )
        self.device_ids: tuple[int, ...] = tuple(
            d.id if isinstance(d, Device) else _whole(d, "a device id") for d in devices
        )
        for d in self.device_ids:
            if not 0 <= d <= _MAX_INT:
                raise InvalidArgumentError(f"mesh device id {d} is out of range (ids count from 0)")
        # Checked by the core (sizes, counts, repeats); fail here, not at first use.
        _shard_split(b"", "uint8", [0], list(self.axes), list(self.device_ids), [])

    @property
    def shape(self) -> dict[str, int]:
        return dict(self.axes)

    def __len__(self) -> int:
        return len(self.device_ids)

    def __repr__(self) -> str:
        return f"rpjrt.sharding.Mesh({self.shape}, devices={list(self.device_ids)})"


def _spec(spec: Spec) -> list[list[str]]:
    if spec is None:
        return []
    if isinstance(spec, str):
        raise TypeError(f"a partition spec is a sequence of entries, not a string: ({spec!r},)")
    if not isinstance(spec, Sequence):
        raise TypeError(
            f"a partition spec is a sequence of entries (None, an axis name, or a tuple of "
            f"axis names), not {type(spec).__name__}"
        )
    out: list[list[str]] = []
    for k, entry in enumerate(spec):
        if entry is None:
            out.append([])
        elif isinstance(entry, str):
            out.append([entry])
        elif isinstance(entry, Sequence) and all(isinstance(a, str) for a in entry):
            out.append(list(entry))
        else:
            raise TypeError(
                f"partition spec entry {k} is {entry!r}: an entry is None, an axis name, or a "
                f"tuple of axis names"
            )
    return out


def uses_shardy(program: str | bytes) -> bool:
    """Whether a StableHLO module (text or bytecode) uses the Shardy (``sdy``) dialect."""
    return _uses_shardy(program)


def split(array: Any, mesh: Mesh, spec: Spec) -> list[Any]:
    """The shards of a host array (numpy arrays, one per mesh position)."""
    import numpy as np

    a, dt = _fallible(lambda: _host(array), "the array to split", array)
    # The array's bytes go in place (no copy); each shard is allocated fallibly.
    shards, dims = _shard_split(
        _bytes_of(a), dt.name, list(a.shape), list(mesh.axes), list(mesh.device_ids), _spec(spec)
    )
    return [np.frombuffer(s, dtype=_numpy_dtype(dt)).reshape(dims) for s in shards]


def _bytes_of(a: Any) -> Any:
    """A C-contiguous numpy array's bytes as a uint8 view of the same memory (numpy exports
    no buffer for ml_dtypes' types; the view needs none of its own)."""
    import numpy as np

    return a.reshape(-1).view(np.uint8)


def _fallible(f: Any, what: str, source: Any) -> Any:
    """``f()``, with a host allocation that cannot be made (numpy's ``MemoryError``) raised
    as ``ResourceExhaustedError`` naming ``what`` and its size."""
    try:
        return f()
    except MemoryError as e:
        if isinstance(e, ResourceExhaustedError):
            raise
        size = getattr(source, "nbytes", None)
        raise ResourceExhaustedError(
            f"{what} needs a host copy"
            + (f" of {size} bytes" if isinstance(size, int) else "")
            + f", which cannot be made ({e or 'out of memory'})"
        ) from e


def _host(array: Any) -> tuple[Any, DType]:
    """``array`` as ``client.put`` reads it (``_host``'s numpy adapter): C order, native
    byte order, with the rpjrt dtype it holds; a dtype rpjrt has no type for is refused."""
    import numpy as np

    from ._host import _from_numpy, numpy_of

    a, dt, _ = _from_numpy(array if isinstance(array, np.ndarray) else numpy_of(array), None)
    return a, dt


def shard(client: Client, array: Any, mesh: Mesh, spec: Spec) -> list[Buffer]:
    """Splits a host array by ``spec`` and puts each shard on its mesh device."""
    return [
        client.put(s, device=client.device(d)) for s, d in zip(split(array, mesh, spec), mesh.device_ids)
    ]


def assemble(shards: Sequence[Any], mesh: Mesh, spec: Spec, shape: Sequence[int]) -> Any:
    """The host array of ``shape`` put back together from one shard per mesh position
    (Buffers or arrays). Every shard must have the dtype most shards have (the first
    shard's on a tie) and the shard shape the spec gives; one that differs is refused by
    index. Where the spec replicates, the first copy is used. The same name and work as the
    core's ``rpjrt::sharding::assemble``."""
    import numpy as np

    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise TypeError(f"shape must be a sequence of integers, not {type(shape).__name__}")
    shape = [_whole(d, f"shape[{i}]") for i, d in enumerate(shape)]
    for i, d in enumerate(shape):
        if not 0 <= d <= _MAX_INT:
            raise InvalidArgumentError(
                f"shape[{i}] is {d}: a dimension is an integer from 0 to 2**63-1"
            )
    hosts = [_fallible(lambda s=s: _host(s), f"shard {k}", s) for k, s in enumerate(shards)]
    if not hosts:
        raise ValueError("no shards given")
    # The odd shard out is the one named, even when it comes first.
    names = [t.name for _, t in hosts]
    common = max(names, key=lambda n: (names.count(n), -names.index(n)))
    dt = hosts[names.index(common)][1]
    # Each shard travels with its own dtype and shape: the core refuses one that differs
    # from the first (its bytes are never read as another type).
    # Each shard's bytes go in place (no copy); the result is allocated once, fallibly.
    full = _shard_assemble(
        [(_bytes_of(h), t.name, list(h.shape)) for h, t in hosts],
        dt.name,
        list(shape),
        list(mesh.axes),
        list(mesh.device_ids),
        _spec(spec),
    )
    return np.frombuffer(full, dtype=_numpy_dtype(dt)).reshape(tuple(shape))


def gather(shards: Sequence[Any], mesh: Mesh, spec: Spec, shape: Sequence[int]) -> Any:
    """Deprecated name of :func:`assemble`, kept for one release."""
    warnings.warn(
        "rpjrt.sharding.gather is deprecated and will be removed in the next release; "
        "use rpjrt.sharding.assemble",
        DeprecationWarning,
        stacklevel=2,
    )
    return assemble(shards, mesh, spec, shape)


def _compiled_shardings(
    exe: Executable, n_args: int
) -> tuple[list[OpSharding] | None, list[OpSharding] | None]:
    """The shardings ``exe`` was compiled with, per parameter and per output, where they can
    be checked against specs: the plugin reports them, and partitions are the mesh
    positions (one replica; with several, each replica reads the whole mesh's data its own
    way). The parameters' and the outputs' are judged apart: a count that does not match
    turns off only its own side's checks (``None``), never the other's."""
    if exe.num_replicas != 1:
        return None, None
    try:
        params: list[OpSharding] | None = exe.parameter_shardings()
    except UnsupportedError:
        params = None
    try:
        outputs: list[OpSharding] | None = exe.output_shardings()
    except UnsupportedError:
        outputs = None
    if params is not None and len(params) != n_args:
        params = None
    if outputs is not None and len(outputs) != exe.num_outputs:
        outputs = None
    return params, outputs


def _uneven(what: str, spec: Spec, shape: Sequence[int], mesh: Mesh, reason: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{what} {spec!r} splits the program's {tuple(shape)} unevenly ({reason}): XLA would pad "
        f"the shards and the array would come back padded or cut. Uneven shardings are refused "
        f"(as JAX refuses them): use a mesh axis whose size divides the dimension, or pad the "
        f"array in the program"
    )


def _check_global(
    exe: Executable,
    hosts: Sequence[Any],
    mesh: Mesh,
    in_specs: Sequence[Spec],
    out_specs: Sequence[Spec],
) -> None:
    """Checks the host arguments' shapes, and every spec's split of the program's global
    shapes, against the shapes the program was written for (read from the MLIR text it
    was compiled from; see ``_global_signature``), before anything runs. A partitioned
    program reports only each partition's (padded) shape, which a wrong global shape can
    match: 4x4 host rows fit a program of 3x4 split in two as well as 3x4 do."""
    sig = _global_signature(exe)
    if sig is None:
        return
    params, results = sig
    if len(params) == len(hosts):
        for k, (h, g, spec) in enumerate(zip(hosts, params, in_specs)):
            if g is None:
                continue
            if tuple(h.shape) != tuple(g):
                raise InvalidArgumentError(
                    f"argument {k} has shape {tuple(h.shape)}, but {exe.name}'s parameter {k} "
                    f"is {tuple(g)} (its global shape; each device gets a shard of it)"
                )
            _even(f"in_specs[{k}]", spec, g, mesh)
    if len(results) == exe.num_outputs:
        per_device = exe.output_shapes
        for j, (g, spec) in enumerate(zip(results, out_specs)):
            if g is None:
                continue
            _even(f"out_specs[{j}]", spec, g, mesh)
            full = _shard_global_dims(
                list(per_device[j]), list(mesh.axes), list(mesh.device_ids), _spec(spec)
            )
            if tuple(full) != tuple(g):
                raise InvalidArgumentError(
                    f"out_specs[{j}] {spec!r} does not fit {exe.name}'s result {j} of shape "
                    f"{tuple(g)}: each device holds {tuple(per_device[j])}, which this spec "
                    f"puts together as {tuple(full)}. The spec does not cut the result as the "
                    f"program was compiled to, or the program's sharding of it is uneven (XLA "
                    f"pads it; uneven shardings are refused, as JAX refuses them)"
                )


def _even(what: str, spec: Spec, shape: Sequence[int], mesh: Mesh) -> None:
    """Refuses ``spec`` where it does not divide every dimension of ``shape`` evenly."""
    sizes = dict(mesh.axes)
    for d, names in enumerate(_spec(spec)):
        parts = 1
        for n in names:
            parts *= sizes.get(n, 1)
        if d < len(shape) and parts > 1 and shape[d] % parts:
            raise _uneven(
                what, spec, shape, mesh, f"dimension {d} of size {shape[d]} into {parts} parts"
            )


def _check_spec(sharding: OpSharding, rank: int, mesh: Mesh, spec: Spec, what: str) -> None:
    try:
        _shard_check(sharding, rank, list(mesh.axes), list(mesh.device_ids), _spec(spec))
    except InvalidArgumentError as e:
        raise InvalidArgumentError(
            f"{what} {spec!r} does not match the sharding the program was compiled with: {e}"
        ) from None


def run_sharded(
    exe: Executable,
    args: Sequence[Any],
    mesh: Mesh,
    in_specs: Sequence[Spec],
    out_specs: Sequence[Spec],
) -> list[Any]:
    """Splits each host argument by its spec, runs ``exe.execute_sharded`` with mesh
    position ``k``'s shards on ``mesh.device_ids[k]``, and returns each output put back
    together by its spec (numpy arrays of the global shapes).

    Where the plugin reports the executable's shardings, each spec is checked against its
    parameter's or output's (``InvalidArgumentError`` naming it; input specs before
    anything runs): a spec that cuts a value into other blocks, or gives a mesh position
    another partition's block, would otherwise return a wrong array."""
    client = exe.client
    exe_ids = [d.id for d in exe.addressable_devices()]
    if exe_ids != list(mesh.device_ids):
        # Partition (or replica) k runs on exe_ids[k] and reads mesh position k's shards:
        # the same devices in another order would hand each partition another's shard.
        same = sorted(exe_ids) == sorted(mesh.device_ids)
        raise ValueError(
            f"{exe.name} runs on devices {exe_ids} in that order, but the mesh holds"
            f" {list(mesh.device_ids)}"
            + (
                ": the same devices in another order; build the mesh in the executable's"
                " order, or compile with device_assignment=[the mesh's ids]"
                if same
                else ""
            )
        )
    if len(in_specs) != len(args):
        raise ValueError(f"{len(args)} arguments but {len(in_specs)} input specs")
    if len(out_specs) != exe.num_outputs:
        raise ValueError(f"{exe.name} has {exe.num_outputs} outputs but {len(out_specs)} output specs")
    hosts = [_host(a)[0] for a in args]
    # Everything is checked before anything runs: each spec against the compiled sharding,
    # then the global shapes (and even splits) the program was written for.
    params, outputs = _compiled_shardings(exe, len(args))
    if params is not None:
        for k, (h, spec) in enumerate(zip(hosts, in_specs)):
            _check_spec(params[k], h.ndim, mesh, spec, f"in_specs[{k}]")
    if outputs is not None:
        for j, spec in enumerate(out_specs):
            _check_spec(outputs[j], len(exe.output_shapes[j]), mesh, spec, f"out_specs[{j}]")
    _check_global(exe, hosts, mesh, in_specs, out_specs)
    pos = {d: k for k, d in enumerate(mesh.device_ids)}
    per_arg = [shard(client, h, mesh, s) for h, s in zip(hosts, in_specs)]
    lists = [[bufs[pos[d]] for bufs in per_arg] for d in exe_ids]
    outs = exe.execute_sharded(lists)
    results = []
    for j, spec in enumerate(out_specs):
        by_pos = [outs[exe_ids.index(d)][j] for d in mesh.device_ids]
        if outputs is not None:
            out = outputs[j]
            if out.type == "maximal":
                # The whole value is on one partition; the others' copies are not it.
                by_pos = [by_pos[out.devices()[0]]] * len(by_pos)
        full = _shard_global_dims(
            list(by_pos[0].shape), list(mesh.axes), list(mesh.device_ids), _spec(spec)
        )
        results.append(assemble(by_pos, mesh, spec, full))
    return results


__all__ = [
    "Mesh",
    "Spec",
    "SpecEntry",
    "uses_shardy",
    "split",
    "shard",
    "assemble",
    "gather",
    "run_sharded",
]
