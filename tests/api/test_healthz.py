"""`GET /healthz` answers 200 while the database (and the queue, when there is one) answers."""

from __future__ import annotations

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from app.config import get_settings
from app.health import service
from grader import queue_protocol


def test_healthz_reports_the_database_and_the_in_process_executor(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "ok", "database": "ok", "queue": "in-process"}


def test_an_unreachable_database_is_not_healthy(tmp_path_factory: pytest.TempPathFactory) -> None:
    missing = tmp_path_factory.mktemp("health") / "no-such-dir" / "x.db"
    assert service.database_ok(create_engine(f"sqlite:///{missing}")) is False


def test_reachable_database_is_healthy(engines: dict[str, Engine]) -> None:
    assert all(service.database_ok(engine) for engine in engines.values())


@pytest.mark.postgres
def test_the_queue_is_healthy_once_its_tables_exist(migrated_urls: dict[str, str]) -> None:
    import asyncio

    url = migrated_urls["postgres"]
    settings = get_settings().model_copy(
        update={"grading_backend": "procrastinate", "database_url": url}
    )
    conninfo = "postgresql://" + url.split("://", 1)[1]
    asyncio.run(queue_protocol.ensure_schema(conninfo))
    with psycopg.connect(conninfo) as conn:
        row = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
        assert row is not None and row[0] is not None
    assert service.queue_ok(settings) is True
    down = settings.model_copy(
        update={"database_url": "postgresql+psycopg://postgres@127.0.0.1:1/none"}
    )
    assert service.queue_ok(down) is False
    assert service.queue_ok(settings.model_copy(update={"grading_backend": "local"})) is None
