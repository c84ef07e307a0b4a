"""The day rollups the report reads are kept in step with the rows they count (both databases),
by the analytics consumer applying the domain events (`consumer.drain`: what it does after the
commits): a submission counts when it is made and again when it is graded, in whatever order
gradings come; a learner's days add up to their rank; a language change within a day keeps the
totals exact; and rebuilding from the source rows gives the same rows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.analytics import consumer, rollups, service
from app.analytics.models import (
    AnswerDay,
    AttemptDay,
    CheckDay,
    DayCount,
    DraftDay,
    PassCount,
    StepDay,
)
from app.auth import lifecycle
from app.auth.models import User
from app.submissions import jobs
from app.submissions import service as submissions
from app.submissions.models import QUEUED, Submission
from tests.analytics.conftest import EXERCISE, LESSON, _result
from tests.auth.factories import PASSWORD, create_user
from tests.content.conftest import FIXTURE_LESSONS

DAY = datetime(2026, 11, 10, 10, 0, tzinfo=UTC)


@pytest.fixture
def lessons(use_lessons: Callable[[object], None]) -> None:
    use_lessons(FIXTURE_LESSONS)


def exercise(session: Session, **options: Any) -> dict[str, Any]:
    """The exercise's figures, every count shown (a cohort threshold of 1), per locale, once
    the consumer applied the events."""
    consumer.drain(session)
    report = service.report(session, lesson_id=LESSON, locale="en", min_cohort=1, **options)
    rows = report.model_dump(mode="json")["exercises"]
    return {row["locale"]: row for row in rows}


def funnel(row: dict[str, Any]) -> tuple[Any, ...]:
    return (
        row["submitted"],
        row["passed"],
        row["passed_first"],
        row["median_submissions"],
        row["median_minutes_to_pass"],
        row["failed_submissions"],
    )


def queued(session: Session, user: User, at: datetime, locale: str = "en") -> Submission:
    submission = Submission(
        user_id=user.id, exercise=EXERCISE, code="#", locale=locale, status=QUEUED, created_at=at
    )
    session.add(submission)
    session.flush()
    return submission


def grade(session: Session, submission: Submission, verdict: str, check: str | None) -> None:
    assert jobs.complete(session, submission.id, _result(verdict, check), attempt=1, owner=None)


def test_a_submission_counts_when_made_and_again_when_graded(
    session: Session, lessons: None
) -> None:
    user = create_user(session, email="s@example.org", name="S")
    made = submissions.submit(session, user_id=user.id, exercise=EXERCISE, code="print(1)")
    total = exercise(session)[None]
    assert (total["opened"], *funnel(total)) == (1, 1, 0, 0, None, None, 0)
    grade(session, made.submission, "pass", None)
    assert funnel(exercise(session)[None]) == (1, 1, 1, 1.0, 0.0, 0)


def test_gradings_in_any_order_keep_each_submission_s_rank(session: Session, lessons: None) -> None:
    user = create_user(session, email="o@example.org", name="O")
    first = queued(session, user, DAY)
    second = queued(session, user, DAY + timedelta(minutes=5))
    grade(session, second, "pass", None)  # the later submission's result comes first
    # Minutes count from the first submission, graded or not.
    assert funnel(exercise(session)[None]) == (1, 1, 1, 1.0, 5.0, 0)
    grade(session, first, "fail", "run.completed")
    assert funnel(exercise(session)[None]) == (1, 1, 0, 2.0, 5.0, 1)


def test_a_learner_s_days_add_up_and_a_range_counts_whole_days(
    session: Session, lessons: None
) -> None:
    user = create_user(session, email="d@example.org", name="D")
    plan = [(0, "fail", "run.completed"), (60, "error", None), (120, "fail", "dist.init")]
    plan += [(24 * 60, "fail", "dist.init"), (24 * 60 + 30, "pass", None)]
    for minutes, verdict, check in plan:
        grade(session, queued(session, user, DAY + timedelta(minutes=minutes)), verdict, check)
    # Four judged submissions up to the pass (the platform error is none), over two days.
    assert funnel(exercise(session)[None]) == (1, 1, 0, 4.0, 24 * 60 + 30.0, 3)
    next_day = datetime(2026, 11, 11, tzinfo=UTC)
    assert funnel(exercise(session, since=next_day)[None]) == (1, 1, 0, 2.0, 30.0, 1)
    assert funnel(exercise(session, until=next_day)[None]) == (1, 0, 0, None, None, 2)
    later = exercise(session, since=next_day + timedelta(days=1))[None]
    assert funnel(later) == (0, 0, 0, None, None, 0)


def test_a_language_change_within_a_day_keeps_totals_and_split_exact(
    session: Session, lessons: None
) -> None:
    user = create_user(session, email="l@example.org", name="L")
    grade(session, queued(session, user, DAY, "en"), "fail", "run.completed")
    grade(session, queued(session, user, DAY + timedelta(minutes=5), "tr"), "pass", None)
    grade(session, queued(session, user, DAY + timedelta(minutes=10), "en"), "pass", None)
    split = exercise(session, by_locale=True)
    assert funnel(split[None]) == (1, 1, 0, 2.0, 5.0, 1)  # fail (en), then pass (tr)
    assert funnel(split["en"]) == (1, 1, 0, 2.0, 10.0, 1)
    assert funnel(split["tr"]) == (1, 1, 1, 1.0, 0.0, 0)


def test_a_range_bound_inside_a_day_is_refused(session: Session, lessons: None) -> None:
    with pytest.raises(ValueError, match="whole UTC days"):
        exercise(session, since=datetime(2026, 11, 10, 12, tzinfo=UTC))


def rows(session: Session) -> dict[str, list[tuple[Any, ...]]]:
    """Every rollup and counter row, shard by shard (less counters a learner's change left at
    0), once the consumer applied the events."""
    consumer.drain(session)
    found = {}
    for model in (StepDay, AnswerDay, AttemptDay, CheckDay, DraftDay, DayCount, PassCount):
        columns = list(model.__table__.columns)
        found[model.__tablename__] = sorted(
            (
                tuple(row)
                for row in session.execute(select(*columns))
                if getattr(row, "learners", 1) or getattr(row, "amount", 0)
            ),
            key=repr,
        )
    return found


def test_rebuilding_from_the_source_rows_gives_the_rows_kept_in_step(
    session: Session, seeded: dict[str, User]
) -> None:
    kept = rows(session)
    assert all(kept.values())
    assert len(kept["analytics_attempt_days"]) == 2 * 8  # each learner who submitted, twice
    rollups.rebuild(session)
    assert rows(session) == kept


def test_a_deleted_account_leaves_the_counters(session: Session, seeded: dict[str, User]) -> None:
    """L2 (English: three steps, two answers, four submissions and a pass) deletes their
    account: no figure counts them any more, and the counters equal a rebuild without them."""
    before = service.report(session, lesson_id=LESSON, locale="en", min_cohort=1)
    lifecycle.delete_account(session, seeded["L2"], password=PASSWORD)
    consumer.drain(session)
    after = service.report(session, lesson_id=LESSON, locale="en", min_cohort=1)
    assert [(s.reached, s.completed) for s in after.steps] == [
        (s.reached - 1, s.completed - (s.step_id != "three"))
        for s in before.steps  # type: ignore[operator]
    ]
    old, new = before.exercises[0], after.exercises[0]
    assert (new.opened, new.submitted, new.passed) == (7, 7, 5)
    assert new.failed_submissions == old.failed_submissions - 2  # type: ignore[operator]
    kept = rows(session)
    rollups.rebuild(session)
    assert rows(session) == kept


def test_a_draft_opens_the_exercise_until_it_is_deleted(session: Session, lessons: None) -> None:
    user = create_user(session, email="w@example.org", name="W")
    submissions.save_draft(session, user_id=user.id, exercise=EXERCISE, code="import torch")
    submissions.save_draft(session, user_id=user.id, exercise=EXERCISE, code="import os")
    split = exercise(session, by_locale=True)
    assert (split[None]["opened"], split[None]["submitted"]) == (1, 0)
    kept = rows(session)
    rollups.rebuild(session)
    assert rows(session) == kept
    submissions.delete_draft(session, user_id=user.id, exercise=EXERCISE)
    assert exercise(session)[None]["opened"] == 0
    assert rows(session)["analytics_day_counts"] == []
