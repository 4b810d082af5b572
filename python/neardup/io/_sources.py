"""What an input or output is: its format and compression told from the name (:func:`detect`,
:func:`output_source`; a Spark output directory is its part files, :func:`input_sources`),
which fields hold the text, id and time (:class:`FieldSpec`), and the two errors of inputs
(:class:`UnknownFormatError`, :class:`InputError`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

FORMATS = ("jsonl", "csv", "tsv", "txt", "parquet", "dir")
EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".txt": "txt",
    ".text": "txt",
    ".parquet": "parquet",
    ".pq": "parquet",
}
COMPRESSIONS = {".gz": "gz", ".xz": "xz", ".zst": "zst", ".zstd": "zst"}


class UnknownFormatError(ValueError):
    """A file name whose format cannot be told, or a format name that does not exist."""


class InputError(ValueError):
    """One bad document (or a whole unreadable file): names the file and the line or row.

    ``slot`` is the bad document's position in its file; None when the file cannot be read on
    (no document follows from it).
    """

    def __init__(self, path: str, line: int | None, message: str, slot: int | None = None) -> None:
        self.path = path
        self.line = line
        self.message = message
        # the slot (document position in the file) of a bad document; None: the file stops here
        self.slot = slot
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[type[InputError], tuple[str, int | None, str, int | None]]:
        # rebuilt from its parts (not from the message alone), so it crosses processes
        return type(self), (self.path, self.line, self.message, self.slot)


@dataclass(frozen=True)
class Source:
    """One input or output: its path, format (one of :data:`FORMATS`) and compression; ``name``:
    a directory's name when it is one of several inputs (:func:`named`): the ids of its files
    start with it, and a directory output copies its kept files under it."""

    path: str
    format: str
    compression: str | None = None
    name: str = ""


def within(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or lies under it, both taken as their real paths."""
    real, top = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([real, top]) == top


def named(sources: list[Source]) -> list[Source]:
    """``sources`` with each directory named by its own name when there are several inputs,
    so that two directories' files of one relative path keep distinct ids."""
    if len(sources) < 2:
        return sources
    return [
        replace(s, name=os.path.basename(os.path.normpath(s.path))) if s.format == "dir" else s
        for s in sources
    ]


@dataclass(frozen=True)
class FieldSpec:
    """Which fields hold the text, the id and the time.

    ``id_field=None`` uses the field ``id`` when a record has one and the document's row number
    (0-based, counted over all inputs) otherwise; a named ``id_field`` must be present.
    ``time_field`` values are numbers (seconds since the epoch) or ISO 8601 strings.
    """

    text_field: str = "text"
    id_field: str | None = None
    time_field: str | None = None


DEFAULT_SPEC = FieldSpec()
"""The fields by default: text in ``text``, id in ``id`` where present, no time."""


def unknown_format(format: str) -> UnknownFormatError:
    """The error for a format name that is not one of :data:`FORMATS`."""
    return UnknownFormatError(f"format {format!r} is not one of {', '.join(FORMATS)}")


def _name_format(path: str) -> tuple[str | None, str | None]:
    """The format (None: not told) and compression that the name ``path`` says."""
    stem, ext = os.path.splitext(path)
    compression = COMPRESSIONS.get(ext.lower())
    return EXTENSIONS.get(os.path.splitext(stem if compression else path)[1].lower()), compression


def _check_parquet(path: str, format: str, compression: str | None) -> None:
    if format == "parquet" and compression is not None:
        raise UnknownFormatError(f"{path}: parquet files are compressed inside; drop the suffix")


def detect(path: str, format: str | None = None) -> Source:
    """Tell the format and compression of ``path`` from its name (a directory is ``dir``).

    ``format`` overrides the guess (the compression suffix is still honoured).
    Raises :class:`UnknownFormatError` naming the file and the known extensions.
    """
    if format is not None and format not in FORMATS:
        raise unknown_format(format)
    if os.path.isdir(path):
        if format not in (None, "dir"):
            raise UnknownFormatError(f"{path}: is a directory, but format {format!r} was given")
        return Source(path, "dir")
    name_fmt, compression = _name_format(path)
    if format is None:
        format = name_fmt
        if format is None:
            known = ", ".join(sorted(EXTENSIONS)) + " (optionally " + ", ".join(COMPRESSIONS)
            raise UnknownFormatError(
                f"{path}: cannot tell the format from the name; known extensions: {known}), "
                "or a directory; or give --format"
            )
    _check_parquet(path, format, compression)
    if format == "dir":
        raise UnknownFormatError(f"{path}: format 'dir' needs a directory")
    return Source(path, format, compression)


def spark_parts(path: str) -> list[str] | None:
    """The part files of a Spark (Hadoop) output directory, in part order: a directory with a
    ``_SUCCESS`` marker and ``part-*`` files, as ``neardup dedup --engine spark`` writes. None:
    ``path`` is not one."""
    if not os.path.isfile(os.path.join(path, "_SUCCESS")):
        return None
    parts = sorted(n for n in os.listdir(path) if n.startswith("part-"))
    return [os.path.join(path, n) for n in parts] if parts else None


def input_sources(path: str, format: str | None = None) -> list[Source]:
    """The inputs that ``path`` names: one file or directory as :func:`detect` tells it, or the part
    files of a Spark output directory (:func:`spark_parts`), each told by its own name."""
    parts = spark_parts(path) if os.path.isdir(path) else None
    if parts is None:
        return [detect(path, format)]
    if format == "dir":
        raise UnknownFormatError(f"{path}: a Spark output directory; its part files are read")
    return [detect(p, format) for p in parts]


def output_source(path: str, inputs: list[Source], format: str | None = None) -> Source:
    """The output of a job over ``inputs``: the inputs' format, compression from its name.

    Raises :class:`UnknownFormatError` when the inputs mix formats or the output's name says
    another format.
    """
    formats = sorted({s.format for s in inputs})
    if len(formats) != 1:
        raise UnknownFormatError(
            f"inputs mix formats ({', '.join(formats)}); run one format at a time"
        )
    fmt = formats[0]
    if fmt == "dir":
        if os.path.exists(path) and not os.path.isdir(path):
            raise UnknownFormatError(f"{path}: the inputs are directories, so must be the output")
        return Source(path, "dir")
    name_fmt, compression = _name_format(path)
    if name_fmt is not None and name_fmt != fmt and format is None:
        raise UnknownFormatError(
            f"{path}: the name says {name_fmt} but the inputs are {fmt}; "
            "the output is written in the inputs' format"
        )
    _check_parquet(path, fmt, compression)
    return Source(path, format or fmt, compression)


def written_in_place(path: str) -> bool:
    """Whether an output at ``path`` is written where it is, not aside and renamed: an existing
    path that is not a regular file (a FIFO, a device such as /dev/null), or one under /dev or
    /proc (``/dev/stdout`` names whatever the shell opened, a file included)."""
    special = ("/dev/", "/proc/")
    if os.path.abspath(path).startswith(special) or os.path.realpath(path).startswith(special):
        return True
    return os.path.exists(path) and not os.path.isfile(path)


def staged_output(output: Source) -> Source:
    """Where a job writes ``output`` so that it appears whole or not at all: a hidden file
    beside it (beside the file a symbolic link names, so that the link stays), renamed onto it
    at the end (:func:`finish_output`). A directory, or a path :func:`written_in_place`, is
    written in place."""
    path = output.path
    if output.format == "dir" or written_in_place(path):
        return output
    head, tail = os.path.split(os.path.realpath(path))
    return Source(os.path.join(head, f".{tail}.neardup-partial"), output.format, output.compression)


def finish_output(staged: Source, output: Source) -> None:
    """Put the output written to ``staged`` (:func:`staged_output`) in its place."""
    if staged is not output:
        os.replace(staged.path, os.path.realpath(output.path))
