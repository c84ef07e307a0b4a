"""Limits that keep one caller from taking the server down, as pure ASGI middleware.

`BodyLimit`: a request body over the limit is refused with 413: at once when Content-Length says
so, else as soon as the bytes read pass it (never read whole into memory first).

`RequestLimits`: at most `max_requests_per_learner` requests of one learner in progress at once
and at most `max_streams_per_learner` open event streams, whichever of their devices, tabs and
tokens they come from; more are answered 429 with Retry-After at once. A credential (bearer token
or session cookie) is counted as the learner it belongs to (`LearnerKeys`: looked up once, then
remembered: a token never changes owner); a credential that belongs to nobody counts alone, and a
request without one counts as its address.
Across callers, at most `admitted` requests hold a database connection at a time; the others wait
(asynchronously, holding no thread and no connection) up to the checkout timeout, then get 503.
With `admitted` no larger than the pool and the thread limit above both, no request can wait for
a connection while holding the thread that the connection's holder needs: the pile-up where a
burst froze the API for a minute cannot form.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable

import anyio.to_thread
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.error_handlers import BUSY_MESSAGE, error_response
from app.errors import N_

STREAM_PATH = re.compile(r"^/api/v1/submissions/[^/]+/events$")  # the live event streams
_TOO_MANY = N_("You have too many requests in progress at once. Wait for them, then try again.")
_TOO_MANY_STREAMS = N_(
    "You have too many live streams open at once. Close one (another tab?), then try again."
)
_TOO_LARGE = N_("The request body is larger than {limit_kib} KiB. Send less at once.")


async def _answer(
    scope: Scope, receive: Receive, send: Send, status: int, code: str, message: str, retry: int
) -> None:
    request = Request(scope)
    headers = {"Retry-After": str(retry)}
    await error_response(request, status, code, message, headers=headers)(scope, receive, send)


class BodyLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            request = Request(scope)
            response = error_response(request, 413, "too_large", _TOO_LARGE, params=self._kib)
            await response(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:  # FastAPI re-raises it; the handler answers
                    raise HTTPException(413, _TOO_LARGE.format(**self._kib))
            return message

        await self.app(scope, counting_receive, send)

    @property
    def _kib(self) -> dict[str, int]:
        return {"limit_kib": -(-self.max_bytes // 1024)}


class LearnerKeys:
    """Which learner a credential belongs to, for counting: `owner_of(token_digest)` (a database
    look-up, run in a thread) once per credential, then remembered (the most recent `size`).
    Concurrent first requests with the same credential share one look-up."""

    def __init__(self, owner_of: Callable[[str], str | None], *, size: int = 10_000) -> None:
        self.owner_of = owner_of
        self.size = size
        self._known: OrderedDict[str, str] = OrderedDict()
        self._pending: dict[str, asyncio.Future[str]] = {}

    def known(self, scope: Scope) -> str | None:
        """The caller's key when no look-up is needed, else None."""
        digest = credential_digest(scope)
        if digest is None:
            client = scope.get("client")
            return "a:" + (client[0] if client else "unknown")
        key = self._known.get(digest)
        if key is not None:
            self._known.move_to_end(digest)
        return key

    async def resolve(self, scope: Scope) -> str:
        digest = credential_digest(scope)
        if digest is None:
            return self.known(scope) or "a:unknown"
        pending = self._pending.get(digest)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._pending[digest] = future
        try:
            owner = await anyio.to_thread.run_sync(self.owner_of, digest)
            key = f"l:{owner}" if owner is not None else f"c:{digest[:32]}"
            self._remember(digest, key)
            future.set_result(key)
            return key
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: the waiters (if any) re-raise it themselves
            raise
        finally:
            del self._pending[digest]

    def _remember(self, digest: str, key: str) -> None:
        self._known[digest] = key
        if len(self._known) > self.size:
            self._known.popitem(last=False)


class RequestLimits:
    def __init__(
        self,
        app: ASGIApp,
        *,
        per_caller: int,
        streams_per_caller: int,
        admitted: int,
        wait_s: float,
        learner_of: Callable[[str], str | None],
    ) -> None:
        self.app = app
        self.per_caller = per_caller
        self.streams_per_caller = streams_per_caller
        self.wait_s = wait_s
        self.keys = LearnerKeys(learner_of)
        self._admission = asyncio.Semaphore(admitted)
        self._requests: Counter[str] = Counter()
        self._streams: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or path.startswith("/static/"):
            await self.app(scope, receive, send)
            return
        caller = self.keys.known(scope)
        if caller is None:  # a credential seen for the first time: find its learner, admitted
            if not await self._admit():
                await _answer(scope, receive, send, 503, "busy", BUSY_MESSAGE, 2)
                return
            try:
                caller = await self.keys.resolve(scope)
            except PoolTimeout:  # no connection for the look-up within the checkout timeout
                await _answer(scope, receive, send, 503, "busy", BUSY_MESSAGE, 2)
                return
            finally:
                self._admission.release()
        if STREAM_PATH.match(path):
            await self._stream(caller, scope, receive, send)
            return
        if self._requests[caller] >= self.per_caller:
            await _answer(scope, receive, send, 429, "too_many_requests", _TOO_MANY, 1)
            return
        self._requests[caller] += 1
        try:
            if not await self._admit():
                await _answer(scope, receive, send, 503, "busy", BUSY_MESSAGE, 2)
                return
            try:
                await self.app(scope, receive, send)
            finally:
                self._admission.release()
        finally:
            _decrement(self._requests, caller)

    async def _admit(self) -> bool:
        try:
            await asyncio.wait_for(self._admission.acquire(), self.wait_s)
        except TimeoutError:
            return False
        return True

    async def _stream(self, caller: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A live event stream holds no connection between its polls: it is not admitted like a
        request, only counted per learner."""
        if self._streams[caller] >= self.streams_per_caller:
            await _answer(scope, receive, send, 429, "too_many_requests", _TOO_MANY_STREAMS, 5)
            return
        self._streams[caller] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            _decrement(self._streams, caller)


def _decrement(counter: Counter[str], key: str) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def credential_digest(scope: Scope) -> str | None:
    """SHA-256 (hex) of the request's bearer token, else of its session cookie; None without."""
    authorization = _header(scope, b"authorization")
    if authorization:
        scheme, _, token = authorization.partition(" ")
        credential = token.strip() if scheme.lower() == "bearer" else authorization
    else:
        credential = _cookie(_header(scope, b"cookie") or "", "rdv_session") or ""
    return hashlib.sha256(credential.encode()).hexdigest() if credential else None


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and value:
            return value
    return None


def request_ip(request: Request) -> str:
    """The caller's address; X-Forwarded-For counts only from RDV_TRUSTED_PROXIES."""
    trusted = request.app.state.settings.trusted_proxies.split(",")
    peer = request.client.host if request.client else None
    return client_ip(peer, request.headers.get("x-forwarded-for"), trusted)


def client_ip(peer: str | None, forwarded_for: str | None, trusted: Iterable[str]) -> str:
    """The client's address: the peer's, unless the peer is a trusted proxy; then the last
    address in X-Forwarded-For that is not itself a trusted proxy (anyone can write the rest)."""
    proxies = {_canonical(p) for p in trusted if p.strip()}
    address = _canonical(peer or "unknown")
    if address not in proxies or not forwarded_for:
        return address
    for hop in reversed([h.strip() for h in forwarded_for.split(",") if h.strip()]):
        hop = _canonical(hop)
        if hop not in proxies:
            return hop
    return address


def _canonical(address: str) -> str:
    try:
        return str(ipaddress.ip_address(address.strip()))
    except ValueError:
        return address.strip()[:64]
