"""The instructors' analytics on a large generated cohort (PostgreSQL): one request's time.

    python -m benchmarks analytics [--learners=10000] [--submissions=30] [--repeat=7]
                                   [--pg=postgresql+psycopg://postgres@127.0.0.1:5432/postgres]

A fresh database is migrated, then filled in a few statements of `generate_series` (bounded:
no Python loop per row): `learners` learners, each with a prefix of lesson 2's steps seen and
completed, every quiz question answered (a wrong first answer for some, then the right one),
a draft per exercise, and `submissions` graded submissions spread over the lesson's exercises
(a few platform errors, passes after some failures, a first failed check drawn from each
exercise's checks). Then `GET /api/v1/instructor/analytics` is requested `repeat` times, in
four shapes (the whole lesson; a 30-day range; by locale; both), through the app in-process
(TestClient: routing, auth, the queries, JSON), and p50 and max are printed. Wanted: p50 under
300 ms at 10,000 x 30. Figures are wall-clock: read them beside the load average (printed).
The database is dropped after the run.
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
            "timestamptz '2026-09-01' + (i % 60) * interval '1 day' + ord * interval '3 min', "
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
                "timestamptz '2026-09-02' + (i % 60) * interval '1 day' + attempt * "
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
            "SELECT md5('u' || i)::uuid, e, 'import torch', timestamptz '2026-09-03' "
            "FROM generate_series(1, :n) i, unnest(CAST(:exercises AS text[])) e"
        ),
        params,
    )
    # Submission j of learner i: a platform error now and then, else a pass for one in five.
    conn.execute(
        text(
            "INSERT INTO submissions (id, user_id, exercise, code, locale, status, result, "
            "verdict, first_failed_check, attempts, created_at, finished_at) "
            "SELECT md5('s' || i || '-' || j)::uuid, md5('u' || i)::uuid, "
            "(CAST(:exercises AS text[]))[1 + j % cardinality(CAST(:exercises AS text[]))], "
            "repeat('x = 1  # a learner program of a few hundred bytes\n', 6), "
            "(" + LOCALES + ")[1 + i % 10], 'done', json_build_object('version', 1, "
            "'status', v, 'summary', v, 'checks', json_build_array()), v, "
            "CASE WHEN v = 'fail' THEN (CAST(:checks AS text[]))"
            "[1 + (i + j) % cardinality(CAST(:checks AS text[]))] END, 1, "
            "timestamptz '2026-09-03' + (i % 1440) * interval '1 minute' + j * interval '2 day', "
            "timestamptz '2026-09-03' + (i % 1440) * interval '1 minute' + j * interval '2 day' "
            "FROM generate_series(1, :n) i, generate_series(1, :per) j, LATERAL (SELECT CASE "
            "WHEN (i * j) % 53 = 0 THEN 'error' WHEN (i * 13 + j * 7) % 5 = 0 THEN 'pass' "
            "ELSE 'fail' END AS v) AS verdict"
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


def main(argv: list[str]) -> int:
    learners = int(_option(argv, "learners", "10000"))
    per = int(_option(argv, "submissions", "30"))
    repeat = int(_option(argv, "repeat", "7"))
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
        _vacuum(url)
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
        headers = {"Authorization": f"Bearer {_instructor_token(url)}"}
        shapes = {
            "lesson": {},
            "30 days": {"since": "2026-09-10", "until": "2026-10-09"},
            "by locale": {"by_locale": "true"},
            "30 days by locale": {"since": "2026-09-10", "until": "2026-10-09", "by_locale": "1"},
        }
        worst = 0.0
        with TestClient(create_app()) as client:
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
                p50 = statistics.median(times)
                worst = max(worst, p50)
                slowest = max(times)
                print(f"{name:>18}: p50 {p50:6.0f} ms, max {slowest:6.0f} ms ({repeat} requests)")
        load = os.getloadavg()
        print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        print(f"slowest shape p50 {worst:.0f} ms (wanted under 300 ms at 10,000 x 30)")
    return 0
