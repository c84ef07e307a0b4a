"""The coach's logic: check the request, understand the question (its kind and its language),
gather the run's evidence and the lesson steps, and keep every question and answer in the
learner's history. The answer itself comes from app/coach/replies.py. No FastAPI imports.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.coach import repository
from app.coach.builtin import N_, Answer, BuiltinCoach
from app.coach.evidence import RunEvidence, gather
from app.coach.guard import SolutionGuard
from app.coach.index import StepHit, StepIndex, get_index
from app.coach.intent import ABOUT_A_CHECK, Intent, classify, from_button
from app.coach.language import detect, fold
from app.coach.levels import Level, asks_about, level_for
from app.coach.llm import ChatProvider
from app.coach.models import CoachExchange
from app.coach.schemas import CoachQuestion
from app.config import Settings
from app.content import service as content
from app.errors import AppError
from app.i18n import SUPPORTED_LOCALES, locale_name, translate
from app.submissions import repository as submissions
from app.submissions.models import Submission
from grader.contract import Result

RATE_WINDOW = timedelta(hours=1)
MAX_RETRIEVED_STEPS = 4


# What each button of the result page asks, kept in the history when it sends no text.
BUTTON_QUESTIONS = {
    "why_failed": N_("Why did this fail?"),
    "hint": N_("A hint on this check, please."),
    "still_stuck": N_("I am still stuck on this check."),
}


# The languages' names, in the language of the answer (a locale missing here: its own name).
LANGUAGE_NAMES = {"en": N_("English"), "tr": N_("Turkish"), "pt-BR": N_("Portuguese")}


def _language_name(of: str, *, said_in: str) -> str:
    name = LANGUAGE_NAMES.get(of)
    return translate(said_in, name) if name is not None else locale_name(of)


@dataclass
class Prepared:
    """A checked question with everything an answer may draw on (plain data: no ORM object, so
    the database session can be closed while the model answers)."""

    body: CoachQuestion
    locale: str  # the answer's: the question's language when it is one of ours, else the page's
    exercise: str | None
    code: str | None
    run: RunEvidence | None
    steps: list[StepHit]  # for the model, each with its text; the failed check's step first
    builtin: Answer
    guard: SolutionGuard | None = None
    # The checks the asked-about submission failed: [{"id", "title" (English)}]
    failed_checks: list[dict[str, str]] = field(default_factory=list)
    intent: Intent = field(default_factory=lambda: Intent("other"))
    focus: str | None = None  # the failed check the answer leads with
    question: str = ""  # what was asked: the typed text, or the button's question
    about_check: str | None = None  # the failed check a question about a failure was about
    other_guards: list[SolutionGuard] = field(default_factory=list)  # no exercise: all of them


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


def _understood(body: CoachQuestion, page_locale: str) -> tuple[str, str, Intent]:
    """The question's text, the answer's locale and what is asked: a button says what it asks
    (its text is not re-read); typed text is classified in the language it is written in."""
    if body.intent is not None:
        question = body.question or translate(page_locale, BUTTON_QUESTIONS[body.intent])
        return question, page_locale, from_button(body.intent)
    question = body.question or ""
    written_in = detect(question)
    locale = written_in if written_in in SUPPORTED_LOCALES else page_locale
    return question, locale, classify(question, written_in)


def _gather(
    session: Session,
    body: CoachQuestion,
    page_locale: str,
    exercise_id: str | None,
    submission: Submission | None,
) -> Prepared:
    question, locale, intent = _understood(body, page_locale)
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
    failed = _failed_checks(submission)
    named = body.check_id or _named_check(question, submission)
    focus = _focus(named, failed)
    about_check = None
    if submission is not None and submission.result is not None and info is not None:
        source = content.get_catalog().lessons[body.lesson_id]
        exercise = next(item for item in source.lesson.exercises if item.id == info.slug)
        levels, asked = _levels(session, submission, failed, focus, intent)
        run = gather(
            exercise_id=info.id,
            exercise=exercise,
            code=submission.code,
            result=Result.model_validate(submission.result),
            failed_attempts=repository.failed_attempts(session, submission=submission),
            locale=locale,
            levels=levels,
            asked=asked,
        )
        if intent.kind in ABOUT_A_CHECK and (named is None or named == focus):
            about_check = focus
    if run is not None:
        builtin = coach.about_run(run, intent, question, focus, asked_check=named)
    elif submission is not None:
        builtin = coach.answer_question(intent, question, body.lesson_id)
        pending = coach.t(
            N_("This submission is still being graded: ask again when its result is in.")
        )
        builtin.markdown = f"{pending}\n\n{builtin.markdown}"
    else:
        builtin = coach.answer_question(intent, question, body.lesson_id)
    if locale != page_locale:
        builtin.markdown = f"{_language_note(locale, page_locale)}\n\n{builtin.markdown}"
    steps = _steps_for_model(index, body.lesson_id, question, locale, run, focus, builtin)
    public = public_text(index, locale, info)
    guard = (
        SolutionGuard.for_exercise(info.solution_path, info.starter_code, code or "", public)
        if info is not None
        else None
    )
    # Asked without an exercise: the answer is judged against every exercise's solution.
    others = [] if info is not None else course_guards(locale)
    return Prepared(
        body=body,
        locale=locale,
        exercise=exercise_id,
        code=code,
        run=run,
        steps=steps,
        builtin=builtin,
        guard=guard,
        failed_checks=failed,
        intent=intent,
        focus=focus,
        question=question,
        about_check=about_check,
        other_guards=others,
    )


def _named_check(question: str, submission: Submission | None) -> str | None:
    """A check of the submission's run that the typed question names by its id or its title."""
    checks = ((submission.result if submission is not None else None) or {}).get("checks") or []
    folded = fold(question)
    for check in checks:
        check_id = str(check.get("id") or "")
        title = fold(str(check.get("title") or ""))
        if (check_id and check_id in folded) or (len(title) > 12 and title in folded):
            return check_id
    return None


def _focus(check_id: str | None, failed: list[dict[str, str]]) -> str | None:
    """The check the answer leads with: the asked one if it failed, else the first failed."""
    ids = [check["id"] for check in failed]
    if check_id in ids:
        return check_id
    return ids[0] if ids else None


def _levels(
    session: Session,
    submission: Submission,
    failed: list[dict[str, str]],
    focus: str | None,
    intent: Intent,
) -> tuple[dict[str, Level], dict[str, int]]:
    """Each failed check's level and how often it was asked about before, on this submission;
    a question about a failure of the focused check moves that check on (app/coach/levels.py)."""
    asked = repository.asked_about(session, submission_id=submission.id)
    levels = {}
    counts = {}
    for check in failed:
        check_id = check["id"]
        before = asks_about(asked, check_id)
        counts[check_id] = before
        moves = check_id == focus and intent.kind in ABOUT_A_CHECK
        levels[check_id] = level_for(
            before if moves else max(before - 1, 0),
            still_stuck=moves and intent.kind == "still_stuck",
            wants_answer=moves and intent.kind == "give_answer",
        )
    return levels, counts


def _language_note(locale: str, page_locale: str) -> str:
    return translate(
        locale, N_("You asked in {language}, so the coach answers in it (the page is in {page}).")
    ).format(
        language=_language_name(locale, said_in=locale),
        page=_language_name(page_locale, said_in=locale),
    )


def _steps_for_model(
    index: StepIndex,
    lesson_id: str,
    question: str,
    locale: str,
    run: RunEvidence | None,
    focus: str | None,
    builtin: Answer,
) -> list[StepHit]:
    """The steps the model may cite: the failed check's own step first, with its text, then the
    built-in answer's sources and the best hits of the question, each with its text."""
    by_id = {hit.step_id: hit for hit in index.steps_of(lesson_id, locale)}
    ordered: list[StepHit] = []
    if run is not None:
        check = next((item for item in run.failed if item.id == focus), None)
        if check is not None and check.levels is not None and check.levels.step in by_id:
            ordered.append(by_id[check.levels.step])
    ordered += [by_id[source.step_id] for source in builtin.sources if source.step_id in by_id]
    ordered += index.search(question, locale, lesson_id=lesson_id, limit=3)
    unique: dict[tuple[str, str], StepHit] = {}
    for hit in ordered:
        unique.setdefault((hit.lesson_id, hit.step_id), hit)
    return [
        replace(hit, excerpt=index.text_of(hit.lesson_id, hit.step_id, locale))
        for hit in list(unique.values())[:MAX_RETRIEVED_STEPS]
    ]


_COURSE_GUARDS: dict[tuple[int, str], list[SolutionGuard]] = {}


def course_guards(locale: str) -> list[SolutionGuard]:
    """A guard for every exercise of the course (its solution against what is public), built
    once per catalog and locale."""
    catalog = content.get_catalog()
    key = (id(catalog), locale)
    if key not in _COURSE_GUARDS:
        index = get_index()
        guards = []
        for loaded in catalog.ordered:
            for exercise in loaded.lesson.exercises:
                info = content.get_exercise(f"{loaded.id}/{exercise.id}")
                public = public_text(index, locale, info)
                guard = SolutionGuard.for_exercise(
                    info.solution_path, info.starter_code, "", public
                )
                if guard is not None:
                    guards.append(guard)
        for stale in [old for old in _COURSE_GUARDS if old[0] != key[0]]:
            del _COURSE_GUARDS[stale]  # an older catalog's
        _COURSE_GUARDS[key] = guards
    return _COURSE_GUARDS[key]


def public_text(index: StepIndex, locale: str, info: content.ExerciseInfo | None) -> str:
    """What the learner can already read: the exercise's prompt and its lesson's steps."""
    if info is None:
        return ""
    lesson_id = info.lesson_id
    steps = [
        index.text_of(lesson_id, hit.step_id, loc)
        for loc in SUPPORTED_LOCALES
        for hit in index.steps_of(lesson_id, loc)
    ]
    codes = [step.code or "" for step in content.get_catalog().lessons[lesson_id].lesson.steps]
    prompts = [info.prompt.get(loc) or "" for loc in SUPPORTED_LOCALES]
    return "\n".join([*prompts, *steps, *codes])


def _failed_checks(submission: Submission | None) -> list[dict[str, str]]:
    result = submission.result if submission is not None else None
    checks = (result or {}).get("checks") or []
    return [
        {"id": str(check["id"]), "title": str(check.get("title") or check["id"])}
        for check in checks
        if check.get("status") == "fail"
    ]


def record(
    session: Session, *, user_id: uuid.UUID, prepared: Prepared, reply: Any
) -> CoachExchange:
    """Store the exchange (`reply`: a replies.Reply)."""
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
            about_check=prepared.about_check,
            locale=prepared.locale,
            question=prepared.question,
            answer=reply.answer,
            sources=[source.model_dump() for source in reply.sources],
            provider=reply.provider,
        ),
    )


def history(
    session: Session, *, user_id: uuid.UUID, lesson_id: str | None, limit: int
) -> list[CoachExchange]:
    return list(repository.history(session, user_id=user_id, lesson_id=lesson_id, limit=limit))
