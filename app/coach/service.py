"""The coach's logic: check the request, gather the run's evidence and the lesson steps, answer
with the model when one is configured (falling back to the built-in coach on any failure), and
keep every question and answer in the learner's history. No FastAPI imports.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.coach import repository
from app.coach.builtin import N_, Answer, BuiltinCoach, source_of
from app.coach.evidence import RunEvidence, gather
from app.coach.guard import leaked_lines, telling_solution_lines
from app.coach.index import StepHit, get_index
from app.coach.llm import ChatProvider, ProviderFailed
from app.coach.models import CoachExchange
from app.coach.prompt import build_messages
from app.coach.schemas import CoachAnswer, CoachQuestion, Provider, Source
from app.config import Settings
from app.content import service as content
from app.content.markdown import render_markdown
from app.errors import AppError
from app.i18n import translate
from app.submissions import repository as submissions
from app.submissions.models import Submission
from grader.contract import Result

log = logging.getLogger(__name__)

RATE_WINDOW = timedelta(hours=1)
MAX_RETRIEVED_STEPS = 4


@dataclass(frozen=True)
class Reply:
    answer: str
    sources: list[Source]
    provider: Provider

    def public(self) -> CoachAnswer:
        return CoachAnswer(
            answer=self.answer,
            answer_html=str(render_markdown(self.answer)),
            sources=self.sources,
            provider=self.provider,
        )


@dataclass
class Prepared:
    """A checked question with everything an answer may draw on."""

    body: CoachQuestion
    locale: str
    exercise: str | None
    code: str | None
    run: RunEvidence | None
    steps: list[StepHit]
    builtin: Answer
    telling: set[str] = field(default_factory=set)
    # The checks the asked-about submission failed: [{"id", "title" (English)}]
    failed_checks: list[dict[str, str]] = field(default_factory=list)


def provider_from(settings: Settings) -> ChatProvider | None:
    if not settings.coach_url:
        return None
    return ChatProvider(
        base_url=settings.coach_url,
        model=settings.coach_model,
        api_key=settings.coach_api_key,
        timeout_s=settings.coach_timeout_seconds,
    )


def _error(locale: str, status: int, code: str, message: str, **params: Any) -> AppError:
    return AppError(code, status, translate(locale, message).format(**params))


def _exercise_not_found(locale: str, exercise_id: str) -> AppError:
    return _error(
        locale,
        404,
        "exercise_not_found",
        N_("There is no exercise called “{exercise}” in this lesson. Check its id and try again."),
        exercise=exercise_id,
    )


def check_rate(
    session: Session,
    *,
    user_id: uuid.UUID,
    limit: int,
    locale: str,
    now: datetime,
    in_flight: int = 0,
) -> None:
    """At most `limit` questions per learner in any hour, the `in_flight` ones being answered
    (app/coach/asking.py) counted as asked; 429 with Retry-After beyond."""
    asked = repository.asked_since(session, user_id=user_id, since=now - RATE_WINDOW)
    if len(asked) + in_flight < limit:
        return
    oldest = len(asked) + in_flight - limit
    frees_at = (_aware(asked[oldest]) if oldest < len(asked) else now) + RATE_WINDOW
    wait = max(1, math.ceil((frees_at - now).total_seconds()))
    error = _error(
        locale,
        429,
        "rate_limited",
        N_(
            "You have asked the coach {limit} questions in the last hour, the most there may "
            "be. Ask again in {minutes} minutes; meanwhile the lesson steps and your results "
            "are still here."
        ),
        limit=limit,
        minutes=max(1, math.ceil(wait / 60)),
    )
    error.headers = {"Retry-After": str(wait)}
    raise error


def _aware(moment: datetime) -> datetime:
    """SQLite gives back naive datetimes; they were stored in UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def prepare(
    session: Session,
    *,
    user_id: uuid.UUID,
    body: CoachQuestion,
    locale: str,
    settings: Settings,
    now: datetime | None = None,
    in_flight: int = 0,
) -> Prepared:
    """Check the request (404s, rate limit) and gather what the answer may draw on."""
    now = now or datetime.now(UTC)
    try:
        lesson = content.localized_lesson(body.lesson_id, locale)
    except content.LessonUnavailable as exc:
        error = _error(
            locale,
            503,
            "lesson_unavailable",
            N_(
                "This lesson cannot be shown right now because its file has an error. "
                "The other lessons work; please try this one again later."
            ),
        )
        error.headers = {"Retry-After": "300"}
        raise error from exc
    except content.ContentNotFound as exc:
        raise _error(
            locale,
            404,
            "lesson_not_found",
            N_("There is no lesson called “{lesson}”. Check its id and try again."),
            lesson=body.lesson_id,
        ) from exc
    if body.step_id is not None and body.step_id not in {step.id for step in lesson.steps}:
        raise _error(
            locale,
            404,
            "step_not_found",
            N_("The lesson has no step called “{step}”. Check its id and try again."),
            step=body.step_id,
        )
    submission = None
    if body.submission_id is not None:
        submission = submissions.get_for_user(
            session, user_id=user_id, submission_id=body.submission_id
        )
        if submission is None:
            raise _error(
                locale,
                404,
                "submission_not_found",
                N_(
                    "There is no submission with this id among yours. "
                    "Check the link, or submit again."
                ),
            )
    exercise_id = body.exercise or (submission.exercise if submission else None)
    if exercise_id is not None and (
        not exercise_id.startswith(body.lesson_id + "/")
        or (submission is not None and submission.exercise != exercise_id)
    ):
        raise _exercise_not_found(locale, exercise_id)
    check_rate(
        session,
        user_id=user_id,
        limit=settings.coach_questions_per_hour,
        locale=locale,
        now=now,
        in_flight=in_flight,
    )
    return _gather(session, body, locale, exercise_id, submission)


def _gather(
    session: Session,
    body: CoachQuestion,
    locale: str,
    exercise_id: str | None,
    submission: Submission | None,
) -> Prepared:
    index = get_index()
    coach = BuiltinCoach(index, locale)
    info = None
    if exercise_id is not None:
        try:
            info = content.get_exercise(exercise_id)
        except content.ContentNotFound as exc:
            raise _exercise_not_found(locale, exercise_id) from exc
    run = None
    code = submission.code if submission is not None else None
    if submission is not None and submission.result is not None and info is not None:
        source = content.get_catalog().lessons[body.lesson_id]
        exercise = next(item for item in source.lesson.exercises if item.id == info.slug)
        run = gather(
            exercise_id=info.id,
            exercise=exercise,
            code=submission.code,
            result=Result.model_validate(submission.result),
            failed_attempts=repository.failed_attempts(session, submission=submission),
            locale=locale,
        )
    if run is not None:
        builtin = coach.explain_run(run, body.question)
    elif submission is not None:
        builtin = coach.answer_question(body.question, body.lesson_id)
        pending = coach.t(
            N_("This submission is still being graded: ask again when its result is in.")
        )
        builtin.markdown = f"{pending}\n\n{builtin.markdown}"
    else:
        builtin = coach.answer_question(body.question, body.lesson_id)
    steps = index.search(body.question, locale, lesson_id=body.lesson_id, limit=MAX_RETRIEVED_STEPS)
    cited = {(hit.lesson_id, hit.step_id) for hit in steps}
    by_id = {hit.step_id: hit for hit in index.steps_of(body.lesson_id, locale)}
    for cited_source in builtin.sources:
        step_hit = by_id.get(cited_source.step_id)
        if step_hit is not None and (step_hit.lesson_id, step_hit.step_id) not in cited:
            steps.append(step_hit)
            cited.add((step_hit.lesson_id, step_hit.step_id))
    telling = (
        telling_solution_lines(info.solution_path, info.starter_code, code or "")
        if info is not None
        else set()
    )
    return Prepared(
        body, locale, exercise_id, code, run, steps, builtin, telling, _failed_checks(submission)
    )


def _failed_checks(submission: Submission | None) -> list[dict[str, str]]:
    result = submission.result if submission is not None else None
    checks = (result or {}).get("checks") or []
    return [
        {"id": str(check["id"]), "title": str(check.get("title") or check["id"])}
        for check in checks
        if check.get("status") == "fail"
    ]


def builtin_reply(prepared: Prepared) -> Reply:
    return Reply(prepared.builtin.markdown, prepared.builtin.sources, "builtin")


def _messages(prepared: Prepared) -> list[dict[str, str]]:
    return build_messages(
        question=prepared.body.question,
        locale=prepared.locale,
        code=prepared.code,
        run=prepared.run,
        steps=prepared.steps,
    )


def _model_reply(prepared: Prepared, text: str) -> Reply:
    """The model's answer with its sources listed; ProviderFailed if it gives the solution away."""
    leaked = leaked_lines(text, prepared.telling)
    if leaked:
        raise ProviderFailed(f"the answer holds {len(leaked)} line(s) of the solution file")
    sources = [source_of(step) for step in prepared.steps]
    cited = [s for n, s in enumerate(sources, start=1) if f"[{n}]" in text] or sources
    if cited:
        heading = translate(prepared.locale, N_("Sources"))
        listed = "\n".join(f"- [{source.title}]({source.url})" for source in cited)
        text = f"{text.strip()}\n\n**{heading}:**\n\n{listed}"
    return Reply(text, cited, "llm")


def answer(prepared: Prepared, provider: ChatProvider | None) -> Reply:
    """The model's answer when one is configured and gives a good one; else the built-in's."""
    if provider is None:
        return builtin_reply(prepared)
    try:
        return _model_reply(prepared, provider.complete(_messages(prepared)))
    except ProviderFailed as exc:
        log.warning("coach model failed, the built-in coach answers: %s", exc)
    except Exception:  # a bug in a client library must not cost the learner an answer either
        log.exception("coach model call broke, the built-in coach answers")
    return builtin_reply(prepared)


def stream(prepared: Prepared, provider: ChatProvider | None) -> Iterator[tuple[str, Any]]:
    """("delta", text) for each checked line as the model writes it, then ("done", Reply).

    A line is shown only once it is complete and holds no solution line; if the model fails or
    leaks part-way, ("reset", None) tells the page to drop what it showed, and the built-in
    coach's answer follows as "done".
    """
    if provider is None:
        yield "done", builtin_reply(prepared)
        return
    written = ""
    shown = 0
    try:
        for piece in provider.stream(_messages(prepared)):
            written += piece
            complete = written.rfind("\n") + 1
            if complete > shown:
                if leaked_lines(written[:complete], prepared.telling):
                    raise ProviderFailed("the answer holds a line of the solution file")
                yield "delta", written[shown:complete]
                shown = complete
        reply = _model_reply(prepared, written)
    except Exception as exc:  # ProviderFailed, or a bug in a client library: never a 500
        log.warning("coach model failed mid-stream, the built-in coach answers: %r", exc)
        if shown:
            yield "reset", None
        reply = builtin_reply(prepared)
    if len(written) > shown and reply.provider == "llm":
        yield "delta", written[shown:]
    yield "done", reply


def record(
    session: Session, *, user_id: uuid.UUID, prepared: Prepared, reply: Reply
) -> CoachExchange:
    body = prepared.body
    return repository.add(
        session,
        CoachExchange(
            user_id=user_id,
            lesson_id=body.lesson_id,
            step_id=body.step_id,
            exercise=prepared.exercise,
            submission_id=body.submission_id,
            # Only a check the submission failed: the view counts "Why did this fail?" per check.
            check_id=body.check_id
            if any(check["id"] == body.check_id for check in prepared.failed_checks)
            else None,
            failed_checks=prepared.failed_checks,
            locale=prepared.locale,
            question=body.question,
            answer=reply.answer,
            sources=[source.model_dump() for source in reply.sources],
            provider=reply.provider,
        ),
    )


def history(
    session: Session, *, user_id: uuid.UUID, lesson_id: str | None, limit: int
) -> list[CoachExchange]:
    return list(repository.history(session, user_id=user_id, lesson_id=lesson_id, limit=limit))
