"""The instructors' analytics on a large generated cohort (PostgreSQL): one request's time.

    python -m benchmarks analytics [--learners=10000] [--submissions=30] [--repeat=15]
                                   [--pg=postgresql+psycopg://postgres@127.0.0.1:5432/postgres]

A fresh database is migrated, then filled in a few statements of `generate_series` (bounded:
no Python loop per row): `learners` learners, starting on one of 30 days, each with a prefix of
lesson 2's steps seen and completed on their first day, every quiz question answered the next
day (a wrong first answer for some, then the right one), a draft per exercise, and
`submissions` graded submissions over the following week, exercise after exercise (a few
platform errors, passes after some failures, a first failed check drawn from each exercise's
checks). The analytics rollups are then built from those rows (`app.analytics.rollups.rebuild`,
as `python -m app.analytics rebuild` does; the counters in shards, one per partition of the
domain events), and the upkeep of one learner's day (what the consumer does for a grading) is
timed. Then
`GET /api/v1/instructor/analytics` is requested `repeat` times in four shapes (the whole
lesson; a 30-day range; by locale; both), through the app in-process (TestClient: routing,
auth, the queries, JSON), after one first request timed apart (it loads the lessons and
translations), and the median and p95 of each are printed with the load average (1 minute)
beside them. Wanted: at most 300 ms at 10,000 x 30. Figures are wall-clock on a
shared machine: read them beside the load average. The database is dropped after the run.
"""

from __future__ import annotations

import os
import statistics
import time

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from benchmarks.api_load import _option, fresh_database

LESSON = "ddp-fundamentals"
LOCALES = "ARRAY['en','en','en','en','en','en','tr','tr','pt-BR','pt-BR']"


def _generate(conn: Connection, learners: int, submissions: int) -> None:
    from app.content import service as content

    loaded = content.get_catalog().lessons[LESSON]
    steps = [step.id for step in loaded.lesson.steps]
    exercises = [f"{LESSON}/{item.id}" for item in loaded.lesson.exercises]
    checks = sorted({c for item in loaded.lesson.exercises for c in item.grading.checks})
    params = {"n": learners, "steps": steps, "exercises": exercises, "checks": checks}
    conn.execute(
        text(
            "INSERT INTO users (id, email, display_name, password_hash, role, created_at) "
            "SELECT md5('u' || i)::uuid, 'b' || i || '@example.org', 'B' || i, 'x', 'learner', "
            "now() FROM generate_series(1, :n) i"
        ),
        params,
    )
    # A prefix of the steps per learner, seen; all but its last completed.
    conn.execute(
        text(
            "INSERT INTO progress_events (user_id, client_id, type, lesson_id, at, payload, "
            "locale, received_at) "
            "SELECT md5('u' || i)::uuid, kind || ord, kind, :lesson, "
            "timestamptz '2026-09-01' + (i % 30) * interval '1 day' + ord * interval '3 min', "
            "json_build_object('step_id', step), (" + LOCALES + ")[1 + i % 10], now() "
            "FROM generate_series(1, :n) i, unnest(CAST(:steps AS text[])) WITH ORDINALITY "
            "AS s(step, ord), unnest(ARRAY['position', 'step_completed']) AS kind "
            "WHERE ord <= 1 + (i * 7919) % cardinality(CAST(:steps AS text[])) "
            "AND (kind = 'position' OR ord < 1 + (i * 7919) % cardinality(CAST(:steps AS text[])))"
        ),
        {**params, "lesson": LESSON},
    )
    for number, question in enumerate(loaded.lesson.quiz):
        choices = [choice.id for choice in question.choices]
        conn.execute(
            text(
                "INSERT INTO progress_events (user_id, client_id, type, lesson_id, at, payload, "
                "locale, received_at) "
                "SELECT md5('u' || i)::uuid, 'q' || :q || attempt, 'quiz_answered', :lesson, "
                "timestamptz '2026-09-02' + (i % 30) * interval '1 day' + attempt * "
                "interval '1 minute', json_build_object('question_id', :q, 'choice', chosen, "
                "'correct', chosen = :answer), (" + LOCALES + ")[1 + i % 10], now() "
                "FROM generate_series(1, :n) i, LATERAL (SELECT 1 AS attempt, "
                "(CAST(:choices AS text[]))[1 + (i * 31 + :k) % :count] AS chosen "
                "UNION ALL SELECT 2, :answer) AS a "
                "WHERE attempt = 1 OR (CAST(:choices AS text[]))[1 + (i * 31 + :k) % :count] "
                "<> :answer"
            ),
            {
                "n": learners,
                "lesson": LESSON,
                "q": question.id,
                "k": number,
                "choices": choices,
                "count": len(choices),
                "answer": question.answer,
            },
        )
    conn.execute(
        text(
            "INSERT INTO submission_drafts (user_id, exercise, code, updated_at) "
            "SELECT md5('u' || i)::uuid, e, 'import torch', "
            "timestamptz '2026-09-03' + (i % 30) * interval '1 day' "
            "FROM generate_series(1, :n) i, unnest(CAST(:exercises AS text[])) e"
        ),
        params,
    )
    # Submission j of learner i: the exercises in turn (a block of submissions each), over the
    # week from their third day; a platform error now and then, else a pass for one in five.
    conn.execute(
        text(
            "INSERT INTO submissions (id, user_id, exercise, code, locale, status, result, "
            "verdict, first_failed_check, attempts, created_at, finished_at) "
            "SELECT md5('s' || i || '-' || j)::uuid, md5('u' || i)::uuid, "
            "(CAST(:exercises AS text[]))"
            "[1 + ((j - 1) * cardinality(CAST(:exercises AS text[]))) / :per], "
            "repeat('x = 1  # a learner program of a few hundred bytes\n', 6), "
            "(" + LOCALES + ")[1 + i % 10], 'done', json_build_object('version', 1, "
            "'status', v, 'summary', v, 'checks', json_build_array()), v, "
            "CASE WHEN v = 'fail' THEN (CAST(:checks AS text[]))"
            "[1 + (i + j) % cardinality(CAST(:checks AS text[]))] END, 1, "
            "at, at FROM generate_series(1, :n) i, generate_series(1, :per) j, "
            "LATERAL (SELECT CASE WHEN (i * j) % 53 = 0 THEN 'error' "
            "WHEN (i * 13 + j * 7) % 5 = 0 THEN 'pass' "
            "ELSE 'fail' END AS v) AS verdict, LATERAL (SELECT timestamptz '2026-09-03' "
            "+ (i % 30) * interval '1 day' + ((j - 1) * 7 / :per) * interval '1 day' "
            "+ (i % 600) * interval '1 minute' + j * interval '11 minute' AS at) AS moment"
        ),
        {**params, "per": submissions},
    )


def _vacuum(url: str) -> None:
    """As autovacuum would soon: statistics, and the visibility map index-only scans need."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text("VACUUM ANALYZE"))
    engine.dispose()


def _instructor_token(database_url: str) -> str:
    from app.auth import service as auth
    from app.auth.models import INSTRUCTOR
    from app.db import make_engine

    engine = make_engine(database_url)
    with Session(engine) as session, session.begin():
        user = auth.register(
            session, email="prof@example.org", password="violet kettle sunrise", display_name="P"
        )
        session.flush()
        auth.set_role(session, email=user.email, role=INSTRUCTOR)
        token = auth.issue_token(session, user, device_name="bench", kind="api")
    engine.dispose()
    return token


def _load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def _rollups(url: str) -> None:
    """Build the rollups from the generated rows (`python -m app.analytics rebuild`), then time
    the upkeep of one learner's day: what the analytics consumer does for a graded submission's
    domain event (off the request path since issue 41)."""
    from app.analytics import rollups
    from app.db import as_utc

    engine = create_engine(url)
    started = time.perf_counter()
    with engine.begin() as conn:
        rollups.rebuild(conn)
    built = time.perf_counter() - started
    with engine.connect() as conn:
        sizes = {
            table: conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in rollups.TABLES
        }
        learners = conn.execute(
            text("SELECT user_id, exercise, created_at FROM submissions ORDER BY id LIMIT 20")
        ).all()
    print(
        f"rollups built in {built:.1f} s ({_load()}): "
        + ", ".join(f"{table} {rows}" for table, rows in sizes.items())
    )
    _vacuum(url)
    times = []
    with Session(engine) as session:
        for user_id, exercise, created_at in learners:
            began = time.perf_counter()
            with session.begin():
                rollups.refresh_attempts(session, user_id, exercise, as_utc(created_at).date())
            times.append((time.perf_counter() - began) * 1000)
    engine.dispose()
    print(
        f"upkeep of one learner's exercise-day: median {statistics.median(times):.1f} ms, "
        f"max {max(times):.1f} ms ({len(times)} refreshes, {_load()})"
    )


def _p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20, method="inclusive")[18]


def main(argv: list[str]) -> int:
    learners = int(_option(argv, "learners", "10000"))
    per = int(_option(argv, "submissions", "30"))
    repeat = int(_option(argv, "repeat", "15"))
    admin = _option(argv, "pg", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    with fresh_database(admin) as url:
        os.environ["RDV_DATABASE_URL"] = url
        from fastapi.testclient import TestClient

        from app.config import get_settings
        from app.main import create_app
        from app.migrate import upgrade

        get_settings.cache_clear()
        upgrade(url)
        engine = create_engine(url)
        started = time.perf_counter()
        with engine.begin() as conn:
            _generate(conn, learners, per)
        with engine.connect() as conn:
            counts = conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM submissions), "
                    "(SELECT count(*) FROM progress_events)"
                )
            ).one()
        engine.dispose()
        print(
            f"generated {learners} learners, {counts[0]} submissions, {counts[1]} progress "
            f"events in {time.perf_counter() - started:.1f} s"
        )
        _rollups(url)
        headers = {"Authorization": f"Bearer {_instructor_token(url)}"}
        shapes = {
            "lesson": {},
            "30 days": {"since": "2026-09-10", "until": "2026-10-09"},
            "by locale": {"by_locale": "true"},
            "30 days by locale": {"since": "2026-09-10", "until": "2026-10-09", "by_locale": "1"},
        }
        worst = 0.0
        with TestClient(create_app()) as client:
            # The first request loads the lessons, translations and check titles: timed apart.
            began = time.perf_counter()
            first = client.get(
                "/api/v1/instructor/analytics", params={"lesson_id": LESSON}, headers=headers
            )
            assert first.status_code == 200, first.text
            cold = (time.perf_counter() - began) * 1000
            print(f"{'first (cold)':>18}: {cold:5.0f} ms ({_load()})")
            for name, shape in shapes.items():
                times = []
                for _ in range(repeat):
                    began = time.perf_counter()
                    answered = client.get(
                        "/api/v1/instructor/analytics",
                        params={"lesson_id": LESSON, **shape},
                        headers=headers,
                    )
                    times.append((time.perf_counter() - began) * 1000)
                    assert answered.status_code == 200, answered.text
                worst = max(worst, _p95(times))
                print(
                    f"{name:>18}: median {statistics.median(times):5.0f} ms, "
                    f"p95 {_p95(times):5.0f} ms ({repeat} requests, {_load()})"
                )
        print(f"slowest p95 {worst:.0f} ms (wanted at most 300 ms at 10,000 x 30; {_load()})")
    return 0
