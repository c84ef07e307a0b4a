"""The learning API under /api/v1: the course, lessons in a locale, quiz answers, progress sync;
the quick check's plain form (no JavaScript)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Cookie, Depends, Form, Header, Path, Query, Response
from fastapi.responses import RedirectResponse

from app.auth.csrf import csrf_protect
from app.auth.deps import CurrentLearner, OptionalLearner
from app.content import service as content
from app.content.localized import LocalizedCourse, LocalizedLesson
from app.content.shuffle import learner_seed, shuffled_for
from app.db import SessionDep
from app.errors import AppError, error_responses
from app.i18n import LOCALE_COOKIE, SUPPORTED_LOCALES, LocaleDep, negotiate
from app.learning import service
from app.learning.schemas import (
    ProgressEventsIn,
    ProgressState,
    QuizAnswerIn,
    QuizVerdictPublic,
)

api_router = APIRouter(tags=["learning"])
router = APIRouter(include_in_schema=False)  # pages

LocaleQuery = Annotated[
    str | None,
    Query(
        max_length=35,
        description=", ".join(SUPPORTED_LOCALES)
        + "; wins over the language cookie `rdv_locale`, which wins over Accept-Language.",
    ),
]
LocaleCookie = Annotated[str | None, Cookie(alias=LOCALE_COOKIE, max_length=35)]
AcceptLanguage = Annotated[str | None, Header(max_length=500)]
IfNoneMatch = Annotated[
    str | None, Header(max_length=500, description="An ETag from an earlier answer.")
]
ContentIdPath = Annotated[str, Path(min_length=1, max_length=100)]

_CACHED: dict[int | str, dict[str, Any]] = {
    200: {
        "headers": {
            "ETag": {"schema": {"type": "string"}},
            "Content-Language": {"schema": {"type": "string"}},
        }
    },
    304: {"description": "Not modified: the ETag you sent is still current."},
}


def _not_found(what: str) -> AppError:
    return AppError("not_found", 404, f"There is no {what}. GET /api/v1/courses lists the lessons.")


def _conditional(
    response: Response,
    etag: str,
    locale: str,
    if_none_match: str | None,
    vary: str = "Accept-Language, Cookie",
) -> Response | None:
    """Sets the caching headers; returns a 304 when the client's copy is current."""
    headers = {"ETag": etag, "Content-Language": locale, "Vary": vary}
    if if_none_match is not None:
        sent = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
        if etag in sent or "*" in sent:
            return Response(status_code=304, headers=headers)
    response.headers.update(headers)
    return None


@api_router.get(
    "/courses",
    response_model=LocalizedCourse,
    responses={**_CACHED, **error_responses(422)},
)
def read_course(
    response: Response,
    locale: LocaleQuery = None,
    accept_language: AcceptLanguage = None,
    locale_cookie: LocaleCookie = None,
    if_none_match: IfNoneMatch = None,
) -> LocalizedCourse | Response:
    """The course with its lessons in order, in the requested locale."""
    served = negotiate(query=locale, cookie=locale_cookie, accept_language=accept_language)
    course = content.localized_course(served)
    return _conditional(response, course.etag, served, if_none_match) or course


@api_router.get(
    "/lessons/{lesson_id}",
    response_model=LocalizedLesson,
    responses={**_CACHED, **error_responses(401, 404, 422, 503)},
)
def read_lesson(
    response: Response,
    lesson_id: ContentIdPath,
    learner: OptionalLearner,
    locale: LocaleQuery = None,
    accept_language: AcceptLanguage = None,
    locale_cookie: LocaleCookie = None,
    if_none_match: IfNoneMatch = None,
) -> LocalizedLesson | Response:
    """Steps, quiz (without answers), exercises; `fallback_fields` lists what is in English.

    Each question's choices come in the caller's own order (stable for a learner, shared by
    visitors; the page shows the same); answers are checked by choice id, whatever the order.
    """
    served = negotiate(query=locale, cookie=locale_cookie, accept_language=accept_language)
    try:
        lesson = content.localized_lesson(lesson_id, served)
    except content.LessonUnavailable as exc:
        raise AppError(
            "lesson_unavailable",
            503,
            "This lesson's file has an error, so it cannot be shown right now. The other lessons "
            "work; try this one again later.",
            headers={"Retry-After": "300"},
        ) from exc
    except content.ContentNotFound as exc:
        raise _not_found(f"lesson {lesson_id!r}") from exc
    lesson = shuffled_for(lesson, learner_seed(learner.id if learner else None))
    # The choices' order depends on who asks: caches must key on the credentials too.
    vary = "Accept-Language, Authorization, Cookie"
    return _conditional(response, lesson.etag, served, if_none_match, vary) or lesson


@api_router.post(
    "/quiz/{lesson_id}/{question_id}",
    response_model=QuizVerdictPublic,
    responses=error_responses(401, 403, 404, 422),
)
def answer_quiz(
    lesson_id: ContentIdPath,
    question_id: ContentIdPath,
    body: QuizAnswerIn,
    session: SessionDep,
    learner: OptionalLearner,
    locale: LocaleQuery = None,
    accept_language: AcceptLanguage = None,
    locale_cookie: LocaleCookie = None,
) -> QuizVerdictPublic:
    """Whether `choice` is right, with the explanation; saved to progress when signed in."""
    served = negotiate(query=locale, cookie=locale_cookie, accept_language=accept_language)
    try:
        verdict = content.check_answer(lesson_id, question_id, body.choice, served)
    except content.ContentNotFound as exc:
        raise _not_found(f"question {question_id!r} in lesson {lesson_id!r}") from exc
    recorded = False
    if learner is not None:
        rejected = service.record_quiz_answer(
            session, learner.id, lesson_id, question_id, body.choice, served
        )
        recorded = not rejected
    return QuizVerdictPublic(
        correct=verdict.correct,
        explanation=verdict.explanation,
        explanation_html=str(verdict.explanation_html),
        recorded=recorded,
    )


@router.post("/lessons/{lesson_id}/quiz/{question_id}")
def answer_quiz_form(
    lesson_id: ContentIdPath,
    question_id: ContentIdPath,
    session: SessionDep,
    learner: OptionalLearner,
    _csrf: Annotated[None, Depends(csrf_protect)],
    interface: LocaleDep,
    choice: Annotated[str, Form(max_length=16)] = "",
    step: Annotated[int | None, Query(ge=1, le=1000)] = None,
    locale: Annotated[str | None, Query(max_length=35)] = None,
) -> Response:
    """The quick check without JavaScript: record the answer like the API does (when signed
    in), then back to the lesson page at the same step, which shows the verdict."""
    query: dict[str, str | int] = {"step": step} if step is not None else {}
    if locale is not None:
        query["locale"] = locale
    target = f"/lessons/{quote(lesson_id, safe='')}"
    try:
        content.check_answer(lesson_id, question_id, choice)  # as the API: real questions only
    except content.ContentNotFound:
        choice = ""  # back to the page (or its 404) without a verdict
    if choice:
        if learner is not None:
            service.record_quiz_answer(
                session, learner.id, lesson_id, question_id, choice, interface
            )
        query.update(question=question_id, choice=choice)
    if query:
        target += f"?{urlencode(query)}"
    if choice:
        target += f"#quiz-{quote(question_id, safe='')}"
    return RedirectResponse(target, status_code=303)


@api_router.post(
    "/progress/events",
    response_model=ProgressState,
    responses=error_responses(401, 403, 422),
)
def sync_progress(
    body: ProgressEventsIn, learner: CurrentLearner, session: SessionDep, locale: LocaleDep
) -> ProgressState:
    """Send events (each once or many times: duplicates change nothing); get the merged state."""
    return service.sync(session, learner.id, body.events, since=body.since, locale=locale)


@api_router.get("/progress", response_model=ProgressState, responses=error_responses(401, 422))
def read_progress(
    learner: CurrentLearner,
    session: SessionDep,
    since: Annotated[int | None, Query(ge=0, description="The cursor from your last sync.")] = None,
) -> ProgressState:
    """Your merged progress: every lesson, or only lessons changed since the cursor."""
    return service.changes_since(session, learner.id, since)
