"""Grading backends behind one interface: the in-process executor and the procrastinate queue.

The submissions table is the source of truth. A backend only moves rows along
queued -> running -> done | error; a submission is handed to a backend after the transaction
that created it commits (the backend reads committed rows), so a rollback never leaves a ghost
job and a crash never loses one.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

from app.db import SessionFactory
from app.submissions import jobs
from app.submissions import repository as repo
from app.submissions.events import Batch, EventBuffer
from app.submissions.exercises import SpecLookup, spec_from_content
from app.submissions.models import Submission
from grader.contract import GradeEvent, Job, Result

if TYPE_CHECKING:
    from grader.sandbox.pool import Pool

log = logging.getLogger(__name__)

# Queued submissions counted for the grader's pool (more change nothing: it starts a sandbox per
# refill thread whenever any wait).
WAITING_LOOK = 8

GradeFn = Callable[..., Result]  # grade(job, *, on_event=...) -> Result


class GradingBackend(Protocol):
    name: str

    def start(self) -> None:
        """Pick up unfinished submissions and begin taking new ones."""

    def wake(self) -> None:
        """A new submission was committed: look for work now rather than at the next poll."""

    def stop(self) -> None:
        """Stop taking work; a job still running is picked up again by the next start."""

    def withdraw(self, job_ids: list[int]) -> int:
        """A deleted account's jobs that no worker has taken yet: removed from the queue, with
        the code they carry. How many were removed."""

    def hint_exercise(self, exercise: str) -> None:
        """A learner opened or is editing this exercise: whoever grades readies its launches.
        Returns at once and never fails the caller."""


def real_grade(
    job: Job, *, on_event: Callable[[GradeEvent], None] | None = None, pool: Pool | None = None
) -> Result:
    from grader.api import grade

    return grade(job, on_event=on_event, pool=pool)


class LocalBackend:
    """Runs the grader in this process, at most `concurrency` jobs at once, jobs kept in the DB.
    With the real grader it owns the grader's warm pool (grader.sandbox.pool): opened by
    `start`, closed by `stop`, so no prepared sandbox outlives the server."""

    name = "local"

    def __init__(
        self,
        session_factory: SessionFactory,
        *,
        concurrency: int = 1,
        grade: GradeFn = real_grade,
        spec_for: SpecLookup = spec_from_content,
        lease_seconds: float = 30.0,
        max_attempts: int = 2,
        poll_seconds: float = 1.0,
    ) -> None:
        self._uow = session_factory
        self._concurrency = max(1, concurrency)
        self._grade = grade
        self._spec_for = spec_for
        self._lease_seconds = lease_seconds
        self._max_attempts = max_attempts
        self._poll_seconds = poll_seconds
        self.owner = jobs.new_owner()
        self._wakeup = threading.Event()
        self._stopping = threading.Event()
        self._active: set[uuid.UUID] = set()
        self._active_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None
        self._grader_pool: Pool | None = None

    def start(self) -> None:
        self._stopping.clear()
        if self._grade is real_grade and self._grader_pool is None:
            from grader.api import prewarm
            from grader.sandbox.pool import open_pool

            self._grader_pool = open_pool()
            if self._grader_pool is not None:
                prewarm(self._grader_pool)  # sandboxes start now, not at the first submission
        self._pool = ThreadPoolExecutor(self._concurrency, thread_name_prefix="grading")
        self._thread = threading.Thread(target=self._dispatch_loop, name="grading-dispatch")
        self._thread.daemon = True
        self._thread.start()

    def wake(self) -> None:
        self._wakeup.set()

    def hint_exercise(self, exercise: str) -> None:
        """A learner opened or is editing this exercise: the grader's pool prepares its launches
        (world sizes, reference and faulted runs, the 2-node job), so its verdict does not wait
        for the ones the last grading of another exercise left. Returns at once."""
        pool = self._grader_pool
        spec = self._spec_for(exercise) if pool is not None else None
        if pool is None or spec is None:
            return
        from grader.api import hint_exercise

        try:
            hint_exercise(spec, pool)
        except Exception:  # a hint: the learner's draft is saved whatever the pool does
            log.exception("could not ready the warm pool for %s", exercise)

    def stop(self) -> None:
        self._stopping.set()
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._grader_pool is not None:
            self._grader_pool.close()  # its prepared sandboxes go with the server
            self._grader_pool = None

    def withdraw(self, job_ids: list[int]) -> int:
        """Nothing to do: this backend reads each job's code from its row when it claims it, and
        a deleted account's rows are gone (a claim of one finds nothing)."""
        return 0

    def run_pending_once(self) -> int:
        """Claim and start what fits now; returns how many jobs started (tests, benchmarks)."""
        free = self._concurrency - len(self._active)
        if free <= 0:
            return 0
        with self._uow() as session:
            ids = [s.id for s in repo.next_queued(session, limit=free, undispatched_only=False)]
        started = 0
        for submission_id in ids:
            with self._uow() as session:
                submission = jobs.claim(session, submission_id, self.owner)
            if submission is None:
                continue
            with self._active_lock:
                self._active.add(submission.id)
            assert self._pool is not None
            self._pool.submit(self._run, submission)
            started += 1
        return started

    def _tell_pool_what_waits(self) -> None:
        """How many submissions wait behind the running ones: with some waiting, the grader's
        pool starts their sandboxes during the gradings (grader.sandbox.pool.Pool.queued)."""
        pool = self._grader_pool
        if pool is None:
            return
        with self._uow() as session:
            waiting = repo.queued_count(session, at_most=WAITING_LOOK)
        pool.queued(waiting)

    def _dispatch_loop(self) -> None:
        beat_every = self._lease_seconds / 3
        next_beat = 0.0
        while not self._stopping.is_set():
            try:
                if time.monotonic() >= next_beat:
                    self._heartbeat_and_reclaim()
                    next_beat = time.monotonic() + beat_every
                self.run_pending_once()
                self._tell_pool_what_waits()
            except Exception:
                log.exception("grading dispatcher failed; retrying")
            self._wakeup.wait(self._poll_seconds)
            self._wakeup.clear()

    def _heartbeat_and_reclaim(self) -> None:
        with self._uow() as session:
            jobs.heartbeat(session, self.owner)
            reclaimed = jobs.reclaim_stale(
                session,
                me=self.owner,
                lease_seconds=self._lease_seconds,
                max_attempts=self._max_attempts,
            )
        if reclaimed.requeued or reclaimed.ended:
            log.warning(
                "picked up submissions of a stopped runner: %d to run again, %d ended as errors",
                len(reclaimed.requeued),
                len(reclaimed.ended),
            )

    def _run(self, submission: Submission) -> None:
        try:
            self._grade_one(submission)
        except Exception as exc:
            log.exception("grading submission %s failed", submission.id)
            with self._uow() as session:
                jobs.fail_for_platform(
                    session, submission, jobs.grader_stopped(exc), owner=self.owner
                )
        finally:
            with self._active_lock:
                self._active.discard(submission.id)
            self._wakeup.set()

    def _grade_one(self, submission: Submission) -> None:
        attempt = submission.attempts
        with self._uow() as session:
            job = jobs.build_job(submission, self._spec_for)
            if job is None:
                jobs.fail_for_platform(
                    session, submission, jobs.no_spec(submission.exercise), owner=self.owner
                )
                return
            repo.add_event(
                session,
                submission_id=submission.id,
                attempt=attempt,
                kind="status",
                data={"status": "starting"},
            )

        def write(batch: Batch) -> None:
            with self._uow() as session:
                jobs.record_events(session, submission.id, attempt, batch)

        buffer = EventBuffer(write)
        try:
            if self._grader_pool is not None:
                result = self._grade(job, on_event=buffer.on_grade_event, pool=self._grader_pool)
            else:
                result = self._grade(job, on_event=buffer.on_grade_event)
        finally:
            buffer.close()
        with self._uow() as session:
            jobs.complete(session, submission.id, result, attempt=attempt, owner=self.owner)


def make_backend(session_factory: SessionFactory | None = None) -> GradingBackend:
    """The backend the settings name (RDV_GRADING_BACKEND)."""
    from app.config import get_settings
    from app.db import unit_of_work

    settings = get_settings()
    factory = session_factory or unit_of_work
    if settings.grading_backend == "procrastinate":
        from app.submissions.queue import ProcrastinateBackend

        return ProcrastinateBackend(
            factory,
            conninfo=settings.queue_conninfo(),
            max_attempts=settings.max_attempts,
            results_worker=settings.results_worker,
        )
    return LocalBackend(
        factory,
        concurrency=settings.grading_concurrency,
        lease_seconds=settings.lease_seconds,
        max_attempts=settings.max_attempts,
    )
