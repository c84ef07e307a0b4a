"""The mail outbox: mail queued in the request's transaction, sent with retries (issue 39, D6).

Revision ID: i39_mail_outbox
Revises: i28_rollups
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "i39_mail_outbox"
down_revision: str | None = "i41_domain_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mail_outbox",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("to_address", sa.String(length=320), nullable=False),
        sa.Column("subject", sa.String(length=500), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mail_outbox")),
    )
    op.create_index(op.f("ix_mail_outbox_due_at"), "mail_outbox", ["due_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_mail_outbox_due_at"), table_name="mail_outbox")
    op.drop_table("mail_outbox")
