"""The procrastinate path with a stand-in grader: real PostgreSQL, real worker processes,
a worker killed with SIGKILL mid-job. (test_real_grading.py does the same with the real grader.)
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.submissions.queue import ProcrastinateBackend
from grader.contract import ExerciseSpec
from tests.submissions.helpers import (
    SessionFactory,
    new_submission,
    stored_events,
    wait_for,
    wait_for_event,
)
from tests.submissions.queue_fixtures import Workers

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
