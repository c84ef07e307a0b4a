"""Both backends with the real grader on lesson 2's exercise: the reference solution passes
through the in-process executor and through a procrastinate worker process, and a worker killed
with SIGKILL while the learner's ranks run loses nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.content.service import get_exercise
from app.submissions.backends import LocalBackend
from app.submissions.exercises import spec_from_content
from app.submissions.queue import ProcrastinateBackend
from tests.submissions.helpers import (
    EXERCISE,
    SessionFactory,
    make_uow,
    new_submission,
    stored_events,
    wait_for,
    wait_for_event,
)
from tests.submissions.queue_fixtures import Workers

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]


def solution() -> str:
    return get_exercise(EXERCISE).solution_path.read_text("utf-8")


def assert_graded_pass(uow: SessionFactory, submission_id: object) -> None:
    done = wait_for(uow, submission_id, "done", "error")  # type: ignore[arg-type]
    assert done.result is not None
    assert (done.status, done.result["status"]) == ("done", "pass"), done.result
    events = stored_events(uow, done.id)
    output_ranks = {e.rank for e in events if e.kind == "output"}
    assert output_ranks == {0, 1}
    checked = {e.data["id"] for e in events if e.kind == "check"}
    assert {c["id"] for c in done.result["checks"]} == checked
    assert events[-1].kind == "done"
    assert done.result["artifacts"]["sampler"]["epochs"]


@pytest.fixture
def sqlite_uow(tmp_path: Path) -> Iterator[SessionFactory]:
    from tests.submissions.conftest import fresh_database_url

    factory, dispose = make_uow(fresh_database_url("sqlite", tmp_path))
    yield factory
    dispose()


def test_local_backend_grades_the_solution_for_real(sqlite_uow: SessionFactory) -> None:
    backend = LocalBackend(sqlite_uow, poll_seconds=0.1)
    submission_id = new_submission(sqlite_uow, solution())
    backend.start()
    try:
        assert_graded_pass(sqlite_uow, submission_id)
    finally:
        backend.stop()


@pytest.mark.postgres
def test_a_grader_worker_grades_the_solution_for_real(
    pg_uow: SessionFactory,
    start_backend: Callable[..., ProcrastinateBackend],
    workers: Workers,
) -> None:
    start_backend(spec_from_content)
    workers.start()
    submission_id = new_submission(pg_uow, solution())
    assert_graded_pass(pg_uow, submission_id)


@pytest.mark.postgres
def test_sigkill_of_a_real_worker_mid_job_retries_and_passes(
    pg_uow: SessionFactory,
    start_backend: Callable[..., ProcrastinateBackend],
    workers: Workers,
) -> None:
    start_backend(spec_from_content, max_attempts=2)
    # Each rank says hello, then takes a few seconds before training: time to kill the worker.
    slow_start = "import time\nprint('warming up', flush=True)\ntime.sleep(4)\n"
    doomed = workers.start()
    submission_id = new_submission(pg_uow, slow_start + solution())
    wait_for_event(pg_uow, submission_id, "output")
    workers.kill(doomed)
    workers.start()
    assert_graded_pass(pg_uow, submission_id)
    rerun = wait_for(pg_uow, submission_id, "done")
    assert rerun.attempts == 2
    assert "retrying" in [e.data.get("status") for e in stored_events(pg_uow, submission_id)]
