"""The ``rpjrt`` console script: the same command-line tool as the Rust binary."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the rpjrt CLI with ``argv`` (default: ``sys.argv[1:]``); returns its exit code."""
    args = ["rpjrt", *(sys.argv[1:] if argv is None else argv)]
    from ._rpjrt import _run_cli

    # The tool finds plugins with the same Rust discovery as rpjrt.Client(); give it this
    # interpreter's sys.path to search, and the command that starts the tool again (conform
    # runs its checks in child processes, and this process is the interpreter, not the
    # rpjrt binary). Both are restored afterwards.
    saved = {k: os.environ.get(k) for k in ("RPJRT_PLUGIN_PATH", "RPJRT_CLI_SELF")}
    search = [p or "." for p in sys.path]
    if saved["RPJRT_PLUGIN_PATH"]:
        search.insert(0, saved["RPJRT_PLUGIN_PATH"])
    os.environ["RPJRT_PLUGIN_PATH"] = os.pathsep.join(search)
    os.environ["RPJRT_CLI_SELF"] = json.dumps([sys.executable, "-m", "rpjrt"])

    # The tool runs in Rust and never returns to the interpreter while it works, so
    # Python's own SIGINT handler would only set a flag nobody reads: let Ctrl-C end the
    # process as it ends the native binary.
    # Likewise a closed pipe (`python -m rpjrt info --json | head`) ends the process
    # quietly, as it ends C tools, instead of a panic on EPIPE inside the tool.
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
        previous_pipe = signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    except ValueError:  # not the main thread: leave signals alone
        previous = previous_pipe = None
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        return 141
    try:
        return int(_run_cli(args))
    finally:
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
