"""The HTTP server's own deadlines (issue 39, D10), for `python -m app serve`.

uvicorn closes a keep-alive connection that stays idle after a response (`timeout_keep_alive`)
but gives a fresh connection for ever to send its first request's headers: forty sockets that
never finish their headers (or never send a byte) stay open. `HeaderDeadline` is uvicorn's h11
protocol with that timer armed from the moment the connection is made: the whole header must
arrive within `header_timeout_s`, else the connection is closed. Later requests on the same
connection are covered by uvicorn's keep-alive timer, which also runs until a request's headers
are complete.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from app.config import Settings


class HeaderDeadline(H11Protocol):
    header_timeout_s = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(
            self.header_timeout_s, self.timeout_keep_alive_handler
        )


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The server's settings: deadlines for headers, idle connections and stopping."""
    protocol = type(
        "HeaderDeadline", (HeaderDeadline,), {"header_timeout_s": settings.header_timeout_s}
    )
    return {
        "factory": True,
        # The app reads X-Forwarded-For itself, from RDV_TRUSTED_PROXIES only (app/limits.py):
        # uvicorn's own proxy headers would believe any local peer.
        "proxy_headers": False,
        "server_header": False,
        "http": protocol,
        "timeout_keep_alive": max(1, round(settings.keep_alive_s)),
        # SIGTERM: stop taking connections, let requests in progress finish for this long, then
        # cut them off: the process always stops within its grace period.
        "timeout_graceful_shutdown": max(1, round(settings.shutdown_grace_s)),
    }
