"""rpjrt.triton: Triton IR compiled by the plugin's Triton extension. The fake plugin
implements it (deterministic PTX-looking output); the CPU plugins have none and raise
UnsupportedError naming it."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest

import rpjrt
import rpjrt.triton
from rpjrt import InvalidArgumentError, UnsupportedError

from .conftest import fake_plugin_path, run_python

MODULE = """module {
  tt.func public @add_kernel(%arg0: !tt.ptr<f32>) {
    tt.return
  }
}
"""

_COPIES = itertools.count()


def _fnv1a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


@pytest.fixture()
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A fresh copy of the fake plugin with the Triton extension, loaded with the given
    args-layout version (each copy reads its knobs once, when it loads)."""

    def load(version: str = "2", extensions: str = "Layouts,FFI,Triton") -> rpjrt.Plugin:
        copy = tmp_path / f"fake-triton-{next(_COPIES)}.so"
        shutil.copy(fake_plugin_path(), copy)
        monkeypatch.setenv("RPJRT_FAKE_EXTENSIONS", extensions)
        monkeypatch.setenv("RPJRT_FAKE_TRITON_VERSION", version)
        plugin = rpjrt.Plugin(str(copy))  # loading reads the knobs
        monkeypatch.delenv("RPJRT_FAKE_EXTENSIONS")
        monkeypatch.delenv("RPJRT_FAKE_TRITON_VERSION")
        return plugin

    return load


def test_compile_returns_assembly_on_the_fake(fake) -> None:  # type: ignore[no-untyped-def]
    plugin = fake()
    assert rpjrt.triton.is_available(plugin)
    with rpjrt.Client(plugin) as client:
        k = rpjrt.triton.compile(client, MODULE, arch="sm_90", num_warps=8, num_stages=2)
    h = f"{_fnv1a(MODULE.encode()):016x}"
    assert isinstance(k, rpjrt.triton.TritonKernel)
    text = k.asm_text
    assert text is not None and k.asm == text.encode()
    assert ".target sm_90\n" in text and f"fnv1a64 {h}" in text
    assert "num_warps=8 num_ctas=1 num_stages=2" in text
    assert k.entry_name == f"fake_triton_{h}"
    assert k.shared_mem_bytes == 1024 * 2 * 8
    assert (k.arch, k.num_warps, k.num_ctas, k.num_stages) == ("9.0", 8, 1, 2)
    assert k.cluster_dims is None and k.path is None
    r = repr(k)
    assert r.startswith("TritonKernel(arch='9.0', num_warps=8, num_ctas=1, num_stages=2")
    assert f"entry='fake_triton_{h}'" in r and "shared_mem_bytes=16384" in r
    # bytes in, same answer; the plugin works without a client too.
    again = rpjrt.triton.compile(plugin, MODULE.encode(), "9.0", num_warps=8, num_stages=2)
    assert again.asm == k.asm


def test_version1_plugin_reports_cluster_dims(fake) -> None:  # type: ignore[no-untyped-def]
    k = rpjrt.triton.compile(fake("1"), MODULE, "9.0", num_ctas=4)
    assert k.cluster_dims == (4, 1, 1)
    assert "cluster_dims=(4, 1, 1)" in repr(k)


def test_path_output_is_read(fake) -> None:  # type: ignore[no-untyped-def]
    k = rpjrt.triton.compile(fake(), MODULE, "gfx942")
    assert k.asm == b"" and k.entry_name is None
    assert k.path == f"/nonexistent/rpjrt-fake-triton-{_fnv1a(MODULE.encode()):016x}.hsaco"
    assert "path='/nonexistent/" in repr(k)


def test_bad_options_name_what_was_wrong(fake) -> None:  # type: ignore[no-untyped-def]
    plugin = fake()
    with pytest.raises(InvalidArgumentError, match="num_warps must be a power of two"):
        rpjrt.triton.compile(plugin, MODULE, "9.0", num_warps=3)
    with pytest.raises(InvalidArgumentError, match="num_ctas"):
        rpjrt.triton.compile(plugin, MODULE, "9.0", num_ctas=0)
    with pytest.raises(InvalidArgumentError, match="num_stages"):
        rpjrt.triton.compile(plugin, MODULE, "9.0", num_stages=99)
    with pytest.raises(InvalidArgumentError, match='arch "sm_x" is not sm_ followed by two or more digits'):
        rpjrt.triton.compile(plugin, MODULE, "sm_x")
    with pytest.raises(InvalidArgumentError, match="arch is required"):
        rpjrt.triton.compile(plugin, MODULE)
    with pytest.raises(InvalidArgumentError, match="module is empty"):
        rpjrt.triton.compile(plugin, b"", "9.0")
    with pytest.raises(TypeError, match="module must be Triton IR"):
        rpjrt.triton.compile(plugin, 42, "9.0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected an rpjrt.Client or rpjrt.Plugin"):
        rpjrt.triton.compile("cpu", MODULE, "9.0")  # type: ignore[arg-type]
    # The plugin's compiler error names the entry.
    with pytest.raises(InvalidArgumentError, match="PJRT_Triton_Compile.*tt.bad"):
        rpjrt.triton.compile(plugin, "module { tt.bad }", "9.0")
    # A fake device has no compute capability to default the arch from.
    with rpjrt.Client(plugin) as client:
        with pytest.raises(InvalidArgumentError, match="compute_capability"):
            rpjrt.triton.compile(client, MODULE)


def test_fake_without_the_extension_is_unsupported(fake) -> None:  # type: ignore[no-untyped-def]
    plugin = fake(extensions="Layouts,FFI")
    assert not rpjrt.triton.is_available(plugin)
    with pytest.raises(UnsupportedError, match="PJRT_Triton_Compile.*Triton extension"):
        rpjrt.triton.compile(plugin, MODULE, "9.0")


def test_cpu_plugins_raise_unsupported_naming_the_extension(client) -> None:  # type: ignore[no-untyped-def]
    assert not rpjrt.triton.is_available(client)
    with pytest.raises(UnsupportedError) as e:
        rpjrt.triton.compile(client, MODULE, "sm_90")
    assert "PJRT_Triton_Compile" in str(e.value) and "PJRT_Triton_Extension" in str(e.value)


def test_triton_is_an_attribute_after_a_plain_import() -> None:
    r = run_python(
        """
        import sys
        import rpjrt
        assert "rpjrt.triton" not in sys.modules
        assert "triton" in dir(rpjrt)
        assert rpjrt.triton.__name__ == "rpjrt.triton"
        assert callable(rpjrt.triton.compile)
        print("ok")
        """
    )
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
