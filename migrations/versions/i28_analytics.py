"""Instructor analytics: a submission's verdict and first failing check in their own columns,
the locale a progress event was sent in, and the indexes the analytics queries read by.

`submissions.verdict` is the Result's status (pass | fail | error) and
`submissions.first_failed_check` the id of the first check (in the Result's order) that failed;
both are copied from the Result when it is stored, so counting them never parses the stored JSON.
Existing rows are filled from their Result here. `progress_events.locale` is the interface
language of the request that sent the event (NULL for older events).

Revision ID: i28_analytics
Revises: 0006
Create Date: 2026-12-03
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "i28_analytics"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 1000


def first_failed_check(result: dict[str, Any]) -> str | None:
    for check in result.get("checks") or []:
        if check.get("status") == "fail":
            return str(check.get("id"))[:64]
    return None


def _backfill() -> None:
    submissions = sa.table(
        "submissions",
        sa.column("id", sa.Uuid()),
        sa.column("result", sa.JSON()),
        sa.column("verdict", sa.String()),
        sa.column("first_failed_check", sa.String()),
    )
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(submissions.c.id, submissions.c.result).where(submissions.c.result.is_not(None))
    ).all()
    for start in range(0, len(rows), BATCH):
        updates = [
            {
                "sid": row.id,
                "v": str(row.result.get("status"))[:8],
                "f": first_failed_check(row.result),
            }
            for row in rows[start : start + BATCH]
            if isinstance(row.result, dict)
        ]
        if updates:
            bind.execute(
                submissions.update()
                .where(submissions.c.id == sa.bindparam("sid"))
                .values(verdict=sa.bindparam("v"), first_failed_check=sa.bindparam("f")),
                updates,
            )


def upgrade() -> None:
    op.add_column("submissions", sa.Column("verdict", sa.String(8), nullable=True))
    op.add_column("submissions", sa.Column("first_failed_check", sa.String(64), nullable=True))
    op.add_column("progress_events", sa.Column("locale", sa.String(16), nullable=True))
    # Covering on PostgreSQL (index-only scans, in the order the per-learner window reads);
    # plain on SQLite, which has no INCLUDE.
    op.create_index(
        "ix_submissions_exercise_user",
        "submissions",
        ["exercise", "user_id", "created_at", "id"],
        postgresql_include=["verdict", "locale", "first_failed_check"],
    )
    op.create_index(
        "ix_progress_events_lesson_type",
        "progress_events",
        ["lesson_id", "type", "user_id", "at"],
        postgresql_include=["client_id", "locale", "payload"],
    )
    _backfill()


def downgrade() -> None:
    op.drop_index("ix_progress_events_lesson_type", table_name="progress_events")
    op.drop_index("ix_submissions_exercise_user", table_name="submissions")
    with op.batch_alter_table("progress_events") as batch:
        batch.drop_column("locale")
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("first_failed_check")
        batch.drop_column("verdict")
