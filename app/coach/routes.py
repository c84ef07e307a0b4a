"""HTTP for the coach: ask a question (JSON, or Server-Sent Events for the page), read history.
Thin: see service.py."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from app.admission import inside_slot, outside_slot
from app.auth.deps import CurrentInstructor, CurrentLearner
from app.coach import service, struggles
from app.coach.asking import ASKING, Ticket
from app.coach.llm import ChatProvider
from app.coach.schemas import (
    CoachAnswer,
    CoachExchangePublic,
    CoachHistory,
    CoachQuestion,
    StruggleReport,
)
from app.content.schemas import SLUG_PATTERN
from app.db import SessionDep
from app.errors import error_responses
from app.i18n import LocaleDep
from app.submissions.backends import SessionFactory
from app.submissions.routes import SessionFactoryDep

api_router = APIRouter(tags=["coach"])

EVENT_STREAM = "text/event-stream"


@api_router.post(
    "/coach",
    response_model=CoachAnswer,
    responses={
        200: {
            "content": {
                EVENT_STREAM: {
                    "schema": {"type": "string"},
                    "example": 'event: delta\ndata: {"text": "Rank 1 ..."}\n\n'
                    'event: done\ndata: {"answer": "...", "answer_html": "...", '
                    '"sources": [], "provider": "llm"}\n\n',
                }
            },
            "description": "The answer; with `Accept: text/event-stream`, Server-Sent Events: "
            "`delta` ({text}: checked lines as the model writes them), `reset` (drop what was "
            "shown: the built-in coach answers instead) and `done` (the whole answer).",
        },
        **error_responses(401, 403, 404, 422, 429, 503),
    },
)
def ask_coach(
    request: Request,
    session: SessionDep,
    sessions: SessionFactoryDep,
    learner: CurrentLearner,
    locale: LocaleDep,
    body: CoachQuestion,
    accept: Annotated[str | None, Header(max_length=500)] = None,
) -> Any:
    """Ask the coach about a lesson, an exercise or one of your own submissions.

    With `submission_id` the coach explains each failed check from what the ranks did, and
    escalates over your failed tries (a nudge, then a pointer, then a fix of your own line).
    Without it, it answers from the lesson steps that match the question best.
    """
    settings = request.app.state.settings
    # Counted as asked until answered (the hourly limit is atomic); the stream closes its own.
    ticket: Ticket | None = ASKING.begin(learner.id)
    try:
        prepared = service.prepare(
            session,
            user_id=learner.id,
            body=body,
            locale=locale,
            settings=settings,
            in_flight=ticket.earlier if ticket else 0,
        )
        provider = service.provider_from(settings)
        headers = {"Content-Language": locale, "Cache-Control": "no-store"}
        if accept and EVENT_STREAM in accept:
            headers["X-Accel-Buffering"] = "no"
            stream = _events(request, sessions, learner.id, prepared, provider, ticket)
            ticket = None
            return StreamingResponse(stream, media_type=EVENT_STREAM, headers=headers)
        session.commit()  # the model is asked with no transaction open and no row locked
        with outside_slot(request):  # nor an admission slot held: others use it meanwhile
            reply = service.answer(prepared, provider)
        service.record(session, user_id=learner.id, prepared=prepared, reply=reply)
        session.commit()  # stored before the ticket closes: never counted neither way
        return JSONResponse(reply.public().model_dump(mode="json"), headers=headers)
    finally:
        if ticket is not None:
            ticket.done()


def _events(
    request: Request,
    sessions: SessionFactory,
    user_id: uuid.UUID,
    prepared: service.Prepared,
    provider: ChatProvider | None,
    ticket: Ticket | None,
) -> Iterator[str]:
    try:
        for kind, payload in service.stream(prepared, provider):
            if kind == "done":  # the response started: its slot went back; take one
                with inside_slot(request), sessions() as own:
                    service.record(own, user_id=user_id, prepared=prepared, reply=payload)
                data: dict[str, Any] = payload.public().model_dump(mode="json")
            else:
                data = {"text": payload} if kind == "delta" else {}
            yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
    finally:
        if ticket is not None:
            ticket.done()


@api_router.get("/coach/history", response_model=CoachHistory, responses=error_responses(401))
def coach_history(
    session: SessionDep,
    learner: CurrentLearner,
    lesson_id: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> CoachHistory:
    """Your own questions to the coach and its answers, newest first."""
    rows = service.history(session, user_id=learner.id, lesson_id=lesson_id, limit=limit)
    return CoachHistory(exchanges=[CoachExchangePublic.model_validate(row) for row in rows])


@api_router.get(
    "/coach/struggles",
    response_model=StruggleReport,
    responses=error_responses(401, 403, 422),
)
def coach_struggles(
    request: Request,
    session: SessionDep,
    instructor: CurrentInstructor,
    locale: LocaleDep,
    lesson_id: Annotated[str | None, Query(max_length=64, pattern=SLUG_PATTERN)] = None,
    days: Annotated[int, Query(ge=1, le=365)] = 30,
    recent: Annotated[int, Query(ge=1, le=100)] = 20,
) -> JSONResponse:
    """Instructors only: where learners struggle, from every learner's questions to the coach.

    Questions in the last `days` days (in one lesson with `lesson_id`), counted per place of the
    course (lesson, step, exercise) and per check the asked-about submission failed, with how
    many came from the "Why did this fail?" button on that check; then the `recent` newest
    questions. Learners are shown by a pseudonym, never by name or address. A learner is 403.
    """
    report = struggles.report(
        session,
        locale=locale,
        secret=request.app.state.settings.secret_key,
        lesson_id=lesson_id,
        days=days,
        recent=recent,
    )
    return JSONResponse(
        report.model_dump(mode="json"),
        headers={"Content-Language": locale, "Cache-Control": "no-store"},
    )
