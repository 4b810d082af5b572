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
    directories: dict[str, tuple[str, ...]] | None = None,
) -> bool:
    """Whether the paths of ``neardup command`` cannot work, said before any work (the first
    problem is named): an
    input that is also an output (writing would destroy it before it is read), two outputs on
    one path; for a local job also an output inside an input directory (the writing pass would
    read it back), an output file that is a directory (it cannot be opened to write), an output
    whose directory does not exist or cannot be written, but for the
    outputs ``made`` with their directories (a report, a directory output) and those written
    in place (:func:`neardup.io.written_in_place`).

    ``directories`` maps the outputs that are directories to the names of the files written in
    them: for a local job such a directory must be one, or be one that can be made (its nearest
    existing ancestor a writable directory), and none of those files may be a directory."""
    directories = directories or {}
    written: dict[str, str] = {}
    for flag, path in outputs.items():
        if not path:
            continue
        real = os.path.realpath(path)
        if real in written:
            eprint(f"neardup {command}: {written[real]} and {flag} are both {path}")
            return True
        written[real] = flag
        if not local:
            continue
        if flag in directories:
            problem = _directory_refused(path, directories[flag])
            if problem:
                eprint(f"neardup {command}: {flag} {path}{problem}")
                return True
            continue
        # (a directory output, one in ``made``, may be a directory already; a report is a file,
        # made with the directory of its pages beside it)
        if (flag not in made or flag == "--report") and os.path.isdir(path):
            eprint(f"neardup {command}: {flag} {path} is a directory, not a file")
            return True
        parent = os.path.dirname(real)
        if flag in made or nio.written_in_place(path):
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
                if nio.within(out, real):
                    eprint(f"neardup {command}: {flag} {outputs[flag]} is inside the input {path}")
                    return True
    return False


def spark_input_refused(inputs: list[str], outputs: dict[str, str | None]) -> str | None:
    """Why a Spark job cannot run: a local input (a glob's matches too) inside an output
    directory, which Spark replaces before it reads the input; None when none is."""
    import glob

    for given in inputs:
        path = given.removeprefix("file://")
        if "://" in path:
            continue
        for found in glob.glob(path) if glob.has_magic(path) else [path]:
            for flag, out in outputs.items():
                if out and nio.within(found, out):
                    return (
                        f"the input {given} is inside the output {flag} {out}, which Spark replaces"
                    )
    return None


def _directory_refused(path: str, files: tuple[str, ...]) -> str | None:
    """Why an output directory at ``path``, with ``files`` written in it, cannot be: the rest of
    the message after the flag and path, or None when it can."""
    if os.path.exists(path):
        if not os.path.isdir(path):
            return " is a file, not a directory" if os.path.isfile(path) else " is not a directory"
        if not os.access(path, os.W_OK | os.X_OK):
            return ": the directory is not writable"
        for name in files:
            inside = os.path.join(path, name)
            if os.path.isdir(inside):
                return f": {inside} is a directory, not a file"
        return None
    # (made with its parents: the nearest existing ancestor must be a writable directory)
    ancestor = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        return f": {ancestor} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f": directory {ancestor} is not writable"
    return None


def dir_output_refused(output: str, inputs: list[nio.Source]) -> str | None:
    """Why the directory ``output`` cannot take the kept files of the input directories
    ``inputs`` (copied under ``output/<input's name>/`` when there are several: their
    :func:`~neardup.io.named` names), said before any work; None when it can. An input inside
    it would be overwritten; two inputs of one name would be written over each other; files
    already in it would stay beside the kept ones, as if kept."""
    names: dict[str, str] = {}
    for source in inputs:
        path = source.path
        if nio.within(path, output):
            return f"the input {path} is inside the output directory {output}"
        if source.name and source.name in names:
            return (
                f"the inputs {names[source.name]} and {path} would both be written to "
                f"{os.path.join(output, source.name)}: give directories of distinct names"
            )
        names[source.name] = path
    if os.path.isdir(output) and os.listdir(output):
        return (
            f"-o {output} holds files already: give a new or empty directory (a file there "
            "that this run does not keep would stay beside the kept ones)"
        )
    return None
