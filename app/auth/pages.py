"""Account pages: register, sign in, sign out, my devices. Thin: the work is in service.py.

The browser's session is a device token like the app's, kept in an HttpOnly, SameSite=Lax cookie.
Every form posts its CSRF token (`csrf_protect`).
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import AfterValidator, ValidationError

from app.auth import service
from app.auth.csrf import csrf_protect
from app.auth.deps import SESSION_COOKIE, OptionalAuth
from app.auth.devices import browser_device_name
from app.auth.mails import send_registration_mail
from app.auth.passwords import WeakPassword
from app.auth.ratelimit import AuthRateLimits
from app.auth.schemas import UserCreate
from app.client import request_ip, safe_next
from app.db import SessionDep
from app.errors import AppError
from app.i18n import resolve_locale, translate
from app.templating import render
from app.text import storable

router = APIRouter(tags=["pages"], include_in_schema=False)

SESSION_MAX_AGE = 60 * 60 * 24 * 90  # the cookie lives 90 days; revoking the device ends it now
Csrf = Annotated[None, Depends(csrf_protect)]


def _render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    response = render(request, name, **context)
    response.status_code = status_code
    return response


def _locale(request: Request) -> str:
    return resolve_locale(request)


def _device_name(request: Request) -> str:
    return browser_device_name(request.headers.get("user-agent", ""))


def _signed_in(request: Request, token: str, target: str) -> Response:
    response = RedirectResponse(safe_next(target), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="lax",
        secure=request.app.state.settings.secure_cookies,
        path="/",
    )
    return response


def _limits(request: Request) -> AuthRateLimits:
    limits: AuthRateLimits = request.app.state.auth_rate_limits
    return limits


@router.get("/register")
def register_page(request: Request, auth: OptionalAuth, next: str = "/") -> Response:
    if auth is not None:
        return RedirectResponse(safe_next(next), status_code=303)
    return _render(request, "auth/register.html", next=safe_next(next), form={}, error=None)


@router.post("/register")
def register_submit(
    request: Request,
    session: SessionDep,
    _csrf: Csrf,
    email: Annotated[str, Form(max_length=320), AfterValidator(storable)] = "",
    display_name: Annotated[str, Form(max_length=80), AfterValidator(storable)] = "",
    password: Annotated[str, Form(max_length=256), AfterValidator(storable)] = "",
    next: Annotated[str, Form(max_length=500)] = "/",
) -> Response:
    form = {"email": email, "display_name": display_name}

    def again(message: str, status_code: int, field: str | None = None) -> Response:
        return _render(
            request,
            "auth/register.html",
            status_code,
            next=safe_next(next),
            form=form,
            error=message,
            error_field=field,
        )

    if _limits(request).check_register(request_ip(request)) is not None:
        return again(
            translate(
                _locale(request), "Too many sign-ups from your network. Wait an hour and try again."
            ),
            429,
        )
    try:
        body = UserCreate(email=email, display_name=display_name, password=password)
    except ValidationError as exc:
        return again(
            translate(
                _locale(request),
                "Enter a valid email, a name, and a password of at least 10 characters.",
            ),
            422,
            _first_invalid_field(exc),
        )
    try:
        registration = service.register_quietly(
            session, email=body.email, password=body.password, display_name=body.display_name
        )
    except WeakPassword as exc:
        return again(translate(_locale(request), exc.message), 422)
    # The same answer, after the same work, whether or not the address had an account: nobody
    # learns from this form who has one. The mail says which it was, to the address's owner.
    settings = request.app.state.settings
    send_registration_mail(session, settings, registration, _locale(request), _limits(request))
    target = urlencode({"registered": "1", "next": _welcome_url(next)})
    return RedirectResponse(f"/login?{target}", status_code=303)


def _first_invalid_field(error: ValidationError) -> str | None:
    for detail in error.errors():
        if detail.get("loc"):
            return str(detail["loc"][0])
    return None


def _welcome_url(target: str) -> str:
    """Where the new learner was going, with `welcome=1`: the page greets them once."""
    parts = urlsplit(safe_next(target))
    query = [*parse_qsl(parts.query, keep_blank_values=True), ("welcome", "1")]
    return urlunsplit(("", "", parts.path, urlencode(query), parts.fragment))


@router.get("/login")
def login_page(
    request: Request, auth: OptionalAuth, next: str = "/", registered: bool = False
) -> Response:
    """`registered`: just after the registration form, which signs nobody in (see above)."""
    if auth is not None:
        return RedirectResponse(safe_next(next), status_code=303)
    return _render(
        request,
        "auth/login.html",
        next=safe_next(next),
        form={},
        error=None,
        registered=registered,
    )


@router.post("/login")
def login_submit(
    request: Request,
    session: SessionDep,
    _csrf: Csrf,
    email: Annotated[str, Form(max_length=320), AfterValidator(storable)] = "",
    password: Annotated[str, Form(max_length=256), AfterValidator(storable)] = "",
    next: Annotated[str, Form(max_length=500)] = "/",
) -> Response:
    def again(message: str, status_code: int) -> Response:
        return _render(
            request,
            "auth/login.html",
            status_code,
            next=safe_next(next),
            form={"email": email},
            error=message,
            error_field="password",
        )

    if _limits(request).check_login(request_ip(request), email) is not None:
        return again(
            translate(
                _locale(request), "Too many sign-in attempts. Wait 15 minutes and try again."
            ),
            429,
        )
    try:
        user = service.authenticate(session, email=email, password=password)
    except AppError as exc:
        if exc.code != "invalid_credentials":  # busy: no password was checked
            raise
        _limits(request).login_failed(request_ip(request), email)
        return again(
            translate(
                _locale(request), "The email or password is wrong. Check both and try again."
            ),
            401,
        )
    token = service.issue_token(session, user, device_name=_device_name(request), kind="browser")
    return _signed_in(request, token, next)


@router.post("/logout")
def logout(auth: OptionalAuth, _csrf: Csrf) -> Response:
    if auth is not None:
        service.revoke(auth.device)
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/account/devices")
def devices_page(request: Request, auth: OptionalAuth, session: SessionDep) -> Response:
    if auth is None:
        return RedirectResponse("/login?next=/account/devices", status_code=303)
    devices = service.list_devices(session, auth.user)
    return _render(
        request,
        "auth/devices.html",
        devices=devices,
        current_device_id=auth.device.id,
        learner=auth.user,
    )


@router.post("/account/devices/{device_id}/revoke")
def revoke_device(
    device_id: uuid.UUID, auth: OptionalAuth, session: SessionDep, _csrf: Csrf
) -> Response:
    if auth is None:
        return RedirectResponse("/login?next=/account/devices", status_code=303)
    with contextlib.suppress(AppError):  # already signed out, or not yours: the list tells
        service.revoke_device(session, auth.user, device_id)
    if device_id == auth.device.id:
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response
    return RedirectResponse("/account/devices", status_code=303)
