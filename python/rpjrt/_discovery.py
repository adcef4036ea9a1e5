"""Finding PJRT plugins without importing (or loading) anything.

The search itself is ``rpjrt::discovery`` in Rust, shared with the ``rpjrt`` command line
and Rust users, so all three find the same plugins in the same order; Python passes its
``sys.path`` as the directories to search. Where it looks, in order:

1. ``RPJRT_PLUGIN``: a path to a plugin library, or the name of a plugin found by the
   steps below (``RPJRT_PLUGIN=cuda``). When set, ``Client()`` uses it and nothing else.
2. ``PJRT_NAMES_AND_LIBRARY_PATHS``: ``"name:path,name:path"`` as JAX reads it (``;``
   between name and path on Windows); a path ending in ``.json`` is a JAX plugin config
   (``{"library_path": ..., "create_options": {...}}``).
3. Installed wheels that advertise an entry point in the ``jax_plugins`` or
   ``xla_plugins`` group (``*.dist-info/entry_points.txt``), and modules of the
   ``jax_plugins`` / ``xla_plugins`` namespace packages. The library inside is found from
   the distribution's RECORD, or by looking in the module's directory on ``sys.path``:
   plugin modules are never imported.
4. Known plugin wheels: xla-cpu-pjrt, lammps-jax-pjrt-cpu, fastatomstruct-xla-cpu, jax-cuda12-pjrt,
   jax-cuda13-pjrt, and libtpu (``TPU_LIBRARY_PATH`` first, then the libtpu wheel).

Nothing here opens a library in this process: :func:`plugins` lists files and reads each
one's PJRT version in a child process (``python -m rpjrt probe-version``), all at once, so
that a library that crashes, exits or hangs while loading costs only its own answer
(``None``), after at most ``RPJRT_PLUGIN_TIMEOUT`` seconds (20 by default). ``Client()`` loads the first usable one, trying accelerators (tpu, cuda,
rocm, others) before CPU plugins when nothing was asked for explicitly. What stays in
Python is what needs the interpreter: ``sys.path`` and the :class:`PluginInfo` objects.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

__all__ = ["PluginInfo", "plugins", "find_plugin", "candidates", "ENTRY_POINT_GROUPS", "KNOWN_PACKAGES"]

@dataclass(frozen=True)
class _Known:
    package: str  # distribution name on PyPI
    module_dir: str  # directory of the library, relative to site-packages
    library: str  # preferred library file name in that directory
    name: str  # plugin name
    platform: str


def _tables() -> tuple[tuple[_Known, ...], tuple[str, ...], tuple[str, ...]]:
    # The one statement of these lists is ``rpjrt::discovery`` in Rust; the native module
    # hands them over (it loads no plugin).
    from . import _rpjrt

    known, groups, namespaces = _rpjrt._discovery_tables()
    return tuple(_Known(*k) for k in known), tuple(groups), tuple(namespaces)


#: Plugin wheels rpjrt knows by name (found even without an entry point), read from
#: ``rpjrt::discovery::KNOWN_PACKAGES``; entry point groups whose values name a plugin
#: module; namespace packages whose sub-packages are plugin modules.
KNOWN_PACKAGES, ENTRY_POINT_GROUPS, NAMESPACE_PACKAGES = _tables()

@dataclass(frozen=True)
class PluginInfo:
    """A plugin library that discovery found (nothing is loaded until a Client uses it).

    Attributes:
        name: the plugin's name: the entry point or module name (``"xla_cpu_pjrt"``,
            ``"xla_cuda12"``), the name given in ``PJRT_NAMES_AND_LIBRARY_PATHS``, or the
            file's stem for a bare path.
        path: absolute path of the shared library.
        version: the version of the wheel that installed it, or ``None`` when it did not
            come from a wheel (the PJRT API version is known only once loaded:
            ``client.plugin.api_version``).
        source: where it was found, e.g. ``"RPJRT_PLUGIN"``,
            ``"entry point xla_plugins:xla_cpu_pjrt"``, ``"package lammps-jax-pjrt-cpu"``.
        platform: ``"cpu"``, ``"cuda"``, ``"rocm"``, ``"tpu"``... guessed from names, or
            ``None``; the real platform is ``client.platform``.
        package: the distribution (wheel) name, when it came from one.
        options: client create options from a JAX plugin config (``.json``), else ``None``.
        pjrt_version: the PJRT C API version the library reports (``"0.81"``), filled in by
            :func:`plugins`, which loads each library to ask (without initialising it);
            ``None`` where the library could not be read.
    """

    name: str
    path: str
    version: str | None
    source: str
    platform: str | None = None
    package: str | None = None
    options: Mapping[str, Any] | None = field(default=None, compare=False)
    pjrt_version: str | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        parts = [f"name={self.name!r}", f"path={self.path!r}"]
        if self.pjrt_version is not None:
            parts.append(f"pjrt_version={self.pjrt_version!r}")
        if self.version is not None:
            parts.append(f"version={self.version!r}")
        parts.append(f"source={self.source!r}")
        if self.platform is not None:
            parts.append(f"platform={self.platform!r}")
        if self.package is not None:
            parts.append(f"package={self.package!r}")
        if self.options:
            parts.append(f"options={dict(self.options)!r}")
        return f"PluginInfo({', '.join(parts)})"


def _search_path() -> list[str]:
    return [entry or "." for entry in sys.path]


def _info(t: tuple[Any, ...]) -> PluginInfo:
    name, path, version, source, platform, package, options = t
    return PluginInfo(name, path, version, source, platform, package, options)


def _pick_library(directory: Path, preferred: str | None = None) -> Path | None:
    """The PJRT library in a plugin module's directory (not a Python extension)."""
    from . import _rpjrt

    found = _rpjrt._pick_library(directory, preferred)
    return None if found is None else Path(found)


def plugins() -> list[PluginInfo]:
    """Every plugin library discovery can see, in search order (nothing is initialised).

    The order is the search order of the module docstring: ``RPJRT_PLUGIN`` (a path),
    ``PJRT_NAMES_AND_LIBRARY_PATHS``, entry points, namespace packages, known wheels and
    ``TPU_LIBRARY_PATH``. A file found twice is listed once, under its first source.
    """
    from . import _rpjrt

    found = [_info(t) for t in _rpjrt._discover(_search_path())]
    versions = _probe_pjrt_versions([info.path for info in found])
    return [replace(info, pjrt_version=v) for info, v in zip(found, versions)]


#: How long reading the plugins' versions may take when RPJRT_PLUGIN_TIMEOUT is not set.
_PROBE_TIMEOUT = 20.0


def _probe_timeout() -> float:
    # The variable read by the rule Plugin(..., timeout=) follows; a value that rule refuses
    # leaves a listing at its default instead of failing it.
    from . import _rpjrt

    try:
        t = _rpjrt._plugin_timeout_env()
    except ValueError:
        return _PROBE_TIMEOUT
    return _PROBE_TIMEOUT if t is None else t


def _probe_pjrt_versions(paths: list[str]) -> list[str | None]:
    """The PJRT version each library reports, or None where it is not a loadable plugin.

    Loading a library runs its code, so each is loaded in a child process (the hidden
    ``probe-version`` verb of ``python -m rpjrt``); the children run at once and are
    killed when the time is up. Ctrl-C interrupts the wait (and kills the children).
    """
    import subprocess
    import time

    # The time limit is this side's: a child that gave up by itself at the same moment
    # would race the kill and read as a library that answered nothing.
    env = {k: v for k, v in os.environ.items() if k != "RPJRT_PLUGIN_TIMEOUT"}
    children: list[subprocess.Popen[bytes] | None] = []
    for path in paths:
        # A missing file, or a FIFO/device named by a variable, is never opened.
        if not os.path.isfile(path):
            children.append(None)
            continue
        try:
            children.append(
                subprocess.Popen(
                    [sys.executable, "-m", "rpjrt", "probe-version", path],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    env=env,
                )
            )
        except OSError:
            children.append(None)
    limit = _probe_timeout()
    # A limit beyond any wait (inf: none) is waited out without one: select() cannot take it.
    deadline = None if limit > 1e6 else time.monotonic() + limit
    versions: list[str | None] = []
    try:
        for child in children:
            if child is None:
                versions.append(None)
                continue
            try:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                out, _ = child.communicate(timeout=left)
            except subprocess.TimeoutExpired:
                if child.poll() is None:  # still loading when the time is up
                    child.kill()
                    child.communicate()
                    versions.append(None)
                    continue
                out, _ = child.communicate()  # it finished while another was waited for
            first = out.decode("utf-8", "replace").partition("\n")[0].strip()
            ok = child.returncode == 0 and first.startswith("version ")
            versions.append(first[len("version ") :] if ok else None)
    finally:
        for child in children:
            if child is not None and child.poll() is None:
                child.kill()
                child.wait()
    return versions


def candidates(spec: object = None) -> list[PluginInfo]:
    """The plugins a ``Client(spec)`` tries, in order; raises PluginLoadError if none.

    ``spec`` is ``None`` (``RPJRT_PLUGIN`` if set, else everything found: accelerators
    first, CPU last), a platform (``"cpu"``, ``"cuda"``, ``"gpu"``, ``"rocm"``, ``"tpu"``),
    a plugin or wheel name (``"xla_cpu_pjrt"``, ``"lammps-jax-pjrt-cpu"``), a path to a
    library (``str`` or ``os.PathLike``), or a :class:`PluginInfo`.
    """
    if isinstance(spec, PluginInfo):
        return [spec]
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if isinstance(spec, bytes):
        spec = os.fsdecode(spec)
    if spec is not None and not isinstance(spec, str):
        from ._errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"a plugin is named by a platform, a name, a path or a PluginInfo, not {type(spec).__name__}"
        )
    from . import _rpjrt

    if spec is None and os.environ.get("PYPJRT_PLUGIN") and not os.environ.get("RPJRT_PLUGIN"):
        # pypjrt's variable: a migrating user would otherwise get another plugin unawares.
        import warnings

        warnings.warn(
            "PYPJRT_PLUGIN is set but rpjrt does not read it: set RPJRT_PLUGIN (or pass the "
            "plugin to Client) to choose the plugin; choosing from every plugin found",
            stacklevel=3,
        )
    return [_info(t) for t in _rpjrt._candidates(spec, _search_path())]


def find_plugin(spec: object = None) -> PluginInfo:
    """The first plugin :func:`candidates` would try; raises PluginLoadError if none."""
    return candidates(spec)[0]
