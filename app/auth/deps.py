"""Who is calling: `CurrentLearner` (401 if nobody) and `OptionalLearner` (None if nobody).

Both accept a bearer token (the mobile app) or the `rdv_session` cookie (the browser). A request
that authenticates by cookie and changes state must also pass the CSRF checks; a bearer request
need not, since browsers never attach that header on their own.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.auth import service
from app.auth.csrf import SAFE_METHODS, verify_csrf
from app.auth.models import INSTRUCTOR, User
from app.auth.service import AuthContext
from app.db import SessionDep
from app.errors import N_, AppError

SESSION_COOKIE = "rdv_session"


def _auth_context(request: Request, session: SessionDep) -> AuthContext | None:
    context = _resolve(request, session)
    # For the page header (account_context), read now, while the session is open: an error page
    # is rendered after the session has been rolled back and closed, when the user row can no
    # longer be loaded (a stale form's "form expired" page was a 500 for that reason).
    request.state.account_header = (
        {
            "signed_in": True,
            "display_name": context.user.display_name,
            "instructor": context.user.role == INSTRUCTOR,
        }
        if context
        else None
    )
    return context


def _resolve(request: Request, session: SessionDep) -> AuthContext | None:
    authorization = request.headers.get("authorization")
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _not_authenticated()
        context = service.resolve_token(session, token.strip(), via="bearer")
        if context is None:
            # A revoked or unknown bearer token is an error, not anonymity: the app must sign in.
            raise _not_authenticated()
        return context
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        return service.resolve_token(session, cookie, via="cookie")
    return None


def _not_authenticated() -> AppError:
    return AppError(
        "not_authenticated",
        401,
        "Sign in first: send a valid token as 'Authorization: Bearer <token>' "
        "(POST /api/v1/auth/token gives you one).",
        headers={"WWW-Authenticate": "Bearer"},
    )


async def optional_auth(
    request: Request,
    context: Annotated[AuthContext | None, Depends(_auth_context)],
) -> AuthContext | None:
    if context is not None and context.via == "cookie" and request.method not in SAFE_METHODS:
        await verify_csrf(request)
    return context


# Documents the bearer scheme in OpenAPI for the operations that need a learner; the token is
# read by `_resolve` above, which also accepts the browser's cookie.
bearer_scheme = HTTPBearer(
    auto_error=False,
    description="A device token from POST /api/v1/auth/token (browsers use the session cookie).",
)


async def current_auth(
    context: Annotated[AuthContext | None, Depends(optional_auth)],
    _documented: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> AuthContext:
    if context is None:
        raise _not_authenticated()
    return context


async def optional_learner(
    context: Annotated[AuthContext | None, Depends(optional_auth)],
) -> User | None:
    return context.user if context else None


async def current_learner(context: Annotated[AuthContext, Depends(current_auth)]) -> User:
    return context.user


async def current_instructor(learner: Annotated[User, Depends(current_learner)]) -> User:
    """An instructor (401 if nobody is signed in, 403 for a learner)."""
    if learner.role != INSTRUCTOR:
        raise AppError(
            "instructors_only",
            403,
            N_(
                "Only instructors may see this. An operator makes an account an instructor "
                "with `python -m app role EMAIL instructor`."
            ),
        )
    return learner


def account_context(request: Request) -> dict[str, Any]:
    """Template context: `account.signed_in`, `account.display_name` and `account.instructor`
    (the instructors' links) for the page header.

    Uses what this request's auth dependency resolved; pages that never asked (no database
    lookup there) show the account links whenever the browser holds a session cookie.
    """
    header: dict[str, Any] | None = getattr(request.state, "account_header", None)
    if header is not None:
        return {"account": header}
    resolved = hasattr(request.state, "account_header")
    signed_in = not resolved and SESSION_COOKIE in request.cookies
    return {"account": {"signed_in": signed_in, "display_name": None, "instructor": False}}


OptionalAuth = Annotated[AuthContext | None, Depends(optional_auth)]
CurrentAuth = Annotated[AuthContext, Depends(current_auth)]
CurrentLearner = Annotated[User, Depends(current_learner)]
OptionalLearner = Annotated[User | None, Depends(optional_learner)]
CurrentInstructor = Annotated[User, Depends(current_instructor)]
