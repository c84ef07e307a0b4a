"""The in-process grading backend on a committed database: lifecycle, restart, bounded
concurrency, platform errors. The grader here is a stand-in; test_real_grading.py runs the real one.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.submissions import service
from app.submissions.backends import LocalBackend
from app.submissions.models import Submission, SubmissionEvent
from grader.contract import ExerciseSpec, GradeEvent, Job, Result
from tests.auth.factories import create_user
from tests.submissions.fakes import FakeGrader

SessionFactory = Callable[[], AbstractContextManager[Session]]
SPEC = ExerciseSpec(checks=["run.completed"])


def spec_for(exercise: str) -> ExerciseSpec | None:
    return SPEC if exercise == "ddp-fundamentals/train" else None


def new_submission(uow: SessionFactory, code: str = "print(1)\n") -> uuid.UUID:
    with uow() as session:
        user = create_user(session)
        submitted = service.submit(
            session,
            user_id=user.id,
            exercise="ddp-fundamentals/train",
            code=code,
            spec_for=spec_for,
            max_in_flight=10,
        )
        session.flush()
        return submitted.submission.id


def wait_for(uow: SessionFactory, submission_id: uuid.UUID, *statuses: str) -> Submission:
    deadline = time.monotonic() + 120  # a hang guard, not a performance threshold
    while time.monotonic() < deadline:
        with uow() as session:
            submission = session.get(Submission, submission_id)
            assert submission is not None
            if submission.status in statuses:
                return submission
        time.sleep(0.05)
    raise AssertionError(f"submission never reached {statuses}")


def stored_events(uow: SessionFactory, submission_id: uuid.UUID) -> list[SubmissionEvent]:
    with uow() as session:
        return list(
            session.scalars(
                select(SubmissionEvent)
                .where(SubmissionEvent.submission_id == submission_id)
                .order_by(SubmissionEvent.id)
            )
        )


@pytest.fixture
def backend_factory(uow: SessionFactory) -> Iterator[Callable[..., LocalBackend]]:
    made: list[LocalBackend] = []

    def make(**kwargs: object) -> LocalBackend:
        options: dict[str, object] = {"spec_for": spec_for, "poll_seconds": 0.05, **kwargs}
        backend = LocalBackend(uow, **options)  # type: ignore[arg-type]
        made.append(backend)
        backend.start()
        return backend

    yield make
    for backend in made:
        backend.stop()


def test_a_submission_is_graded_and_its_events_stored_in_order(
    uow: SessionFactory, backend_factory: Callable[..., LocalBackend]
) -> None:
    grader = FakeGrader("fail")
    submission_id = new_submission(uow)
    backend_factory(grade=grader).wake()
    done = wait_for(uow, submission_id, "done", "error")
    assert done.status == "done"
    assert done.result is not None and done.result["status"] == "fail"
    assert done.attempts == 1
    assert grader.jobs[0].submission_id == str(submission_id)
    kinds = [(e.kind, e.rank) for e in stored_events(uow, submission_id)]
    assert kinds == [
        ("status", None),
        ("status", None),
        ("output", 0),
        ("output", 1),
        ("check", None),
        ("done", None),
    ]


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def make_running(uow: SessionFactory, submission_id: uuid.UUID, *, attempts: int) -> None:
    """As if a web process claimed it and then died mid-job."""
    owner = f"{socket.gethostname()}:{dead_pid()}:deadbeef"
    with uow() as session:
        session.execute(
            update(Submission)
            .where(Submission.id == submission_id)
            .values(status="running", attempts=attempts, lease_owner=owner)
        )


def test_restart_picks_up_queued_and_reruns_a_dead_processs_running_job(
    uow: SessionFactory, backend_factory: Callable[..., LocalBackend]
) -> None:
    queued = new_submission(uow, "print('queued')\n")
    running = new_submission(uow, "print('running')\n")
    make_running(uow, running, attempts=1)
    backend_factory(grade=FakeGrader("pass"), concurrency=2)
    assert wait_for(uow, queued, "done", "error").status == "done"
    rerun = wait_for(uow, running, "done", "error")
    assert rerun.status == "done"
    assert rerun.attempts == 2
    statuses = [e.data.get("status") for e in stored_events(uow, running) if e.kind == "status"]
    assert statuses[0] == "retrying"


def test_a_job_whose_runner_died_too_often_ends_as_error_never_fail(
    uow: SessionFactory, backend_factory: Callable[..., LocalBackend]
) -> None:
    submission_id = new_submission(uow)
    make_running(uow, submission_id, attempts=2)
    grader = FakeGrader("fail")
    backend_factory(grade=grader, max_attempts=2)
    ended = wait_for(uow, submission_id, "done", "error")
    assert ended.status == "error"
    assert ended.result is not None and ended.result["status"] == "error"
    assert "does not count against you" in ended.result["error"]
    assert grader.jobs == []  # not run a third time
    assert stored_events(uow, submission_id)[-1].kind == "done"


def test_concurrency_is_bounded(
    uow: SessionFactory, backend_factory: Callable[..., LocalBackend]
) -> None:
    gate = threading.Event()
    grader = FakeGrader("pass", gate=gate)
    first, second = new_submission(uow, "print(1)\n"), new_submission(uow, "print(2)\n")
    backend = backend_factory(grade=grader, concurrency=1)
    assert grader.started.wait(60)
    backend.wake()
    assert backend.run_pending_once() == 0  # the one slot is taken
    with uow() as session:
        statuses = {s.id: s.status for s in session.scalars(select(Submission))}
    assert sorted(statuses.values()) == ["queued", "running"]
    gate.set()
    assert wait_for(uow, first, "done").status == "done"
    assert wait_for(uow, second, "done").status == "done"


def test_a_crashing_grader_is_a_platform_error(
    uow: SessionFactory, backend_factory: Callable[..., LocalBackend]
) -> None:
    def broken(job: object, **_: object) -> object:
        raise RuntimeError("sandbox exploded")

    submission_id = new_submission(uow)
    backend_factory(grade=broken)
    ended = wait_for(uow, submission_id, "done", "error")
    assert ended.status == "error"
    assert ended.result is not None and "sandbox exploded" in ended.result["error"]


def test_a_rolled_back_submission_is_never_graded(
    uow: SessionFactory, db_backend: str, request: pytest.FixtureRequest
) -> None:
    """Backends take only committed rows: a request that fails after the insert queues nothing."""
    with pytest.raises(RuntimeError), uow() as session:
        user = create_user(session)
        service.submit(
            session, user_id=user.id, exercise="ddp-fundamentals/train", code="x", spec_for=spec_for
        )
        session.flush()
        raise RuntimeError("the request failed after the insert")
    with uow() as session:
        assert list(session.scalars(select(Submission))) == []


def no_database() -> AbstractContextManager[Session]:
    raise AssertionError("expecting an exercise touches no database")


def owning(pool: object) -> LocalBackend:
    """A backend of the real grader whose warm pool is `pool` (as `start` opens it)."""
    backend = LocalBackend(no_database, spec_for=spec_for)
    backend._grader_pool = pool  # type: ignore[assignment]
    return backend


def test_a_hinted_exercise_readies_the_real_graders_pool_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import grader.api

    warmed: list[tuple[ExerciseSpec, object]] = []
    monkeypatch.setattr(grader.api, "hint_exercise", lambda spec, pool: warmed.append((spec, pool)))
    pool = object()
    owning(pool).hint_exercise("ddp-fundamentals/train")
    owning(pool).hint_exercise("no-such/exercise")
    assert warmed == [(SPEC, pool)]
    # A stand-in grader, or a real one whose pool is off, has no pool to ready.
    stand_in = LocalBackend(no_database, grade=FakeGrader(), spec_for=spec_for)
    stand_in.hint_exercise("ddp-fundamentals/train")
    LocalBackend(no_database, spec_for=spec_for).hint_exercise("ddp-fundamentals/train")
    assert warmed == [(SPEC, pool)]


def test_the_backend_owns_the_graders_pool_and_closes_it_when_it_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import grader.api
    import grader.sandbox.pool

    class Recorded:
        closed = False

        def close(self) -> None:
            self.closed = True

    opened = Recorded()
    monkeypatch.setattr(grader.sandbox.pool, "open_pool", lambda: opened)
    monkeypatch.setattr(grader.api, "prewarm", lambda pool: None)
    backend = LocalBackend(no_database, spec_for=spec_for, poll_seconds=60)
    monkeypatch.setattr(backend, "_dispatch_loop", lambda: None)
    backend.start()
    assert backend._grader_pool is opened
    backend.stop()
    assert opened.closed and backend._grader_pool is None


def test_a_pool_that_cannot_start_never_fails_the_learners_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import grader.api
    from grader.sandbox.base import SandboxUnavailable

    def unavailable(spec: ExerciseSpec, pool: object) -> None:
        raise SandboxUnavailable("bwrap is not installed")

    monkeypatch.setattr(grader.api, "hint_exercise", unavailable)
    owning(object()).hint_exercise("ddp-fundamentals/train")


class CountsQueued:
    """The grader pool's side the backend tells how many submissions wait."""

    def __init__(self) -> None:
        self.told: list[int] = []

    def queued(self, count: int) -> None:
        self.told.append(count)

    def close(self) -> None:
        pass


def test_the_pool_is_told_how_many_submissions_wait_behind_the_running_one(
    uow: SessionFactory, backend_factory: Callable[..., LocalBackend]
) -> None:
    """With a backlog the grader's pool starts the next gradings' sandboxes during this one
    (grader.sandbox.pool.Pool.queued); once it is drained, it is told so."""
    gate = threading.Event()
    grader = FakeGrader(gate=gate)

    def grade(job: Job, *, on_event: Callable[[GradeEvent], None], pool: object) -> Result:
        return grader(job, on_event=on_event)

    backend = backend_factory(grade=grade, concurrency=1)
    pool = CountsQueued()
    backend._grader_pool = pool  # type: ignore[assignment]
    ids = [new_submission(uow) for _ in range(3)]
    backend.wake()
    assert grader.started.wait(60)
    deadline = time.monotonic() + 60  # a hang guard
    while 2 not in pool.told and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 2 in pool.told  # one running, two waiting
    gate.set()
    for submission_id in ids:
        wait_for(uow, submission_id, "done")
    while pool.told[-1] != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.told[-1] == 0
