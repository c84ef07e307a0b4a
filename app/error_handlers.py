"""How errors are answered: JSON `{"code", "message"}` on API paths, an HTML page elsewhere.

`install_error_handlers(app)` registers one handler per kind of error (the app's `AppError`,
FastAPI's validation and HTTP errors, a database pool that is exhausted); `CatchAll` is the
outermost middleware and turns any other exception into a 500 in the same shapes, logged once,
without re-raising, so the server keeps the connection open.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm.exc import StaleDataError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.client import safe_next
from app.config import get_settings
from app.errors import N_, AppError
from app.i18n import resolve_locale, translate
from app.templating import render

log = logging.getLogger(__name__)

BUSY_RETRY_AFTER_S = 2

_HTTP_CODES = {
    400: ("invalid_request", N_("The request could not be read.")),
    401: ("not_authenticated", N_("Sign in first.")),
    403: ("forbidden", N_("You may not do this.")),
    404: ("not_found", N_("Nothing exists at this address. Check the path against /openapi.json.")),
    405: ("method_not_allowed", N_("This address does not accept that method. See /openapi.json.")),
    413: ("too_large", N_("The request is too large. Send less at once.")),
    429: ("rate_limited", N_("Too many requests. Wait a little and try again.")),
}
# A page (not an API path) that does not exist: said to a learner, not to a client developer.
PAGE_NOT_FOUND = N_(
    "There is no page at this address. The link may be mistyped or out of date; the course "
    "page lists every lesson."
)
_INTERNAL = N_("Something went wrong on our side; nothing was changed. Try again in a minute.")
BUSY_MESSAGE = N_("The server is busy right now. Wait a second, then try again.")


def is_api(path: str) -> bool:
    return path.startswith("/api/") or path == "/openapi.json"


def wants_page(request: Request) -> bool:
    """A browser's page request (a form post), not an API call: a path outside /api/ whose
    Accept does not ask for JSON alone (browsers send text/html; a bare client sends */*)."""
    if is_api(request.url.path):
        return False
    accept = request.headers.get("accept", "").lower()
    return "text/html" in accept or "application/json" not in accept


def error_response(
    request: Request,
    status_code: int,
    code: str,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    params: dict[str, Any] | None = None,
    **extra: Any,
) -> Response:
    """The error in the request's locale: JSON for API paths and clients, else the error page."""
    locale = resolve_locale(request)
    text = translate(locale, message)
    if params:
        text = text.format(**params)
    if wants_page(request):
        response: Response = render(
            request, "web/error.html", status_code=status_code, locale=locale, message=text
        )
    else:
        response = JSONResponse({"code": code, "message": text, **extra}, status_code=status_code)
    response.headers.update(headers or {})
    return response


def form_expired_page(request: Request, status_code: int = 403) -> Response:
    """The page a form post gets when its CSRF check fails: nothing was saved, go back."""
    response = render(request, "auth/form_expired.html", back=_back_target(request))
    response.status_code = status_code
    return response


def _back_target(request: Request) -> str:
    """Where the form came from: the Referer when it is a page on this site, else the page that
    holds the form the request posted (the lesson for a quiz answer), else the course."""
    referer = urlsplit(request.headers.get("referer", ""))
    own = {urlsplit(get_settings().base_url).netloc, request.headers.get("host", "")}
    if referer.scheme in ("http", "https") and referer.netloc and referer.netloc in own:
        back = (referer.path or "/") + (f"?{referer.query}" if referer.query else "")
        return safe_next(back)
    path = request.url.path
    if path in ("/login", "/register"):
        return path
    if path.startswith("/account/"):
        return "/account/devices"
    parts = path.split("/")
    if len(parts) > 3 and parts[1] == "lessons" and parts[2]:  # /lessons/<id>/quiz/<question>
        query = request.url.query
        return f"/lessons/{quote(parts[2], safe='')}" + (f"?{query}" if query else "")
    return "/"


async def handle_app_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AppError)
    if exc.code == "csrf_failed" and wants_page(request):
        return form_expired_page(request, exc.status_code)
    return error_response(
        request,
        exc.status_code,
        exc.code,
        exc.message,
        headers=exc.headers,
        params=exc.params,
        **(exc.extra or {}),
    )


async def handle_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    details = [
        {
            "loc": [part if isinstance(part, int) else str(part) for part in err["loc"]],
            "msg": str(err.get("msg", "")),
            "type": str(err.get("type", "")),
        }
        for err in exc.errors()
    ]
    first = details[0] if details else None
    where = ".".join(str(p) for p in first["loc"]) if first else "request"
    message = f"The request is not valid: {where}: {first['msg'] if first else 'invalid'}."
    return error_response(request, 422, "invalid_request", message, details=details)


async def handle_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and is_api(request.url.path):
        # A body that is not even JSON (or not UTF-8): the same answer as any invalid body.
        message = f"The request could not be read: {exc.detail}. Send UTF-8 JSON."
        return error_response(request, 422, "invalid_request", message, details=[])
    code, message = _HTTP_CODES.get(exc.status_code, ("http_error", str(exc.detail)))
    if exc.status_code == 404 and wants_page(request):
        message = PAGE_NOT_FOUND
    return error_response(request, exc.status_code, code, message, headers=exc.headers)


async def handle_pool_timeout(request: Request, exc: Exception) -> Response:
    """Every database connection stayed busy for the checkout timeout: say so at once."""
    log.warning("database pool exhausted: %s %s answered 503", request.method, request.url.path)
    headers = {"Retry-After": str(BUSY_RETRY_AFTER_S)}
    return error_response(request, 503, "busy", BUSY_MESSAGE, headers=headers)


CHANGED_MEANWHILE = N_(
    "What this request changes was changed or deleted meanwhile. Load it again, then retry."
)


async def handle_stale_data(request: Request, exc: Exception) -> Response:
    """A row the request updates was deleted (or changed) by another one in between (a sync in
    flight while the account is deleted, issue 39 D9): 409, nothing of it kept, never a 500."""
    log.warning("stale row: %s %s answered 409: %s", request.method, request.url.path, exc)
    return error_response(request, 409, "changed_meanwhile", CHANGED_MEANWHILE)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(AppError, handle_app_error)
    app.add_exception_handler(RequestValidationError, handle_validation)
    app.add_exception_handler(StarletteHTTPException, handle_http)
    app.add_exception_handler(PoolTimeout, handle_pool_timeout)
    app.add_exception_handler(StaleDataError, handle_stale_data)


class CatchAll:
    """Any exception nothing else handled: logged with its traceback, answered 500 (JSON on API
    paths, a page elsewhere) unless the response had started, and never re-raised."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_tracking)
        except Exception:
            log.exception("unhandled error in %s %s", scope.get("method"), scope.get("path"))
            if started:
                return  # the client has a partial answer; the server closes the stream
            request = Request(scope)
            try:
                response = error_response(request, 500, "internal_error", _INTERNAL)
            except Exception:  # even the error page failed: the plain JSON body
                response = JSONResponse(
                    {"code": "internal_error", "message": _INTERNAL}, status_code=500
                )
            await response(scope, receive, send)
