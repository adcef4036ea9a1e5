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
one's PJRT version in a child process (the ``probe-version`` verb of ``python -m rpjrt``,
run by this interpreter with this rpjrt), up to 32 at once (fewer under a low ``ulimit -n``),
so that a library that crashes, exits or hangs while loading costs only its own answer
(``None``, with the reason in ``PluginInfo.problem``), after at most
``RPJRT_PLUGIN_TIMEOUT`` seconds (20 by default), however long a process it started holds
the child's pipes. A child that cannot be started is a ``RuntimeWarning`` and each such
plugin's ``problem``, never a silent ``None``. ``Client()`` loads the first usable one, trying accelerators (tpu, cuda,
rocm, others) before CPU plugins when nothing was asked for explicitly. What stays in
Python is what needs the interpreter: ``sys.path`` and the :class:`PluginInfo` objects.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

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
        problem: why ``pjrt_version`` is ``None``, in words (what ``rpjrt plugins`` shows
            in the row's ``problem``): not a regular file, not a PJRT library, crashed or
            hung while loading, a config that cannot be read, or a probe child that could
            not be started or could not import rpjrt. ``None`` when the version was read,
            and for :func:`candidates` (which reads no versions).
    """

    name: str
    path: str
    version: str | None
    source: str
    platform: str | None = None
    package: str | None = None
    options: Mapping[str, Any] | None = field(default=None, compare=False)
    pjrt_version: str | None = field(default=None, compare=False)
    problem: str | None = field(default=None, compare=False)

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
        if self.problem is not None:
            parts.append(f"problem={self.problem!r}")
        return f"PluginInfo({', '.join(parts)})"


def _search_path() -> list[str]:
    """``sys.path`` as directories to search: entries that imports skip (not a ``str``, or
    holding NUL) are skipped here too."""
    return _sys_path_dirs()


# Imported with this module, not at the first search: an import that another thread is in
# the middle of when the process forks leaves the module's import lock held in the child.
from ._cli import _sys_path_dirs  # noqa: E402


def _info(t: tuple[Any, ...]) -> PluginInfo:
    name, path, version, source, platform, package, options, *rest = t
    problem = rest[0] if rest else None
    return PluginInfo(name, path, version, source, platform, package, options, problem=problem)


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
    # An entry that already has a problem (a config that cannot be read) is not probed.
    answers = _probe_pjrt_versions([info.path for info in found if info.problem is None])
    out = []
    for info in found:
        if info.problem is None:
            version, problem = answers.pop(0)
            info = replace(info, pjrt_version=version, problem=problem)
        out.append(info)
    return out


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


#: The most probe children running at once. Each holds two pipes in this process (and a
#: thread-free slot in the wait below); with hundreds of plugins, starting every child at
#: once ran out of file descriptors. A library stuck while loading holds its slot for the
#: time limit, so fewer stuck libraries than this still cost one time limit in all.
_PROBES_AT_ONCE = 32


def _probes_at_once(n: int) -> int:
    """How many probe children to run at once: :data:`_PROBES_AT_ONCE`, fewer where the
    open-files limit (``ulimit -n``) leaves less room (8 descriptors a child, counting
    the ones a start holds for a moment), never fewer than one."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        soft = -1
    cap = _PROBES_AT_ONCE
    if soft > 0:
        cap = min(cap, max(1, (soft - 64) // 8))
    return max(1, min(cap, n))


#: errno values of a child start that failed for want of a resource another child will give
#: back when it ends (file descriptors, processes, memory): the start is tried again then.
def _for_want_of_resources(e: OSError) -> bool:
    import errno

    return e.errno in (errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM)


def _start_failure(e: OSError) -> str:
    """Why a probe child could not be started, in words, with what to do."""
    import errno

    why = f"cannot start a child process to read its PJRT version: {e}"
    if e.errno in (errno.EMFILE, errno.ENFILE):
        return f"{why}; out of file descriptors: raise the limit (`ulimit -n`)"
    if e.errno == errno.EAGAIN:
        return f"{why}; out of processes: raise the limit (`ulimit -u`)"
    if not sys.executable:
        return f"{why} (sys.executable is empty: this interpreter is embedded and cannot be run again)"
    return f"{why} (the child is {sys.executable!r} running rpjrt)"


def _probe_pjrt_versions(paths: list[str]) -> list[tuple[str | None, str | None]]:
    """The PJRT version each library reports, or ``(None, why)`` where there is none.

    Loading a library runs its code, so each is loaded in a child process (the hidden
    ``probe-version`` verb of the command line, run by this interpreter with this rpjrt:
    ``_cli._child_command``); up to :func:`_probes_at_once` children run at once. Nothing
    here waits past each child's time limit (``RPJRT_PLUGIN_TIMEOUT``): neither for a child
    to end (it is killed) nor for its output to end (a process the library started, a
    daemon, may hold the pipe open for as long as it runs; the answer is the first line).
    A library that did not answer in time is named in a :class:`RuntimeWarning`, and so is
    a child that could not import rpjrt or could not be started at all; each answer says
    why there is no version. Ctrl-C interrupts the wait (and kills the children).
    """
    import subprocess
    import time

    from ._cli import CHILD_IMPORT_FAILED, _child_command

    # The time limit is this side's: a child that gave up by itself at the same moment
    # would race the kill and read as a library that answered nothing.
    env = {k: v for k, v in os.environ.items() if k != "RPJRT_PLUGIN_TIMEOUT"}
    answers: list[tuple[str | None, str | None] | None] = [None] * len(paths)
    unstarted: list[tuple[str, str]] = []
    probes: list[_Probe] = []
    todo: list[int] = []
    for i, path in enumerate(paths):
        # A missing file, or a FIFO/device named by a variable, is never opened.
        why = _not_a_file(path)
        if why is not None:
            answers[i] = (None, why)
        else:
            todo.append(i)
    limit = _probe_timeout()
    cap = _probes_at_once(len(todo))
    command: list[str] = []
    try:
        command = _child_command()
    except (OSError, ValueError) as e:
        for i in todo:
            why = f"cannot start a child process to read its PJRT version: {e}"
            answers[i] = (None, why)
            unstarted.append((paths[i], why))
        todo = []
    todo.reverse()  # popped from the end: in order
    running: list[_Probe] = []
    try:
        while todo or running:
            while todo and len(running) < cap:
                i = todo[-1]
                try:
                    child = subprocess.Popen(
                        [*command, "probe-version", paths[i]],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        env=env,
                    )
                except OSError as e:
                    if _for_want_of_resources(e) and running:
                        # Tried again when a running child has ended and given its back.
                        cap = max(1, len(running))
                        break
                    todo.pop()
                    why = _start_failure(e)
                    answers[i] = (None, why)
                    unstarted.append((paths[i], why))
                    continue
                todo.pop()
                # A limit beyond any wait (inf: none) is waited out without one.
                deadline = None if limit > 1e6 else time.monotonic() + limit
                probe = _Probe(paths[i], child, i, deadline)
                running.append(probe)
                probes.append(probe)
            if not running:
                continue
            _wait_for_probes(running, any_one=True)
            for probe in [p for p in running if p.done()]:
                running.remove(probe)
                probe.close()
                answers[probe.index] = probe.answer(limit, CHILD_IMPORT_FAILED)
    finally:
        for probe in running:
            probe.close()
    _warn_about_probes(probes, unstarted, limit, CHILD_IMPORT_FAILED)
    return [a if a is not None else (None, "its PJRT version was not read") for a in answers]


def _not_a_file(path: str) -> str | None:
    """Why ``path`` is not probed (not opened: a FIFO or device would block), in the words
    of ``rpjrt plugins``; ``None`` for a regular file."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as e:
        return f"cannot be read: {e}"
    import stat

    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a device, FIFO or directory); not loaded"
    return None


class _Probe:
    """One ``probe-version`` child, and what it wrote: the start of its stdout (the answer
    is the first line) and the end of its stderr (what it said if it could not start)."""

    #: How much of each stream is kept (the rest is read and dropped, so that a child with
    #: more to write is never blocked on a full pipe).
    KEEP = 4096

    def __init__(
        self, path: str, child: subprocess.Popen[bytes], index: int = 0, deadline: float | None = None
    ) -> None:
        self.path = path
        self.child = child
        self.index = index
        self.deadline = deadline
        self.out = b""
        self.err = b""
        self.stdout = None if child.stdout is None else child.stdout.fileno()
        self.open = {f.fileno(): f for f in (child.stdout, child.stderr) if f is not None}
        for fd in self.open:
            os.set_blocking(fd, False)
        self.timed_out = False
        self.watched = False

    def read(self, fd: int) -> bool:
        """Reads what is there on one of the child's pipes; True at its end (the caller
        then stops watching it and closes it: :meth:`close_pipe`)."""
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            return True
        if fd == self.stdout:
            if len(self.out) < self.KEEP:
                self.out = (self.out + chunk)[: self.KEEP]
        else:
            self.err = (self.err + chunk)[-self.KEEP :]
        return False

    def close_pipe(self, fd: int) -> None:
        """Closes one of the child's pipes, at its end."""
        self.open.pop(fd).close()

    def answered(self) -> bool:
        """The child has ended and its answer is in: its first line, or the end of its
        stdout (a process it started may still hold the pipes; they are not waited on)."""
        if self.child.poll() is None:
            return False
        return b"\n" in self.out or self.stdout not in self.open

    def done(self) -> bool:
        """Answered, or out of time (then marked so: the caller kills it)."""
        return self.answered() or self.timed_out

    def close(self) -> None:
        """Kills the child if it still runs (and reaps it: a killed child ends at once; a
        process it started is not waited for), and closes the pipes."""
        if self.child.poll() is None:
            self.timed_out = True
            self.child.kill()
            self.child.wait()
        for f in self.open.values():
            f.close()
        self.open.clear()

    def version(self) -> str | None:
        """The version the child reported, or None."""
        first = self.out.decode("utf-8", "replace").partition("\n")[0].strip()
        if self.timed_out or self.child.returncode != 0 or not first.startswith("version "):
            return None
        return first[len("version ") :]

    def answer(self, limit: float, import_failed: str) -> tuple[str | None, str | None]:
        """``(version, None)``, or ``(None, why)`` in the words of ``rpjrt plugins``."""
        version = self.version()
        if version is not None:
            return version, None
        first = self.out.decode("utf-8", "replace").partition("\n")[0].strip()
        said = self.err.decode("utf-8", "replace")
        code = self.child.returncode
        if self.timed_out:
            return None, f"loading it did not finish in {limit:g} s (RPJRT_PLUGIN_TIMEOUT)"
        if import_failed in said:
            return None, said[said.index(import_failed) :].splitlines()[0]
        if first.startswith("error "):
            return None, first[len("error ") :] or "its PJRT version could not be read"
        if code is not None and code < 0:
            import signal

            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return None, f"loading it crashed the process (was killed by {name} ({-code}))"
        tail = said.strip().splitlines()[-1:] if said.strip() else []
        return None, (
            f"the child reading its PJRT version exited with status {code} without an answer"
            + (f": {tail[0]}" if tail else "")
        )


def _wait_for_probes(probes: list[_Probe], any_one: bool = False) -> None:
    """Reads the probes' pipes until every child has answered or run out of time (with
    ``any_one``: until one of them has), each by its own deadline."""
    import selectors
    import time

    with selectors.DefaultSelector() as sel:
        for probe in probes:
            for fd in probe.open:
                sel.register(fd, selectors.EVENT_READ, probe)
        while True:
            now = time.monotonic()
            for p in probes:
                # One that ended but whose first line never came (its pipe held open) is
                # late too; the caller kills the ones still running.
                if not p.answered() and p.deadline is not None and p.deadline <= now:
                    p.timed_out = True
            waiting = [p for p in probes if not p.done()]
            if not waiting or (any_one and len(waiting) < len(probes)):
                return
            deadlines = [p.deadline for p in waiting if p.deadline is not None]
            left = None if not deadlines else max(0.0, min(deadlines) - now)
            # A child's end is not something select() reports: look again every 20 ms.
            for key, _ in sel.select(0.02 if left is None else min(left, 0.02)):
                probe = key.data
                if key.fd in probe.open and probe.read(key.fd):
                    # Unwatched before it is closed: its number may be used again.
                    sel.unregister(key.fd)
                    probe.close_pipe(key.fd)


def _warn_about_probes(
    probes: list[_Probe], unstarted: list[tuple[str, str]], limit: float, import_failed: str
) -> None:
    """Says which libraries did not answer in time, which could not be asked (a child that
    could not be started) and that a child could not import rpjrt: their versions are None,
    which would otherwise read as "not a plugin"."""
    import warnings

    late = [p.path for p in probes if p.timed_out]
    if late:
        warnings.warn(
            f"rpjrt.plugins(): loading {', '.join(map(repr, late))} to read the PJRT version "
            f"did not finish in {limit:g} s (RPJRT_PLUGIN_TIMEOUT); pjrt_version is None",
            RuntimeWarning,
            stacklevel=4,
        )
    if unstarted:
        shown = ", ".join(repr(p) for p, _ in unstarted[:5])
        more = f" and {len(unstarted) - 5} more" if len(unstarted) > 5 else ""
        warnings.warn(
            f"rpjrt.plugins(): {unstarted[0][1]}; pjrt_version is None for {len(unstarted)} "
            f"librar{'y' if len(unstarted) == 1 else 'ies'} ({shown}{more}); each one's "
            "`problem` says why",
            RuntimeWarning,
            stacklevel=4,
        )
    for p in probes:
        said = p.err.decode("utf-8", "replace")
        if import_failed in said:
            line = said[said.index(import_failed) :].splitlines()[0]
            warnings.warn(
                f"rpjrt.plugins(): cannot read the plugins' PJRT versions: {line}",
                RuntimeWarning,
                stacklevel=4,
            )
            return


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
            stacklevel=4,
        )
    return [_info(t) for t in _rpjrt._candidates(spec, _search_path())]


def find_plugin(spec: object = None) -> PluginInfo:
    """The first plugin :func:`candidates` would try; raises PluginLoadError if none."""
    return candidates(spec)[0]
