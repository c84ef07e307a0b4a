"""Shared fixtures: migrated databases (SQLite and PostgreSQL), a session per test inside a
rolled-back transaction, and an HTTP client bound to that session."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, delete, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from grader import settings as grader_settings

os.environ.setdefault("RDV_ENVIRONMENT", "test")
# Launches start cold unless a test asks for the warm pool: a pool in every test process would
# keep sandboxes ready for plans the next test does not make (each a few interpreters importing
# torch). The suites that grade as production does ask for it (tests/grader/conftest.py).
os.environ.setdefault("RDV_WARM_POOL", "0")


@pytest.fixture(autouse=True)
def _grader_settings_read_afresh() -> Iterator[None]:
    """The grader reads its settings once per process (grader.settings): each test starts from
    the environment it sets up, and leaves no settings behind."""
    grader_settings.reset()
    yield
    grader_settings.reset()


PG_ADMIN_URL = os.environ.get(
    "RDV_TEST_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def _pg_admin(statement: str) -> None:
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(statement))
    admin.dispose()


def _pg_database_name(worker_id: str) -> str:
    # Unique per test process: two test runs at once (or xdist workers) never share a database.
    return f"rdv_test_{worker_id}_{os.getpid()}".replace("-", "_")


@pytest.fixture(scope="session")
def migrated_urls(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> Iterator[dict[str, str]]:
    """One migrated database per backend for this test process."""
    from app.migrate import upgrade

    sqlite_path: Path = tmp_path_factory.mktemp("db") / "test.db"
    pg_name = _pg_database_name(worker_id)
    _pg_admin(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
    _pg_admin(f'CREATE DATABASE "{pg_name}"')
    urls = {
        "sqlite": f"sqlite:///{sqlite_path}",
        "postgres": PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{pg_name}",
    }
    for url in urls.values():
        upgrade(url)
    yield urls
    _pg_admin(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def engines(migrated_urls: dict[str, str]) -> Iterator[dict[str, Engine]]:
    from app.db import make_engine

    made = {name: make_engine(url) for name, url in migrated_urls.items()}
    yield made
    for engine in made.values():
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def session(engines: dict[str, Engine], db_backend: str) -> Iterator[Session]:
    """A session inside a transaction that is rolled back after the test.

    Code under test may call commit(): with join_transaction_mode="create_savepoint" that only
    releases a savepoint, and the outer rollback still undoes everything.
    """
    connection = engines[db_backend].connect()
    outer = connection.begin()
    db = Session(bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False)
    try:
        yield db
    finally:
        db.close()
        outer.rollback()
        connection.close()


@pytest.fixture
def app(session: Session):  # type: ignore[no-untyped-def]
    """The FastAPI app with its database session bound to the test's transaction."""
    from app.db import get_session
    from app.main import create_app

    application = create_app()

    def _session() -> Iterator[Session]:
        yield session
        session.flush()

    @contextmanager
    def _unit_of_work() -> Iterator[Session]:
        yield session

    application.dependency_overrides[get_session] = _session
    application.state.unit_of_work = _unit_of_work  # outside routes (the limits' look-ups)
    return application


@pytest.fixture
def client(app):  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def committing_engine(engines: dict[str, Engine], db_backend: str) -> Engine:
    """The backend's engine itself, for tests whose connections commit (races between them)."""
    return engines[db_backend]


@pytest.fixture
def committed_learner_id(committing_engine: Engine) -> Iterator[uuid.UUID]:
    """A learner committed for real; deleted after the test (everything personal cascades)."""
    from app.auth.models import User
    from tests.auth.factories import create_user

    with Session(committing_engine) as session, session.begin():
        user_id = create_user(session, email=f"committed-{uuid.uuid4().hex}@example.org").id
    yield user_id
    with Session(committing_engine) as session, session.begin():
        session.execute(delete(User).where(User.id == user_id))


@pytest.fixture
def committing_client(
    committing_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    """A client of an app whose requests get the app's own session (app.db.get_session: one
    commit, then closed) on the backend's database, as when served: unlike `client`, whose one
    session stays open across the test, an object loaded by a request is detached after it.
    Accounts made during the test are deleted after it (everything personal cascades)."""
    from sqlalchemy.orm import sessionmaker

    import app.db
    from app.auth.models import User
    from app.main import create_app

    with Session(committing_engine) as session:
        before = set(session.scalars(select(User.id)))
    maker = sessionmaker(bind=committing_engine, expire_on_commit=False)
    monkeypatch.setattr(app.db, "get_sessionmaker", lambda: maker)
    with TestClient(create_app()) as test_client:
        yield test_client
    with Session(committing_engine) as session, session.begin():
        made = set(session.scalars(select(User.id))) - before
        session.execute(delete(User).where(User.id.in_(made)))
