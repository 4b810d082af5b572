"""The neardup HTTP service: ``create_app(settings)`` (ASGI), ``Settings``, ``serve(settings)``,
``open_store(path)`` (its embedded store: one fsync per write call).

Needs the ``service`` extra (``pip install 'neardup[service]'``). The names load lazily so that
``neardup.service.Settings`` can be used (by the CLI) without FastAPI installed.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Settings", "SettingsError", "create_app", "open_backend", "open_store", "serve"]

_LAZY = {
    "Settings": "neardup.service.settings",
    "SettingsError": "neardup.service.settings",
    "create_app": "neardup.service.app",
    "open_backend": "neardup.service.backend",
    "open_store": "neardup.service.store",
    "serve": "neardup.service.runner",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'neardup.service' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as e:
        if e.name in ("fastapi", "starlette", "uvicorn", "orjson", "pydantic"):
            raise ModuleNotFoundError(
                f"neardup.service.{name} needs {e.name}: pip install 'neardup[service]'",
                name=e.name,
            ) from e
        raise
    globals()[name] = value
    return value
