"""Round 26 of outside checks: misbehaving plugins and plugin files. A load that never
returns must hold up no other plugin; the registry knows files, not path strings; create
options keep float32's range; repeated attribute names follow one rule; a damaged dynamic
segment is refused before the loader follows it; CHLO text is legalized as JAX does."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import fake_plugin_path


def _run(
    code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter (its own registry of plugins; a hang or crash stays
    there), with no fake-plugin settings but those in `env`."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("RPJRT_FAKE_")}
    full.pop("RPJRT_LEGALIZE_CHLO", None)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
    )


@pytest.mark.parametrize("entry", ["GetPjrtApi", "PJRT_Plugin_Initialize"])
def test_a_load_that_never_returns_holds_up_no_other_plugin(
    plugin_paths_all: dict[str, str], entry: str
) -> None:
    # The registry of plugins used to be held across the whole load: after the fake plugin
    # hung, every later load (of any plugin) and even the lookup of a loaded one waited,
    # and their timeouts blamed the healthy plugin.
    code = """
    import os, sys, time, rpjrt
    fake, new, old = sys.argv[1], sys.argv[2], sys.argv[3]
    pre = rpjrt.Client(new)
    try:
        rpjrt.Plugin(fake, timeout=0.5)
        print("fake loaded")
    except rpjrt.DeadlineExceededError as e:
        print("fake timed out:", e)
    for label, make in [("lookup", lambda: rpjrt.Client(new, timeout=5)),
                        ("fresh", lambda: rpjrt.Plugin(old, timeout=20))]:
        t = time.monotonic()
        make()
        print(label, "ok", round(time.monotonic() - t, 1), flush=True)
    # Another name of the stuck file waits for the stuck load, and says so.
    link = os.path.join(sys.argv[4], "again.so")
    os.symlink(fake, link)
    try:
        rpjrt.Plugin(link, timeout=0.5)
        print("second load returned")
    except rpjrt.DeadlineExceededError as e:
        print("second:", e)
    sys.stdout.flush()
    os._exit(0)
    """
    fake = str(fake_plugin_path())
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        r = _run(
            code,
            fake,
            plugin_paths_all["new"],
            plugin_paths_all["old"],
            d,
            env={"RPJRT_FAKE_HANG_ON": entry},
        )
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert f"fake timed out: loading plugin {fake}" in out and f"it was in {entry}" in out, out
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert "lookup ok" in out and float(lines["lookup"].split()[-1]) < 3, out
    assert "fresh ok" in out and float(lines["fresh"].split()[-1]) < 15, out
    second = lines["second:"]
    assert "another thread's load of the same file" in second, second
    assert os.path.realpath(fake) in second and f"which is in {entry}" in second, second


def test_a_load_held_up_by_another_inside_the_loader_names_that_one(
    plugin_paths_all: dict[str, str],
) -> None:
    # A library initializer that never returns holds the system's loader, which every load
    # needs: the other plugin's timeout names the stuck load, not itself.
    code = """
    import os, sys, rpjrt
    fake, old = sys.argv[1], sys.argv[2]
    for path in (fake, old):
        try:
            rpjrt.Plugin(path, timeout=0.5)
            print("loaded")
        except rpjrt.DeadlineExceededError as e:
            print("timed out:", e)
    sys.stdout.flush()
    os._exit(0)
    """
    fake = str(fake_plugin_path())
    r = _run(code, fake, plugin_paths_all["old"], env={"RPJRT_FAKE_HANG_ON": "dlopen"})
    assert r.returncode == 0, r.stderr[-2000:]
    first, second = r.stdout.splitlines()
    assert "it was in the system's library loader" in first, first
    assert second.startswith(f"timed out: loading plugin {plugin_paths_all['old']}"), second
    assert "which another plugin load holds: " + os.path.realpath(fake) in second, second


def test_the_registry_knows_files_not_path_strings(
    plugin_paths_all: dict[str, str], tmp_path: Path
) -> None:
    code = """
    import os, shutil, sys, rpjrt
    fake, old, new, d = sys.argv[1:5]
    def via_memfd(path):
        fd = os.memfd_create("plug")
        os.write(fd, open(path, "rb").read())
        return fd
    # A reused /proc/self/fd number that names another library.
    fd = via_memfd(fake)
    p1 = rpjrt.Plugin(f"/proc/self/fd/{fd}")
    os.close(fd)
    fd2 = via_memfd(old)
    assert fd2 == fd, (fd, fd2)
    p2 = rpjrt.Plugin(f"/proc/self/fd/{fd2}")
    print("memfd", p1.api_version, p2.api_version, p1 == p2, rpjrt.Client(p2).platform)
    # The same memfd again is the same plugin.
    print("memfd again", rpjrt.Plugin(f"/proc/self/fd/{fd2}") == p2)
    # A library replaced at its path, as pip --upgrade does.
    shutil.copy(fake, d + "/p.so")
    a = rpjrt.Plugin(d + "/p.so")
    shutil.copy(old, d + "/p.tmp")
    os.replace(d + "/p.tmp", d + "/p.so")
    b = rpjrt.Plugin(d + "/p.so")
    print("replaced", a == b, b.api_version, rpjrt.Client(b).platform)
    # A hard link and a symlink to a loaded file are that plugin.
    os.link(d + "/p.so", d + "/hard.so")
    os.symlink(d + "/p.so", d + "/soft.so")
    print("links", rpjrt.Plugin(d + "/hard.so") == b, rpjrt.Plugin(d + "/soft.so") == b)
    # A trailing slash names no file, before and after the library is loaded.
    for when in ("before", "after"):
        if when == "after":
            rpjrt.Plugin(new)
        try:
            rpjrt.Plugin(new + "/")
            print(when, "slash loaded")
        except rpjrt.PluginLoadError as e:
            print(when, "slash refused", "Not a directory" in str(e))
    """
    r = _run(
        code,
        str(fake_plugin_path()),
        plugin_paths_all["old"],
        plugin_paths_all["new"],
        str(tmp_path),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.splitlines()
    # The fake's version, then the 0.81 plugin's: another plugin, not the first again.
    assert out[0].startswith("memfd (0, ") and out[0].endswith(" (0, 81) False cpu"), out
    assert out[1:] == [
        "memfd again True",
        "replaced False (0, 81) cpu",
        "links True True",
        "before slash refused True",
        "after slash refused True",
    ], out


def test_float_create_options_beyond_float32_are_refused() -> None:
    code = """
    import math, rpjrt, sys
    fake = sys.argv[1]
    for v in (1e300, -1e39, 1e-50, -1e-50):
        try:
            rpjrt.Client(fake, options={"x": v})
            print(v, "accepted")
        except rpjrt.InvalidArgumentError as e:
            print(v, "refused:", e)
    for v in (1e-45, -0.0, math.inf, 3.0e38):
        c = rpjrt.Client(fake, options={"x": v})
        print(v, "kept:", c.platform_version.split("create options:")[1].strip())
    """
    r = _run(code, str(fake_plugin_path()))
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.splitlines()
    assert out[0] == (
        '1e+300 refused: option "x": 1e+300 is beyond float32 (PJRT\'s float option type)'
    ), out
    assert "-1e+39 refused: " in out[1] and "beyond float32" in out[1], out
    for line in out[2:4]:
        assert "refused" in line and "too small for float32" in line, out
        assert "it would be passed as 0" in line, out
    assert all(" kept: " in line for line in out[4:]) and len(out) == 8, out
    # The smallest subnormal, -0 and infinity reach the plugin as given.
    assert out[4].endswith("=float:0.000000000000000000000000000000000000000000001"), out
    assert out[5].endswith("=float:-0") and out[6].endswith("=float:inf"), out


def test_repeated_attribute_names_keep_the_first_value_everywhere() -> None:
    code = """
    import rpjrt, sys
    p = rpjrt.Plugin(sys.argv[1])
    print(p.attributes["stablehlo_current_version"], p.attributes.get("xla_version"))
    print(p.duplicate_attributes)
    print(p.stablehlo_version, p.stablehlo_target())
    """
    attrs = (
        "stablehlo_current_version=int64list:1,9,0;stablehlo_minimum_version=int64list:0,9,0;"
        "stablehlo_current_version=int64list:1,0,0;xla_version=int64:1;xla_version=int64:2"
    )
    r = _run(code, str(fake_plugin_path()), env={"RPJRT_FAKE_ATTRIBUTES": attrs})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == [
        "[1, 9, 0] 1",
        "[('stablehlo_current_version', [1, 0, 0]), ('xla_version', 2)]",
        "(1, 9, 0) 1.9.0",
    ], r.stdout
    # The property follows the methods' rule: three numbers, none negative.
    for bad in ("1,2", "-1,-2,-3", "1,2,3,4"):
        attrs = f"stablehlo_current_version=int64list:{bad};stablehlo_minimum_version=int64list:0,9,0"
        r = _run(code, str(fake_plugin_path()), env={"RPJRT_FAKE_ATTRIBUTES": attrs})
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stdout.splitlines()[2] == "None None", (bad, r.stdout)


@pytest.mark.parametrize("p_type,says", [(2, "PT_DYNAMIC"), (7, "PT_TLS")])
def test_a_segment_outside_the_loadable_ones_is_refused(
    tmp_path: Path, p_type: int, says: str
) -> None:
    # The loader follows PT_DYNAMIC's address without checking: one outside every loadable
    # segment killed the process with SIGSEGV.
    b = bytearray(fake_plugin_path().read_bytes())
    (phoff,) = struct.unpack_from("<Q", b, 32)
    (phnum,) = struct.unpack_from("<H", b, 56)
    found = [i for i in range(phnum) if struct.unpack_from("<I", b, phoff + 56 * i)[0] == p_type]
    assert found, f"the fake plugin has no segment of type {p_type}"
    struct.pack_into("<Q", b, phoff + 56 * found[0] + 16, 1 << 40)
    lib = tmp_path / "damaged.so"
    lib.write_bytes(bytes(b))
    code = """
    import rpjrt, sys
    try:
        rpjrt.Plugin(sys.argv[1])
        print("loaded")
    except rpjrt.PluginLoadError as e:
        print("refused:", e)
    """
    r = _run(code, str(lib))
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert r.stdout.startswith("refused:") and says in r.stdout, r.stdout
    assert str(lib) in r.stdout and f"program header {found[0]}" in r.stdout, r.stdout


DIGAMMA = """
module @jit_digamma {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>) {
    %0 = chlo.digamma %arg0 : tensor<4xf32> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

NEGATE = """
module @m {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>) {
    %0 = stablehlo.negate %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""


@pytest.mark.parametrize("switch", ["on", "off"])
def test_chlo_text_is_legalized_as_jax_does(plugin_paths_all: dict[str, str], switch: str) -> None:
    # The 0.115 plugin's own CHLO decomposition gives digamma(0) = -inf; JAX's (jaxlib's
    # code, which jax.export uses too) gives NaN. Text without CHLO never imports jaxlib.
    code = """
    import sys, numpy as np, rpjrt
    c = rpjrt.Client(sys.argv[1])
    x = np.array([0.0, -0.0, -2.0, 2.0], np.float32)
    print(c.compile(sys.argv[3])(x)[0].to_numpy().tolist(), "jaxlib" in sys.modules)
    print(c.compile(sys.argv[2])(x)[0].to_numpy().tolist(), "jaxlib" in sys.modules)
    """
    env = {"RPJRT_LEGALIZE_CHLO": "0"} if switch == "off" else {}
    r = _run(code, plugin_paths_all["new"], DIGAMMA, NEGATE, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    plain, chlo = r.stdout.splitlines()
    assert plain == "[-0.0, 0.0, 2.0, -2.0] False", plain
    values, imported = chlo.rsplit(" ", 1)
    head = values.strip("[]").split(", ")
    assert head[3].startswith("0.4227"), chlo
    if switch == "on":
        assert head[:3] == ["nan", "nan", "nan"] and imported == "True", chlo
    else:
        # The plugin's own, older decomposition (the difference the docs describe).
        assert head[:2] == ["-inf", "-inf"] and imported == "False", chlo
