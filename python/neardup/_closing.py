"""``with`` support shared by the objects that hold connections or files."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Closing:
    """Mixin: ``with obj:`` returns ``obj`` and calls ``obj.close()`` on the way out."""

    def close(self) -> None:
        """Release what the object holds (idempotent in every subclass)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
