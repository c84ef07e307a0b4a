"""Queue workers ready what is coming (grader.worker_warm, grader.queue_protocol.coming/send_hint)
on a real PostgreSQL queue: the pending grade jobs first, then the exercises learners opened in
the web app (ProcrastinateBackend.hint_exercise), never while the worker grades. The pool is a
recorder: what it prepares for a plan is the pool's own business (tests/grader/test_pool.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from app.submissions.queue import ProcrastinateBackend
from grader import queue_protocol as protocol
from grader.contract import ExerciseSpec, Job
from grader.exercises import UnknownExercise, load_spec
from grader.launch.plan import plan_launches
from grader.sandbox.pool import Pool
from grader.worker import build_app as build_worker_app
from grader.worker_warm import QueueWarmer
from tests.submissions.queue_fixtures import conninfo

pytestmark = pytest.mark.postgres

LESSON2 = "ddp-fundamentals/train"
ENV_LAUNCH = "torchrun-launch/env-launch"
EVALUATE = "ddp-fundamentals/evaluate"


class RecordingPool:
    """Stands in for grader.sandbox.pool.Pool: records each plan it is asked to prepare."""

    def __init__(self) -> None:
        self.plans: list[list[tuple[int, int]]] = []
        self.waiting: list[int] = []

    def queued(self, count: int) -> None:
        self.waiting.append(count)

    def prewarm(self, plan: list[tuple[Any, tuple[int, int]]], backend: tuple[str, ...]) -> None:
        self.plans.append([shape for _request, shape in plan])


def in_thread(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """`asyncio.run(coroutine)` in a thread of its own: a test run before this one in the same
    process may have left an event loop set on this thread."""
    with ThreadPoolExecutor(1) as executor:
        return executor.submit(asyncio.run, coroutine).result()


def run(coroutine_fn: Callable[[psycopg.AsyncConnection[Any]], Any], dsn: str) -> Any:
    async def go() -> Any:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            return await coroutine_fn(conn)

    return in_thread(go())


def defer_grade(dsn: str, exercise: str) -> None:
    job = Job(exercise=exercise, code="x = 1\n", spec=load_spec(exercise), submission_id=exercise)

    async def go() -> None:
        app = build_worker_app(dsn, queue="cpu")
        async with app.open_async():
            await app.configure_task(name=protocol.GRADE_TASK, queue="cpu").defer_async(
                **protocol.grade_payload(job, 2)
            )

    in_thread(go())


@pytest.fixture
def dsn(pg_url: str) -> str:
    url = conninfo(pg_url)
    in_thread(protocol.ensure_schema(url))
    return url


def plan_of(exercise: str) -> list[tuple[int, int]]:
    return [
        (launch.world_size // launch.nnodes, launch.nnodes)
        for launch in plan_launches(load_spec(exercise))
    ]


def test_what_is_coming_pending_jobs_first_then_fresh_hints_one_per_exercise(dsn: str) -> None:
    defer_grade(dsn, ENV_LAUNCH)
    defer_grade(dsn, LESSON2)

    async def hints(conn: psycopg.AsyncConnection[Any]) -> None:
        for exercise in (EVALUATE, LESSON2, "ddp-fundamentals/accumulate"):
            await protocol.send_hint(conn, exercise, load_spec(exercise))
        # Opened long ago: no longer a sign of what comes.
        await conn.execute(
            f"UPDATE {protocol.HINTS_TABLE} SET at = now() - interval '1 hour' "
            "WHERE exercise = 'ddp-fundamentals/accumulate'"
        )

    run(hints, dsn)
    coming: list[ExerciseSpec] = run(lambda conn: protocol.coming(conn, "cpu", limit=4), dsn)
    assert coming == [load_spec(ENV_LAUNCH), load_spec(LESSON2), load_spec(EVALUATE)]
    assert run(lambda conn: protocol.coming(conn, "cpu", limit=1), dsn) == [load_spec(ENV_LAUNCH)]
    assert run(lambda conn: protocol.coming(conn, "gpu"), dsn) == []


def test_an_idle_worker_readies_what_comes_and_a_grading_one_does_not(dsn: str) -> None:
    pool = RecordingPool()
    warmer = QueueWarmer(pool, dsn, "cpu", "bwrap")  # type: ignore[arg-type]
    assert run(warmer.look, dsn) is None and pool.plans == []  # nothing is coming

    run(lambda conn: protocol.send_hint(conn, ENV_LAUNCH, load_spec(ENV_LAUNCH)), dsn)
    assert run(warmer.look, dsn) == load_spec(ENV_LAUNCH)
    # Its launches, the 2-node job's agents included, in the order the grading makes them.
    assert pool.plans == [plan_of(ENV_LAUNCH)] and (1, 2) in pool.plans[0]
    assert run(warmer.look, dsn) is None and len(pool.plans) == 1  # nothing new

    assert pool.waiting[-1] == 0
    with warmer.job():  # the grading tells the pool its own launches
        defer_grade(dsn, EVALUATE)
        assert run(warmer.look, dsn) is None and len(pool.plans) == 1
        assert pool.waiting[-1] == 1  # but hears of the job waiting: it refills meanwhile
    # Done: the pending job comes before any hint.
    assert run(warmer.look, dsn) == load_spec(EVALUATE)
    assert pool.plans[-1] == plan_of(EVALUATE)


def test_the_web_side_records_what_a_learner_opens_at_most_every_so_often(
    dsn: str, start_backend: Callable[..., ProcrastinateBackend]
) -> None:
    def spec_for(exercise: str) -> ExerciseSpec | None:  # as spec_from_content looks it up
        try:
            return load_spec(exercise)
        except UnknownExercise:
            return None

    backend = start_backend(spec_for)

    def recorded() -> list[tuple[str, Any]]:
        async def rows(conn: psycopg.AsyncConnection[Any]) -> list[tuple[str, Any]]:
            cursor = await conn.execute(f"SELECT exercise, at FROM {protocol.HINTS_TABLE}")
            return list(await cursor.fetchall())

        return run(rows, dsn)

    backend.hint_exercise(ENV_LAUNCH)
    deadline = time.monotonic() + 30
    while not recorded() and time.monotonic() < deadline:
        time.sleep(0.1)
    first = recorded()
    assert [exercise for exercise, _at in first] == [ENV_LAUNCH]
    backend.hint_exercise(ENV_LAUNCH)  # the editor saved again a moment later
    backend.hint_exercise("no-such/exercise")  # nothing to ready: not recorded
    time.sleep(1.0)
    assert recorded() == first
    pool = RecordingPool()
    assert run(QueueWarmer(pool, dsn, "cpu", "bwrap").look, dsn) == load_spec(ENV_LAUNCH)  # type: ignore[arg-type]


def test_a_real_pool_takes_the_hinted_plan(dsn: str) -> None:
    """The warmer's hint reaches a real pool's plan (no sandbox needs to start for that)."""
    run(lambda conn: protocol.send_hint(conn, ENV_LAUNCH, load_spec(ENV_LAUNCH)), dsn)
    pool = Pool(1)
    try:
        run(QueueWarmer(pool, dsn, "cpu", "bwrap").look, dsn)
        assert [(key.ranks, key.nodes) for key in pool.plan] == plan_of(ENV_LAUNCH)
    finally:
        pool.close()
