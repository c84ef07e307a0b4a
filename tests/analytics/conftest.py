"""A seeded lesson with known figures: nine learners' steps, quiz answers, drafts and
submissions in the fixture lesson `second-lesson` (tests/content/fixtures/lessons).

Learners L0-L5 and L8 work in English, L6 and L7 in Turkish; L8 did everything in 2025, before
the date range the tests pick. Every figure the tests expect follows from the table below.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import TypeAdapter
from sqlalchemy.orm import Session

from app.analytics import consumer
from app.auth.models import User
from app.domain_events import Event, Kind, record
from app.learning import service as learning
from app.learning.schemas import ProgressEventIn
from app.submissions import jobs
from app.submissions.models import QUEUED, Draft, Submission
from grader.contract import CheckResult, Result
from tests.auth.factories import create_user
from tests.content.conftest import FIXTURE_LESSONS, use_lessons

__all__ = ["use_lessons"]

LESSON = "second-lesson"
EXERCISE = "second-lesson/hello"
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
OLD = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
_events = TypeAdapter(list[ProgressEventIn])

# Per learner: locale; steps seen ("position") and completed; quiz answers in order;
# a draft?; submissions as (seconds after the start, verdict, first failed check).
SEED: dict[str, dict[str, Any]] = {
    "L0": {"locale": "en", "seen": ["one", "two", "three"], "done": ["one", "two"],
           "answers": ["b"], "draft": True, "subs": [(0, "pass", None)]},
    "L1": {"locale": "en", "seen": ["one", "two", "three"], "done": ["one", "two"],
           "answers": ["b"], "draft": True,
           "subs": [(0, "fail", "run.completed"), (60, "pass", None)]},
    "L2": {"locale": "en", "seen": ["one", "two", "three"], "done": ["one", "two"],
           "answers": ["a", "b"], "draft": True,
           "subs": [(0, "error", None), (10, "fail", "run.completed"),
                    (20, "fail", "run.completed"), (120, "pass", None)]},
    "L3": {"locale": "en", "seen": ["one", "two"], "done": ["one", "two"],
           "answers": ["c", "b"], "draft": True,
           "subs": [(0, "fail", "dist.init"), (30, "fail", "dist.init")]},
    "L4": {"locale": "en", "seen": ["one", "two"], "done": ["one"],
           "answers": ["a"], "draft": True, "subs": [(0, "pass", None)]},
    "L5": {"locale": "en", "seen": ["one", "two"], "done": ["one"],
           "answers": ["b"], "draft": True, "subs": [(0, "fail", None)]},
    "L6": {"locale": "tr", "seen": ["one"], "done": ["one"],
           "answers": ["a", "b"], "draft": True,
           "subs": [(0, "fail", "run.completed"), (180, "pass", None)]},
    "L7": {"locale": "tr", "seen": ["one"], "done": [], "answers": ["b"], "draft": False,
           "subs": []},
    "L8": {"locale": "en", "seen": ["one"], "done": ["one"], "answers": ["a"], "draft": False,
           "subs": [(0, "pass", None)], "start": OLD},
}  # fmt: skip


def _result(verdict: str, failed_check: str | None) -> Result:
    if verdict == "error":
        return Result.platform_error("The sandbox could not start.")
    checks = [CheckResult(id="run.completed", status="pass", title="The program ran")]
    if failed_check == "run.completed":
        checks = [CheckResult(id="run.completed", status="fail", title="The program ran")]
    elif failed_check is not None:
        checks.append(CheckResult(id=failed_check, status="fail", title=failed_check))
    summary = "passed" if verdict == "pass" else "failed"
    return Result(status=verdict, summary=summary, checks=checks)  # type: ignore[arg-type]


def create_events(session: Session, user: User, start: datetime, plan: dict[str, Any]) -> None:
    sent: list[dict[str, Any]] = []

    def event(kind: str, **fields: Any) -> None:
        at = start + timedelta(seconds=len(sent))
        sent.append({"id": uuid.uuid4().hex, "type": kind, "lesson_id": LESSON,
                     "at": at.isoformat(), **fields})  # fmt: skip

    for step in plan["seen"]:
        event("position", step_id=step)
    for step in plan["done"]:
        event("step_completed", step_id=step)
    for choice in plan["answers"]:
        event("quiz_answered", question_id="count", choice=choice)
    learning.sync(session, user.id, _events.validate_python(sent), locale=plan["locale"])


def create_submission(
    session: Session, user: User, at: datetime, verdict: str, failed: str | None, locale: str
) -> Submission:
    """A submission graded through the path production stores Results by (jobs.complete)."""
    submission = Submission(
        user_id=user.id, exercise=EXERCISE, code="print('hello')", locale=locale,
        status=QUEUED, created_at=at,
    )  # fmt: skip
    session.add(submission)
    session.flush()
    assert jobs.complete(session, submission.id, _result(verdict, failed), attempt=1, owner=None)
    return submission


@pytest.fixture
def seeded(session: Session, use_lessons: Callable[[object], None]) -> dict[str, User]:
    use_lessons(FIXTURE_LESSONS)
    users = {}
    for name, plan in SEED.items():
        user = create_user(session, email=f"{name.lower()}@example.org", name=name)
        start = plan.get("start", T0)
        create_events(session, user, start, plan)
        if plan["draft"]:  # saved on `start`'s day, recorded as a save records it
            session.add(Draft(user_id=user.id, exercise=EXERCISE, code="#", updated_at=start))
            record(session, [Event(Kind.DRAFT, user.id, EXERCISE)])
        for seconds, verdict, failed in plan["subs"]:
            at = start + timedelta(hours=1, seconds=seconds)
            create_submission(session, user, at, verdict, failed, plan["locale"])
        users[name] = user
    consumer.drain(session)  # what the analytics consumer does after the commits
    return users
