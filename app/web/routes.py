"""Pages: the course and its lessons. Thin: the content service does the work."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup

from app.content import service as content
from app.content.service import QuizVerdict
from app.i18n import LOCALE_COOKIE, LocaleDep, normalize_locale, translate
from app.web.progress import ProgressDep
from app.web.templating import render

router = APIRouter(include_in_schema=False)

LOCALE_COOKIE_MAX_AGE = 365 * 24 * 3600


@router.get("/", response_class=HTMLResponse)
def course_page(request: Request, locale: LocaleDep) -> Response:
    """The course: its lessons in order, and the FAQ."""
    course = content.localized_course(locale)
    return render(request, "web/course.html", locale=locale, course=course)


def _lesson_response(
    request: Request,
    lesson_id: str,
    locale: str,
    progress: object,
    step: int | None,
    verdicts: dict[str, tuple[str, QuizVerdict]] | None = None,
) -> Response:
    try:
        lesson = content.localized_lesson(lesson_id, locale)
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
    step_ids = [item.id for item in lesson.steps]
    last_step = getattr(progress, "last_step", None)
    if step is None and last_step in step_ids:
        step = step_ids.index(last_step) + 1
    current = min(max(step or 1, 1), len(step_ids))

    def step_href(index: int) -> str:
        """This page at step `index`, keeping the other query parameters (e.g. ?locale=)."""
        query = {key: value for key, value in request.query_params.items() if key != "step"}
        query["step"] = str(index)
        return f"/lessons/{lesson.id}?{urlencode(query)}"

    return render(
        request,
        "web/lesson.html",
        step_href=step_href,
        locale=locale,
        course=content.localized_course(locale),
        lesson=lesson,
        # What templates/submissions/_exercise.html gets as `exercise` (HTML marked safe).
        exercises=[
            {**exercise.model_dump(), "prompt_html": Markup(exercise.prompt_html)}
            for exercise in lesson.exercises
        ],
        current_step=current,
        progress=progress,
        completed_steps=set(getattr(progress, "completed_steps", None) or ()),
        verdicts=verdicts or {},
    )


@router.get("/lessons/{lesson_id}", response_class=HTMLResponse)
def lesson_page(
    request: Request,
    lesson_id: str,
    locale: LocaleDep,
    progress: ProgressDep,
    step: int | None = None,
) -> Response:
    """One lesson: step cards one at a time (`?step=N`), the quick check, the exercises."""
    return _lesson_response(request, lesson_id, locale, progress, step)


@router.post("/lessons/{lesson_id}/quiz/{question_id}", response_class=HTMLResponse)
def quiz_answer_page(
    request: Request,
    lesson_id: str,
    question_id: str,
    locale: LocaleDep,
    progress: ProgressDep,
    choice: Annotated[str, Form()] = "",
    step: int | None = None,
) -> Response:
    """The quick check without JavaScript: the lesson page again, with the verdict shown."""
    verdicts = {}
    try:
        verdict = content.check_answer(lesson_id, question_id, choice, locale)
    except content.ContentNotFound:
        pass
    else:
        if choice:
            verdicts[question_id] = (choice, verdict)
    return _lesson_response(request, lesson_id, locale, progress, step, verdicts)


def _safe_next(target: str | None) -> str:
    """Only a path on this site: never redirect a learner elsewhere."""
    if not target:
        return "/"
    target = target.replace("\\", "/")  # browsers read a backslash as a slash
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


@router.get("/locale/{code}")
def choose_locale(code: str, next: str | None = None) -> Response:
    """The language chooser: remember the choice in a cookie, then go back to the page."""
    response = RedirectResponse(_safe_next(next), status_code=303)
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
