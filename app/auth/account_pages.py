"""Account pages beyond signing in: change the password, delete the account, reset a forgotten
password. Thin: the work is in lifecycle.py, as for the API."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Depends, Form, Query, Request
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
from app.db import SessionDep
from app.errors import AppError
from app.i18n import resolve_locale, translate
from app.limits import request_ip
from app.text import storable

router = APIRouter(tags=["pages"], include_in_schema=False)

Csrf = Annotated[None, Depends(csrf_protect)]
Secret = Annotated[str, Form(max_length=256), AfterValidator(storable)]


def _render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    from app.web.templating import render  # the web layer owns templating

    return render(request, name, status_code=status_code, **context)


def _error(request: Request, exc: AppError) -> str:
    return translate(resolve_locale(request), exc.message)


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
        return _render(request, "auth/password.html", exc.status_code, error=_error(request, exc))
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
        return _render(request, "auth/delete.html", exc.status_code, error=_error(request, exc))
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/forgot-password")
def forgot_page(request: Request) -> Response:
    return _render(request, "auth/forgot.html", sent=False)


@router.post("/forgot-password")
def forgot_submit(
    request: Request,
    session: SessionDep,
    tasks: BackgroundTasks,
    _csrf: Csrf,
    email: Annotated[str, Form(max_length=320), AfterValidator(storable)] = "",
) -> Response:
    """The same page whether or not the address has an account; the mail leaves after it."""
    if rate_limits(request).check_reset(request_ip(request), email) is None:
        reset = lifecycle.request_reset(session, email)
        if reset is not None:
            mail_reset(tasks, request, reset)
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
        error = _error(request, exc)
        return _render(request, "auth/reset.html", exc.status_code, token=token, error=error)
    return _render(request, "auth/reset.html", token="", error=None, done=True)
