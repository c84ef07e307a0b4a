"""Fixtures for the submissions tests: learners with tokens, and committed databases for the
backends (whose threads and worker processes see only committed rows)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import pytest
from fastapi import FastAPI
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from app.auth.models import User
from tests.auth.factories import bearer, create_token, create_user
from tests.conftest import PG_ADMIN_URL
from tests.submissions.queue_fixtures import pg_uow, start_backend, workers  # noqa: F401

SessionFactory = Callable[[], AbstractContextManager[Session]]


@pytest.fixture
def learner(session: Session) -> User:
    return create_user(session, name="Ada")


@pytest.fixture
def auth(session: Session, learner: User) -> dict[str, str]:
    return bearer(create_token(session, learner))


@pytest.fixture
def other_auth(session: Session) -> dict[str, str]:
    return bearer(create_token(session, create_user(session, name="Mallory")))


@pytest.fixture
def stream_sessions(app: FastAPI, session: Session) -> None:
    """The live event stream reads through the test's own session too."""
    from app.submissions.routes import get_session_factory

    app.dependency_overrides[get_session_factory] = lambda: lambda: nullcontext(session)


def fresh_database_url(kind: str, tmp_path: Path) -> str:
    """A new, migrated database that tests may commit to (sqlite file or PostgreSQL)."""
    from app.migrate import upgrade

    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'committed.db'}"
    else:
        name = f"rdv_sub_{uuid.uuid4().hex[:12]}"
        admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    upgrade(url)
    return url


def drop_database(url: str) -> None:
    if not url.startswith("postgresql"):
        return
    name = url.rsplit("/", 1)[1]
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def committed_url(db_backend: str, tmp_path: Path) -> Iterator[str]:
    url = fresh_database_url(db_backend, tmp_path)
    yield url
    drop_database(url)


@pytest.fixture
def uow(committed_url: str) -> Iterator[SessionFactory]:
    """unit_of_work() bound to the committed database."""
    from tests.submissions.helpers import make_uow

    factory, dispose = make_uow(committed_url)
    yield factory
    dispose()


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for this test (the queue lives there too)."""
    url = fresh_database_url("postgres", tmp_path)
    yield url
    drop_database(url)
