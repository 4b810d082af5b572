"""``-`` as an input (stdin) or the output (stdout) of ``neardup dedup``.

The command reads its inputs twice (pass 1 decides, pass 3 copies the kept records), so standard
input is first copied to a temporary file (in ``--temp-dir``), which is then an input like any
other: its format is ``--format``, else JSONL when it starts with ``{``; a gzip, xz or zstd
stream is told by its first bytes. With ``-o -`` the kept records are written to a temporary
file in the inputs' format (uncompressed) and copied to standard output once the job has
succeeded, so a failed job writes nothing there. Both files are in one temporary directory,
removed however the job ends (done, failed, interrupted by Ctrl-C or SIGTERM).

A reader that stops early (``neardup dedup in.jsonl -o - | head -1``) closes standard output:
the copy stops quietly, as a standard Unix tool's does, and :func:`neardup.cli.main` exits with
141 (128 + SIGPIPE), with no error line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from neardup import io as nio
from neardup.kept import spill_directory

STDIO = "-"
_SUFFIX = {"jsonl": ".jsonl", "csv": ".csv", "tsv": ".tsv", "txt": ".txt", "parquet": ".parquet"}
_MAGIC = ((b"\x1f\x8b", ".gz"), (b"\xfd7zXZ\x00", ".xz"), (b"\x28\xb5\x2f\xfd", ".zst"))


class PipeError(ValueError):
    """A ``-`` that cannot be used (no format, a directory output, ``-`` given twice)."""


#: Names of standard output that are written as ``-`` is: through the process's own
#: descriptor (opening them again would truncate a file the shell redirected to, at offset 0).
STDOUT_NAMES = ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


def uses_pipes(args: argparse.Namespace) -> bool:
    """Whether the job reads standard input or writes standard output (an output other than
    ``-o`` named ``-`` is refused by :func:`run_piped`, not written to a file named ``-``)."""
    if args.output in STDOUT_NAMES:
        args.output = STDIO
    others = (getattr(args, name, None) for name in ("clusters", "pairs", "report"))
    return STDIO in args.inputs or args.output == STDIO or STDIO in others


def _spool_stdin(directory: str, format: str | None) -> str:
    """Copy standard input to a file in ``directory`` named for its format and compression;
    returns its path."""
    stream = sys.stdin.buffer
    head = stream.read(1 << 16)
    compression = next((ext for magic, ext in _MAGIC if head.startswith(magic)), "")
    if format is None:
        if compression:
            raise PipeError(
                "-: standard input is compressed; give --format (jsonl, csv, tsv or txt)"
            )
        if not head.lstrip()[:1] == b"{":
            raise PipeError(
                "-: cannot tell the format of standard input (JSONL starts with '{'); "
                "give --format jsonl, csv, tsv or txt"
            )
        format = "jsonl"
    if format not in _SUFFIX or (format == "parquet" and compression):
        raise PipeError(f"-: standard input cannot be read as {format}")
    # (named stdin.*, so that a message about a record says where it came from)
    path = os.path.join(directory, "stdin" + _SUFFIX[format] + compression)
    with open(path, "wb") as f:
        f.write(head)
        shutil.copyfileobj(stream, f, 1 << 20)
    return path


def run_piped(args: argparse.Namespace, run: Callable[[argparse.Namespace], int]) -> int:
    """``run(args)`` with ``-`` replaced by temporary files (see the module docstring)."""
    if args.inputs.count(STDIO) > 1:
        raise PipeError("-: standard input can be given once")
    for name in ("clusters", "pairs", "report"):
        if getattr(args, name, None) == STDIO:
            raise PipeError(f"--{name} -: only the kept documents (-o) go to standard output")
    directory = tempfile.mkdtemp(
        prefix="neardup-", dir=spill_directory(getattr(args, "temp_dir", None))
    )
    try:
        with _sigterm_as_interrupt():
            return _run_in(directory, args, run)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _run_in(
    directory: str, args: argparse.Namespace, run: Callable[[argparse.Namespace], int]
) -> int:
    if STDIO in args.inputs:
        spooled = _spool_stdin(directory, args.format)
        args.inputs = [spooled if p == STDIO else p for p in args.inputs]
    to_stdout = args.output == STDIO
    if to_stdout:
        formats = {nio.detect(p, args.format).format for p in args.inputs if os.path.exists(p)}
        if "dir" in formats:
            raise PipeError("-o -: directories of files cannot be written to standard output")
        fmt = formats.pop() if len(formats) == 1 else "jsonl"  # (run() names a mix)
        args.output = os.path.join(directory, "stdout" + _SUFFIX[fmt])
    code = run(args)
    if to_stdout and code == 0:
        # (BrokenPipeError, a reader that stopped early, goes to neardup.cli.main.) Written to
        # the descriptor, not through sys.stdout.buffer: the buffered writer takes a partial
        # write cut short by the reader's going for success, and the job ended with 0.
        sys.stdout.buffer.flush()
        fd = sys.stdout.fileno()
        with open(args.output, "rb") as f:
            while chunk := f.read(1 << 20):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
    return code


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a job killed by its scheduler) ends the job as Ctrl-C does, so that the
    temporary files are removed (Python's default for SIGTERM is to die on the spot)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
