"""The report's tables as CSV, one table per file, with "<N" for a hidden small count."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any, Literal

from app.analytics.schemas import AnalyticsReport, Count

Table = Literal["steps", "questions", "choices", "exercises", "checks"]
TABLES: tuple[Table, ...] = ("steps", "questions", "choices", "exercises", "checks")


def _rows(report: AnalyticsReport, table: Table) -> Iterator[list[Any]]:
    """The header, then the rows; a hidden count is "<N", a median or share not known is ""."""
    lesson = report.lesson_id

    def n(value: Count) -> int | str:
        return f"<{report.min_cohort}" if value is None else value

    if table == "steps":
        yield ["lesson_id", "step_id", "title", "locale", "reached", "completed"]
        for s in report.steps:
            yield [lesson, s.step_id, s.title, s.locale or "all", n(s.reached), n(s.completed)]
    elif table == "questions":
        yield ["lesson_id", "question_id", "text", "locale", "answered", "first_try_right"]
        for q in report.questions:
            yield [
                lesson,
                q.question_id,
                q.text,
                q.locale or "all",
                n(q.answered),
                n(q.first_try_right),
            ]
    elif table == "choices":
        yield ["lesson_id", "question_id", "choice_id", "text", "correct", "locale", "learners"]
        for q in report.questions:
            for c in q.choices:
                locale = q.locale or "all"
                yield [lesson, q.question_id, c.choice_id, c.text, c.correct, locale, n(c.learners)]
    elif table == "exercises":
        yield [
            "exercise", "title", "locale", "opened", "submitted", "passed", "passed_first",
            "median_submissions", "median_minutes_to_pass", "failed_submissions",
        ]  # fmt: skip
        for e in report.exercises:
            yield [
                e.exercise, e.title, e.locale or "all", n(e.opened), n(e.submitted),
                n(e.passed), n(e.passed_first), e.median_submissions, e.median_minutes_to_pass,
                n(e.failed_submissions),
            ]  # fmt: skip
    else:
        yield ["exercise", "locale", "check_id", "title", "first_failing", "share"]
        for e in report.exercises:
            for check in e.checks:
                yield [
                    e.exercise,
                    e.locale or "all",
                    check.check_id,
                    check.title,
                    n(check.first_failing),
                    check.share,
                ]


def to_csv(report: AnalyticsReport, table: Table) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for row in _rows(report, table):
        writer.writerow(["" if value is None else value for value in row])
    return out.getvalue()
