"""Running the service under uvicorn (one process: the embedded index lives in it, and one
serialized writer orders every write)."""

from __future__ import annotations

import gc
import importlib.util
import logging
import socket
import sys
from typing import Any

from neardup.service.settings import Settings

__all__ = ["serve"]


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(settings: Settings, app: Any | None = None) -> None:
    """Serve ``create_app(settings)`` (or ``app``) until interrupted (SIGINT/SIGTERM: the queued
    writes are applied and the store is closed before exit).

    Prints ``neardup: listening on http://HOST:PORT`` on stdout once the socket is bound (with
    ``port=0`` the system picks the port and this line tells it), then serves.
    """
    import uvicorn

    from neardup.service.app import create_app

    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    sock = _bind(settings.host, settings.port)
    app = app if app is not None else create_app(settings)
    # Everything loaded so far (the store, the app, the libraries: ~65 k objects) lives as long
    # as the process: move it out of the collector's sight, so the full collections that the
    # traffic's garbage triggers now and then walk only newer objects (each full collection
    # pauses the writer and the event loop while it runs).
    gc.collect()
    gc.freeze()
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(
        app,
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        http="httptools" if importlib.util.find_spec("httptools") else "h11",
        lifespan="on",
        access_log=False,
        log_level=settings.log_level,
        timeout_graceful_shutdown=10,
        backlog=2048,
    )
    server = uvicorn.Server(config)
    print(f"neardup: listening on http://{shown}:{port}", flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if not server.started:
        sys.exit(1)
