"""A deleted account's code leaves the grading queue (procrastinate, real PostgreSQL): the jobs
no worker took yet are deleted with the code they carry, so no worker can grade them later."""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg
import pytest
from sqlalchemy import delete

from app.auth.models import User
from app.submissions import service
from app.submissions.models import Submission
from app.submissions.queue import ProcrastinateBackend
from grader.contract import ExerciseSpec
from tests.submissions.helpers import SessionFactory, new_submission
from tests.submissions.queue_fixtures import conninfo

pytestmark = [pytest.mark.postgres]
SECRET = "print('the deleted learner wrote this')\n"


def spec_for(exercise: str) -> ExerciseSpec | None:
    return ExerciseSpec(checks=["run.completed"])


def _jobs_holding_the_code(pg_url: str) -> int:
    with psycopg.connect(conninfo(pg_url)) as conn:
        if conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone() == (None,):
            return 0  # the backend has not made the queue's tables yet
        row = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE args::text LIKE %s",
            ("%the deleted learner wrote this%",),
        ).fetchone()
    return int(row[0]) if row else 0


def test_deleting_an_account_removes_its_queued_code(
    pg_url: str, pg_uow: SessionFactory, start_backend: Callable[..., ProcrastinateBackend]
) -> None:
    backend = start_backend(spec_for)  # no worker: the job waits in the queue
    submission_id = new_submission(pg_uow, SECRET, spec_for=spec_for)
    backend.wake()
    deadline = time.monotonic() + 60
    while _jobs_holding_the_code(pg_url) == 0:
        assert time.monotonic() < deadline, "the submission never reached the queue"
        time.sleep(0.05)
    with pg_uow() as session:
        submission = session.get(Submission, submission_id)
        assert submission is not None
        user_id = submission.user_id
        job_ids = service.queued_job_ids(session, user_id)
        session.execute(delete(User).where(User.id == user_id))
    assert len(job_ids) == 1
    assert backend.withdraw(job_ids) == 1
    assert _jobs_holding_the_code(pg_url) == 0
