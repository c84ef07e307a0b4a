"""The procrastinate path with a stand-in grader: real PostgreSQL, real worker processes,
a worker killed with SIGKILL mid-job. (test_real_grading.py does the same with the real grader.)
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import psycopg
import pytest

from app.submissions.models import Submission
from app.submissions.queue import ProcrastinateBackend
from grader import queue_protocol as protocol
from grader.contract import ExerciseSpec
from tests.submissions.helpers import (
    SessionFactory,
    new_submission,
    stored_events,
    wait_for,
    wait_for_event,
)
from tests.submissions.queue_fixtures import Workers, conninfo

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
FAKE = "tests.submissions.fake_worker"
SPEC = ExerciseSpec(checks=["run.completed"])


def spec_for(exercise: str) -> ExerciseSpec | None:
    return SPEC


def test_a_worker_grades_and_hands_events_and_result_back(
    pg_uow: SessionFactory,
    start_backend: Callable[..., ProcrastinateBackend],
    workers: Workers,
) -> None:
    backend = start_backend(spec_for)
    workers.start(FAKE)
    submission_id = new_submission(pg_uow, spec_for=spec_for)
    backend.wake()
    done = wait_for(pg_uow, submission_id, "done", "error")
    assert done.status == "done"
    assert done.queue == "cpu"
    assert done.result is not None and done.result["status"] == "pass"
    kinds = [(e.kind, e.rank) for e in stored_events(pg_uow, submission_id)]
    assert kinds == [
        ("status", None),
        ("output", 0),
        ("output", 1),
        ("check", None),
        ("done", None),
    ]


def test_a_worker_killed_mid_job_is_retried_by_another(
    pg_uow: SessionFactory,
    start_backend: Callable[..., ProcrastinateBackend],
    workers: Workers,
) -> None:
    start_backend(spec_for, max_attempts=2)
    doomed = workers.start(FAKE, env={"RDV_FAKE_GRADE_SLEEP": "600"})
    submission_id = new_submission(pg_uow, spec_for=spec_for)
    wait_for_event(pg_uow, submission_id, "output")
    assert wait_for(pg_uow, submission_id, "running").attempts == 1
    workers.kill(doomed)
    workers.start(FAKE)
    done = wait_for(pg_uow, submission_id, "done", "error")
    assert done.status == "done"
    assert done.attempts == 2
    assert done.result is not None and done.result["status"] == "pass"
    statuses = [e.data.get("status") for e in stored_events(pg_uow, submission_id)]
    assert "retrying" in statuses


def test_a_job_that_kills_its_workers_ends_as_error_never_fail(
    pg_uow: SessionFactory,
    start_backend: Callable[..., ProcrastinateBackend],
    workers: Workers,
) -> None:
    start_backend(spec_for, max_attempts=1)
    doomed = workers.start(FAKE, env={"RDV_FAKE_GRADE_SLEEP": "600"})
    submission_id = new_submission(pg_uow, spec_for=spec_for)
    wait_for_event(pg_uow, submission_id, "output")
    workers.kill(doomed)
    workers.start(FAKE)  # a live worker notices the stalled job
    ended = wait_for(pg_uow, submission_id, "done", "error")
    assert ended.status == "error"
    assert ended.result is not None and ended.result["status"] == "error"
    assert "does not count against you" in (ended.result["error"] or "")
    assert ended.result["error_id"] == "platform.worker_lost"  # rendered per reader when shown


def test_when_every_worker_is_gone_the_web_side_ends_the_job_as_error(
    pg_uow: SessionFactory,
    start_backend: Callable[..., ProcrastinateBackend],
    workers: Workers,
) -> None:
    start_backend(spec_for, max_attempts=1, grade_stalled_seconds=3)
    doomed = workers.start(FAKE, env={"RDV_FAKE_GRADE_SLEEP": "600"})
    submission_id = new_submission(pg_uow, spec_for=spec_for)
    wait_for_event(pg_uow, submission_id, "output")
    workers.kill(doomed)  # and no other worker ever starts
    ended = wait_for(pg_uow, submission_id, "done", "error")
    assert ended.status == "error"
    assert ended.result is not None and ended.result["status"] == "error"
    assert "does not count against you" in (ended.result["error"] or "")
    assert ended.result["error_id"] == "platform.worker_lost"  # rendered per reader when shown


def dispatched_job(uow: SessionFactory, submission_id: uuid.UUID) -> int:
    """The queue job id once the web side has handed the submission over."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with uow() as session:
            submission = session.get(Submission, submission_id)
            assert submission is not None
            if submission.queue_job_id is not None:
                return int(submission.queue_job_id)
        time.sleep(0.05)
    raise AssertionError("the submission was never handed to the queue")


def test_a_job_the_queue_dropped_without_a_result_ends_as_error_after_its_pending_lines(
    pg_url: str,
    pg_uow: SessionFactory,
    start_backend: Callable[..., ProcrastinateBackend],
) -> None:
    """The web side's sweep ends a submission whose grade job the queue gave up on
    (`queue_gave_up`), but not while a results job for it is still on its way: that one may be
    the stalled-job policy's own ending (`worker_lost`), which says more."""
    backend = start_backend(spec_for)  # and no grader worker: the job stays where it is put
    submission_id = new_submission(pg_uow, spec_for=spec_for)
    backend.wake()
    job_id = dispatched_job(pg_uow, submission_id)
    lock = protocol.submission_lock(str(submission_id))
    with psycopg.connect(conninfo(pg_url), autocommit=True) as db:
        pending = db.execute(  # a results job not due for an hour: still on its way
            "INSERT INTO procrastinate_jobs (queue_name, task_name, lock, args, scheduled_at)"
            " VALUES (%s, %s, %s, '{}', now() + interval '1 hour') RETURNING id",
            (protocol.RESULTS_QUEUE, protocol.RESULT_TASK, lock),
        ).fetchone()
        assert pending is not None
        db.execute("UPDATE procrastinate_jobs SET status = 'cancelled' WHERE id = %s", (job_id,))
        time.sleep(3.5)  # three sweeps (one a second in these tests)
        with pg_uow() as session:
            held = session.get(Submission, submission_id)
            assert held is not None and held.status == "queued"
        db.execute("DELETE FROM procrastinate_jobs WHERE id = %s", (pending[0],))
    ended = wait_for(pg_uow, submission_id, "done", "error")
    assert ended.status == "error"
    assert ended.result is not None and ended.result["error_id"] == "platform.queue_gave_up"
    assert "does not count against you" in (ended.result["error"] or "")


def test_when_every_worker_is_gone_a_retried_job_waits_queued_for_the_next(
    pg_uow: SessionFactory,
    start_backend: Callable[..., ProcrastinateBackend],
    workers: Workers,
) -> None:
    start_backend(spec_for, max_attempts=2, grade_stalled_seconds=3)
    doomed = workers.start(FAKE, env={"RDV_FAKE_GRADE_SLEEP": "600"})
    submission_id = new_submission(pg_uow, spec_for=spec_for)
    wait_for_event(pg_uow, submission_id, "output")
    workers.kill(doomed)
    assert wait_for(pg_uow, submission_id, "queued").attempts == 1  # not `running` any more
    workers.start(FAKE)
    done = wait_for(pg_uow, submission_id, "done", "error")
    assert (done.status, done.attempts) == ("done", 2)
