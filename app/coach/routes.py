"""HTTP for the coach: ask a question (JSON, or Server-Sent Events for the page), read history.
Thin: see service.py."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from app.admission import slot_of
from app.auth.deps import CurrentInstructor, CurrentLearner
from app.coach import execution, service, struggles
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
from app.db import SessionDep, SessionFactory
from app.errors import error_responses
from app.i18n import SUPPORTED_LOCALES, resolve_locale

api_router = APIRouter(tags=["coach"])

EVENT_STREAM = "text/event-stream"


def coach_locale(
    request: Request,
    locale: Annotated[
        str | None,
        Query(
            max_length=16,
            description="The page's language ("
            + ", ".join(SUPPORTED_LOCALES)
            + "): before the language chooser's cookie `rdv_locale` and `Accept-Language`. "
            "The coach answers a question written in another of these languages in that "
            "language, and says so.",
            examples=["tr"],
        ),
    ] = None,
) -> str:
    """The request's locale, with `?locale=` documented on the coach's operations."""
    return resolve_locale(request)


LocaleDep = Annotated[str, Depends(coach_locale)]


def coach_sessions(request: Request) -> SessionFactory:
    """Short transactions of their own, after the request's has ended (the app's unit of work)."""
    factory: SessionFactory = request.app.state.unit_of_work
    return factory


SessionFactoryDep = Annotated[SessionFactory, Depends(coach_sessions)]


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
async def ask_coach(
    request: Request,
    session: SessionDep,
    sessions: SessionFactoryDep,
    learner: CurrentLearner,
    locale: LocaleDep,
    body: CoachQuestion,
    accept: Annotated[str | None, Header(max_length=500)] = None,
) -> Any:
    """Ask the coach about a lesson, an exercise or one of your own submissions.

    It answers the question asked: why a submission failed (the `check_id` asked about first,
    the other failed checks a line each), what a line of your run means, a concept (the lesson's
    explanation, tied to your run when one is attached), or that the course does not cover it;
    it never writes the solution. Hints escalate per check (a nudge, then a pointer, then a fix
    of your own line) with each failed submission and each time you ask again about that check.
    The answer is in the language of the question when it is en, tr or pt-BR (else the page's,
    `?locale=`), named by `Content-Language`. A model that is slow or busy never keeps the answer
    waiting past its deadline: the built-in coach answers instead.
    """
    settings = request.app.state.settings
    # Counted as asked until answered (the hourly limit is atomic); the stream closes its own.
    ticket: Ticket | None = ASKING.begin(learner.id)
    try:

        def prepare() -> service.Prepared:
            prepared = service.prepare(
                session,
                user_id=learner.id,
                body=body,
                locale=locale,
                settings=settings,
                in_flight=ticket.earlier if ticket else 0,
            )
            # Nothing of the request's transaction or connection is held while the model
            # answers (on SQLite every transaction holds the write lock). What the answer needs
            # is in `prepared` (plain data); it is stored afterwards in a transaction of its own.
            session.commit()  # the connection goes back to the pool
            return prepared

        prepared = await run_in_threadpool(prepare)
        provider = service.provider_from(settings)
        headers = {"Content-Language": prepared.locale, "Cache-Control": "no-store"}
        slot_of(request).release()  # nor an admission slot held: others use it meanwhile
        if accept and EVENT_STREAM in accept:
            headers["X-Accel-Buffering"] = "no"
            stream = _events(request, sessions, learner.id, prepared, provider, ticket)
            ticket = None
            return StreamingResponse(stream, media_type=EVENT_STREAM, headers=headers)
        reply = await execution.answer(settings, prepared, provider)
        await execution.record(request, sessions, learner.id, prepared, reply)
        return JSONResponse(reply.public().model_dump(mode="json"), headers=headers)
    finally:
        if ticket is not None:
            ticket.done()


async def _events(
    request: Request,
    sessions: SessionFactory,
    user_id: uuid.UUID,
    prepared: service.Prepared,
    provider: ChatProvider | None,
    ticket: Ticket | None,
) -> AsyncIterator[str]:
    settings = request.app.state.settings
    try:
        async for kind, payload in execution.events(settings, prepared, provider):
            if kind == "done":  # stored (committed) before the ticket closes
                await execution.record(request, sessions, user_id, prepared, payload)
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
