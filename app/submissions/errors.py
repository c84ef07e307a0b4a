"""Submission errors a learner sees (`AppError`s): a stable code, an HTTP status and a sentence
saying what to do next.

Messages are English msgids (marked with `N_` for extraction) translated when the response is
written; `params` fill the placeholders after translation.
"""

from __future__ import annotations

from typing import Any

from app.errors import N_, AppError


class SubmissionError(AppError):
    status_code = 400
    code = "submission_error"
    message = N_("The submission could not be accepted.")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)


class CodeTooLarge(SubmissionError):
    status_code = 413
    code = "code_too_large"
    message = N_(
        "Your program is {size_kib} KiB, but the limit is {limit_kib} KiB. "
        "Remove large data or long comments and submit again."
    )


class CodeEmpty(SubmissionError):
    status_code = 422
    code = "code_empty"
    message = N_("Your program is empty. Write your code in the editor, then submit.")


class TooManyInFlight(SubmissionError):
    status_code = 429
    code = "too_many_in_flight"
    message = N_(
        "You already have {count} submissions being graded, the most at once. "
        "Wait for one to finish, then submit again."
    )


class ExerciseNotFound(SubmissionError):
    status_code = 404
    code = "exercise_not_found"
    message = N_("There is no exercise called “{exercise}”. Check its id and try again.")


class SubmissionNotFound(SubmissionError):
    status_code = 404
    code = "submission_not_found"
    message = N_(
        "There is no submission with this id among yours. Check the link, or submit again."
    )


class IdempotencyKeyReused(SubmissionError):
    status_code = 409
    code = "idempotency_key_reused"
    message = N_(
        "This Idempotency-Key was already used for a different program or exercise. "
        "Send a new key with each new submission."
    )


class DraftTooLarge(SubmissionError):
    status_code = 413
    code = "draft_too_large"
    message = N_("This draft is larger than {limit_kib} KiB and was not saved. Shorten it first.")


class DraftConflict(SubmissionError):
    status_code = 409
    code = "draft_conflict"
    message = N_(
        "This draft was changed on another device since you last loaded it, so it was not "
        "saved. Choose which version to keep, then save again."
    )

    def __init__(self, *, stored: Any = None, code: str | None = None) -> None:
        """`stored`: the draft as saved now (a Draft); `code`: the version that was sent. Both
        go in the answer (`stored`, `sent`), so the editor can offer either."""
        super().__init__()
        if stored is not None:
            self.extra = {
                "stored": {
                    "code": stored.code,
                    "updated_at": stored.updated_at.isoformat(),
                },
                "sent": {"code": code},
            }


class DraftNotFound(SubmissionError):
    status_code = 404
    code = "draft_not_found"
    message = N_("You have no saved draft for this exercise yet.")
