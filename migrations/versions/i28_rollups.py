"""Instructor analytics rollups: per (item, learner, locale, UTC day), what each learner did,
and the counters summed across learners that the report reads instead of every event and
submission (see app/analytics/models.py), filled here from the rows already stored.

The backfill runs the same INSERT ... SELECT the app kept the rollups with then, from a frozen
copy of that code (migrations/frozen/i28_rollups.py; no app import): it reads only columns that
exist at this revision (progress_events and submissions as of i28_analytics).

Revision ID: i28_rollups
Revises: i28_analytics
Create Date: 2026-12-03
"""

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "i28_rollups"
down_revision: str | None = "i28_analytics"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = (
    "analytics_pass_counts",
    "analytics_day_counts",
    "analytics_check_days",
    "analytics_attempt_days",
    "analytics_answer_days",
    "analytics_step_days",
)


def _learner() -> sa.Column[Any]:
    return sa.Column(
        "user_id",
        sa.Uuid(),
        sa.ForeignKey("users.id", ondelete="CASCADE"),
        primary_key=True,
    )


def _at(name: str, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "analytics_step_days",
        sa.Column("lesson_id", sa.String(100), primary_key=True),
        sa.Column("locale", sa.String(16), primary_key=True),
        sa.Column("step_id", sa.String(100), primary_key=True),
        _learner(),
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("completed", sa.Integer(), nullable=False),
    )
    op.create_table(
        "analytics_answer_days",
        sa.Column("lesson_id", sa.String(100), primary_key=True),
        sa.Column("locale", sa.String(16), primary_key=True),
        sa.Column("question_id", sa.String(100), primary_key=True),
        sa.Column("choice", sa.String(100), primary_key=True),
        _learner(),
        sa.Column("day", sa.Date(), primary_key=True),
        _at("first_at"),
        _at("first_right_at", nullable=True),
    )
    op.create_table(
        "analytics_attempt_days",
        sa.Column("exercise", sa.String(200), primary_key=True),
        sa.Column("locale", sa.String(16), primary_key=True),
        _learner(),
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("submissions", sa.Integer(), nullable=False),
        sa.Column("judged", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("judged_to_pass", sa.Integer(), nullable=True),
        _at("first_at"),
        _at("first_pass_at", nullable=True),
    )
    op.create_table(
        "analytics_check_days",
        sa.Column("exercise", sa.String(200), primary_key=True),
        sa.Column("locale", sa.String(16), primary_key=True),
        sa.Column("check_id", sa.String(64), primary_key=True),
        _learner(),
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("failed", sa.Integer(), nullable=False),
    )
    op.create_table(
        "analytics_day_counts",
        sa.Column("lesson_id", sa.String(100), primary_key=True),
        sa.Column("scope", sa.String(16), primary_key=True),
        sa.Column("locale", sa.String(16), primary_key=True),
        sa.Column("item", sa.String(200), primary_key=True),
        sa.Column("detail", sa.String(100), primary_key=True),
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("prev_day", sa.Date(), primary_key=True),
        sa.Column("flag", sa.Integer(), primary_key=True),
        sa.Column("learners", sa.Integer(), nullable=False),
        sa.Column("amount", sa.Integer(), nullable=False),
    )
    op.create_table(
        "analytics_pass_counts",
        sa.Column("exercise", sa.String(200), primary_key=True),
        sa.Column("locale", sa.String(16), primary_key=True),
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("prev_day", sa.Date(), primary_key=True),
        sa.Column("pass_day", sa.Date(), primary_key=True),
        sa.Column("judged_to_pass", sa.Integer(), primary_key=True),
        sa.Column("minutes_to_pass", sa.Integer(), primary_key=True),
        sa.Column("learners", sa.Integer(), nullable=False),
    )
    for table, column in (
        ("analytics_step_days", "lesson_id"),
        ("analytics_answer_days", "lesson_id"),
        ("analytics_attempt_days", "exercise"),
        ("analytics_check_days", "exercise"),
    ):
        op.create_index(f"ix_{table}_user", table, ["user_id", column])
    _frozen().rebuild(op.get_bind())


def _frozen() -> Any:
    """migrations/frozen/i28_rollups.py: the backfill as it was at this revision."""
    path = Path(__file__).resolve().parent.parent / "frozen" / "i28_rollups.py"
    spec = importlib.util.spec_from_file_location("rdv_migration_i28_rollups", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def downgrade() -> None:
    for table in TABLES:
        op.drop_table(table)
