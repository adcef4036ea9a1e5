"""Clients, plugins, devices and memories on both CPU plugins."""

from __future__ import annotations

import os
import warnings

import pytest

import rpjrt

from .conftest import fixture_text

EXPECTED_VERSION = {"old": (0, 81), "new": (0, 115)}


def test_plugin_facts(client: rpjrt.Client, plugin_label: str, plugin_path: str) -> None:
    p = client.plugin
    assert p.api_version == EXPECTED_VERSION[plugin_label]
    assert os.path.realpath(p.path) == os.path.realpath(plugin_path)
    assert p.table_slots > 100
    assert {"FFI", "Layouts"} <= set(p.extensions)
    attrs = p.attributes
    assert attrs["xla_version"] == 2
    assert p.stablehlo_version is not None and p.stablehlo_version >= (1, 0, 0)
    assert list(p.stablehlo_version) == attrs["stablehlo_current_version"]
    assert isinstance(p.info, rpjrt.PluginInfo)
    # a path given directly is still named and versioned as discovery knows the file
    assert p.info.source == "argument"
    assert p.info.name == {"old": "xla_cpu_pjrt", "new": "lammps_jax_pjrt_cpu"}[plugin_label]
    assert p.info.version == {"old": "0.0.1", "new": "0.11.2"}[plugin_label]
    assert repr(p).startswith("rpjrt.Plugin('") and f"pjrt=0.{p.api_version[1]}" in repr(p)
    assert rpjrt.Plugin(plugin_path) == p and hash(rpjrt.Plugin(plugin_path)) == hash(p)


def test_client_facts(client: rpjrt.Client) -> None:
    assert client.platform == "cpu"
    assert isinstance(client.platform_version, str)
    assert client.process_index == 0
    assert not client.closed
    r = repr(client)
    assert r.startswith("rpjrt.Client(platform='cpu', devices=4") and "pjrt=0." in r


def test_devices(client: rpjrt.Client) -> None:
    devs = client.devices()
    assert [d.id for d in devs] == [0, 1, 2, 3]
    assert all(d.kind == "cpu" and d.platform == "cpu" and d.is_addressable for d in devs)
    assert all(d.process_index == 0 for d in devs)
    # The same names mean the same sets as in Rust: devices() is every device,
    # addressable_devices() this process's (all of them in one process).
    assert client.addressable_devices() == [d for d in devs if d.is_addressable] == devs
    with pytest.warns(DeprecationWarning, match="Client.devices"):
        assert client.all_devices() == devs
    d0 = client.device(0)
    assert d0 == devs[0] and hash(d0) == hash(devs[0]) and d0 != devs[1]
    assert d0.client is client
    assert repr(d0) == "rpjrt.Device(id=0, kind='cpu', platform='cpu')"
    assert str(d0) == "cpu:0"
    assert isinstance(d0.attributes, dict)
    assert d0.local_hardware_id in (0, None)
    with pytest.raises(rpjrt.InvalidArgumentError, match="no device with id 99"):
        client.device(99)


def test_memories(client: rpjrt.Client) -> None:
    d0 = client.devices()[0]
    kinds = {m.kind for m in d0.memories()}
    assert {"device", "pinned_host", "unpinned_host"} <= kinds
    assert d0.default_memory().kind == "device"
    pinned = d0.memory("pinned_host")
    assert pinned.kind == "pinned_host" and d0 in pinned.devices()
    assert pinned in client.memories()
    assert repr(pinned).startswith("rpjrt.Memory(id=") and "kind='pinned_host'" in repr(pinned)
    with pytest.raises(rpjrt.Error):
        d0.memory("no_such_kind")


def test_context_manager_and_close(plugin_path: str) -> None:
    with rpjrt.Client(plugin_path) as c:
        exe = c.compile(fixture_text("mul_add.mlir"))
        x = c.put(b"\x00" * 32, dtype="float32")
        d0 = c.devices()[0]
    assert c.closed
    assert repr(c).startswith("rpjrt.Client(closed")
    c.close()  # idempotent
    for action in (
        c.devices,
        lambda: c.compile(fixture_text("mul_add.mlir")),
        lambda: c.put(b"\x00" * 4, dtype="float32"),
        lambda: exe(x, x),
        x.to_host,
        x.block_until_ready,
        d0.memories,
    ):
        with pytest.raises(rpjrt.ClientClosedError):
            action()
    assert repr(x) == "rpjrt.Buffer(float32[8], closed)"


def test_create_options(plugin_label: str, plugin_path: str) -> None:
    if plugin_label == "new":
        with rpjrt.Client(plugin_path, options={"cpu_device_count": 2}) as c:
            assert len(c.devices()) == 2
    with pytest.raises(rpjrt.InvalidArgumentError, match="option 'cpu_device_count'|option \"cpu_device_count\""):
        rpjrt.Client(plugin_path, options={"cpu_device_count": object()})
    with pytest.raises(rpjrt.InvalidArgumentError, match="mapping"):
        rpjrt.Client(plugin_path, options=[1, 2])  # type: ignore[arg-type]


def test_client_from_plugin_object(plugin_path: str) -> None:
    p = rpjrt.Plugin(plugin_path)
    with rpjrt.Client(p) as c:
        assert c.plugin == p


def test_client_by_platform_and_default(monkeypatch: pytest.MonkeyPatch, plugin_path: str) -> None:
    monkeypatch.delenv("RPJRT_PLUGIN", raising=False)
    monkeypatch.delenv("PJRT_NAMES_AND_LIBRARY_PATHS", raising=False)
    with rpjrt.Client("cpu") as c:
        assert c.platform == "cpu"
    monkeypatch.setenv("RPJRT_PLUGIN", plugin_path)
    with rpjrt.Client() as c:
        assert os.path.realpath(c.plugin.path) == os.path.realpath(plugin_path)
        assert c.plugin.info.source == "RPJRT_PLUGIN"


def test_falls_back_with_a_warning(monkeypatch: pytest.MonkeyPatch, tmp_path: object, plugin_path: str) -> None:
    import pathlib

    bad = pathlib.Path(str(tmp_path)) / "libbroken_cpu_pjrt.so"
    bad.write_bytes(b"not a library")
    monkeypatch.delenv("RPJRT_PLUGIN", raising=False)
    monkeypatch.setenv("PJRT_NAMES_AND_LIBRARY_PATHS", f"brokencpu:{bad}")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with rpjrt.Client("cpu") as c:
            assert c.platform == "cpu"
    assert any("skipped plugin brokencpu" in str(x.message) for x in w)


def test_every_candidate_failing_names_each(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    import pathlib

    bad1 = pathlib.Path(str(tmp_path)) / "libone_cpu_pjrt.so"
    bad2 = pathlib.Path(str(tmp_path)) / "libtwo_cpu_pjrt.so"
    bad1.write_bytes(b"not a library")
    bad2.write_bytes(b"not one either")
    monkeypatch.delenv("RPJRT_PLUGIN", raising=False)
    monkeypatch.setenv("PJRT_NAMES_AND_LIBRARY_PATHS", f"onecpu:{bad1},twocpu:{bad2}")
    monkeypatch.setattr("sys.path", [str(tmp_path)])
    with pytest.raises(rpjrt.PluginLoadError) as e:
        rpjrt.Client("cpu")
    msg = str(e.value)
    assert "no plugin could be used" in msg and "onecpu" in msg and "also tried twocpu" in msg, msg


def test_a_plugin_that_loads_but_cannot_serve_is_skipped(monkeypatch: pytest.MonkeyPatch, plugin_paths_all: dict[str, str]) -> None:
    """The CUDA plugin loads without a GPU but cannot create a client; with nothing named,
    it is ranked first and skipped with a warning."""
    from .test_cuda_no_gpu import _cuda_plugin

    cuda = _cuda_plugin()
    monkeypatch.delenv("RPJRT_PLUGIN", raising=False)
    monkeypatch.setenv("PJRT_NAMES_AND_LIBRARY_PATHS", f"cuda:{cuda},cpu:{plugin_paths_all['new']}")
    monkeypatch.setattr("sys.path", [])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with rpjrt.Client() as c:
            assert c.platform == "cpu"
            assert c.plugin.info.name == "cpu"
    assert any("skipped plugin cuda" in str(x.message) for x in w), [str(x.message) for x in w]


def test_missing_plugin_file(tmp_path: object) -> None:
    with pytest.raises(rpjrt.PluginLoadError, match="nope.so"):
        rpjrt.Client(f"{tmp_path}/nope.so")


def test_not_a_plugin(tmp_path: object) -> None:
    # A real shared library that does not export GetPjrtApi: the extension module itself.
    import rpjrt._rpjrt as ext

    with pytest.raises(rpjrt.PluginLoadError, match="GetPjrtApi"):
        rpjrt.Client(ext.__file__)
