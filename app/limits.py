"""Limits that keep one caller from taking the server down, as pure ASGI middleware.

`BodyLimit`: a request body over the limit is refused with 413: at once when Content-Length says
so, else as soon as the bytes read pass it (never read whole into memory first).

`RequestLimits`: at most `max_requests_per_learner` requests of one learner in progress at once
and at most `max_streams_per_learner` open event streams, whichever of their devices, tabs and
tokens they come from; more are answered 429 with Retry-After at once. A credential (bearer token
or session cookie) is counted as the learner it belongs to (`LearnerKeys`: looked up once, then
remembered: a token never changes owner); a request without one, or with one that belongs to
nobody, counts as its client address (the proxy's client behind RDV_TRUSTED_PROXIES).
Across callers, at most `admitted` requests hold a database connection at a time; the others wait
(asynchronously, holding no thread and no connection) up to the checkout timeout, then get 503.
With `admitted` no larger than the pool and the thread limit above both, no request can wait for
a connection while holding the thread that the connection's holder needs: the pile-up where a
burst froze the API for a minute cannot form.
Nothing slow holds a slot: the body is read whole first (app/request_body.py: a deadline and a
minimum rate, else 408), the slot goes back when the response starts, and a route lets it go
around a wait on the outside world (app/admission.py). `/healthz` is neither counted nor queued.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable

import anyio.to_thread
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.admission import SCOPE_KEY as SLOT_KEY
from app.admission import Slot
from app.client import client_ip, forwarded_for
from app.error_handlers import BUSY_MESSAGE, error_response, handle_http
from app.errors import N_
from app.request_body import SLOW_BODY, Disconnected, SlowBody, has_body, read_body, replay

# Never counted nor queued: the load balancer's probe answers while learners fill every slot.
UNLIMITED_PATHS = frozenset({"/healthz"})
STREAM_PATH = re.compile(r"^/api/v1/submissions/[^/]+/events$")  # the live event streams
QUESTION_PATH = "/api/v1/coach"  # POST: a question to the coach, counted apart
_TOO_MANY = N_("You have too many requests in progress at once. Wait for them, then try again.")
_TOO_MANY_STREAMS = N_(
    "You have too many live streams open at once. Close one (another tab?), then try again."
)
_TOO_MANY_QUESTIONS = N_(
    "You have too many questions to the coach waiting at once. Wait for an answer, then ask again."
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
    Concurrent first requests with the same credential share one look-up. A credential that
    belongs to nobody (made up, expired, revoked) counts as its sender's address, like a request
    without one: a thousand made-up tokens are one anonymous caller, not a thousand."""

    def __init__(
        self,
        owner_of: Callable[[str], str | None],
        *,
        trusted_proxies: Iterable[str] = (),
        size: int = 10_000,
    ) -> None:
        self.owner_of = owner_of
        self.trusted = [p for p in trusted_proxies if p.strip()]
        self.size = size
        self._known: OrderedDict[str, str] = OrderedDict()
        self._pending: dict[str, asyncio.Future[str]] = {}

    def anonymous(self, scope: Scope) -> str:
        """The key of a caller without a learner: its client address (behind a trusted proxy,
        the address the proxy saw)."""
        client = scope.get("client")
        peer = client[0] if client else None
        lines = _headers(scope, b"x-forwarded-for")
        return "a:" + client_ip(peer, forwarded_for(lines), self.trusted)

    def known(self, scope: Scope) -> str | None:
        """The caller's key when no look-up is needed, else None."""
        digest = credential_digest(scope)
        if digest is None:
            return self.anonymous(scope)
        key = self._known.get(digest)
        if key is None:
            return None
        self._known.move_to_end(digest)
        return key or self.anonymous(scope)

    async def resolve(self, scope: Scope) -> str:
        digest = credential_digest(scope)
        if digest is None:
            return self.anonymous(scope)
        pending = self._pending.get(digest)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._pending[digest] = pending
            try:
                owner = await anyio.to_thread.run_sync(self.owner_of, digest)
                key = f"l:{owner}" if owner is not None else ""
                self._remember(digest, key)
                pending.set_result(key)
            except BaseException as exc:
                pending.set_exception(exc)
                pending.exception()  # retrieved: the waiters (if any) re-raise it themselves
                raise
            finally:
                del self._pending[digest]
        key = await asyncio.shield(pending)
        return key or self.anonymous(scope)

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
        questions_per_caller: int | None = None,
        slots_per_caller: int | None = None,
        wait_s: float,
        learner_of: Callable[[str], str | None],
        trusted_proxies: Iterable[str] = (),
        body_grace_s: float = 5.0,
        body_min_rate: int = 16 * 1024,
    ) -> None:
        self.app = app
        self.per_caller = per_caller
        self.streams_per_caller = streams_per_caller
        self.questions_per_caller = questions_per_caller or per_caller
        # At most this many of the admission slots held by one caller's requests at once: a
        # learner's batches that wait on that learner's own lock (the progress cursor) cannot
        # hold every slot (issue 39, D4: 5 learners x 8 big syncs, everyone else 503).
        self.slots_per_caller = slots_per_caller or per_caller
        self._own: dict[str, asyncio.Semaphore] = {}
        self.wait_s = wait_s
        self.body_grace_s = body_grace_s
        self.body_min_rate = body_min_rate
        self.keys = LearnerKeys(learner_of, trusted_proxies=trusted_proxies)
        self._admission = asyncio.Semaphore(admitted)
        self._requests: Counter[str] = Counter()
        self._streams: Counter[str] = Counter()
        self._questions: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or path.startswith("/static/") or path in UNLIMITED_PATHS:
            await self.app(scope, receive, send)
            return
        caller = self.keys.known(scope)
        if caller is None:  # a credential seen for the first time: find its learner, admitted
            lookup = Slot(self._admission, self.wait_s)
            if not await lookup.acquire():
                await _answer(scope, receive, send, 503, "busy", BUSY_MESSAGE, 2)
                return
            try:
                caller = await self.keys.resolve(scope)
            except PoolTimeout:  # no connection for the look-up within the checkout timeout
                await _answer(scope, receive, send, 503, "busy", BUSY_MESSAGE, 2)
                return
            finally:
                lookup.release()
        if STREAM_PATH.match(path):
            await self._stream(caller, scope, receive, send)
            return
        # A question waits on the model without a slot: counted apart, so that a learner's
        # waiting questions never make their other requests 429 (nor theirs the questions).
        question = path == QUESTION_PATH and scope.get("method") == "POST"
        counter = self._questions if question else self._requests
        if counter[caller] >= (self.questions_per_caller if question else self.per_caller):
            message = _TOO_MANY_QUESTIONS if question else _TOO_MANY
            await _answer(scope, receive, send, 429, "too_many_requests", message, 1)
            return
        counter[caller] += 1
        try:
            await self._admitted(scope, receive, send, None if question else caller)
        finally:
            _decrement(counter, caller)
            if caller not in self._requests:  # none of theirs in progress: nobody waits on it
                self._own.pop(caller, None)

    async def _admitted(
        self, scope: Scope, receive: Receive, send: Send, caller: str | None = None
    ) -> None:
        """Read the body (holding nothing), take the caller's share and a slot, run; both go
        back when the response starts (app/admission.py)."""
        if has_body(scope.get("method", "")):
            declared = _header(scope, b"content-length")
            try:
                body = await read_body(
                    receive,
                    declared=int(declared) if declared and declared.isdigit() else None,
                    grace_s=self.body_grace_s,
                    min_rate=self.body_min_rate,
                )
            except SlowBody:
                await _answer(scope, receive, send, 408, "request_timeout", SLOW_BODY, 1)
                return
            except Disconnected:
                return
            except HTTPException as exc:  # BodyLimit: the body passed the size limit
                await (await handle_http(Request(scope), exc))(scope, receive, send)
                return
            receive = replay(body, receive)
        share = Slot(self._share_of(caller), self.wait_s)  # a no-op without a caller
        if not await share.acquire():
            await _answer(scope, receive, send, 503, "busy", BUSY_MESSAGE, 2)
            return
        slot = Slot(self._admission, self.wait_s)
        if not await slot.acquire():
            share.release()
            await _answer(scope, receive, send, 503, "busy", BUSY_MESSAGE, 2)
            return
        scope[SLOT_KEY] = slot

        async def send_releasing(message: Message) -> None:
            if message["type"] == "http.response.start":
                slot.release()  # the answer is made: a slow reader holds no slot
                share.release()
            await send(message)

        try:
            await self.app(scope, receive, send_releasing)
        finally:
            slot.release()
            share.release()

    def _share_of(self, caller: str | None) -> asyncio.Semaphore | None:
        if caller is None:
            return None
        share = self._own.get(caller)
        if share is None:
            share = self._own[caller] = asyncio.Semaphore(self.slots_per_caller)
        return share

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


def _headers(scope: Scope, name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope.get("headers", []) if key == name]


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
