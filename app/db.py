"""The database: engine, declarative Base, the one commit point per request or job, and the one
way to act after a commit (`after_commit`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from typing import Annotated, Any

from fastapi import Depends
from sqlalchemy import DateTime, MetaData, create_engine, event
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.orm import DeclarativeBase, Session, SessionTransaction, sessionmaker
from sqlalchemy.types import TypeDecorator

from app.config import get_settings

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# A unit of work outside a request (a backend's transaction, a stream's short reads): call it,
# enter it, and it commits on a clean exit.
SessionFactory = Callable[[], AbstractContextManager[Session]]


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def utcnow() -> datetime:
    """Now, as an aware UTC datetime: the one clock of every table's timestamps."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp column that always reads back as an aware UTC datetime: PostgreSQL keeps the
    zone (timestamptz), SQLite hands back naive values, which are UTC (everything is written in
    UTC). A naive value written is taken as UTC too."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


def as_utc(moment: datetime) -> datetime:
    """`moment` as aware UTC (a naive one is UTC already)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def make_engine(
    url: str, *, pool_size: int = 10, max_overflow: int = 5, pool_timeout: float = 2.0
) -> Engine:
    """`pool_timeout`: a request waits this long for a connection, then gets 503 Retry-After
    (app/error_handlers.py) instead of queueing behind a pile-up."""
    # hide_parameters: an error's message never carries the statement's values (a password
    # hash, a token digest) into the log.
    kwargs: dict[str, Any] = {
        "future": True,
        "hide_parameters": True,
        "pool_size": pool_size,
        "max_overflow": max_overflow,
        "pool_timeout": pool_timeout,
    }
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    else:
        kwargs["pool_pre_ping"] = True
    engine = create_engine(url, **kwargs)
    if url.startswith("sqlite"):
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite opens transactions lazily, before the first write: a SAVEPOINT issued first
    # would then commit for real when released. Take transaction control from the driver and
    # emit BEGIN ourselves (SQLAlchemy's documented recipe), so savepoints nest properly.
    # IMMEDIATE: a transaction that reads then writes would otherwise fail at once with
    # "database is locked" when another connection wrote in between (no busy wait applies).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _sqlite_begin(connection: Any) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


@lru_cache
def get_engine() -> Engine:
    settings = get_settings()
    return make_engine(
        settings.database_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_overflow,
        pool_timeout=settings.db_checkout_timeout_s,
    )


@lru_cache
def get_sessionmaker() -> sessionmaker[Session]:
    return sessionmaker(bind=get_engine(), expire_on_commit=False)


@contextmanager
def unit_of_work() -> Iterator[Session]:
    """The one commit point: commit on success, roll back on any error."""
    session = get_sessionmaker()()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def background_units_of_work(url: str, connections: int = 2) -> SessionFactory:
    """Units of work on an engine of their own, for a background consumer: it never takes one
    of the connections the requests' admission counts on (app/limits.py admits as many
    requests as the request pool holds), so a request never waits behind it for one."""
    maker = sessionmaker(
        bind=make_engine(url, pool_size=connections, max_overflow=0, pool_timeout=30),
        expire_on_commit=False,
    )

    @contextmanager
    def unit() -> Iterator[Session]:
        with maker.begin() as session:
            yield session

    return unit


def get_session() -> Iterator[Session]:
    with unit_of_work() as session:
        yield session


# scope="function": commit (or roll back) when the route returns, BEFORE the response is sent.
# FastAPI's default for yield dependencies ("request") commits after the client already has its
# answer, so a client's next request could miss the write (measured: a token revoked with 204
# still worked, a token just issued was not yet valid) and a failed commit would follow a 2xx.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def import_all_models() -> None:
    """Import every domain's models so Base.metadata knows all tables (Alembic, tests)."""
    import importlib
    import pkgutil

    import app

    for module in pkgutil.iter_modules(app.__path__):
        if module.ispkg:
            try:
                importlib.import_module(f"app.{module.name}.models")
            except ModuleNotFoundError as exc:
                if exc.name != f"app.{module.name}.models":
                    raise


# After a commit: the one way the app acts once a transaction's writes are visible to others
# (a grading backend woken for a new submission, the analytics consumer for new domain events,
# a mail sent). An action registered during a transaction runs once, after the session's outer
# transaction commits; a rollback drops it. A failing action is logged, never raised: the
# commit has happened, and whatever the action stands for must also be recoverable without it
# (a consumer's poll, a sweep), since a process may stop between the commit and the action.
_ACTIONS = "rdv_after_commit"


def after_commit(session: Session, action: Callable[[], object], *, key: object = None) -> Any:
    """Run `action` once after `session`'s transaction commits. With `key`, a second action of
    the same key in the same transaction is not added: the first one is returned (to add to
    what it will do)."""
    actions: dict[object, Callable[[], object]] | None = session.info.get(_ACTIONS)
    if actions is None:
        actions = session.info[_ACTIONS] = {}
        event.listen(session, "after_commit", _run_actions)
        event.listen(session, "after_transaction_end", _drop_actions)
    return actions.setdefault(action if key is None else key, action)


def _run_actions(session: Session) -> None:
    actions = session.info.get(_ACTIONS) or {}
    pending = list(actions.values())
    actions.clear()
    for action in pending:
        try:
            action()
        except Exception:
            logging.getLogger(__name__).exception("an action after a commit failed")


def _drop_actions(session: Session, transaction: SessionTransaction) -> None:
    """A rolled-back (outer) transaction's actions never run."""
    if transaction.parent is None and transaction.nested is False:
        actions = session.info.get(_ACTIONS)
        if actions:
            actions.clear()
