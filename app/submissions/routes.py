"""HTTP for submissions: submit, read, stream live events, keep drafts. Thin: see service.py."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session

from app.auth import service as auth_service
from app.auth.deps import CurrentAuth, CurrentLearner
from app.db import SessionDep, SessionFactory, after_commit, unit_of_work
from app.errors import error_responses
from app.i18n import LocaleDep
from app.submissions import event_schemas, pagination, service, sse
from app.submissions.backends import GradingBackend
from app.submissions.errors import DraftNotFound
from app.submissions.models import Submission
from app.submissions.rendering import (
    render_event,
    render_result,
    render_summary,
)
from app.submissions.schemas import (
    EXERCISE_ID_PATTERN,
    DraftPublic,
    DraftUpdate,
    SubmissionAccepted,
    SubmissionCreate,
    SubmissionList,
    SubmissionPublic,
    SubmissionSummary,
)
from grader.contract import Result

api_router = APIRouter(tags=["submissions"])

SSE_EXAMPLES = {
    "queued": {"value": 'event: queued\ndata: {"position":2,"attempt":0}\n\n'},
    "done": {"value": 'id: 57\nevent: done\ndata: {"status":"pass","result":{}}\n\n'},
    "signed_out": {
        "value": 'event: signed_out\ndata: {"message":"This device was signed out."}\n\n'
    },
}


def get_session_factory() -> SessionFactory:
    """Sessions for work outside the request's own transaction (the live event stream)."""
    return unit_of_work


SessionFactoryDep = Annotated[SessionFactory, Depends(get_session_factory)]
ExerciseId = Annotated[str, Path(pattern=EXERCISE_ID_PATTERN, examples=["ddp-fundamentals/train"])]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=200,
        description="Send the same key again (a double click, a retry) to get the same submission.",
    ),
]


def _wake_after_commit(request: Request, session: Session) -> None:
    """Tell the backend once the submission is committed, so a rollback never queues a ghost."""
    backend: GradingBackend | None = getattr(request.app.state, "grading_backend", None)
    if backend is not None:
        after_commit(session, backend.wake)


def _hint_grader(request: Request, exercise: str) -> None:
    """The learner has this exercise open: a grader in this process (the local backend) prepares
    its launches; with the queue, the workers of its queue do while they wait."""
    backend: GradingBackend | None = getattr(request.app.state, "grading_backend", None)
    if backend is not None:
        backend.hint_exercise(exercise)


def _public(session: Session, submission: Submission, locale: str) -> SubmissionPublic:
    public = SubmissionPublic.model_validate(submission)
    public.queue_position = service.queue_position(session, submission)
    if submission.result is not None:
        rendered = render_result(submission.result, submission.exercise, locale)
        public.result = Result.model_validate(rendered)
    return public


@api_router.post(
    "/submissions",
    status_code=202,
    response_model=SubmissionAccepted,
    responses=error_responses(401, 403, 404, 409, 413, 429, 422),
)
def create_submission(
    request: Request,
    session: SessionDep,
    learner: CurrentLearner,
    locale: LocaleDep,
    body: SubmissionCreate,
    idempotency_key: IdempotencyKey = None,
) -> SubmissionAccepted:
    """Queue the learner's program for grading; a repeated Idempotency-Key gives the same one."""
    submitted = service.submit(
        session,
        user_id=learner.id,
        exercise=body.exercise,
        code=body.code,
        locale=locale,
        idempotency_key=idempotency_key,
        max_in_flight=request.app.state.settings.max_submissions_in_flight,
    )
    submission = submitted.submission
    if submitted.created:
        session.flush()
        _wake_after_commit(request, session)
    url = f"/api/v1/submissions/{submission.id}"
    return SubmissionAccepted(
        id=submission.id,
        exercise=submission.exercise,
        status=submission.status,
        queue_position=service.queue_position(session, submission),
        url=url,
        events_url=f"{url}/events",
    )


@api_router.get("/submissions", response_model=SubmissionList, responses=error_responses(401, 422))
def list_submissions(
    session: SessionDep,
    learner: CurrentLearner,
    locale: LocaleDep,
    exercise: Annotated[str | None, Query(pattern=EXERCISE_ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[
        str | None,
        Query(
            max_length=200,
            pattern=pagination.CURSOR_PATTERN,
            description="`next_cursor` from the previous page.",
        ),
    ] = None,
) -> SubmissionList:
    """The learner's submissions, newest first (optionally for one exercise), a page at a time."""
    page = service.list_for_learner(
        session, user_id=learner.id, exercise=exercise, limit=limit, cursor=cursor
    )
    rows = page.submissions
    return SubmissionList(
        next_cursor=page.next_cursor,
        submissions=[
            SubmissionSummary(
                id=row.id,
                exercise=row.exercise,
                status=row.status,
                outcome=(row.result or {}).get("status"),
                summary=render_summary(row.result, locale),
                created_at=row.created_at,
            )
            for row in rows
        ],
    )


@api_router.get(
    "/submissions/{submission_id}",
    response_model=SubmissionPublic,
    responses=error_responses(401, 404, 422),
)
def read_submission(
    response: Response,
    session: SessionDep,
    learner: CurrentLearner,
    locale: LocaleDep,
    submission_id: uuid.UUID,
) -> SubmissionPublic:
    """One of the learner's own submissions, with its Result once graded, in the viewer's
    language (`?locale=`, the language cookie, then Accept-Language)."""
    submission = service.get_for_learner(session, user_id=learner.id, submission_id=submission_id)
    response.headers["Content-Language"] = locale
    return _public(session, submission, locale)


@api_router.get(
    "/submissions/{submission_id}/events",
    response_class=StreamingResponse,
    responses={200: event_schemas.openapi_response(), **error_responses(401, 404, 422)},
)
def submission_events(
    request: Request,
    session: SessionDep,
    sessions: SessionFactoryDep,
    auth: CurrentAuth,
    locale: LocaleDep,
    submission_id: uuid.UUID,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)] = None,
) -> StreamingResponse:
    """Live progress as Server-Sent Events; reconnect with Last-Event-ID to resume. Checks and
    the Result come in the viewer's language, as for `GET /submissions/{id}`. The stream ends
    with `signed_out` when the device's token is revoked while it is open."""
    submission = service.get_for_learner(session, user_id=auth.user.id, submission_id=submission_id)
    exercise = submission.exercise
    device_id = auth.device.id
    return StreamingResponse(
        sse.stream(
            sessions,
            submission_id,
            last_event_id=sse.parse_last_event_id(last_event_id),
            is_disconnected=request.is_disconnected,
            render=lambda kind, data: render_event(kind, data, exercise, locale),
            signed_in=lambda s: auth_service.device_is_active(s, device_id),
        ),
        media_type="text/event-stream",
        headers={
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
            "Content-Language": locale,
        },
    )


@api_router.get(
    "/drafts/{exercise:path}",
    response_model=DraftPublic,
    responses={
        **error_responses(401, 404, 422),
        204: {"description": "No draft, with `missing=empty`."},
    },
)
def read_draft(
    request: Request,
    session: SessionDep,
    learner: CurrentLearner,
    exercise: ExerciseId,
    missing: Annotated[
        Literal["error", "empty"],
        Query(
            description="No draft yet: `error` answers 404 `draft_not_found`; `empty` answers "
            "204 (the editor asks this way: a missing draft is normal, not a failed request)."
        ),
    ] = "error",
) -> DraftPublic | Response:
    """The learner's saved, unsubmitted code for an exercise (the editor asks when it opens)."""
    _hint_grader(request, exercise)
    draft = service.get_draft(session, user_id=learner.id, exercise=exercise)
    if draft is None:
        if missing == "empty":
            return Response(status_code=204)
        raise DraftNotFound()
    return DraftPublic.model_validate(draft)


@api_router.put(
    "/drafts/{exercise:path}",
    response_model=DraftPublic,
    responses=error_responses(401, 403, 404, 409, 413, 422),
)
def save_draft(
    request: Request,
    session: SessionDep,
    learner: CurrentLearner,
    exercise: ExerciseId,
    body: DraftUpdate,
) -> DraftPublic:
    """Keep the editor's content so another device or a reload finds it; with
    `base_updated_at`, 409 `draft_conflict` instead of overwriting another device's edits."""
    draft = service.save_draft(
        session,
        user_id=learner.id,
        exercise=exercise,
        code=body.code,
        base_updated_at=body.base_updated_at,
    )
    _hint_grader(request, exercise)
    return DraftPublic.model_validate(draft)


@api_router.delete(
    "/drafts/{exercise:path}", status_code=204, responses=error_responses(401, 403, 404, 422)
)
def delete_draft(session: SessionDep, learner: CurrentLearner, exercise: ExerciseId) -> Response:
    """Forget the draft ("reset to starter")."""
    service.delete_draft(session, user_id=learner.id, exercise=exercise)
    return Response(status_code=204)
