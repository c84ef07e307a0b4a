"""Instructors: a role per account; the coach's exchanges name the failed check asked about.

`users.role` is "learner" (every account so far) or "instructor" (set with
`python -m app role EMAIL instructor`). `coach_exchanges.check_id` is the failed check whose
"Why did this fail?" button asked the question; `failed_checks` lists the checks the asked-about
submission failed. Both feed the instructors' view of where learners struggle.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "users",
        sa.Column("role", sa.String(16), nullable=False, server_default="learner"),
    )
    op.add_column("coach_exchanges", sa.Column("check_id", sa.String(64), nullable=True))
    op.add_column(
        "coach_exchanges",
        sa.Column("failed_checks", sa.JSON(), nullable=False, server_default="[]"),
    )
    op.create_index(
        "ix_coach_exchanges_lesson_created", "coach_exchanges", ["lesson_id", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_coach_exchanges_lesson_created", table_name="coach_exchanges")
    with op.batch_alter_table("coach_exchanges") as batch:
        batch.drop_column("failed_checks")
        batch.drop_column("check_id")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("role")
