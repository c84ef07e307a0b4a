"""Readiness of the web process's dependencies, for load balancers and compose healthchecks."""

from __future__ import annotations

from functools import lru_cache

import psycopg
from sqlalchemy import text
from sqlalchemy.engine import Engine

from app.config import Settings, get_settings
from app.db import make_engine

PROBE_TIMEOUT_S = 3


@lru_cache
def probe_engine() -> Engine:
    """The probe's own connection, apart from the learners' pool: a pool that learners keep
    busy never makes the probe wait (or answer 503) behind them."""
    settings = get_settings()
    return make_engine(
        settings.database_url, pool_size=1, max_overflow=1, pool_timeout=PROBE_TIMEOUT_S
    )


def database_ok(engine: Engine) -> bool:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except Exception:
        return False


def queue_ok(settings: Settings) -> bool | None:
    """None for the in-process executor (no queue to reach); else whether procrastinate's tables
    answer on the queue's database."""
    if settings.grading_backend != "procrastinate":
        return None
    try:
        conninfo = settings.queue_conninfo()
        with psycopg.connect(conninfo, connect_timeout=PROBE_TIMEOUT_S) as conn:
            row = conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL").fetchone()
        return bool(row and row[0])
    except Exception:
        return False
