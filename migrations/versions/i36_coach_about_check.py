"""The coach's exchanges name the failed check a question asked about, button or typed.

`coach_exchanges.about_check`: the failed check of the asked-about submission that a question
about a failure (why did it fail, a hint, still stuck, the answer please) was about, whether a
button asked it or the learner typed it; None for a concept or a line question. The coach's
escalation (nudge, pointer, fix) counts these per submission and check. `check_id` stays what the
"Why did this fail?" button named, for the instructors' view.

Revision ID: i36_coach_about_check
Revises: i28_rollups
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "i36_coach_about_check"
down_revision: str | None = "i39_mail_outbox"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("coach_exchanges", sa.Column("about_check", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("coach_exchanges") as batch:
        batch.drop_column("about_check")
