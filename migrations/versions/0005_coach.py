"""The coach's questions and answers, per learner (deleted with the account).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "coach_exchanges",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("lesson_id", sa.String(64), nullable=False),
        sa.Column("step_id", sa.String(64), nullable=True),
        sa.Column("exercise", sa.String(200), nullable=True),
        sa.Column("submission_id", sa.Uuid(), nullable=True),
        sa.Column("locale", sa.String(16), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_coach_exchanges_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
            name=op.f("fk_coach_exchanges_submission_id_submissions"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_coach_exchanges")),
    )
    op.create_index("ix_coach_exchanges_user_created", "coach_exchanges", ["user_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_coach_exchanges_user_created", table_name="coach_exchanges")
    op.drop_table("coach_exchanges")
