"""API errors: one JSON shape `{"code", "message"}` with stable codes, documented in OpenAPI.

`ApiError` carries no FastAPI types so services may raise it; `app.auth.routes.install` adds the
handlers that turn it (and FastAPI's own validation and HTTP errors on /api paths) into JSON.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ApiError(Exception):
    """An error the client can act on: a stable `code`, a sentence in `message`."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.headers = headers


class ErrorBody(BaseModel):
    """Every API error. `code` is stable (clients branch on it); `message` is for people."""

    code: str = Field(examples=["not_authenticated"])
    message: str = Field(examples=["Sign in first: send your token as 'Authorization: Bearer'."])


class ValidationIssue(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ValidationErrorBody(ErrorBody):
    """A request the server could not read: `details` names each offending field."""

    details: list[ValidationIssue] = Field(default_factory=list)


# Stable codes, the status they come with, and what they mean (README lists them too).
ERROR_CODES: dict[str, tuple[int, str]] = {
    "invalid_request": (422, "The request body, query or path did not validate."),
    "not_authenticated": (401, "No valid token or session: sign in again."),
    "invalid_credentials": (401, "The email or password is wrong."),
    "csrf_failed": (403, "A cookie-authenticated request without a valid CSRF token or origin."),
    "not_found": (404, "Nothing with that id exists for you."),
    "method_not_allowed": (405, "That path does not accept this method."),
    "email_taken": (409, "An account with this email exists already."),
    "rate_limited": (429, "Too many attempts; retry after the Retry-After seconds."),
    "lesson_unavailable": (503, "The lesson's file is broken right now; the others work."),
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the given error statuses (422 gets the detailed body)."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        codes = [code for code, (st, _) in ERROR_CODES.items() if st == status]
        model = ValidationErrorBody if status == 422 else ErrorBody
        out[status] = {"model": model, "description": "Error codes: " + ", ".join(codes)}
    return out
