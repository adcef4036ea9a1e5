"""Collectives across 2 and 4 CPU devices on both plugins, against JAX.

JAX lowers SPMD programs (shard_map with psum, all_gather, ppermute, psum_scatter,
all_to_all, and a partitioned matmul) with the Shardy partitioner and with GSPMD, in a
subprocess with 4 host devices, and records its own per-device results. rpjrt compiles the
same text with only ``num_partitions`` (and the mesh's device order) set, splits the inputs
with ``rpjrt.sharding``, and must match JAX shard by shard. The same five collectives also
run as replicas (``num_replicas=n``, cross-replica StableHLO), against the per-device
results of the matching JAX program.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rpjrt
import rpjrt.sharding as sh

from .conftest import run_python

GENERATOR = r"""
import json, os, sys
import numpy as np
import jax, jax.numpy as jnp
from jax import shard_map
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

def make_mesh(shape, names):
    return jax.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(shape))

out_dir = sys.argv[1] if len(sys.argv) > 1 else os.environ["OUT_DIR"]
cases = []

def spec_list(p):
    return [None if e is None else ([e] if isinstance(e, str) else list(e)) for e in p]

def record(name, n, shardy, mesh, fn, args, in_specs, out_specs):
    shard = lambda p: NamedSharding(mesh, p)
    jf = jax.jit(fn, in_shardings=tuple(shard(p) for p in in_specs),
                 out_shardings=tuple(shard(p) for p in out_specs))
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=shard(p)) for a, p in zip(args, in_specs)]
    text = jf.lower(*specs).as_text()
    placed = [jax.device_put(a, shard(p)) for a, p in zip(args, in_specs)]
    outs = jf(*placed)
    key = f"{name}-{n}-{'shardy' if shardy else 'gspmd'}"
    arrays = {}
    for i, a in enumerate(args):
        arrays[f"in{i}"] = np.asarray(a)
    for j, o in enumerate(outs):
        arrays[f"out{j}"] = np.asarray(o)
        for s in o.addressable_shards:
            arrays[f"out{j}_dev{s.device.id}"] = np.asarray(s.data)
    np.savez(os.path.join(out_dir, key + ".npz"), **arrays)
    cases.append({
        "key": key, "name": name, "n": n, "shardy": shardy, "text": text,
        "axes": [[a, int(s)] for a, s in mesh.shape.items()],
        "devices": [int(d.id) for d in mesh.devices.flat],
        "in_specs": [spec_list(p) for p in in_specs],
        "out_specs": [spec_list(p) for p in out_specs],
        "num_args": len(args), "num_outputs": len(outs),
    })

rng = np.random.default_rng(0)
for shardy in (True, False):
    jax.config.update("jax_use_shardy_partitioner", shardy)
    for n in (2, 4):
        mesh = make_mesh((n,), ("x",))
        smap = lambda f, i, o: shard_map(f, mesh=mesh, in_specs=i, out_specs=o, check_vma=False)
        a = rng.normal(size=(4 * n,)).astype(np.float32)
        b = rng.normal(size=(2 * n * n,)).astype(np.float32)
        perm = [(i, (i + 1) % n) for i in range(n)]
        record("psum", n, shardy, mesh,
               lambda x: (smap(lambda v: jax.lax.psum(v, "x"), P("x"), P())(x),),
               [a], [P("x")], [P()])
        record("all_gather", n, shardy, mesh,
               lambda x: (smap(lambda v: jax.lax.all_gather(v, "x", tiled=True), P("x"), P())(x),),
               [a], [P("x")], [P()])
        record("ppermute", n, shardy, mesh,
               lambda x: (smap(lambda v: jax.lax.ppermute(v, "x", perm), P("x"), P("x"))(x),),
               [a], [P("x")], [P("x")])
        record("psum_scatter", n, shardy, mesh,
               lambda x: (smap(lambda v: jax.lax.psum_scatter(v, "x", tiled=True), P("x"), P("x"))(x),),
               [b], [P("x")], [P("x")])
        record("all_to_all", n, shardy, mesh,
               lambda x: (smap(lambda v: jax.lax.all_to_all(v, "x", 0, 0, tiled=True), P("x"), P("x"))(x),),
               [b], [P("x")], [P("x")])
        if n == 2:
            mm_mesh = mesh
            ins, outs = [P("x", None), P(None, "x")], [P("x", None)]
        else:
            mm_mesh = make_mesh((2, 2), ("x", "y"))
            ins, outs = [P("x", "y"), P("y", None)], [P("x", None)]
        m1 = rng.normal(size=(8, 4)).astype(np.float32)
        m2 = rng.normal(size=(4, 6)).astype(np.float32)
        record("matmul", n, shardy, mm_mesh, lambda x, y: (x @ y,), [m1, m2], ins, outs)

with open(os.path.join(out_dir, "cases.json"), "w") as f:
    json.dump(cases, f)
"""


@pytest.fixture(scope="module")
def jax_cases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("collectives")
    r = run_python(
        GENERATOR,
        env={"XLA_FLAGS": "--xla_force_host_platform_device_count=4", "OUT_DIR": str(out)},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    cases = json.loads((out / "cases.json").read_text())
    assert len(cases) == 24
    return out, cases


def _mesh(case: dict[str, Any]) -> sh.Mesh:
    return sh.Mesh({a: s for a, s in case["axes"]}, case["devices"])


def test_spmd_programs_match_jax_shard_by_shard(
    client: rpjrt.Client, jax_cases: tuple[Path, list[dict[str, Any]]]
) -> None:
    out, cases = jax_cases
    for case in cases:
        data = np.load(out / (case["key"] + ".npz"))
        assert sh.uses_shardy(case["text"]) == case["shardy"], case["key"]
        mesh = _mesh(case)
        exe = client.compile(
            case["text"], num_partitions=case["n"], device_assignment=[case["devices"]]
        )
        args = [data[f"in{i}"] for i in range(case["num_args"])]
        # Shard by shard: rpjrt.sharding splits, execute_sharded runs, and each device's
        # output equals JAX's shard on that device.
        per_arg = [sh.shard(client, a, mesh, s) for a, s in zip(args, case["in_specs"])]
        ids = [d.id for d in exe.addressable_devices()]
        pos = {d: k for k, d in enumerate(mesh.device_ids)}
        outs = exe.execute_sharded([[bufs[pos[d]] for bufs in per_arg] for d in ids])
        for k, d in enumerate(ids):
            for j in range(case["num_outputs"]):
                np.testing.assert_allclose(
                    outs[k][j].to_numpy(),
                    data[f"out{j}_dev{d}"],
                    rtol=1e-5,
                    atol=1e-5,
                    err_msg=f"{case['key']} device {d} output {j}",
                )
        # And the whole arrays, put back together by the output specs.
        got = sh.run_sharded(exe, args, mesh, case["in_specs"], case["out_specs"])
        for j, g in enumerate(got):
            np.testing.assert_allclose(g, data[f"out{j}"], rtol=1e-5, atol=1e-5, err_msg=case["key"])


def _group(n: int) -> str:
    return f"dense<[[{', '.join(str(i) for i in range(n))}]]> : tensor<1x{n}xi64>"


ADD = """({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    })"""


def _replica_program(name: str, n: int) -> str:
    g = _group(n)
    if name == "psum":
        sig, body = (4, 4), f'"stablehlo.all_reduce"(%a) <{{replica_groups = {g}}}> {ADD}'
    elif name == "all_gather":
        sig, body = (4, 4 * n), f'"stablehlo.all_gather"(%a) <{{all_gather_dim = 0 : i64, replica_groups = {g}}}>'
    elif name == "ppermute":
        pairs = ", ".join(f"[{i}, {(i + 1) % n}]" for i in range(n))
        sig = (4, 4)
        body = f'"stablehlo.collective_permute"(%a) <{{source_target_pairs = dense<[{pairs}]> : tensor<{n}x2xi64>}}>'
    elif name == "psum_scatter":
        sig = (2 * n, 2)
        body = f'"stablehlo.reduce_scatter"(%a) <{{scatter_dimension = 0 : i64, replica_groups = {g}}}> {ADD}'
    else:
        sig = (2 * n, 2 * n)
        body = (
            f'"stablehlo.all_to_all"(%a) <{{split_dimension = 0 : i64, concat_dimension = 0 : i64, '
            f"split_count = {n} : i64, replica_groups = {g}}}>"
        )
    i, o = sig
    return f"""module @replicas attributes {{mhlo.num_replicas = {n} : i32}} {{
  func.func public @main(%a: tensor<{i}xf32>) -> tensor<{o}xf32> {{
    %0 = {body} : (tensor<{i}xf32>) -> tensor<{o}xf32>
    return %0 : tensor<{o}xf32>
  }}
}}"""


def test_replica_collectives_match_jax(
    client: rpjrt.Client, jax_cases: tuple[Path, list[dict[str, Any]]]
) -> None:
    out, cases = jax_cases
    for case in cases:
        if not case["shardy"] or case["name"] == "matmul":
            continue
        n = case["n"]
        data = np.load(out / (case["key"] + ".npz"))
        exe = client.compile(_replica_program(case["name"], n), num_replicas=n)
        ids = [d.id for d in exe.addressable_devices()]
        # Replica r gets shard r of the input (the shard JAX gave device r).
        shards = sh.split(data["in0"], _mesh(case), ("x",))
        outs = exe.execute_sharded([[client.put(shards[r], device=client.device(d))] for r, d in enumerate(ids)])
        for r in range(n):
            np.testing.assert_allclose(
                outs[r][0].to_numpy(),
                data[f"out0_dev{case['devices'][r]}"],
                rtol=1e-5,
                atol=1e-5,
                err_msg=f"replicas {case['key']} replica {r}",
            )


def test_shardy_module_needs_only_num_partitions(
    client: rpjrt.Client, jax_cases: tuple[Path, list[dict[str, Any]]]
) -> None:
    """No partitioner options: the sdy dialect is detected and Shardy switched on."""
    out, cases = jax_cases
    case = next(c for c in cases if c["key"] == "ppermute-2-shardy")
    data = np.load(out / (case["key"] + ".npz"))
    exe = client.compile(case["text"], num_partitions=2)
    assert exe.num_partitions == 2
    (got,) = sh.run_sharded(exe, [data["in0"]], _mesh(case), case["in_specs"], case["out_specs"])
    np.testing.assert_allclose(got, data["out0"], rtol=1e-6)
    # The same module as bytecode is detected too.
    assert sh.uses_shardy(case["text"].encode())


def test_partition_specs_that_are_not_specs_are_named() -> None:
    """A spec that is not a sequence, or an entry that is neither None, an axis name nor a
    tuple of axis names, is a TypeError saying what a spec is (it was "'int' object is not
    iterable", or an axis named "5")."""
    mesh = sh.Mesh({"x": 2}, [0, 1])
    a = np.arange(8, dtype=np.float32).reshape(4, 2)
    with pytest.raises(TypeError, match="a partition spec is a sequence of entries"):
        sh.split(a, mesh, 5)  # type: ignore[arg-type]
    for bad in [(1, None), (("x", 5), None), ({"x"}, None)]:
        with pytest.raises(TypeError, match="partition spec entry 0 is"):
            sh.split(a, mesh, bad)  # type: ignore[arg-type]
    parts = sh.split(a, mesh, [("x",), None])
    assert [p.tolist() for p in parts] == [a[:2].tolist(), a[2:].tolist()]
