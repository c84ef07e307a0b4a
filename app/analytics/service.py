"""The instructors' analytics for one lesson: the drop-off along its sequence, each quiz
question's answers and distractors, and each exercise's funnel and the checks that stop it.

Figures come grouped from the database (`repository`); this module puts them in the lesson's
order (from the content service, keyed by step, question and exercise ids), computes the
medians, and hides every count of fewer than `min_cohort` learners (but some) so no small
group of learners can be singled out. No FastAPI imports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime, time
from functools import cache
from typing import Any

from sqlalchemy.orm import Session

from app.analytics import repository
from app.analytics.consumer import figures_as_of
from app.analytics.models import ALL
from app.analytics.repository import Window
from app.analytics.schemas import (
    AnalyticsReport,
    CheckFigures,
    ChoiceFigures,
    Count,
    ExerciseFigures,
    QuestionFigures,
    SequenceItem,
    StepFigures,
)
from app.content import service as content
from app.content.localized import LocalizedLesson
from app.db import as_utc, utcnow
from app.errors import N_
from app.i18n import translate
from grader.i18n import render

NO_FAILED_CHECK = N_("Failed without a failed check (crash before any check could judge)")


def cohort(learners: int, min_cohort: int) -> Count:
    """The count, or None when it names fewer than `min_cohort` learners (but some)."""
    return None if 0 < learners < min_cohort else learners


def sequence(lesson: LocalizedLesson) -> list[SequenceItem]:
    """The lesson's steps, questions and exercises, in the order the lesson shows them (its
    `sequence`, which an author may interleave)."""
    items = {
        **{("step", s.id): SequenceItem(kind="step", id=s.id, title=s.title) for s in lesson.steps},
        **{
            ("question", q.id): SequenceItem(kind="question", id=q.id, title=q.question)
            for q in lesson.quiz
        },
        **{
            ("exercise", e.slug): SequenceItem(kind="exercise", id=e.id, title=e.title)
            for e in lesson.exercises
        },
    }
    return [items[(card.kind, card.id)] for card in lesson.sequence]


def report(
    session: Session,
    *,
    lesson_id: str,
    locale: str,
    min_cohort: int,
    since: datetime | None = None,
    until: datetime | None = None,
    by_locale: bool = False,
) -> AnalyticsReport:
    """Raises content.ContentNotFound for a lesson that does not exist (or is broken).
    `since` and `until` bound [since, until) and must be midnights UTC: the figures count
    whole UTC days."""
    lesson = content.localized_lesson(lesson_id, locale)
    repository.tune(session)
    window = Window(
        lesson_id=lesson_id,
        exercises=tuple(exercise.id for exercise in lesson.exercises),
        since=whole_day(since),
        until=whole_day(until),
        by_locale=by_locale,
    )
    return AnalyticsReport(
        lesson_id=lesson.id,
        lesson_title=lesson.title,
        since=since,
        until=until,
        by_locale=by_locale,
        min_cohort=min_cohort,
        sequence=sequence(lesson),
        steps=_steps(session, window, lesson, min_cohort),
        questions=_questions(session, window, lesson, min_cohort),
        exercises=_exercises(session, window, lesson, locale, min_cohort),
        lag_seconds=_lag_seconds(session),
    )


def _lag_seconds(session: Session) -> float:
    """Seconds since the oldest domain event not yet applied was recorded (0: none is left)."""
    oldest = figures_as_of(session)
    return 0.0 if oldest is None else max(0.0, (utcnow() - oldest).total_seconds())


Query = Callable[[Session, Window], Sequence[Any]]


def whole_day(moment: datetime | None) -> date | None:
    """The UTC day that starts at `moment`: the analytics count whole days (their rollups are
    per day), so a bound must be a midnight UTC."""
    if moment is None:
        return None
    day = as_utc(moment)
    if day.time() != time():
        raise ValueError(f"the analytics count whole UTC days: {moment} is not a midnight UTC")
    return day.date()


def _fetch(session: Session, window: Window, query: Query) -> list[tuple[str | None, list[Any]]]:
    """(None, the totals' rows), then, split by locale, (locale, its rows) for each locale
    present, from one query: the totals are the rollups' own ALL rows (a learner who changed
    language counts once in each locale, and once in the totals)."""
    rows = query(session, window)
    parts: list[tuple[str | None, list[Any]]] = [(None, [row for row in rows if row.locale == ALL])]
    for locale in sorted({row.locale for row in rows} - {ALL}):
        parts.append((locale, [row for row in rows if row.locale == locale]))
    return parts


def _by_key(rows: Iterable[Any], *keys: str) -> dict[Any, Any]:
    return {tuple(getattr(row, key) for key in keys): row for row in rows}


def _count(row: Any, name: str, k: int) -> Count:
    return cohort(int(getattr(row, name) or 0) if row is not None else 0, k)


def _steps(session: Session, window: Window, lesson: LocalizedLesson, k: int) -> list[StepFigures]:
    figures = []
    for locale, rows in _fetch(session, window, repository.step_counts):
        found = _by_key(rows, "step_id")
        for step in lesson.steps:
            row = found.get((step.id,))
            figures.append(
                StepFigures(
                    step_id=step.id,
                    title=step.title,
                    locale=locale,
                    reached=_count(row, "learners", k),
                    completed=_count(row, "completed", k),
                )
            )
    return figures


def _questions(
    session: Session, window: Window, lesson: LocalizedLesson, k: int
) -> list[QuestionFigures]:
    right = _right_answers(lesson.id)
    chosen_parts = dict(_fetch(session, window, repository.choice_counts))
    figures = []
    for locale, rows in _fetch(session, window, repository.question_counts):
        found = _by_key(rows, "question_id")
        chosen = _by_key(chosen_parts.get(locale, []), "question_id", "choice")
        for question in lesson.quiz:
            row = found.get((question.id,))
            figures.append(
                QuestionFigures(
                    question_id=question.id,
                    text=question.question,
                    locale=locale,
                    answered=_count(row, "learners", k),
                    first_try_right=_count(row, "first_try_right", k),
                    choices=[
                        ChoiceFigures(
                            choice_id=choice.id,
                            text=choice.text,
                            correct=right.get(question.id) == choice.id,
                            learners=_count(chosen.get((question.id, choice.id)), "learners", k),
                        )
                        for choice in question.choices
                    ],
                )
            )
    return figures


def _right_answers(lesson_id: str) -> dict[str, str]:
    loaded = content.get_catalog().lessons.get(lesson_id)
    return {q.id: q.answer for q in loaded.lesson.quiz} if loaded else {}


def _median(histogram: Sequence[tuple[float, int]], k: int) -> float | None:
    """The median of values given as (value, how many learners), or None under k learners."""
    total = sum(count for _, count in histogram)
    if total == 0 or total < k:
        return None
    values = sorted(histogram)

    def at(position: int) -> float:  # the value at a 0-based position in the sorted values
        seen = 0
        for value, count in values:
            seen += count
            if position < seen:
                return value
        raise IndexError(position)

    middle = total // 2
    return at(middle) if total % 2 else (at(middle - 1) + at(middle)) / 2


def _exercises(
    session: Session, window: Window, lesson: LocalizedLesson, locale: str, k: int
) -> list[ExerciseFigures]:
    opened_parts = dict(_fetch(session, window, repository.opened_counts))
    check_parts = dict(_fetch(session, window, repository.first_failing_checks))
    failing_parts = dict(_fetch(session, window, repository.failing_counts))
    figures = []
    for row_locale, histogram in _fetch(session, window, repository.attempt_histogram):
        opened = _by_key(opened_parts.get(row_locale, []), "exercise")
        failing = _by_key(failing_parts.get(row_locale, []), "exercise")
        for exercise in lesson.exercises:
            figures.append(
                _exercise(
                    exercise.id,
                    exercise.title,
                    row_locale,
                    _count(opened.get((exercise.id,)), "learners", k),
                    [row for row in histogram if row.exercise == exercise.id],
                    failing.get((exercise.id,)),
                    [row for row in check_parts.get(row_locale, []) if row.exercise == exercise.id],
                    locale,
                    k,
                )
            )
    return figures


def _exercise(
    exercise_id: str,
    title: str,
    row_locale: str | None,
    opened: Count,
    histogram: list[Any],
    failing: Any,
    check_rows: list[Any],
    locale: str,
    k: int,
) -> ExerciseFigures:
    def learners(keep: Callable[[Any], bool]) -> int:
        return sum(int(row.learners) for row in histogram if keep(row))

    passers = [row for row in histogram if row.judged_to_pass is not None]
    failed = int(failing.failed or 0) if failing is not None else 0
    failed_shown = cohort(_count(failing, "learners", 1) or 0, k) is not None
    check_figures = []
    for row in sorted(check_rows, key=lambda row: (-int(row.submissions), row.check_id)):
        shown = cohort(int(row.learners), k) is not None
        submissions = int(row.submissions)
        check_figures.append(
            CheckFigures(
                check_id=row.check_id,
                title=check_title(row.check_id, locale),
                first_failing=submissions if shown else None,
                share=round(submissions / failed, 4) if shown and failed else None,
            )
        )
    return ExerciseFigures(
        exercise=exercise_id,
        title=title,
        locale=row_locale,
        opened=opened,
        submitted=cohort(learners(lambda row: True), k),
        passed=cohort(learners(lambda row: row.judged_to_pass is not None), k),
        passed_first=cohort(learners(lambda row: row.judged_to_pass == 1), k),
        median_submissions=_median(
            [(float(row.judged_to_pass), int(row.learners)) for row in passers], k
        ),
        median_minutes_to_pass=_median(
            [(float(row.minutes_to_pass), int(row.learners)) for row in passers], k
        ),
        failed_submissions=failed if failed_shown else None,
        checks=check_figures,
    )


def check_title(check_id: str, locale: str) -> str:
    if not check_id:
        return translate(locale, NO_FAILED_CHECK)
    return render(f"title.{check_id}", _english_titles().get(check_id, check_id), {}, locale)


@cache
def _english_titles() -> dict[str, str]:
    from grader.checks import all_checks  # check metadata only: the pure check functions

    return {check_id: item.title for check_id, item in all_checks().items()}
