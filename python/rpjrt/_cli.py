"""The ``rpjrt`` console script: the same command-line tool as the Rust binary."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Sequence

__all__ = ["main"]


# Set for the tool when descriptor 1 was closed at start: the Rust binary finds that
# before its runtime puts /dev/null there; under Python the check is made here (the
# interpreter leaves a closed stdout closed and sets ``sys.stdout`` to None).
_STDOUT_CLOSED_ENV = "RPJRT_CLI_STDOUT_CLOSED"

# What this front end changed in the environment for the tool, with the user's own values
# (the hex of their bytes, or null where unset): ``rpjrt launch`` gives the job's processes
# the user's environment back from it, not the tool's settings.
_ADDED_ENV = "RPJRT_CLI_ADDED_ENV"
# The variables this front end sets for the tool.
_SET_FOR_THE_TOOL = ("RPJRT_PLUGIN_PATH", "RPJRT_CLI_SELF")


def _added_record(saved: dict[str, str | None]) -> str:
    """The value of ``RPJRT_CLI_ADDED_ENV`` for this run: the user's values of the variables
    set for the tool. A ``python -m rpjrt`` that the tool started (a verb's child process)
    keeps the record it inherited, which holds the user's values, not its parent's
    settings."""
    inherited = os.environ.get(_ADDED_ENV)
    if inherited and saved["RPJRT_CLI_SELF"] == _self_command():
        return inherited
    record: dict[str, str | None] = {}
    for k in _SET_FOR_THE_TOOL:
        value = saved[k]
        record[k] = None if value is None else os.fsencode(value).hex()
    return json.dumps(record)


def _fd_closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def _occupy_closed_stdio() -> tuple[list[int], bool]:
    """Does for descriptors 0, 1 and 2 what Rust's runtime does for the binary: a closed one
    is opened on /dev/null, so that no file the tool or a plugin opens later lands there
    (and takes the output meant for the terminal). Returns the descriptors it opened, and
    whether stdout was closed when the interpreter started (``rpjrt ... >&-``), which the
    tool then reports as the binary does (exit 1, ``descriptor 1 was closed when rpjrt
    started``)."""
    opened = []
    for fd in (0, 1, 2):
        if _fd_closed(fd):
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            opened.append(fd)
    # The interpreter sets sys.__stdout__ to None when descriptor 1 was not open at start.
    stdout_closed = sys.__stdout__ is None or 1 in opened
    return opened, stdout_closed


def _sys_path_dirs() -> list[str]:
    """The entries of ``sys.path`` that the import system searches, as directories: a
    ``str`` without NUL (an empty one is the current directory). Anything else (bytes, a
    number, a ``str`` holding NUL, one that the file system encoding cannot encode) is
    skipped, as imports skip it: one such entry must not fail plugin discovery."""
    dirs = []
    for entry in sys.path:
        if not isinstance(entry, str) or "\0" in entry:
            continue
        try:
            os.fsencode(entry)
        except UnicodeError:
            continue
        dirs.append(entry or ".")
    return dirs


def _search_path(inherited: str | None) -> str:
    """The directories the tool searches for plugins: ``RPJRT_PLUGIN_PATH`` as given, then
    this interpreter's ``sys.path`` (:func:`_sys_path_dirs`), each directory once. A
    ``python -m rpjrt`` that this command started (to run a verb in a child process) keeps
    the list it was given, which already holds its parent's ``sys.path``."""
    if inherited and os.environ.get("RPJRT_CLI_SELF") == _self_command():
        return inherited
    search = inherited.split(os.pathsep) if inherited else []
    search += _sys_path_dirs()
    seen = set()
    unique = []
    for p in search:
        key = os.path.normpath(os.path.abspath(p)) if p else p
        if p and key not in seen:
            seen.add(key)
            unique.append(p)
    return os.pathsep.join(unique)


# What a child started by :func:`_child_command` runs: this rpjrt, found through the
# directory it was imported from (passed as the first argument) when the child's own
# ``sys.path`` would not find it there (a zipapp, a notebook, an embedded interpreter that
# added a ``sys.path`` entry at run time) or would find another copy first. Only the child's
# ``sys.path`` changes, never an environment variable that processes it starts inherit. A
# child that cannot import rpjrt says so on stderr, led by :data:`CHILD_IMPORT_FAILED`, and
# exits with status 2 (it did not start the verb).
CHILD_IMPORT_FAILED = "rpjrt: this child process cannot import rpjrt"
_CHILD_BOOTSTRAP = f"""\
import os, sys
from importlib.util import find_spec
where = sys.argv.pop(1)
try:
    found = find_spec("rpjrt")
except (ImportError, ValueError):
    found = None
here = [] if found is None else [
    os.path.dirname(os.path.realpath(p)) for p in found.submodule_search_locations or ()
]
if os.path.realpath(where) not in here:
    sys.path.insert(0, where)
try:
    from rpjrt._cli import main
except ImportError as e:
    sys.stderr.write(
        "{CHILD_IMPORT_FAILED} (" + sys.executable + "; the parent imported it from "
        + repr(where) + ", which is on this sys.path): " + str(e) + "\\n"
    )
    sys.exit(2)
sys.exit(main())
"""


def _import_dir() -> str:
    """The ``sys.path`` entry this rpjrt was imported from: the directory above the package
    (a zip archive's path for a zipapp)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _child_command() -> list[str]:
    """The command that runs this rpjrt's command line again in a child process: this
    interpreter, told where rpjrt was imported from (see ``_CHILD_BOOTSTRAP``), so that the
    child imports the same rpjrt even when only a run-time ``sys.path`` entry finds it."""
    return [sys.executable, "-c", _CHILD_BOOTSTRAP, _import_dir()]


def _self_command() -> str:
    return json.dumps(_child_command())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the rpjrt CLI with ``argv`` (default: ``sys.argv[1:]``); returns its exit code.

    ``argv`` is a list of arguments (``["plugins", "--json"]``), never one string: a string
    would be taken apart character by character. Each argument is a ``str``, ``bytes`` or
    an ``os.PathLike`` (``pathlib.Path``), the last two passed on as the same bytes; any
    other type raises ``TypeError`` naming the argument. An argument holding a NUL byte,
    which no command line can hold, is a usage error (exit code 2) naming the argument."""
    if isinstance(argv, (str, bytes, bytearray)):
        raise TypeError(
            f"rpjrt._cli.main takes a list of arguments, not one {type(argv).__name__} "
            f"({argv!r}): write main([{argv!r}]), or main(shlex.split(...)) for a command line"
        )
    given = []
    for i, arg in enumerate(list(sys.argv[1:] if argv is None else argv), 1):
        # A path (``pathlib.Path``) or bytes is an argument as the OS holds it: given to
        # the tool as the same bytes (``os.fsdecode``'s surrogate escapes), as a file name
        # that is not UTF-8 arrives from a shell.
        raw = os.fspath(arg) if isinstance(arg, os.PathLike) else arg
        if isinstance(raw, bytearray):
            raw = bytes(raw)
        if not isinstance(raw, (str, bytes)):
            raise TypeError(
                f"rpjrt._cli.main: argument {i}, {arg!r}, is a {type(arg).__name__}; each "
                "argument is a str, bytes or os.PathLike (write str(x) for a number)"
            )
        if isinstance(raw, str) and "\x00" in raw or isinstance(raw, bytes) and b"\x00" in raw:
            print(
                f"rpjrt: argument {i}, {raw!r}, holds a NUL byte, which no command-line "
                "argument can hold (a C string ends there); remove it",
                file=sys.stderr,
            )
            return 2
        given.append(os.fsdecode(raw) if isinstance(raw, bytes) else raw)
    args = ["rpjrt", *given]
    from ._rpjrt import _run_cli

    # The tool finds plugins with the same Rust discovery as rpjrt.Client(); give it this
    # interpreter's sys.path to search, and the command that starts the tool again (conform
    # runs its checks in child processes, and this process is the interpreter, not the
    # rpjrt binary). Both are restored afterwards; what the user had is recorded for the
    # tool (``RPJRT_CLI_ADDED_ENV``), so that ``launch`` passes on only the user's settings.
    saved = {
        k: os.environ.get(k)
        for k in (*_SET_FOR_THE_TOOL, _STDOUT_CLOSED_ENV, _ADDED_ENV)
    }
    os.environ[_ADDED_ENV] = _added_record(saved)
    os.environ["RPJRT_PLUGIN_PATH"] = _search_path(saved["RPJRT_PLUGIN_PATH"])
    os.environ["RPJRT_CLI_SELF"] = _self_command()
    opened, stdout_closed = _occupy_closed_stdio()
    if stdout_closed:
        os.environ[_STDOUT_CLOSED_ENV] = "1"

    # The tool runs in Rust and never returns to the interpreter while it works, so
    # Python's own SIGINT handler would only set a flag nobody reads: let Ctrl-C end the
    # process as it ends the native binary.
    # Likewise a closed pipe (`python -m rpjrt info --json | head`) ends the process
    # quietly, as it ends C tools, instead of a panic on EPIPE inside the tool.
    # A SIGINT that was ignored when the process started (a background job of a
    # non-interactive shell) stays ignored, as the binary keeps it (docs/distributed.md).
    try:
        previous = None
        if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
            previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
        previous_pipe = signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    except ValueError:  # not the main thread: leave signals alone
        previous = previous_pipe = None
    try:
        try:
            # None where the descriptor was closed when the interpreter started.
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:
                    stream.flush()
        except BrokenPipeError:
            return 141
        return int(_run_cli(args))
    finally:
        for fd in opened:
            try:
                os.close(fd)
            except OSError:
                pass
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if previous_pipe is not None:
            signal.signal(signal.SIGPIPE, previous_pipe)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


if __name__ == "__main__":
    sys.exit(main())
