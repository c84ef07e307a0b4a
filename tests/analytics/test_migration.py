"""Migration i28_analytics fills the new columns of submissions graded before it (both
databases), and downgrades cleanly."""

from __future__ import annotations

import ast
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, text

from app.migrate import alembic_config
from tests.conftest import PG_ADMIN_URL, _pg_admin


@pytest.fixture
def empty_url(db_backend: str, tmp_path: Path) -> Iterator[str]:
    if db_backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'migrate.db'}"
        return
    name = f"rdv_i28_{uuid.uuid4().hex[:12]}"
    _pg_admin(f'CREATE DATABASE "{name}"')
    yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_graded_submissions_get_their_verdict_and_first_failed_check(empty_url: str) -> None:
    config = alembic_config(empty_url)
    command.upgrade(config, "0006")
    engine = create_engine(empty_url)
    user_id = uuid.uuid4()

    def as_stored(value: uuid.UUID) -> str:  # SQLAlchemy's Uuid: 32 hex digits on SQLite
        return value.hex if empty_url.startswith("sqlite") else str(value)

    results = {
        "failed": {"status": "fail", "checks": [
            {"id": "run.completed", "status": "pass"}, {"id": "ddp.in_sync", "status": "fail"},
            {"id": "ckpt.barrier", "status": "fail"}]},
        "passed": {"status": "pass", "checks": [{"id": "run.completed", "status": "pass"}]},
    }  # fmt: skip
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO users (id, email, display_name, password_hash, role, created_at) "
                "VALUES (:id, 'm@example.org', 'M', 'x', 'learner', CURRENT_TIMESTAMP)"
            ),
            {"id": as_stored(user_id)},
        )
        for name, result in [*results.items(), ("queued", None)]:
            conn.execute(
                text(
                    "INSERT INTO submissions (id, user_id, exercise, code, locale, status, "
                    "result, attempts, created_at) VALUES (:id, :user, 'a/b', :name, 'en', "
                    "'done', :result, 0, CURRENT_TIMESTAMP)"
                ),
                {
                    "id": as_stored(uuid.uuid4()),
                    "user": as_stored(user_id),
                    "name": name,
                    "result": json.dumps(result) if result else None,
                },
            )
    command.upgrade(config, "head")
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT code, verdict, first_failed_check FROM submissions"))
        assert sorted(tuple(row) for row in rows) == [
            ("failed", "fail", "ddp.in_sync"),
            ("passed", "pass", None),
            ("queued", None, None),
        ]
    command.downgrade(config, "0006")
    engine.dispose()


def test_the_rollups_are_backfilled_from_the_rows_already_stored(empty_url: str) -> None:
    """Migration i28_rollups fills the day rollups from the events and submissions stored
    before it: each row under its locale and under ALL ('*')."""
    config = alembic_config(empty_url)
    command.upgrade(config, "i28_analytics")
    engine = create_engine(empty_url)
    sqlite = empty_url.startswith("sqlite")
    user_id = uuid.uuid4().hex if sqlite else str(uuid.uuid4())
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO users (id, email, display_name, password_hash, role, created_at) "
                "VALUES (:id, 'r@example.org', 'R', 'x', 'learner', CURRENT_TIMESTAMP)"
            ),
            {"id": user_id},
        )
        for verdict, at in [("fail", "2026-11-02 09:00:00"), ("pass", "2026-11-02 09:05:00")]:
            conn.execute(
                text(
                    "INSERT INTO submissions (id, user_id, exercise, code, locale, status, "
                    "verdict, first_failed_check, attempts, created_at) VALUES (:id, :user, "
                    "'a/b', '#', 'tr', 'done', :verdict, :check, 1, :at)"
                ),
                {
                    "id": uuid.uuid4().hex if sqlite else str(uuid.uuid4()),
                    "user": user_id,
                    "verdict": verdict,
                    "check": "run.completed" if verdict == "fail" else None,
                    "at": at if sqlite else at + "+00",
                },
            )
        conn.execute(
            text(
                "INSERT INTO progress_events (user_id, client_id, type, lesson_id, at, payload, "
                "locale, received_at) VALUES (:user, 'e1', 'step_completed', 'a', :at, :payload, "
                "NULL, CURRENT_TIMESTAMP)"
            ),
            {
                "user": user_id,
                "at": "2026-11-02 08:00:00" if sqlite else "2026-11-02 08:00:00+00",
                "payload": json.dumps({"step_id": "one"}),
            },
        )
    command.upgrade(config, "head")
    with engine.connect() as conn:
        attempts = conn.execute(
            text(
                "SELECT locale, submissions, judged, failed, judged_to_pass "
                "FROM analytics_attempt_days ORDER BY locale"
            )
        ).all()
        assert [tuple(row) for row in attempts] == [("*", 2, 2, 1, 2), ("tr", 2, 2, 1, 2)]
        checks = conn.execute(text("SELECT locale, check_id, failed FROM analytics_check_days"))
        assert sorted(tuple(row) for row in checks) == [
            ("*", "run.completed", 1),
            ("tr", "run.completed", 1),
        ]
        steps = conn.execute(text("SELECT locale, step_id, completed FROM analytics_step_days"))
        assert sorted(tuple(row) for row in steps) == [("", "one", 1), ("*", "one", 1)]
    command.downgrade(config, "i28_analytics")
    engine.dispose()


def test_no_migration_imports_app_code() -> None:
    """A migration replays the same whatever the app's code is today: the migrations and their
    frozen copies (migrations/frozen/) import nothing from app/."""
    found = []
    migrations = Path(__file__).resolve().parents[2] / "migrations"
    for path in [*migrations.glob("versions/*.py"), *migrations.glob("frozen/*.py")]:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            found += [f"{path.name}: {name}" for name in names if name.split(".")[0] == "app"]
    assert found == []


def test_the_events_migration_keeps_the_counters_and_counts_the_drafts(empty_url: str) -> None:
    """Migration i41_domain_events: the counters already there stay (in shard 0), each draft
    gets its day, and it downgrades with the shards summed back."""
    config = alembic_config(empty_url)
    command.upgrade(config, "i28_rollups")
    engine = create_engine(empty_url)
    sqlite = empty_url.startswith("sqlite")
    user_id = uuid.uuid4().hex if sqlite else str(uuid.uuid4())
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO users (id, email, display_name, password_hash, role, created_at) "
                "VALUES (:id, 'd@example.org', 'D', 'x', 'learner', CURRENT_TIMESTAMP)"
            ),
            {"id": user_id},
        )
        conn.execute(
            text(
                "INSERT INTO submission_drafts (user_id, exercise, code, updated_at) "
                "VALUES (:id, 'a/b', '#', :at)"
            ),
            {"id": user_id, "at": "2026-11-02 23:30:00" if sqlite else "2026-11-02 23:30:00+00"},
        )
        conn.execute(
            text(
                "INSERT INTO analytics_day_counts VALUES "
                "('a', 'opened', '*', 'a/b', '', '2026-11-02', '0001-01-01', 0, 1, 0)"
            )
        )
    command.upgrade(config, "head")
    with engine.connect() as conn:
        days = conn.execute(text("SELECT exercise, day FROM analytics_draft_days")).all()
        assert [(row[0], str(row[1])) for row in days] == [("a/b", "2026-11-02")]
        counts = conn.execute(text("SELECT scope, shard, learners FROM analytics_day_counts"))
        assert [tuple(row) for row in counts] == [("opened", 0, 1)]
        partitions = conn.execute(text("SELECT count(*) FROM analytics_partitions")).scalar()
        assert partitions == 4
    command.downgrade(config, "i28_rollups")
    with engine.connect() as conn:
        counts = conn.execute(text("SELECT scope, learners FROM analytics_day_counts"))
        assert [tuple(row) for row in counts] == [("opened", 1)]
    command.downgrade(config, "i28_analytics")
    engine.dispose()
