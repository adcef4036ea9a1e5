"""The ``rpjrt`` console script: the same command-line tool as the Rust binary."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the rpjrt CLI with ``argv`` (default: ``sys.argv[1:]``); returns its exit code."""
    args = ["rpjrt", *(sys.argv[1:] if argv is None else argv)]
    from ._rpjrt import _run_cli

    # The tool falls back to $RPJRT_PLUGIN when no plugin is named; let it also find the
    # plugin wheels that Python discovery sees.
    if not os.environ.get("RPJRT_PLUGIN"):
        try:
            from ._discovery import find_plugin

            os.environ["RPJRT_PLUGIN"] = find_plugin().path
        except Exception:
            pass

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


if __name__ == "__main__":
    sys.exit(main())
