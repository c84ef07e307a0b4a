"""Reading a request's body whole, with a deadline, before the request takes anything others need.

`read_body(receive, declared)` gathers the `http.request` messages until the last one, within
`grace_s` plus one second per `min_rate` bytes of the body (the declared Content-Length, or the
bytes so far when chunked): a client that sends slower than that, or stops half-way, is answered
408 without ever having held an admission slot. `replay(body, receive)` hands the app the body as
one message; later calls (a disconnect) go to the server's own `receive`.
"""

from __future__ import annotations

import asyncio
import time

from starlette.types import Message, Receive

from app.errors import N_

SLOW_BODY = N_("The request body arrived too slowly. Check your connection, then send it again.")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class SlowBody(Exception):
    """The body did not arrive within its deadline."""


class Disconnected(Exception):
    """The client went away before its body was whole."""


async def read_body(
    receive: Receive, *, declared: int | None, grace_s: float, min_rate: int
) -> bytes:
    started = time.monotonic()
    chunks: list[bytes] = []
    received = 0
    while True:
        expected = max(declared or 0, received)
        remaining = started + grace_s + expected / min_rate - time.monotonic()
        if remaining <= 0:
            raise SlowBody
        try:
            message = await asyncio.wait_for(receive(), remaining)
        except TimeoutError as exc:
            raise SlowBody from exc
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        chunks.append(chunk)
        received += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def has_body(method: str) -> bool:
    """Whether the request may carry a body (one without Content-Length is read all the same:
    a chunked body, or an empty one, at once)."""
    return method in BODY_METHODS
