"""Accounts API under /api/v1 (register, tokens, devices, me) and the account pages."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Form, Request, Response, status
from pydantic import AfterValidator
from sqlalchemy.orm import Session

from app.auth import lifecycle, service
from app.auth.deps import CurrentAuth, CurrentLearner
from app.auth.mails import send_registration_mail, send_reset_mail
from app.auth.models import User
from app.auth.ratelimit import AuthRateLimits
from app.auth.schemas import (
    AccountDeletion,
    DevicePublic,
    PasswordChange,
    PasswordResetConfirm,
    PasswordResetRequest,
    TokenPublic,
    UserCreate,
    UserPublic,
)
from app.client import request_ip
from app.db import SessionDep, after_commit
from app.errors import AppError, error_responses
from app.i18n import resolve_locale
from app.submissions import service as submissions
from app.submissions.backends import GradingBackend
from app.text import NO_NUL, storable

api_router = APIRouter(tags=["accounts"])


def rate_limits(request: Request) -> AuthRateLimits:
    limits: AuthRateLimits = request.app.state.auth_rate_limits
    return limits


def limit_password_checks(request: Request, user: User) -> None:
    """A password checked with a credential (change it, delete the account) counts as a sign-in
    to that account from this address: a stolen token cannot guess at sign-in's pace and more."""
    wait = rate_limits(request).check_login(request_ip(request), user.email)
    if wait is not None:
        raise _rate_limited(wait)


def _rate_limited(retry_after: int) -> AppError:
    return AppError(
        "rate_limited",
        429,
        f"Too many attempts from here. Wait {retry_after} seconds, then try again.",
        headers={"Retry-After": str(retry_after)},
    )


@api_router.post(
    "/auth/register",
    status_code=status.HTTP_201_CREATED,
    response_model=UserPublic,
    responses=error_responses(422, 429),
)
def register(
    request: Request,
    body: UserCreate,
    session: SessionDep,
) -> UserPublic:
    """Create an account. Then get a token with POST /auth/token.

    The answer is the same whether or not the address had an account already (so that nobody
    can probe who has one); only the owner's password signs in to an existing account. A mail
    follows: a welcome to a new account, or word to the owner that someone tried. A
    password among the commonest ones, or a trivial repeat, gets 422 `weak_password`."""
    wait = rate_limits(request).check_register(request_ip(request))
    if wait is not None:
        raise _rate_limited(wait)
    registration = service.register_quietly(
        session, email=body.email, password=body.password, display_name=body.display_name
    )
    locale = resolve_locale(request)
    send_registration_mail(
        session, request.app.state.settings, registration, locale, rate_limits(request)
    )
    return UserPublic.model_validate(registration.user)


@api_router.post(
    "/auth/token", response_model=TokenPublic, responses=error_responses(401, 422, 429)
)
def issue_token(
    request: Request,
    session: SessionDep,
    username: Annotated[
        str,
        Form(min_length=1, max_length=320, pattern=NO_NUL, description="The account's email."),
        AfterValidator(storable),
    ],
    password: Annotated[
        str, Form(min_length=1, max_length=256, pattern=NO_NUL), AfterValidator(storable)
    ],
    device_name: Annotated[
        str, Form(min_length=1, max_length=120, pattern=NO_NUL), AfterValidator(storable)
    ] = "Mobile app",
) -> TokenPublic:
    """A new token for this device (OAuth2 password form). Send it as `Authorization: Bearer`."""
    wait = rate_limits(request).check_login(request_ip(request), username)
    if wait is not None:
        raise _rate_limited(wait)
    try:
        user = service.authenticate(session, email=username, password=password)
    except AppError as exc:
        if exc.code == "invalid_credentials":  # not "busy": no password was checked
            rate_limits(request).login_failed(request_ip(request), username)
        raise
    token = service.issue_token(session, user, device_name=device_name, kind="api")
    return TokenPublic(access_token=token)


@api_router.delete(
    "/auth/token",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=error_responses(401, 403),
)
def revoke_token(auth: CurrentAuth) -> Response:
    """Sign this device out: the token in use stops working at once."""
    service.revoke(auth.device)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@api_router.get("/auth/devices", response_model=list[DevicePublic], responses=error_responses(401))
def list_devices(auth: CurrentAuth, session: SessionDep) -> list[DevicePublic]:
    """Every device signed in to this account ("my devices")."""
    return [
        DevicePublic.model_validate(device).model_copy(
            update={"current": device.id == auth.device.id}
        )
        for device in service.list_devices(session, auth.user)
    ]


@api_router.delete(
    "/auth/devices/{device_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=error_responses(401, 403, 404, 422),
)
def revoke_device(device_id: uuid.UUID, learner: CurrentLearner, session: SessionDep) -> Response:
    """Sign one of your devices out (a lost phone, a shared computer)."""
    service.revoke_device(session, learner, device_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@api_router.get("/me", response_model=UserPublic, responses=error_responses(401))
def me(learner: CurrentLearner) -> UserPublic:
    """The signed-in learner."""
    return UserPublic.model_validate(learner)


@api_router.post(
    "/auth/password",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=error_responses(401, 403, 422, 429),
)
def change_password(
    request: Request, body: PasswordChange, auth: CurrentAuth, session: SessionDep
) -> Response:
    """A new password. Every other device is signed out; this one stays signed in. The current
    password is checked as at sign-in, with the same limits (429 beyond)."""
    limit_password_checks(request, auth.user)
    lifecycle.change_password(
        session,
        auth.user,
        current=body.current_password,
        new=body.new_password,
        keep_device=auth.device,
    )
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@api_router.delete(
    "/me",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=error_responses(401, 403, 422, 429),
)
def delete_account(
    request: Request, body: AccountDeletion, learner: CurrentLearner, session: SessionDep
) -> Response:
    """Delete your account, confirmed with your password: progress, drafts, submissions,
    devices and everything else kept for you go with it, at once and for good. The password is
    checked as at sign-in, with the same limits (429 beyond)."""
    limit_password_checks(request, learner)
    delete_with_queued_code(request, session, learner, password=body.password)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def delete_with_queued_code(request: Request, session: Session, user: User, password: str) -> None:
    """Delete the account (lifecycle.py) and, once that is committed (the request's one commit
    point), the code of its submissions still waiting in the grading queue
    (app/submissions/queue.py)."""
    job_ids = submissions.queued_job_ids(session, user.id)
    lifecycle.delete_account(session, user, password=password)
    backend: GradingBackend | None = getattr(request.app.state, "grading_backend", None)
    if backend is not None and job_ids:
        after_commit(session, lambda: backend.withdraw(job_ids))


@api_router.post(
    "/auth/password-reset",
    status_code=status.HTTP_202_ACCEPTED,
    response_class=Response,
    responses=error_responses(422, 429),
)
def request_password_reset(
    request: Request,
    body: PasswordResetRequest,
    session: SessionDep,
) -> Response:
    """Mail a reset link (valid one hour) to the address, if it has an account. The answer is
    the same either way; the mail leaves after it."""
    wait = rate_limits(request).check_reset(request_ip(request), body.email)
    if wait is not None:
        raise _rate_limited(wait)
    reset = lifecycle.request_reset(session, body.email)
    if reset is not None:
        mail_reset(session, request, reset)
    return Response(status_code=status.HTTP_202_ACCEPTED)


def mail_reset(session: Session, request: Request, reset: lifecycle.ResetRequest) -> None:
    """The reset mail, in the request's language, under the per-recipient limits."""
    settings = request.app.state.settings
    send_reset_mail(session, settings, reset, resolve_locale(request), rate_limits(request))


@api_router.post(
    "/auth/password-reset/confirm",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=error_responses(400, 422),
)
def confirm_password_reset(body: PasswordResetConfirm, session: SessionDep) -> Response:
    """Set a new password with the token from the reset mail; every device is signed out, so
    sign in again with POST /auth/token."""
    lifecycle.reset_password(session, token=body.token, new=body.new_password)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
