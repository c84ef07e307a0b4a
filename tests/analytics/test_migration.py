"""Migration i28_analytics fills the new columns of submissions graded before it (both
databases), and downgrades cleanly."""

from __future__ import annotations

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
