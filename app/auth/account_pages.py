"""Account pages beyond signing in: change the password, delete the account (then a page that
says it is gone), sign out everywhere, reset a forgotten password. Thin: the work is in
lifecycle.py, as for the API. Every form goes through `auth/_field.html`: an error about one
field is said at that field."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import AfterValidator

from app.auth import lifecycle
from app.auth.csrf import csrf_protect
from app.auth.deps import SESSION_COOKIE, OptionalAuth
from app.auth.routes import (
    delete_with_queued_code,
    limit_password_checks,
    mail_reset,
    rate_limits,
)
from app.client import request_ip
from app.db import SessionDep
from app.errors import AppError
from app.i18n import resolve_locale, translate
from app.templating import render
from app.text import storable

router = APIRouter(tags=["pages"], include_in_schema=False)

Csrf = Annotated[None, Depends(csrf_protect)]
Secret = Annotated[str, Form(max_length=256), AfterValidator(storable)]


def _render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    return render(request, name, status_code=status_code, **context)


def _error(request: Request, exc: AppError) -> str:
    return translate(resolve_locale(request), exc.message)


def _failed(
    request: Request, name: str, exc: AppError, fields: dict[str, str], **context: Any
) -> Response:
    """The form again with the error at the field it is about (`fields`: error code -> field)."""
    error = _error(request, exc)
    field = fields.get(exc.code)
    return _render(request, name, exc.status_code, error=error, error_field=field, **context)


def _signed_out(path: str) -> Response:
    response = RedirectResponse(path, status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/account/password")
def password_page(request: Request, auth: OptionalAuth) -> Response:
    if auth is None:
        return RedirectResponse("/login?next=/account/password", status_code=303)
    return _render(request, "auth/password.html", error=None, done=False)


@router.post("/account/password")
def password_submit(
    request: Request,
    auth: OptionalAuth,
    session: SessionDep,
    _csrf: Csrf,
    current_password: Secret = "",
    new_password: Secret = "",
) -> Response:
    if auth is None:
        return RedirectResponse("/login?next=/account/password", status_code=303)
    try:
        limit_password_checks(request, auth.user)
        lifecycle.change_password(
            session, auth.user, current=current_password, new=new_password, keep_device=auth.device
        )
    except AppError as exc:
        fields = {"invalid_credentials": "current_password", "weak_password": "new_password"}
        return _failed(request, "auth/password.html", exc, fields)
    return _render(request, "auth/password.html", error=None, done=True)


@router.get("/account/delete")
def delete_page(request: Request, auth: OptionalAuth) -> Response:
    if auth is None:
        return RedirectResponse("/login?next=/account/delete", status_code=303)
    return _render(request, "auth/delete.html", error=None)


@router.post("/account/delete")
def delete_submit(
    request: Request, auth: OptionalAuth, session: SessionDep, _csrf: Csrf, password: Secret = ""
) -> Response:
    if auth is None:
        return RedirectResponse("/login?next=/account/delete", status_code=303)
    try:
        limit_password_checks(request, auth.user)
        delete_with_queued_code(request, session, auth.user, password)
    except AppError as exc:
        return _failed(request, "auth/delete.html", exc, {"invalid_credentials": "password"})
    return _signed_out("/account/deleted")


@router.get("/account/deleted")
def deleted_page(request: Request) -> Response:
    return _render(request, "auth/goodbye.html", deleted=True)


@router.post("/account/devices/revoke-all")
def sign_out_everywhere(auth: OptionalAuth, session: SessionDep, _csrf: Csrf) -> Response:
    if auth is None:
        return RedirectResponse("/login?next=/account/devices", status_code=303)
    lifecycle.sign_out_everywhere(session, auth.user)
    return _signed_out("/account/signed-out")


@router.get("/account/signed-out")
def signed_out_page(request: Request) -> Response:
    return _render(request, "auth/goodbye.html", deleted=False)


@router.get("/forgot-password")
def forgot_page(request: Request) -> Response:
    return _render(request, "auth/forgot.html", sent=False)


@router.post("/forgot-password")
def forgot_submit(
    request: Request,
    session: SessionDep,
    _csrf: Csrf,
    email: Annotated[str, Form(max_length=320), AfterValidator(storable)] = "",
) -> Response:
    """The same page whether or not the address has an account; the mail leaves after it."""
    if rate_limits(request).check_reset(request_ip(request), email) is None:
        reset = lifecycle.request_reset(session, email)
        if reset is not None:
            mail_reset(session, request, reset)
    return _render(request, "auth/forgot.html", sent=True)


@router.get("/reset-password")
def reset_page(request: Request, token: Annotated[str, Query(max_length=200)] = "") -> Response:
    return _render(request, "auth/reset.html", token=token, error=None, done=False)


@router.post("/reset-password")
def reset_submit(
    request: Request,
    session: SessionDep,
    _csrf: Csrf,
    token: Annotated[str, Form(max_length=200), AfterValidator(storable)] = "",
    new_password: Secret = "",
) -> Response:
    try:
        lifecycle.reset_password(session, token=token, new=new_password)
    except AppError as exc:
        fields = {"weak_password": "new_password"}
        return _failed(request, "auth/reset.html", exc, fields, token=token)
    return _render(request, "auth/reset.html", token="", error=None, done=True)
