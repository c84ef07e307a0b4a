"""Submissions, their live events, and per-learner drafts.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EVENT_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "submissions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("exercise", sa.String(200), nullable=False),
        sa.Column("code", sa.Text(), nullable=False),
        sa.Column("locale", sa.String(16), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("queue", sa.String(16), nullable=True),
        sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("queue_job_id", sa.BigInteger(), nullable=True),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_submissions_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_submissions")),
        sa.UniqueConstraint("user_id", "idempotency_key", name="uq_submissions_user_idempotency"),
    )
    op.create_index("ix_submissions_status_created", "submissions", ["status", "created_at"])
    op.create_index("ix_submissions_user_status", "submissions", ["user_id", "status"])
    op.create_table(
        "submission_events",
        sa.Column("id", EVENT_ID, autoincrement=True, nullable=False),
        sa.Column("submission_id", sa.Uuid(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
            name=op.f("fk_submission_events_submission_id_submissions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_submission_events")),
    )
    op.create_index(
        op.f("ix_submission_events_submission_id"), "submission_events", ["submission_id"]
    )
    op.create_table(
        "submission_drafts",
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("exercise", sa.String(200), nullable=False),
        sa.Column("code", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_submission_drafts_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", "exercise", name=op.f("pk_submission_drafts")),
    )


def downgrade() -> None:
    op.drop_table("submission_drafts")
    op.drop_index(op.f("ix_submission_events_submission_id"), table_name="submission_events")
    op.drop_table("submission_events")
    op.drop_index("ix_submissions_user_status", table_name="submissions")
    op.drop_index("ix_submissions_status_created", table_name="submissions")
    op.drop_table("submissions")
