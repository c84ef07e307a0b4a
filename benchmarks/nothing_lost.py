"""Issue 39's three figures, each a bounded run on loopback, with the load average beside it:

1. deadlock (D1's shape): a real server on PostgreSQL (the default 15 slots), a coach model that
   answers in `--model-s` (past its 4 s deadline); 40 questions from 5 learners, then 16 ordinary
   requests of 2 others, `/healthz` and a static file. Printed: how many got no answer within
   `--deadline` (wanted: 0), statuses, p50/max latencies, and the ordinary request's latency
   against its own baseline measured first, on the same server (the ratio).
2. drafts (D3): `--rounds` rounds of two devices saving from the same base at once, on SQLite and
   PostgreSQL, through the service in real transactions. Wanted: 0 rounds where both were told
   "saved" (an edit overwritten).
3. mail restart (D6): 11 mails queued, the sender stopped while a relay takes a second per mail,
   a new sender started; wanted: 0 lost. Timed against the same 11 mails sent without a stop.

    python -m benchmarks nothing_lost [--pg=postgresql+psycopg://postgres@127.0.0.1:5432/postgres]
                                      [--rounds=100] [--model-s=12] [--deadline=60]
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from benchmarks.api_load import _option, fresh_database
from tests.api.served import served

PASSWORD = "violet kettle marmalade"
QUESTION = {
    "question": "Why does every rank see the same samples?",
    "lesson_id": "ddp-fundamentals",
}


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def _sign_up(url: str) -> dict[str, str]:
    email = f"bench-{uuid.uuid4().hex[:8]}@example.org"
    with httpx.Client(base_url=f"{url}/api/v1", timeout=120) as api:
        api.post("/auth/register", json={"email": email, "password": PASSWORD, "display_name": "B"})
        token = api.post(
            "/auth/token", data={"username": email, "password": PASSWORD, "device_name": "b"}
        ).json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    httpx.get(f"{url}/api/v1/me", headers=auth, timeout=120)
    return auth


def _timed(method: str, url: str, headers: dict[str, str], timeout: float) -> tuple[int, float]:
    started = time.monotonic()
    try:
        if method == "POST":
            status = httpx.post(url, json=QUESTION, headers=headers, timeout=timeout).status_code
        else:
            status = httpx.get(url, headers=headers, timeout=timeout).status_code
    except httpx.TransportError:
        status = 0
    return status, time.monotonic() - started


def _summary(name: str, results: list[tuple[int, float]]) -> str:
    statuses: dict[int, int] = {}
    for status, _ in results:
        statuses[status] = statuses.get(status, 0) + 1
    times = sorted(took for _, took in results)
    return (
        f"  {name:<9} n={len(results):>2} statuses={dict(sorted(statuses.items()))} "
        f"p50={statistics.median(times):.2f}s max={times[-1]:.2f}s  load {load()}"
    )


def deadlock(admin_url: str, model_s: float, deadline_s: float) -> bool:
    from tests.coach.fake_llm import FakeModel

    model = FakeModel(mode="slow", delay_s=model_s).start()
    env = {
        "RDV_COACH_URL": model.url,
        "RDV_COACH_TIMEOUT_SECONDS": "4",
        "RDV_AUTH_ADDRESS_LIMIT_FACTOR": "10",
        "RDV_DB_CHECKOUT_TIMEOUT_S": "15",
    }
    try:
        with tempfile.TemporaryDirectory() as tmp, served("postgres", Path(tmp), env) as server:
            url = server.url
            askers = [_sign_up(url) for _ in range(5)]
            others = [_sign_up(url) for _ in range(2)]
            baseline = [_timed("GET", f"{url}/api/v1/me", others[0], deadline_s) for _ in range(16)]
            with ThreadPoolExecutor(64) as pool:
                asked = [
                    pool.submit(_timed, "POST", f"{url}/api/v1/coach", a, deadline_s)
                    for a in askers
                    for _ in range(8)
                ]
                time.sleep(1.0)
                ordinary = [
                    pool.submit(_timed, "GET", f"{url}/api/v1/me", o, deadline_s)
                    for o in others
                    for _ in range(8)
                ]
                probes, static = [], []
                for _ in range(4):
                    probes.append(pool.submit(_timed, "GET", f"{url}/healthz", {}, deadline_s))
                    path = f"{url}/static/js/lesson.js"
                    static.append(pool.submit(_timed, "GET", path, {}, deadline_s))
                    time.sleep(1.0)
                results = {
                    "questions": [f.result() for f in asked],
                    "ordinary": [f.result() for f in ordinary],
                    "healthz": [f.result() for f in probes],
                    "static": [f.result() for f in static],
                }
    finally:
        model.stop()
    print(f"1. deadlock (D1 shape, PostgreSQL, model answers in {model_s:.0f} s, deadline 4 s)")
    print(_summary("baseline", baseline))
    for name, got in results.items():
        print(_summary(name, got))
    unanswered = sum(status == 0 for got in results.values() for status, _ in got)
    ratio = statistics.median(t for _, t in results["ordinary"]) / statistics.median(
        t for _, t in baseline
    )
    print(
        f"  unanswered within {deadline_s:.0f} s: {unanswered}; "
        f"ordinary p50 / baseline: {ratio:.1f}x"
    )
    return unanswered == 0


def _draft_rounds(engine: Engine, rounds: int) -> tuple[int, int]:
    """(rounds where both devices were told saved, rounds with exactly one saved)."""
    from app.auth.models import User
    from app.submissions import service
    from app.submissions.errors import DraftConflict
    from tests.auth.factories import create_user

    exercise = "ddp-fundamentals/train"
    with Session(engine, expire_on_commit=False) as session, session.begin():
        learner = create_user(session, email=f"race-{uuid.uuid4().hex}@example.org").id
        base = service.save_draft(
            session, user_id=learner, exercise=exercise, code="#\n"
        ).updated_at

    def save(job: tuple[str, object, threading.Barrier]) -> bool:
        code, base_at, start = job
        with Session(engine, expire_on_commit=False) as session:
            start.wait()
            try:
                with session.begin():
                    service.save_draft(
                        session,
                        user_id=learner,
                        exercise=exercise,
                        code=code,
                        base_updated_at=base_at,  # type: ignore[arg-type]
                    )
            except DraftConflict:
                return False
        return True

    both = one = 0
    with ThreadPoolExecutor(2) as pool:
        for n in range(rounds):
            start = threading.Barrier(2)
            jobs = [(f"# A {n}\n", base, start), (f"# B {n}\n", base, start)]
            saved = list(pool.map(save, jobs))
            both += all(saved)
            one += sum(saved) == 1
            with Session(engine) as session:
                draft = service.get_draft(session, user_id=learner, exercise=exercise)
                assert draft is not None
                base = draft.updated_at
    with Session(engine) as session, session.begin():
        session.query(User).filter(User.id == learner).delete()
    return both, one


def drafts(admin_url: str, rounds: int) -> bool:
    from app.migrate import upgrade as upgrade_url

    ok = True
    with tempfile.TemporaryDirectory() as tmp, fresh_database(admin_url) as pg_url:
        for name, url in (("sqlite", f"sqlite:///{tmp}/race.db"), ("postgres", pg_url)):
            upgrade_url(url)
            engine = create_engine(url)
            started = time.monotonic()
            both, one = _draft_rounds(engine, rounds)
            took = time.monotonic() - started
            engine.dispose()
            print(
                f"2. drafts ({name}): {rounds} rounds, overwritten (both saved) {both}, "
                f"one saved one 409 {one}, {took / rounds * 1000:.0f} ms a round  load {load()}"
            )
            ok = ok and both == 0 and one == rounds
    return ok


def mail_restart(admin_url: str) -> bool:
    from app.config import Settings
    from app.migrate import upgrade as upgrade_url
    from app.outmail import queue, sender
    from tests.auth.test_mail_queue import _SlowRelay

    with fresh_database(admin_url) as url:
        upgrade_url(url)
        engine = create_engine(url)
        maker = sessionmaker(bind=engine, expire_on_commit=False)

        @contextmanager
        def sessions() -> Iterator[Session]:
            with maker() as session, session.begin():
                yield session

        def run(stop_after_s: float | None) -> tuple[int, float]:
            recipients = [f"{n}-{uuid.uuid4().hex[:6]}@example.org" for n in range(11)]
            with sessions() as session:
                for to in recipients:
                    queue.enqueue(session, to=to, subject="Welcome", body="text")
            started = time.monotonic()
            slow = _SlowRelay(1.0)
            received = slow.received
            try:
                settings = Settings(smtp_host="127.0.0.1", smtp_port=slow.port)
                first = sender.Sender(sessions, settings, concurrency=4, poll_s=0.2).start()
                if stop_after_s is not None:
                    time.sleep(stop_after_s)
                    first.stop(timeout_s=3)  # the process stops with mails queued
                    first = sender.Sender(sessions, settings, concurrency=4, poll_s=0.2).start()
                deadline = time.monotonic() + 120
                while set(recipients) - set(received) and time.monotonic() < deadline:
                    time.sleep(0.05)
                first.stop()
            finally:
                slow.stop()
            return len(set(recipients) - set(received)), time.monotonic() - started

        lost_plain, plain_s = run(None)
        lost, restart_s = run(1.5)
        engine.dispose()
    print(
        f"3. mail restart: 11 queued, relay 1 s a mail, stopped at 1.5 s, restarted: lost {lost} "
        f"(without a stop: {lost_plain}); all sent in {restart_s:.1f} s vs {plain_s:.1f} s "
        f"({restart_s / plain_s:.2f}x)  load {load()}"
    )
    return lost == 0 and lost_plain == 0


def main(argv: list[str]) -> int:
    admin_url = _option(argv, "pg", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    rounds = int(_option(argv, "rounds", "100"))
    model_s = float(_option(argv, "model-s", "12"))
    deadline_s = float(_option(argv, "deadline", "120"))
    ok = drafts(admin_url, rounds)
    ok = mail_restart(admin_url) and ok
    ok = deadlock(admin_url, model_s, deadline_s) and ok
    return 0 if ok else 1
