"""Pages: the course and its lessons. Thin: the content service does the work."""

from __future__ import annotations

import contextlib
from itertools import pairwise
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup

from app.auth.deps import OptionalLearner
from app.content import service as content
from app.content.localized import LessonSummary, LocalizedLesson
from app.content.service import QuizVerdict
from app.content.shuffle import learner_seed, shuffled_for
from app.i18n import LOCALE_COOKIE, LocaleDep, normalize_locale, translate
from app.learning.standing import LessonStanding
from app.templating import render
from app.web.progress import CourseProgressDep, PageProgress, ProgressDep

router = APIRouter(include_in_schema=False)

# The lesson page's query parameters that show a quiz verdict (see `lesson_page`).
VERDICT_PARAMS = ("question", "choice")

LOCALE_COOKIE_MAX_AGE = 365 * 24 * 3600


@router.get("/", response_class=HTMLResponse)
def course_page(request: Request, locale: LocaleDep, progress: CourseProgressDep) -> Response:
    """The course: its lessons in order (with the learner's progress and where to go next), and
    the FAQ."""
    course = content.localized_course(locale)
    standings = progress or {}
    actions = {item.id: lesson_action(item.id, standings.get(item.id)) for item in course.lessons}
    return render(
        request,
        "web/course.html",
        locale=locale,
        course=course,
        standings=standings,
        actions=actions,
        primary=primary_lesson(course.lessons, actions),
    )


def primary_lesson(lessons: list[LessonSummary], actions: dict[str, tuple[str, str]]) -> str | None:
    """The lesson of the course page's one call to action: the first lesson in progress, else
    the first one not started; None when every lesson is done (or none can be shown)."""
    available = [item for item in lessons if item.available]
    for wanted in ("continue", "start"):
        for item in available:
            if actions[item.id][0] == wanted:
                return item.id
    return None


def lesson_action(lesson_id: str, standing: LessonStanding | None) -> tuple[str, str]:
    """The course page's link for one lesson: ("start" | "continue" | "review", href).

    Continue goes to the first card left to do in the lesson's sequence: a step not completed, a
    question not yet answered correctly, or an exercise not yet passed.
    """
    page = f"/lessons/{quote(lesson_id, safe='')}"
    if standing is None or standing.status == "new":
        return "start", page
    if standing.status == "done" or standing.next_card is None:
        return "review", f"{page}?step=1#steps"
    card_id = quote(standing.next_card_id or "", safe="")
    if standing.next_kind == "question":
        # The lesson page opens the card of `?question=`.
        return "continue", f"{page}?question={card_id}#quiz-{card_id}"
    if standing.next_kind == "exercise":
        return "continue", f"{page}?step={standing.next_card}#exercise-{card_id}"
    return "continue", f"{page}?step={standing.next_card}#steps"


def _lesson_response(
    request: Request,
    lesson_id: str,
    locale: str,
    progress: PageProgress | None,
    step: int | None,
    question: str | None,
    verdicts: dict[str, tuple[str, QuizVerdict]],
    seed: str,
) -> Response:
    try:
        lesson = shuffled_for(content.localized_lesson(lesson_id, locale), seed)
    except content.LessonUnavailable:
        message = translate(
            locale,
            "This lesson cannot be shown right now because its file has an error. "
            "The other lessons work; please try this one again later.",
        )
        return _error_page(request, locale, 503, message)
    except content.ContentNotFound:
        message = translate(locale, "There is no such lesson. Pick one from the course page.")
        return _error_page(request, locale, 404, message)
    # One sequence of cards in the author's order: steps, questions and exercises.
    cards = lesson_cards(lesson)
    position = {(card["kind"], card["id"]): card["index"] for card in cards}
    last_step = progress.last_step if progress is not None else None
    if step is None and question is not None and ("question", question) in position:
        step = position["question", question]
    if step is None and last_step is not None and ("step", last_step) in position:
        step = position["step", last_step]
    current = min(max(step or 1, 1), len(cards))

    def step_href(index: int) -> str:
        """This page at step `index`, keeping the other query parameters (e.g. ?locale=)."""
        query = {
            key: value
            for key, value in request.query_params.items()
            if key not in ("step", *VERDICT_PARAMS)
        }
        query["step"] = str(index)
        return f"/lessons/{lesson.id}?{urlencode(query)}"

    # Each question's form comes back to the question's card, in the locale the URL asked for.
    quiz_query: dict[str, str] = {}
    if "locale" in request.query_params:
        quiz_query["locale"] = request.query_params["locale"]
    return render(
        request,
        "web/lesson.html",
        step_href=step_href,
        quiz_query=urlencode(quiz_query),
        locale=locale,
        course=content.localized_course(locale),
        lesson=lesson,
        cards=cards,
        card_index=card_index(cards),
        exercises=[card["item"] for card in cards if card["kind"] == "exercise"],
        current_step=current,
        progress=progress,
        completed_steps=set(progress.completed_steps) if progress is not None else set(),
        verdicts=verdicts,
    )


def lesson_cards(lesson: LocalizedLesson) -> list[dict[str, Any]]:
    """The lesson's sequence as the page shows it: for each card its kind, id, 1-based `index`,
    the localized item (an exercise as templates/submissions/_exercise.html gets it, HTML marked
    safe), `number` (a question's number in the quick check, an exercise's among the exercises)
    and `next` (the card after it, or None)."""
    items: dict[str, dict[str, Any]] = {
        "step": {item.id: item for item in lesson.steps},
        "question": {item.id: item for item in lesson.quiz},
        "exercise": {
            item.slug: {**item.model_dump(), "prompt_html": Markup(item.prompt_html)}
            for item in lesson.exercises
        },
    }
    numbers: dict[str, int] = {}
    cards: list[dict[str, Any]] = []
    for index, card in enumerate(lesson.sequence, 1):
        numbers[card.kind] = numbers.get(card.kind, 0) + 1
        item = items[card.kind][card.id]
        cards.append(
            {
                "kind": card.kind,
                "id": card.id,
                "index": index,
                "item": item,
                "number": numbers[card.kind],
                "next": None,
            }
        )
    for shown, following in pairwise(cards):
        shown["next"] = following
    return cards


def card_index(cards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The page's list of the whole sequence: each step and exercise by its title, and each run
    of consecutive questions as one "Quick check" entry spanning its cards (`first`..`last`)."""
    entries: list[dict[str, Any]] = []
    for card in cards:
        previous = entries[-1] if entries else None
        if card["kind"] == "question" and previous and previous["kind"] == "question":
            previous["last"] = card["index"]
            continue
        entries.append(
            {"kind": card["kind"], "first": card["index"], "last": card["index"], "card": card}
        )
    return entries


@router.get("/lessons/{lesson_id}", response_class=HTMLResponse)
def lesson_page(
    request: Request,
    lesson_id: str,
    locale: LocaleDep,
    progress: ProgressDep,
    learner: OptionalLearner,
    step: int | None = None,
    question: Annotated[str | None, Query(max_length=100)] = None,
    choice: Annotated[str | None, Query(max_length=16)] = None,
) -> Response:
    """One lesson: a sequence of cards shown one at a time (`?step=N` is the Nth card), in the
    lesson's order (its `sequence`, else steps, quiz, exercises): steps, quick-check questions
    (`?question=<id>` opens that question's card) and exercises; then the next lesson.

    `?question=<id>&choice=<id>` shows the verdict on that answer: the quick check's form (no
    JavaScript) posts to the learning domain, which records the answer and redirects here. A
    signed-in learner also sees every answer saved in their progress, with its verdict. The
    choices come in the learner's own order, the one the API gives them (`content.shuffle`).
    """
    answers = dict(progress.quiz_answers) if progress is not None else {}
    if question and choice:
        answers[question] = choice  # the answer just sent wins over the saved one
    verdicts = _verdicts(lesson_id, answers, locale)
    seed = learner_seed(learner.id if learner else None)
    return _lesson_response(request, lesson_id, locale, progress, step, question, verdicts, seed)


def _verdicts(
    lesson_id: str, answers: dict[str, str], locale: str
) -> dict[str, tuple[str, QuizVerdict]]:
    """Each answer (question id -> choice) with its verdict against the lesson as it is now."""
    verdicts = {}
    for question_id, choice in answers.items():
        # A stale link (the question is gone): the page without a verdict for it.
        with contextlib.suppress(content.ContentNotFound):
            verdict = content.check_answer(lesson_id, question_id, choice, locale)
            verdicts[question_id] = (choice, verdict)
    return verdicts


def _safe_next(target: str | None) -> str:
    """Only a path on this site: never redirect a learner elsewhere."""
    if not target:
        return "/"
    target = target.replace("\\", "/")  # browsers read a backslash as a slash
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


def _without_locale(target: str) -> str:
    parts = urlsplit(target)
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(key, value) for key, value in query if key != "locale"]
    if len(kept) == len(query):
        return target
    return urlunsplit(parts._replace(query=urlencode(kept)))


@router.get("/locale/{code}")
def choose_locale(code: str, next: str | None = None) -> Response:
    """The language chooser: remember the choice in a cookie, then go back to the page, without
    its `?locale=` (which would win over the cookie)."""
    response = RedirectResponse(_without_locale(_safe_next(next)), status_code=303)
    locale = normalize_locale(code)
    if locale is not None:
        response.set_cookie(
            LOCALE_COOKIE, locale, max_age=LOCALE_COOKIE_MAX_AGE, samesite="lax", httponly=False
        )
    return response


def _error_page(request: Request, locale: str, status_code: int, message: str) -> Response:
    return render(
        request, "web/error.html", status_code=status_code, locale=locale, message=message
    )
