"""The instructors' analytics for one lesson: the drop-off along its sequence, each quiz
question's answers and distractors, and each exercise's funnel and the checks that stop it.

Figures come grouped from the database (`repository`); this module puts them in the lesson's
order (from the content service, keyed by step, question and exercise ids), computes the
medians, and hides every count of fewer than `min_cohort` learners (but some) so no small
group of learners can be singled out. No FastAPI imports.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any

from sqlalchemy.orm import Session

from app.analytics import repository
from app.analytics.repository import LearnerAttempts, Window
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
from app.errors import N_
from app.i18n import translate
from grader.i18n import render

NO_FAILED_CHECK = N_("Failed without a failed check (crash before any check could judge)")


def cohort(learners: int, min_cohort: int) -> Count:
    """The count, or None when it names fewer than `min_cohort` learners (but some)."""
    return None if 0 < learners < min_cohort else learners


def sequence(lesson: LocalizedLesson) -> list[SequenceItem]:
    """The lesson's steps, questions and exercises, in the order the lesson shows them."""
    items = [SequenceItem(kind="step", id=step.id, title=step.title) for step in lesson.steps]
    items += [SequenceItem(kind="question", id=q.id, title=q.question) for q in lesson.quiz]
    items += [SequenceItem(kind="exercise", id=e.id, title=e.title) for e in lesson.exercises]
    return items


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
    """Raises content.ContentNotFound for a lesson that does not exist (or is broken)."""
    lesson = content.localized_lesson(lesson_id, locale)
    window = Window(
        lesson_id=lesson_id,
        exercises=tuple(exercise.id for exercise in lesson.exercises),
        since=since,
        until=until,
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
    )


def _locales(rows: Iterable[Any], by_locale: bool) -> list[str | None]:
    """None (every learner) first, then each learner locale present, in order."""
    return [None, *sorted({row.locale for row in rows})] if by_locale else [None]


def _summed(rows: Iterable[Any], key: Any, locale: str | None) -> dict[Any, dict[str, int]]:
    """Counts per key for one locale (None: summed over locales; each learner has one)."""
    sums: dict[Any, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        if locale is None or row.locale == locale:
            for name, value in row._mapping.items():
                if name != "locale" and isinstance(value, int):
                    sums[key(row)][name] += value
    return sums


def _steps(session: Session, window: Window, lesson: LocalizedLesson, k: int) -> list[StepFigures]:
    rows = repository.step_counts(session, window)
    figures = []
    for locale in _locales(rows, window.by_locale):
        counts = _summed(rows, lambda row: row.step_id, locale)
        for step in lesson.steps:
            found = counts.get(step.id, {})
            figures.append(
                StepFigures(
                    step_id=step.id,
                    title=step.title,
                    locale=locale,
                    reached=cohort(found.get("reached", 0), k),
                    completed=cohort(found.get("completed", 0), k),
                )
            )
    return figures


def _questions(
    session: Session, window: Window, lesson: LocalizedLesson, k: int
) -> list[QuestionFigures]:
    rows = repository.question_counts(session, window)
    choice_rows = repository.choice_counts(session, window)
    right = _right_answers(lesson.id)
    figures = []
    for locale in _locales([*rows, *choice_rows], window.by_locale):
        counts = _summed(rows, lambda row: row.question_id, locale)
        chosen = _summed(choice_rows, lambda row: (row.question_id, row.choice), locale)
        for question in lesson.quiz:
            found = counts.get(question.id, {})
            figures.append(
                QuestionFigures(
                    question_id=question.id,
                    text=question.question,
                    locale=locale,
                    answered=cohort(found.get("answered", 0), k),
                    first_try_right=cohort(found.get("first_try_right", 0), k),
                    choices=[
                        ChoiceFigures(
                            choice_id=choice.id,
                            text=choice.text,
                            correct=right.get(question.id) == choice.id,
                            learners=cohort(
                                chosen.get((question.id, choice.id), {}).get("learners", 0), k
                            ),
                        )
                        for choice in question.choices
                    ],
                )
            )
    return figures


def _right_answers(lesson_id: str) -> dict[str, str]:
    loaded = content.get_catalog().lessons.get(lesson_id)
    return {q.id: q.answer for q in loaded.lesson.quiz} if loaded else {}


def _median(values: Sequence[float], k: int) -> float | None:
    return float(statistics.median(values)) if values and len(values) >= k else None


def _exercises(
    session: Session, window: Window, lesson: LocalizedLesson, locale: str, k: int
) -> list[ExerciseFigures]:
    opened_rows = repository.opened_counts(session, window)
    attempts = repository.learner_attempts(session, window)
    check_rows = repository.first_failing_checks(session, window)
    figures = []
    for row_locale in _locales([*opened_rows, *attempts], window.by_locale):
        opened = _summed(opened_rows, lambda row: row.exercise, row_locale)
        checks = _summed(check_rows, lambda row: (row.exercise, row.check_id), row_locale)
        for exercise in lesson.exercises:
            mine = [
                row
                for row in attempts
                if row.exercise == exercise.id and row_locale in (None, row.locale)
            ]
            figures.append(
                _exercise(
                    exercise.id,
                    exercise.title,
                    row_locale,
                    opened.get(exercise.id, {}).get("opened", 0),
                    mine,
                    {cid: n for (ex, cid), n in checks.items() if ex == exercise.id},
                    locale,
                    k,
                )
            )
    return figures


def _exercise(
    exercise_id: str,
    title: str,
    row_locale: str | None,
    opened: int,
    attempts: list[LearnerAttempts],
    checks: dict[str, dict[str, int]],
    locale: str,
    k: int,
) -> ExerciseFigures:
    passers = [row for row in attempts if row.judged_to_pass is not None]
    failers = [row for row in attempts if row.failed]
    failed = sum(row.failed for row in attempts)
    failed_shown = cohort(len(failers), k) is not None
    check_figures = []
    for check_id, counts in sorted(checks.items(), key=lambda item: -item[1]["submissions"]):
        shown = cohort(counts["learners"], k) is not None
        check_figures.append(
            CheckFigures(
                check_id=check_id,
                title=check_title(check_id, locale),
                first_failing=counts["submissions"] if shown else None,
                share=round(counts["submissions"] / failed, 4) if shown and failed else None,
            )
        )
    return ExerciseFigures(
        exercise=exercise_id,
        title=title,
        locale=row_locale,
        opened=cohort(opened, k),
        submitted=cohort(len(attempts), k),
        passed=cohort(len(passers), k),
        passed_first=cohort(sum(row.judged_to_pass == 1 for row in passers), k),
        median_submissions=_median([float(row.judged_to_pass or 0) for row in passers], k),
        median_seconds_to_pass=_median([_seconds(row) for row in passers], k),
        failed_submissions=failed if failed_shown else None,
        checks=check_figures,
    )


def _seconds(row: LearnerAttempts) -> float:
    assert row.first_pass_at is not None
    return (_aware(row.first_pass_at) - _aware(row.first_at)).total_seconds()


def _aware(moment: datetime) -> datetime:
    """SQLite gives back naive datetimes; they were stored in UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def check_title(check_id: str, locale: str) -> str:
    if not check_id:
        return translate(locale, NO_FAILED_CHECK)
    return render(f"title.{check_id}", _english_titles().get(check_id, check_id), {}, locale)


@cache
def _english_titles() -> dict[str, str]:
    from grader.checks import all_checks  # check metadata only: the pure check functions

    return {check_id: item.title for check_id, item in all_checks().items()}
