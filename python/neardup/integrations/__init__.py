"""neardup with other libraries: :mod:`neardup.integrations.datasets` (Hugging Face datasets).

Each integration imports its library only when imported itself, so a missing one is an error of
that module alone, naming the extra to install. What they share with ``neardup dedup`` (which
row of a group stays, :func:`keep_order`) is here, free of any library.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["keep_order"]


def keep_order(
    keep: str,
    lengths: npt.NDArray[np.int64] | None = None,
    times: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.int64] | None:
    """The rows from most to least preferred as the one of a group to keep (for
    :meth:`neardup.corpus.CorpusDeduper.result`): None for ``"first"`` (input order), the longest
    text first for ``"longest"`` (``lengths``), the newest first for ``"newest"`` (``times``);
    ties go to the row read first."""
    if keep == "first":
        return None
    key = {"longest": lengths, "newest": times}.get(keep)
    if keep not in ("longest", "newest"):
        raise ValueError(f"keep {keep!r} is not one of first, longest, newest")
    if key is None:
        raise ValueError(
            f"keep {keep!r} needs the rows' {'lengths' if keep == 'longest' else 'times'}"
        )
    rows = np.arange(len(key), dtype=np.int64)
    return rows[np.lexsort((rows, -np.asarray(key)))]
