"""``python -m rpjrt.conform PLUGIN [--json REPORT|-] [--html PAGE|-] [--only PATTERN] [-v]``.

The conformance harness of the ``rpjrt`` command line (``rpjrt conform``), reachable from
Python without the binary on ``PATH``. Every argument is passed through; ``--diff A B``
compares two reports, and ``--html PAGE A.json [B.json ...]`` renders saved reports as a
page (a matrix for several). See ``docs/cli.md`` and ``docs/conform-schema.md``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``rpjrt conform`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    from ._cli import main as cli_main

    return cli_main(["conform", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
