"""The app's one error hierarchy: `AppError(code, status, message)`, and its JSON shape.

Every error a client or learner sees is an `AppError` (or a subclass with the fields as class
attributes): a stable `code` clients branch on, an HTTP status, and a sentence saying what happened
and what to do next. `message` is an English msgid, translated when the response is written;
`params` fill its placeholders after translation. No FastAPI types here, so services raise it.
`app/error_handlers.py` turns it into `{"code", "message"}` on API paths and a page elsewhere.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


def N_(message: str) -> str:  # the conventional gettext marker: extracted, translated later
    return message


class AppError(Exception):
    """An error the client can act on: a stable `code`, a status, a sentence in `message`."""

    code: str = "error"
    status_code: int = 400
    message: str = N_("The request could not be carried out.")
    # More fields of the JSON answer beside code and message (a conflict's two versions).
    extra: dict[str, Any] | None = None

    def __init__(
        self,
        code: str | None = None,
        status: int | None = None,
        message: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        **params: Any,
    ) -> None:
        self.code = code or type(self).code
        self.status_code = status or type(self).status_code
        self.message = message or type(self).message
        self.headers = headers
        self.params = params
        super().__init__(self.message.format(**params) if params else self.message)


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


# Every stable code, the status it comes with, and what it means (README lists them too).
# Complete: tests/api/test_error_codes.py fails on an AppError subclass or a raised code that is
# missing here or has another status.
ERROR_CODES: dict[str, tuple[int, str]] = {
    "invalid_request": (422, "The request body, query or path did not validate."),
    "weak_password": (422, "The password is too common or too simple."),
    "not_authenticated": (401, "No valid token or session: sign in again."),
    "invalid_credentials": (401, "The email or password is wrong."),
    "csrf_failed": (403, "A cookie-authenticated request without a valid CSRF token or origin."),
    "not_found": (404, "Nothing with that id exists for you."),
    "method_not_allowed": (405, "That path does not accept this method."),
    "email_taken": (409, "An account with this email exists already."),
    "request_timeout": (408, "The request body arrived too slowly; send it again."),
    "too_large": (413, "The request body is larger than the server accepts."),
    "rate_limited": (429, "Too many attempts; retry after the Retry-After seconds."),
    "too_many_requests": (429, "Too many requests of yours at once; retry after Retry-After."),
    "reset_token_invalid": (400, "The password reset link is unknown, used or expired."),
    "submission_error": (400, "The submission could not be accepted."),
    "code_too_large": (413, "The submitted program is larger than the server accepts."),
    "draft_too_large": (413, "The draft is larger than the server keeps."),
    "code_empty": (422, "The submitted program is empty."),
    "invalid_date": (422, "A day is not written as YYYY-MM-DD."),
    "too_many_in_flight": (429, "Too many of your submissions are waiting to be graded."),
    "exercise_not_found": (404, "No exercise has that id."),
    "submission_not_found": (404, "None of your submissions has that id."),
    "draft_not_found": (404, "You have no draft for that exercise."),
    "idempotency_key_reused": (409, "The Idempotency-Key was sent before with another body."),
    "draft_conflict": (409, "The draft changed on another device since the version you edited."),
    "changed_meanwhile": (409, "What the request changes was changed or deleted meanwhile."),
    "instructors_only": (403, "Only instructors may see this."),
    "internal_error": (500, "The server failed; nothing was changed. Retry later."),
    "lesson_unavailable": (503, "The lesson's file is broken right now; the others work."),
    "busy": (503, "The server is busy; retry after the Retry-After seconds."),
}

_EXAMPLE_MESSAGES: dict[str, str] = {
    "invalid_request": "The request is not valid: body.email: String should match pattern.",
    "not_authenticated": "Sign in first: send a valid token as 'Authorization: Bearer <token>'.",
    "rate_limited": "Too many attempts from here. Wait 60 seconds, then try again.",
    "internal_error": "Something went wrong on our side; nothing was changed. Try again later.",
    "busy": "The server is busy right now. Wait a second, then try again.",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the given error statuses (422 gets the detailed body),
    each with an example per code; every operation may also answer 500 and 503."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in (*statuses, 500, 503):
        model = ValidationErrorBody if status == 422 else ErrorBody
        codes = [code for code, (st, _) in ERROR_CODES.items() if st == status]
        model = ValidationErrorBody if status == 422 else ErrorBody
        examples = {
            code: {
                "summary": ERROR_CODES[code][1],
                "value": {
                    "code": code,
                    "message": _EXAMPLE_MESSAGES.get(code, ERROR_CODES[code][1]),
                },
            }
            for code in codes
        }
        out[status] = {
            "model": model,
            "description": "Error codes: " + ", ".join(codes),
            "content": {"application/json": {"examples": examples}},
        }
    return out


def _example(code: str) -> dict[str, Any]:
    meaning = ERROR_CODES[code][1]
    message = _EXAMPLE_MESSAGES.get(code, meaning)
    return {"summary": meaning, "value": {"code": code, "message": message}}
