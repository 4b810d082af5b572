"""The `neardup` command. Each subcommand lives in its own module with two functions:
``add_parser(subparsers)`` registers it (and calls ``parser.set_defaults(run=run)``) and
``run(args) -> int`` executes it, returning the exit code.

Exit codes: 0 success, 1 the job failed on its input (bad record with --on-error fail, ...),
2 usage error (bad flags, unknown format), 130 interrupted, 141 standard output closed by its
reader before all was written (``| head``: the exit status of a Unix tool killed by SIGPIPE,
without a message).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

from neardup import __version__

#: Standard output closed by its reader: 128 + SIGPIPE, as a shell reports a tool it killed.
EXIT_BROKEN_PIPE = 141

# subcommand name -> module under neardup.cli; a module missing (not built yet) is skipped.
SUBCOMMANDS = {
    "dedup": "neardup.cli.dedup",
    "fingerprint": "neardup.cli.fingerprint",
    "index": "neardup.cli.index",
    "calibrate": "neardup.cli.calibrate",
    "serve": "neardup.cli.serve",
    "repair": "neardup.cli.repair",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neardup", description="Find and drop near-duplicate texts with SimHash."
    )
    parser.add_argument("--version", action="version", version=f"neardup {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in SUBCOMMANDS.values():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name == module_name:
                continue
            raise
        module.add_parser(sub)
    return parser


def _say_warnings(command: str) -> None:
    """Warnings said as the command says things, ``neardup COMMAND: warning: ...`` on standard
    error (Python's own form names a source file and prints its line)."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        print(f"neardup {command}: warning: {message}", file=sys.stderr)

    warnings.showwarning = show


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _say_warnings(args.command)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of standard output stopped (| head): end quietly, as a Unix tool killed by
        # SIGPIPE does; what is still buffered for stdout goes nowhere (Python's flush at exit
        # would print another error).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
