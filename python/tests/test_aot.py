"""Compile once, on both plugins: serialize/load, refusals, the compile cache, introspection,
StableHLO versions and topologies."""

from __future__ import annotations

import array
import os
import warnings
from pathlib import Path

import pytest

import rpjrt

from .conftest import REPO, fixture_text, plugin_paths, run_python

MLP = REPO / "crates" / "rpjrt" / "tests" / "fixtures" / "mlp_train_step.mlir"
EXPORTED = REPO / "crates" / "rpjrt" / "tests" / "fixtures" / "mul_add.jax_export.mlirbc"


def run_mul_add(client: rpjrt.Client, exe: rpjrt.Executable) -> list[float]:
    a = client.put(array.array("f", [i * 0.5 for i in range(8)]))
    b = client.put(array.array("f", [3.0 - i for i in range(8)]))
    (y,) = exe(a, b)
    out: list[float] = y.tolist()
    return out


def is_old(client: rpjrt.Client) -> bool:
    return client.plugin.api_version < (0, 100)


def test_serialize_load_round_trip(client: rpjrt.Client) -> None:
    exe = client.compile(fixture_text("mul_add.mlir"))
    expected = run_mul_add(client, exe)
    data = exe.serialize()
    info = rpjrt.inspect_artifact(data)
    major, minor = client.plugin.api_version
    assert info["target"]["pjrt_version"] == f"{major}.{minor}"
    assert info["target"]["device_count"] == len(client.devices())
    assert info["target"] == client.artifact_target()
    loaded = client.load(data)
    assert run_mul_add(client, loaded) == expected
    # From a file path too, and the plugin's bare blob explicitly.
    assert run_mul_add(client, client.load(exe.serialize_bare(), bare=True)) == expected
    with pytest.raises(rpjrt.InvalidArgumentError, match="load_bare"):
        client.load(exe.serialize_bare())


def test_load_with_overrides(client: rpjrt.Client) -> None:
    exe = client.compile(fixture_text("mul_add.mlir"))
    data = exe.serialize()
    loaded = client.load(data, overrides={"num_replicas": 1, "portable": False})
    assert run_mul_add(client, loaded) == run_mul_add(client, exe)
    with pytest.raises(rpjrt.InvalidArgumentError, match="unknown override"):
        client.load(data, overrides={"replicas": 2})
    with pytest.raises(rpjrt.InvalidArgumentError, match="num_replicas"):
        client.load(data, overrides={"num_replicas": 0})
    with pytest.raises(rpjrt.InvalidArgumentError, match="bare"):
        client.load(exe.serialize_bare(), bare=True, overrides={"num_replicas": 1})


def test_load_from_a_path(client: rpjrt.Client, tmp_path: Path) -> None:
    exe = client.compile(fixture_text("mul_add.mlir"))
    p = tmp_path / "mul_add.rpjrt"
    p.write_bytes(exe.serialize())
    assert run_mul_add(client, client.load(p)) == run_mul_add(client, exe)
    # Only a regular file is read: /dev/zero never ends, a FIFO blocks, a directory fails.
    for bad in (Path("/dev/zero"), tmp_path):
        with pytest.raises(rpjrt.InvalidArgumentError, match="not a regular file"):
            client.load(bad)
        with pytest.raises(rpjrt.InvalidArgumentError, match="not a regular file"):
            rpjrt.inspect_artifact(bad)


def test_damaged_artifacts_are_refused(client: rpjrt.Client) -> None:
    data = client.compile(fixture_text("mul_add.mlir")).serialize()
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10
    with pytest.raises(rpjrt.InvalidArgumentError, match="checksum"):
        client.load(bytes(flipped))
    with pytest.raises(rpjrt.InvalidArgumentError, match="truncated"):
        client.load(data[: len(data) - 7])
    with pytest.raises(rpjrt.InvalidArgumentError, match="checksum"):
        rpjrt.inspect_artifact(bytes(flipped))
    with pytest.raises(rpjrt.InvalidArgumentError, match="bytes"):
        client.load("not bytes")  # type: ignore[arg-type]


def test_non_bytes_data_is_refused_by_type_before_any_allocation(client: rpjrt.Client) -> None:
    """An int is not an artifact: ``bytes(n)`` would make n zero bytes (a terabyte for
    ``10**12``) before any check; only the buffer protocol and paths are read. Overrides
    that are not a mapping are refused as such."""
    data = client.compile(fixture_text("mul_add.mlir")).serialize()
    for bad in [10**12, 5, [1, 2, 3], object()]:
        with pytest.raises(rpjrt.InvalidArgumentError, match="bytes-like or a path, not"):
            client.load(bad)  # type: ignore[arg-type]
        with pytest.raises(rpjrt.InvalidArgumentError, match="bytes-like or a path, not"):
            rpjrt.inspect_artifact(bad)  # type: ignore[arg-type]
    with pytest.raises(rpjrt.InvalidArgumentError, match="not int"):
        client.compile(10**12)  # type: ignore[arg-type]
    for view in [memoryview(data), bytearray(data), array.array("B", data)]:
        assert run_mul_add(client, client.load(view)) == run_mul_add(client, client.load(data))
    with pytest.raises(rpjrt.InvalidArgumentError, match="overrides must be a mapping"):
        client.load(data, overrides="num_replicas")  # type: ignore[arg-type]


def test_artifacts_move_only_to_their_own_plugin() -> None:
    paths = plugin_paths()
    old = rpjrt.Client(paths["old"])
    new = rpjrt.Client(paths["new"])
    text = fixture_text("mul_add.mlir")
    from_old = old.compile(text).serialize()
    from_new = new.compile(text).serialize()
    ov = "{}.{}".format(*old.plugin.api_version)
    nv = "{}.{}".format(*new.plugin.api_version)
    with pytest.raises(rpjrt.InvalidArgumentError) as e:
        new.load(from_old)
    assert ov in str(e.value) and nv in str(e.value) and "pjrt_version" in str(e.value)
    with pytest.raises(rpjrt.InvalidArgumentError, match=nv):
        old.load(from_new)


def test_introspection(client: rpjrt.Client) -> None:
    exe = client.compile(fixture_text("mul_add.mlir"))
    old = is_old(client)
    fmt, prog = exe.optimized_program()
    assert fmt and prog
    with pytest.raises(rpjrt.UnsupportedError):
        exe.optimized_hlo_text()
    stats = exe.compiled_memory_stats()
    assert stats["argument_size_in_bytes"] == 64 and stats["output_size_in_bytes"] == 32
    assert exe.output_layouts() == [(0,)]
    assert exe.compile_options()
    if old:
        assert exe.cost_analysis()["flops"] == 16.0
        for f in (exe.output_memory_kinds, exe.parameter_layouts):
            with pytest.raises(rpjrt.UnsupportedError):
                f()
        # Without the Shardings extension, from the compiled module: none, as on 0.115.
        assert exe.parameter_shardings() == [] and exe.output_shardings() == []
    else:
        with pytest.raises(rpjrt.UnsupportedError):
            exe.cost_analysis()
        assert exe.output_memory_kinds() == ["device"]
        assert exe.parameter_layouts() == [(0,), (0,)]
        assert isinstance(exe.output_shardings(), list)


SHARDY_SIN = REPO / "crates" / "rpjrt" / "tests" / "fixtures" / "shardy_sin.mlir"


def test_shardings_of_a_two_device_program(client: rpjrt.Client) -> None:
    # JAX-lowered sin(x) * 2 over f32[8,4], split along axis 0 over a 2-device mesh.
    # The 0.81 plugin lacks the Shardings extension: its answers come from the compiled
    # module, and must be the same.
    exe = client.compile(SHARDY_SIN.read_text(), num_partitions=2)
    (p,) = exe.parameter_shardings()
    (o,) = exe.output_shardings()
    assert isinstance(p, rpjrt.OpSharding)
    assert p == o and hash(p) == hash(o)
    assert str(p) == "{devices=[2,1]<=[2]}"
    assert repr(p) == "OpSharding({devices=[2,1]<=[2]})"
    assert p.type == "other" and not p.is_replicated
    assert p.tile_assignment_dimensions == [2, 1]
    assert p.tile_assignment_devices == [] and p.iota_reshape_dims == [2]
    assert p.devices() == [0, 1]
    assert p.last_tile_dims == [] and p.tuple_shardings == [] and p.shard_group is None
    # A single-device program has none.
    assert client.compile(fixture_text("mul_add.mlir")).parameter_shardings() == []


def test_op_sharding_from_bytes() -> None:
    # Bytes jaxlib writes for these shardings (HloSharding.to_proto().SerializeToString()).
    t = rpjrt.OpSharding.from_bytes(bytes.fromhex("08031a0202024a02020252020100"))
    assert str(t) == "{devices=[2,2]<=[2,2]T(1,0)}" and t.devices() == [0, 2, 1, 3]
    tup = rpjrt.OpSharding.from_bytes(bytes.fromhex("08022a002a0b08031a01024a0102520100"))
    assert tup.type == "tuple" and str(tup) == "{{replicated}, {devices=[2]<=[2]}}"
    assert [x.type for x in tup.tuple_shardings] == ["replicated", "other"]
    assert rpjrt.OpSharding.from_bytes(b"").is_replicated
    for bad in (b"\xff" * 8, bytes.fromhex("08031a0202024a02020252020100")[:-1], b"\x08\x2a"):
        with pytest.raises(rpjrt.InvalidArgumentError, match="not a valid serialized OpSharding"):
            rpjrt.OpSharding.from_bytes(bad)


def test_stablehlo_versions(client: rpjrt.Client) -> None:
    versions = client.plugin.stablehlo_versions()
    assert versions is not None
    current, minimum = versions
    assert client.plugin.stablehlo_target() == current
    data = EXPORTED.read_bytes()
    written = rpjrt.artifact_stablehlo_version(data)
    assert written is not None and written.count(".") == 2
    fit = client.plugin.stablehlo_fit(data)
    assert fit["artifact"] == written and fit["current"] == current
    assert fit["minimum"] == minimum
    assert rpjrt.artifact_stablehlo_version(b"module {}") is None
    too_old = b"ML\xefR\x0dStableHLO_v0.1.0\x00" + b"\xff" * 16
    with pytest.raises(rpjrt.InvalidArgumentError, match=f"0.1.0.*{minimum}.*{current}"):
        client.compile(too_old)


def test_topology_and_compiling_without_devices(client: rpjrt.Client) -> None:
    t = client.topology()
    assert t.platform_name == "cpu"
    assert [d[0] for d in t.devices()] == [d.id for d in client.devices()]
    assert t.serialize()
    text = fixture_text("mul_add.mlir")
    if is_old(client):
        with pytest.raises(rpjrt.UnsupportedError, match="topology"):
            t.compile(text)
    else:
        exe = client.load(t.compile(text))
        assert run_mul_add(client, exe) == run_mul_add(client, client.compile(text))
    with pytest.raises(rpjrt.UnsupportedError, match="UNIMPLEMENTED"):
        client.plugin.topology("cpu")


def test_cache_counts_and_lists(client: rpjrt.Client, tmp_path: Path) -> None:
    cache = rpjrt.Cache(tmp_path / "c", max_bytes=10_000_000)
    assert cache.max_bytes == 10_000_000
    text = fixture_text("mul_add.mlir")
    first = client.compile(text, cache=cache)
    second = client.compile(text, cache=cache)
    assert run_mul_add(client, first) == run_mul_add(client, second)
    s = cache.stats()
    assert (s["hits"], s["misses"], s["writes"], s["corrupt"]) == (1, 1, 1, 0)
    assert s["bytes_written"] == cache.total_bytes() == s["bytes_read"]
    # The hit's time, and the plugin's deserialization within it.
    assert 0 < s["hit_plugin_time"] <= s["hit_time"]
    (entry,) = cache.entries()
    assert entry["target"] == client.artifact_target()
    assert cache.info(entry["key"][:10])["key"] == entry["key"]
    assert cache.clear() == 1 and cache.entries() == []


def test_corrupt_entry_warns_once_and_recompiles(client: rpjrt.Client, tmp_path: Path) -> None:
    cache = rpjrt.Cache(tmp_path)
    text = MLP.read_text()
    client.compile(text, cache=cache)
    (entry,) = cache.entries()
    p = Path(entry["path"])
    good = p.read_bytes()
    p.write_bytes(good[: len(good) // 2])
    with pytest.warns(RuntimeWarning, match="unusable"):
        client.compile(text, cache=cache)
    assert cache.stats()["corrupt"] == 1 and cache.stats()["misses"] == 2
    p.write_bytes(good[: len(good) // 3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reported once: no second warning
        client.compile(text, cache=cache)
    assert cache.stats()["corrupt"] == 2
    client.compile(text, cache=cache)
    assert cache.stats()["hits"] == 1


def test_client_cache_dir_and_second_process(plugin_path: str, tmp_path: Path) -> None:
    c = rpjrt.Client(plugin_path, cache_dir=tmp_path)
    assert c.cache is not None and Path(c.cache.dir) == tmp_path
    c.compile(MLP.read_text())
    assert c.cache.stats()["misses"] == 1
    code = f"""
        import rpjrt
        c = rpjrt.Client({plugin_path!r})
        c.compile(open({str(MLP)!r}).read())
        print("STATS", c.cache.stats()["hits"], c.cache.stats()["misses"])
    """
    r = run_python(code, env={"RPJRT_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "STATS 1 0" in r.stdout, r.stdout
    c.cache = None
    assert c.cache is None
    assert os.listdir(tmp_path)


def test_cache_size_bound_that_is_not_utf8_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Read as unset, such a bound would quietly leave the cache unbounded.
    monkeypatch.setenv("RPJRT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("RPJRT_CACHE_MAX_BYTES", "10\udcff")
    with pytest.raises(rpjrt.InvalidArgumentError, match="RPJRT_CACHE_MAX_BYTES"):
        rpjrt.Cache.from_env()
