"""CSRF protection for cookie-authenticated requests and every state-changing form.

Two independent checks, both required:
1. Origin: a browser's `Sec-Fetch-Site` must be `same-origin` (or `none`: typed by the user); when
   that header is absent, an `Origin` header must name this site.
2. Token: the form field `csrf_token` or the header `X-CSRF-Token` must equal
   HMAC(secret_key, the `rdv_csrf` cookie). The middleware below gives every browser that cookie;
   templates get the matching token as `csrf_token` (see `csrf_context`).
Requests authenticated by a bearer token are exempt: a browser never adds that header by itself.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlsplit

from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.config import get_settings
from app.errors import AppError

CSRF_COOKIE = "rdv_csrf"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_STATE_KEY = "csrf_secret"


def _sign(secret: str) -> str:
    key = get_settings().secret_key.encode("utf-8")
    return hmac.new(key, b"csrf:" + secret.encode("utf-8"), hashlib.sha256).hexdigest()


def _cookie_secret(request: Request) -> str | None:
    state_secret = getattr(request.state, _STATE_KEY, None)
    return request.cookies.get(CSRF_COOKIE) or state_secret


def csrf_token(request: Request) -> str:
    """The token to put in forms (and in a <meta> tag for fetch calls) on this request's page."""
    secret = _cookie_secret(request)
    if secret is None:  # outside the middleware (a bare test app): mint one for this request
        secret = secrets.token_urlsafe(32)
        setattr(request.state, _STATE_KEY, secret)
    return _sign(secret)


def csrf_context(request: Request) -> dict[str, Any]:
    """A Jinja2Templates context processor: `{{ csrf_token }}` in every template."""
    return {"csrf_token": csrf_token(request)}


def _failed(message: str) -> AppError:
    return AppError("csrf_failed", 403, message)


def check_origin(request: Request) -> None:
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        if fetch_site not in ("same-origin", "none"):
            raise _failed("This request came from another site and was refused. Reload the page.")
        return
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        if origin == "null":
            raise _failed("This request came from an opaque origin and was refused.")
        return  # not a browser that sends Origin: the token check alone decides
    own = {urlsplit(get_settings().base_url).netloc, request.headers.get("host", "")}
    if urlsplit(origin).netloc not in own:
        raise _failed("This request came from another site and was refused. Reload the page.")


async def verify_csrf(request: Request) -> None:
    """Both checks; raises AppError(403, "csrf_failed") when either fails."""
    check_origin(request)
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        value = (await request.form()).get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    secret = request.cookies.get(CSRF_COOKIE)
    if not sent or not secret or not hmac.compare_digest(sent, _sign(secret)):
        raise _failed(
            "Your form expired or came without its security token. Reload the page and try again."
        )


async def csrf_protect(request: Request) -> None:
    """Dependency for every state-changing form route (signed in or not, e.g. login)."""
    if request.method not in SAFE_METHODS:
        await verify_csrf(request)


class CSRFCookieMiddleware:
    """Gives every browser visiting a page an `rdv_csrf` cookie (pure ASGI: streams untouched)."""

    def __init__(self, app: ASGIApp, *, secure: bool = False) -> None:
        self.app = app
        self.secure = secure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path.startswith(("/api/", "/static/")):
            await self.app(scope, receive, send)
            return
        if _has_cookie(scope):
            await self.app(scope, receive, send)
            return
        secret = secrets.token_urlsafe(32)
        scope.setdefault("state", {})[_STATE_KEY] = secret
        cookie = f"{CSRF_COOKIE}={secret}; Path=/; HttpOnly; SameSite=Lax"
        if self.secure:
            cookie += "; Secure"

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"set-cookie", cookie.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def _has_cookie(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:
                return False
            if CSRF_COOKIE in jar and jar[CSRF_COOKIE].value:
                return True
    return False
