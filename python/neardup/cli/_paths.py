"""The input and output paths of a command, checked before any work."""

from __future__ import annotations

import os

from neardup import io as nio
from neardup.io import eprint

__all__ = ["paths_refused"]


def paths_refused(
    command: str,
    inputs: list[str],
    outputs: dict[str, str | None],
    local: bool = True,
    made: tuple[str, ...] = ("--report",),
) -> bool:
    """Whether the paths of ``neardup command`` cannot work, said before any work (the first
    problem is named): an
    input that is also an output (writing would destroy it before it is read), two outputs on
    one path; for a local job also an output inside an input directory (the writing pass would
    read it back), an output whose directory does not exist or cannot be written, but for the
    outputs ``made`` with their directories (a report, a directory output) and those written
    in place (:func:`neardup.io.written_in_place`)."""
    written: dict[str, str] = {}
    for flag, path in outputs.items():
        if not path:
            continue
        real = os.path.realpath(path)
        if real in written:
            eprint(f"neardup {command}: {written[real]} and {flag} are both {path}")
            return True
        written[real] = flag
        parent = os.path.dirname(real)
        if not local or flag in made or nio.written_in_place(path):
            continue
        if not os.path.isdir(parent):
            eprint(f"neardup {command}: {flag} {path}: no directory {parent}")
            return True
        if not os.access(parent, os.W_OK):
            eprint(f"neardup {command}: {flag} {path}: directory {parent} is not writable")
            return True
    for path in inputs:
        real = os.path.realpath(path)
        if real in written:
            eprint(f"neardup {command}: {path} is both an input and an output")
            return True
        if local and os.path.isdir(real):
            for out, flag in written.items():
                if out.startswith(real + os.sep):
                    eprint(f"neardup {command}: {flag} {outputs[flag]} is inside the input {path}")
                    return True
    return False
