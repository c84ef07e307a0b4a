"""Exception handlers: ApiError everywhere; FastAPI's validation and HTTP errors as JSON
`{"code", "message"}` on /api paths (pages keep whatever handler the web layer installed).

A page form that fails its CSRF check (an expired or missing token) gets a small HTML page in the
learner's language with a link back, not the JSON body: a person reads it, not a client.
"""

from __future__ import annotations

import inspect
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import (
    http_exception_handler,
    request_validation_exception_handler,
)
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.auth.errors import ApiError
from app.auth.pages import form_expired_page

_HTTP_CODES = {
    401: ("not_authenticated", "Sign in first."),
    403: ("forbidden", "You may not do this."),
    404: ("not_found", "Nothing exists at this address. Check the path against /openapi.json."),
    405: ("method_not_allowed", "This address does not accept that method. See /openapi.json."),
    413: ("too_large", "The request is too large."),
    429: ("rate_limited", "Too many requests. Wait a little and try again."),
}


def _is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def wants_page(request: Request) -> bool:
    """A browser's page request (a form post), not an API call: a path outside /api/ whose
    Accept does not ask for JSON alone (browsers send text/html; a bare client sends */*)."""
    if _is_api(request):
        return False
    accept = request.headers.get("accept", "").lower()
    return "text/html" in accept or "application/json" not in accept


def api_error_json(status_code: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"code": code, "message": message, **extra}, status_code=status_code)


async def handle_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    if exc.code == "csrf_failed" and wants_page(request):
        return form_expired_page(request, exc.status_code)
    response = api_error_json(exc.status_code, exc.code, exc.message)
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


async def _call(handler: Any, request: Request, exc: Exception) -> Response:
    result = handler(request, exc)
    if inspect.isawaitable(result):
        result = await result
    assert isinstance(result, Response)
    return result


def install_handlers(app: FastAPI) -> None:
    page_validation = app.exception_handlers.get(
        RequestValidationError, request_validation_exception_handler
    )
    page_http = app.exception_handlers.get(StarletteHTTPException, http_exception_handler)

    async def handle_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if not _is_api(request):
            return await _call(page_validation, request, exc)
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
        return api_error_json(422, "invalid_request", message, details=details)

    async def handle_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if not _is_api(request):
            return await _call(page_http, request, exc)
        if exc.status_code == 400:
            # A body that is not even JSON (or not UTF-8): the same answer as any invalid body.
            message = f"The request could not be read: {exc.detail}. Send UTF-8 JSON."
            return api_error_json(422, "invalid_request", message, details=[])
        code, message = _HTTP_CODES.get(exc.status_code, ("http_error", str(exc.detail)))
        response = api_error_json(exc.status_code, code, message)
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    app.add_exception_handler(ApiError, handle_api_error)
    app.add_exception_handler(RequestValidationError, handle_validation)
    app.add_exception_handler(StarletteHTTPException, handle_http)
