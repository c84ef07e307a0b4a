"""Queries for the coach: the learner's exchanges and their failed attempts on an exercise."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, defer

from app.coach.models import CoachExchange
from app.submissions.models import DONE, Submission


def add(session: Session, exchange: CoachExchange) -> CoachExchange:
    session.add(exchange)
    session.flush()
    return exchange


def asked_since(session: Session, *, user_id: uuid.UUID, since: datetime) -> list[datetime]:
    """When the learner asked each question after `since`, oldest first (the rate limit)."""
    return list(
        session.scalars(
            select(CoachExchange.created_at)
            .where(CoachExchange.user_id == user_id, CoachExchange.created_at > since)
            .order_by(CoachExchange.created_at)
        )
    )


def history(
    session: Session, *, user_id: uuid.UUID, lesson_id: str | None, limit: int
) -> Sequence[CoachExchange]:
    query = select(CoachExchange).where(CoachExchange.user_id == user_id)
    if lesson_id is not None:
        query = query.where(CoachExchange.lesson_id == lesson_id)
    return session.scalars(query.order_by(CoachExchange.created_at.desc()).limit(limit)).all()


def asked_in_course(
    session: Session, *, since: datetime, lesson_id: str | None
) -> Sequence[CoachExchange]:
    """Every learner's exchanges since `since` (in one lesson if given), newest first."""
    query = (
        select(CoachExchange)
        .options(defer(CoachExchange.answer), defer(CoachExchange.sources))
        .where(CoachExchange.created_at >= since)
    )
    if lesson_id is not None:
        query = query.where(CoachExchange.lesson_id == lesson_id)
    return session.scalars(query.order_by(CoachExchange.created_at.desc())).all()


def _graded_results(session: Session, submission: Submission) -> list[dict[str, Any] | None]:
    """The Results of the learner's graded submissions of this exercise, up to this one."""
    return list(
        session.scalars(
            select(Submission.result).where(
                Submission.user_id == submission.user_id,
                Submission.exercise == submission.exercise,
                Submission.status == DONE,
                Submission.created_at <= submission.created_at,
            )
        ).all()
    )


def failed_attempts(session: Session, *, submission: Submission) -> int:
    """How many graded, failed submissions of this exercise the learner made up to this one."""
    rows = _graded_results(session, submission)
    return sum(1 for result in rows if (result or {}).get("status") == "fail")


def asked_about(session: Session, *, submission_id: uuid.UUID) -> list[str]:
    """The failed check each earlier question about a failure of this submission was about (a
    concept or a line question is about none and is left out)."""
    return [
        check
        for check in session.scalars(
            select(CoachExchange.about_check).where(CoachExchange.submission_id == submission_id)
        )
        if check is not None
    ]
