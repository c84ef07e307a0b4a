"""The HTTP server's own deadlines (issue 39, D10), for `python -m app serve`.

uvicorn closes a keep-alive connection idle after a response (`timeout_keep_alive`), but any
byte received cancels that timer, and a fresh connection has none: sockets that never finish a
request's headers (one byte a second, or nothing at all) stay open for ever. `HeaderDeadline` is
uvicorn's h11 protocol with a timer of its own: from the moment the connection is made, and
again whenever it waits for its next request, the request's whole header must arrive within
`header_timeout_s`, else the connection is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.config import Settings


class HeaderDeadline(H11Protocol):
    header_timeout_s = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # a request's header is in
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm()  # waiting for the next request's header

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


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
