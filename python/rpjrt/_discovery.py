"""Finding PJRT plugins without importing (or loading) anything.

Where rpjrt looks, in order:

1. ``RPJRT_PLUGIN``: a path to a plugin library, or the name of a plugin found by the
   steps below (``RPJRT_PLUGIN=cuda``). When set, ``Client()`` uses it and nothing else.
2. ``PJRT_NAMES_AND_LIBRARY_PATHS``: ``"name:path,name:path"`` as JAX reads it (``;``
   between name and path on Windows); a path ending in ``.json`` is a JAX plugin config
   (``{"library_path": ..., "create_options": {...}}``).
3. Installed wheels that advertise an entry point in the ``jax_plugins`` or
   ``xla_plugins`` group, and modules of the ``jax_plugins`` / ``xla_plugins`` namespace
   packages. The library inside is found from the distribution's RECORD, or by looking in
   the module's directory on ``sys.path``: plugin modules are never imported.
4. Known plugin wheels: xla-cpu-pjrt, lammps-jax-pjrt-cpu, jax-cuda12-pjrt,
   jax-cuda13-pjrt, and libtpu (``TPU_LIBRARY_PATH`` first, then the libtpu wheel).

Nothing here opens a library; :func:`plugins` only lists files. ``Client()`` loads the
first usable one, trying accelerators (tpu, cuda, rocm, others) before CPU plugins when
nothing was asked for explicitly.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from ._errors import PluginLoadError

__all__ = ["PluginInfo", "plugins", "find_plugin", "candidates", "ENTRY_POINT_GROUPS", "KNOWN_PACKAGES"]

#: Entry point groups whose values name a plugin module.
ENTRY_POINT_GROUPS = ("jax_plugins", "xla_plugins")
#: Namespace packages whose sub-packages are plugin modules.
NAMESPACE_PACKAGES = ("jax_plugins", "xla_plugins")

_SHLIB_SUFFIXES = (".so", ".dylib", ".dll")


@dataclass(frozen=True)
class _Known:
    package: str  # distribution name on PyPI
    module_dir: str  # directory of the library, relative to site-packages
    library: str  # preferred library file name in that directory
    name: str  # plugin name
    platform: str


#: Plugin wheels rpjrt knows by name (found even without an entry point).
KNOWN_PACKAGES: tuple[_Known, ...] = (
    _Known("xla-cpu-pjrt", "xla_plugins/xla_cpu_pjrt", "xla_cpu_pjrt.so", "xla_cpu_pjrt", "cpu"),
    _Known(
        "lammps-jax-pjrt-cpu",
        "lammps_jax_pjrt_cpu",
        "pjrt_c_api_cpu_plugin.so",
        "lammps_jax_pjrt_cpu",
        "cpu",
    ),
    _Known("jax-cuda12-pjrt", "jax_plugins/xla_cuda12", "xla_cuda_plugin.so", "xla_cuda12", "cuda"),
    _Known("jax-cuda13-pjrt", "jax_plugins/xla_cuda13", "xla_cuda_plugin.so", "xla_cuda13", "cuda"),
    _Known("libtpu", "libtpu", "libtpu.so", "libtpu", "tpu"),
)

# What to install when nothing is found, by requested platform.
_INSTALL_HINTS = {
    "cpu": "pip install 'rpjrt[cpu]'   (the xla-cpu-pjrt plugin)",
    "cuda": "pip install jax-cuda12-pjrt   (or jax-cuda13-pjrt for CUDA 13)",
    "gpu": "pip install jax-cuda12-pjrt   (NVIDIA; or jax-cuda13-pjrt, or a ROCm PJRT wheel)",
    "rocm": "pip install jax-rocm7-pjrt   (AMD ROCm)",
    "tpu": "pip install libtpu   (or set TPU_LIBRARY_PATH)",
}
_PLATFORM_ALIASES = {"gpu": ("cuda", "rocm"), "host": ("cpu",)}
_ACCELERATOR_RANK = {"tpu": 0, "cuda": 1, "rocm": 2}


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


def _guess_platform(*texts: str | None) -> str | None:
    for text in texts:
        if not text:
            continue
        t = text.lower()
        for key, platform in (
            ("tpu", "tpu"),
            ("cuda", "cuda"),
            ("rocm", "rocm"),
            ("metal", "metal"),
            ("cpu", "cpu"),
            ("host", "cpu"),
        ):
            if key in t:
                return platform
    return None


def _looks_like_path(spec: str) -> bool:
    return (
        os.sep in spec
        or (os.altsep is not None and os.altsep in spec)
        or spec.endswith(_SHLIB_SUFFIXES)
        or ".so." in spec
    )


def _pick_library(directory: Path, preferred: str | None = None) -> Path | None:
    """The PJRT library in a plugin module's directory (not a Python extension)."""
    try:
        entries = sorted(p for p in directory.iterdir() if p.is_file())
    except OSError:
        return None
    if preferred is not None:
        for p in entries:
            if p.name == preferred:
                return p
    libs = [
        p
        for p in entries
        if (p.suffix in _SHLIB_SUFFIXES or ".so." in p.name)
        and ".cpython-" not in p.name
        and ".abi3." not in p.name
        and not p.name.startswith("_")
    ]
    if not libs:
        return None
    for key in ("pjrt", "plugin"):
        for p in libs:
            if key in p.name.lower():
                return p
    return libs[0]


def _module_dirs(module: str) -> Iterator[Path]:
    """Directories on sys.path that hold `module` (a dotted package name), no import."""
    rel = Path(*module.split("."))
    for entry in sys.path:
        base = Path(entry or ".")
        d = base / rel
        if d.is_dir():
            yield d.resolve()


def _dist_library(dist: metadata.Distribution, module_dir: str, preferred: str | None) -> Path | None:
    """The library under `module_dir` (a/b) among the files a distribution's RECORD lists."""
    files = dist.files
    if not files:
        return None
    prefix = module_dir.rstrip("/") + "/"
    candidates = []
    for f in files:
        s = str(f).replace("\\", "/")
        if s.startswith(prefix) and "/" not in s[len(prefix) :]:
            name = s[len(prefix) :]
            if name.endswith(_SHLIB_SUFFIXES) or ".so." in name:
                candidates.append(Path(str(dist.locate_file(f))))
    if not candidates:
        return None
    if preferred is not None:
        for c in candidates:
            if c.name == preferred:
                return c.resolve()
    return _pick_library(candidates[0].parent, preferred) or candidates[0].resolve()


def _dist_version(dist: metadata.Distribution | None) -> str | None:
    if dist is None:
        return None
    try:
        return dist.version
    except Exception:
        return None


def _dist_name(dist: metadata.Distribution | None) -> str | None:
    if dist is None:
        return None
    try:
        return str(dist.metadata["Name"])
    except Exception:
        return None


def _from_env_rpjrt_plugin() -> Iterator[PluginInfo]:
    spec = os.environ.get("RPJRT_PLUGIN", "").strip()
    if spec and _looks_like_path(spec):
        path = os.path.abspath(os.path.expanduser(spec))
        name = Path(path).name.split(".")[0]
        yield PluginInfo(name, path, None, "RPJRT_PLUGIN", _guess_platform(name, path))


def _read_json_config(path: str) -> tuple[str, Mapping[str, Any] | None]:
    # Never open anything but a regular file: opening a FIFO blocks until a writer comes.
    if not os.path.isfile(path):
        what = "does not exist" if not os.path.lexists(path) else "is not a regular file"
        raise PluginLoadError(f"cannot read the PJRT plugin config {path}: it {what}")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise PluginLoadError(f"cannot read the PJRT plugin config {path}: {e}") from None
    if not isinstance(config, dict) or "library_path" not in config:
        raise PluginLoadError(f"the PJRT plugin config {path} has no 'library_path' field")
    options = config.get("create_options")
    return str(config["library_path"]), options if isinstance(options, dict) else None


def _from_env_names_and_paths() -> Iterator[PluginInfo]:
    value = os.environ.get("PJRT_NAMES_AND_LIBRARY_PATHS", "").strip()
    if not value:
        return
    sep = ";" if os.name == "nt" else ":"
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, found, path = item.partition(sep)
        if not found or not name or not path:
            continue  # malformed; JAX ignores it as well
        options = None
        if path.endswith(".json"):
            path, options = _read_json_config(path)
        path = os.path.abspath(os.path.expanduser(path))
        yield PluginInfo(
            name, path, None, "PJRT_NAMES_AND_LIBRARY_PATHS", _guess_platform(name, path), None, options
        )


def _entry_points(group: str) -> Iterable[metadata.EntryPoint]:
    try:
        return metadata.entry_points(group=group)
    except Exception:  # a broken distribution must not break discovery
        return ()


def _from_entry_points() -> Iterator[PluginInfo]:
    for group in ENTRY_POINT_GROUPS:
        for ep in _entry_points(group):
            module = ep.value.split(":", 1)[0].strip()
            if not module:
                continue
            dist = getattr(ep, "dist", None)
            lib: Path | None = None
            if dist is not None:
                lib = _dist_library(dist, module.replace(".", "/"), None)
            if lib is None:
                for d in _module_dirs(module):
                    lib = _pick_library(d)
                    if lib is not None:
                        break
            if lib is None:
                continue
            pkg = _dist_name(dist)
            yield PluginInfo(
                ep.name,
                str(lib.resolve()),
                _dist_version(dist),
                f"entry point {group}:{ep.name}",
                _guess_platform(ep.name, module, pkg),
                pkg,
            )


def _from_namespaces() -> Iterator[PluginInfo]:
    for ns in NAMESPACE_PACKAGES:
        seen: set[str] = set()
        for d in _module_dirs(ns):
            try:
                subdirs = sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
            except OSError:
                continue
            for sub in subdirs:
                if sub.name in seen:
                    continue  # an earlier sys.path entry shadows it, as for imports
                seen.add(sub.name)
                lib = _pick_library(sub)
                if lib is not None:
                    yield PluginInfo(
                        sub.name,
                        str(lib.resolve()),
                        None,
                        f"namespace package {ns}.{sub.name}",
                        _guess_platform(sub.name),
                    )


def _from_known_packages() -> Iterator[PluginInfo]:
    tpu_path = os.environ.get("TPU_LIBRARY_PATH", "").strip()
    for known in KNOWN_PACKAGES:
        if known.package == "libtpu" and tpu_path:
            path = os.path.abspath(os.path.expanduser(tpu_path))
            yield PluginInfo("libtpu", path, None, "TPU_LIBRARY_PATH", "tpu")
        dist: metadata.Distribution | None
        try:
            dist = metadata.distribution(known.package)
        except metadata.PackageNotFoundError:
            dist = None
        except Exception:
            dist = None
        lib: Path | None = None
        if dist is not None:
            lib = _dist_library(dist, known.module_dir, known.library)
        if lib is None:
            for d in _module_dirs(known.module_dir.replace("/", ".")):
                lib = _pick_library(d, known.library)
                if lib is not None:
                    break
        if lib is None:
            continue
        yield PluginInfo(
            known.name,
            str(lib.resolve()),
            _dist_version(dist),
            f"package {known.package}",
            known.platform,
            _dist_name(dist) or known.package,
        )


def _merge(found: Iterable[PluginInfo]) -> list[PluginInfo]:
    """Drop later sightings of the same file, filling in what the first one lacked."""
    out: list[PluginInfo] = []
    index: dict[str, int] = {}
    for info in found:
        key = os.path.realpath(info.path)
        if key in index:
            i = index[key]
            first = out[i]
            out[i] = PluginInfo(
                first.name,
                first.path,
                first.version if first.version is not None else info.version,
                first.source,
                first.platform if first.platform is not None else info.platform,
                first.package if first.package is not None else info.package,
                first.options if first.options is not None else info.options,
            )
            continue
        index[key] = len(out)
        out.append(info)
    return out


def plugins() -> list[PluginInfo]:
    """Every plugin library discovery can see, in search order (nothing is loaded).

    The order is the search order of the module docstring: ``RPJRT_PLUGIN`` (a path),
    ``PJRT_NAMES_AND_LIBRARY_PATHS``, entry points, namespace packages, known wheels and
    ``TPU_LIBRARY_PATH``. A file found twice is listed once, under its first source.
    """
    found = _merge(
        [
            *_from_env_rpjrt_plugin(),
            *_from_env_names_and_paths(),
            *_from_entry_points(),
            *_from_namespaces(),
            *_from_known_packages(),
        ]
    )
    env = os.environ.get("RPJRT_PLUGIN", "").strip()
    if env and not _looks_like_path(env):
        # RPJRT_PLUGIN names one of the others: list it first.
        found.sort(key=lambda info: not _matches(info, env))
    return [replace(info, pjrt_version=_probe_pjrt_version(info.path)) for info in found]


def _probe_pjrt_version(path: str) -> str | None:
    """The PJRT version a library reports, or None if it is not a loadable plugin."""
    from . import _rpjrt  # the native module: imported only when asked to probe

    try:
        return _rpjrt._probe_pjrt_version(path)
    except Exception:  # any load failure just means "unknown" in a listing
        return None


def _matches(info: PluginInfo, want: str) -> bool:
    w = want.lower()
    platforms = _PLATFORM_ALIASES.get(w, (w,))
    if info.platform is not None and info.platform in platforms:
        return True
    names = {info.name.lower(), Path(info.path).name.lower()}
    if info.package:
        names.add(info.package.lower())
        names.add(info.package.lower().replace("-", "_"))
    return w in names or w.replace("-", "_") in names


def _searched(found: list[PluginInfo]) -> str:
    env = os.environ
    lines = [
        f"  RPJRT_PLUGIN: {env.get('RPJRT_PLUGIN') or '(unset)'}",
        f"  PJRT_NAMES_AND_LIBRARY_PATHS: {env.get('PJRT_NAMES_AND_LIBRARY_PATHS') or '(unset)'}",
        f"  entry points in groups {', '.join(ENTRY_POINT_GROUPS)}",
        f"  namespace packages {', '.join(NAMESPACE_PACKAGES)} on sys.path",
        f"  wheels {', '.join(k.package for k in KNOWN_PACKAGES)}",
        f"  TPU_LIBRARY_PATH: {env.get('TPU_LIBRARY_PATH') or '(unset)'}",
    ]
    if found:
        lines.append("found, but not matching:")
        lines.extend(f"  {info.name} ({info.platform or 'unknown platform'}) at {info.path}" for info in found)
    else:
        lines.append("found: nothing")
    return "\n".join(lines)


def _hint(want: str | None) -> str:
    if want is not None and want.lower() in _INSTALL_HINTS:
        return _INSTALL_HINTS[want.lower()]
    return _INSTALL_HINTS["cpu"] + "\n  or point RPJRT_PLUGIN at a PJRT plugin library (a .so exporting GetPjrtApi)"


def _rank(info: PluginInfo) -> int:
    if info.platform is None:
        return 3
    return _ACCELERATOR_RANK.get(info.platform, 4 if info.platform == "cpu" else 3)


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
    source = "argument"
    if spec is None:
        env = os.environ.get("RPJRT_PLUGIN", "").strip()
        if env:
            spec, source = env, "RPJRT_PLUGIN"
    if isinstance(spec, str):
        if not spec.strip():
            from ._errors import InvalidArgumentError

            raise InvalidArgumentError("an empty string names no plugin")
        if _looks_like_path(spec) or (os.path.isfile(spec) and not _matches_any_platform(spec)):
            path = os.path.abspath(os.path.expanduser(spec))
            name = Path(path).name.split(".")[0]
            given = PluginInfo(name, path, None, source, _guess_platform(name, path))
            return [_enrich(given)]
    found = plugins()
    if spec is None:
        if found:
            return sorted(found, key=_rank)  # stable: search order within a rank
        raise PluginLoadError(
            "no PJRT plugin found. Searched:\n" + _searched(found) + "\nInstall one:\n  " + _hint(None)
        )
    assert isinstance(spec, str)
    chosen = [info for info in found if _matches(info, spec)]
    if chosen:
        return chosen
    origin = " (from RPJRT_PLUGIN)" if source == "RPJRT_PLUGIN" else ""
    raise PluginLoadError(
        f"no PJRT plugin matching {spec!r}{origin} found. Searched:\n"
        + _searched(found)
        + "\nInstall one:\n  "
        + _hint(spec)
    )


def _enrich(info: PluginInfo) -> PluginInfo:
    """A path given directly, named and versioned as discovery knows the same file."""
    try:
        real = os.path.realpath(info.path)
        for known in plugins():
            if os.path.realpath(known.path) == real:
                return PluginInfo(
                    known.name,
                    info.path,
                    known.version,
                    info.source,
                    known.platform or info.platform,
                    known.package,
                    known.options,
                )
    except Exception:  # discovery trouble must not break an explicit path
        pass
    return info


def _matches_any_platform(spec: str) -> bool:
    return spec.lower() in _INSTALL_HINTS or spec.lower() in _PLATFORM_ALIASES


def find_plugin(spec: object = None) -> PluginInfo:
    """The first plugin :func:`candidates` would try; raises PluginLoadError if none."""
    return candidates(spec)[0]
