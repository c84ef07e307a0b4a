"""Domain events (the outbox) and the analytics consumer's state; counters split in shards.

- `domain_events`: what a domain recorded in its transaction, until the analytics consumer
  applies it (app/domain_events, app/analytics/consumer.py);
- `analytics_partitions`: one row per partition of the events, held while a consumer applies
  them, with its lag;
- `analytics_draft_days`: each draft as the counters count it (filled from the drafts);
- the rollups' learner columns lose their foreign key (an account's rows stay until the
  consumer takes its contributions off the counters);
- `shard` joins the counters' keys (0 for the rows already there: the report sums the shards).

Nothing here imports app code.

Revision ID: i41_domain_events
Revises: i28_rollups
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "i41_domain_events"
down_revision: str | None = "i28_rollups"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PARTITIONS = 4  # app.domain_events.PARTITIONS when this was written
ROLLUPS = (
    ("analytics_step_days", "lesson_id"),
    ("analytics_answer_days", "lesson_id"),
    ("analytics_attempt_days", "exercise"),
    ("analytics_check_days", "exercise"),
)
COUNTERS = {
    "analytics_day_counts": (
        "lesson_id",
        "scope",
        "locale",
        "item",
        "detail",
        "day",
        "prev_day",
        "flag",
    ),
    "analytics_pass_counts": (
        "exercise",
        "locale",
        "day",
        "prev_day",
        "pass_day",
        "judged_to_pass",
        "minutes_to_pass",
    ),
}


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def upgrade() -> None:
    op.create_table(
        "domain_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("subject", sa.String(200), nullable=False),
        sa.Column("day", sa.Date(), nullable=True),
        sa.Column("partition", sa.SmallInteger(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_domain_events_partition", "domain_events", ["partition", "id"])
    partitions = op.create_table(
        "analytics_partitions",
        sa.Column("partition", sa.SmallInteger(), primary_key=True, autoincrement=False),
        sa.Column("applied", sa.Integer(), nullable=False),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lag_ms", sa.Integer(), nullable=False),
    )
    op.bulk_insert(
        partitions,
        [
            {"partition": p, "applied": 0, "applied_at": None, "lag_ms": 0}
            for p in range(PARTITIONS)
        ],
    )
    op.create_table(
        "analytics_draft_days",
        sa.Column("exercise", sa.String(200), primary_key=True),
        sa.Column("user_id", sa.Uuid(), primary_key=True),
        sa.Column("day", sa.Date(), nullable=False),
    )
    day = "date(updated_at)" if _sqlite() else "CAST(timezone('UTC', updated_at) AS DATE)"
    op.execute(
        "INSERT INTO analytics_draft_days (exercise, user_id, day) "
        f"SELECT exercise, user_id, {day} FROM submission_drafts"
    )
    for table, _item in ROLLUPS:
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(f"fk_{table}_user_id_users", type_="foreignkey")
    for table, keys in COUNTERS.items():
        _with_shard(table, keys)


def _with_shard(table: str, keys: tuple[str, ...]) -> None:
    shard = sa.Column("shard", sa.SmallInteger(), nullable=False, server_default="0")
    if _sqlite():
        with op.batch_alter_table(table, recreate="always") as batch:
            batch.drop_constraint(f"pk_{table}", type_="primary")
            batch.add_column(shard)
            batch.create_primary_key(f"pk_{table}", [*keys, "shard"])
        return
    op.drop_constraint(f"pk_{table}", table, type_="primary")
    op.add_column(table, shard)
    op.create_primary_key(f"pk_{table}", table, [*keys, "shard"])


def _without_shard(table: str, keys: tuple[str, ...], sums: tuple[str, ...]) -> None:
    """The shards summed back into one row per key, then the column dropped."""
    columns = ", ".join(keys)
    summed = ", ".join(f"sum({name}) AS {name}" for name in sums)
    op.execute(
        f"CREATE TABLE {table}_summed AS SELECT {columns}, {summed} FROM {table} GROUP BY {columns}"
    )
    op.execute(f"DELETE FROM {table}")
    if _sqlite():
        with op.batch_alter_table(table, recreate="always") as batch:
            batch.drop_column("shard")
    else:
        op.drop_constraint(f"pk_{table}", table, type_="primary")
        op.drop_column(table, "shard")
        op.create_primary_key(f"pk_{table}", table, list(keys))
    op.execute(f"INSERT INTO {table} ({columns}, {', '.join(sums)}) SELECT * FROM {table}_summed")
    op.execute(f"DROP TABLE {table}_summed")


def downgrade() -> None:
    _without_shard("analytics_pass_counts", COUNTERS["analytics_pass_counts"], ("learners",))
    _without_shard("analytics_day_counts", COUNTERS["analytics_day_counts"], ("learners", "amount"))
    for table, _item in ROLLUPS:
        op.execute(f"DELETE FROM {table} WHERE user_id NOT IN (SELECT id FROM users)")
        with op.batch_alter_table(table) as batch:
            batch.create_foreign_key(
                f"fk_{table}_user_id_users", "users", ["user_id"], ["id"], ondelete="CASCADE"
            )
    op.drop_table("analytics_draft_days")
    op.drop_table("analytics_partitions")
    op.drop_index("ix_domain_events_partition", table_name="domain_events")
    op.drop_table("domain_events")
