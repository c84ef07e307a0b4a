"""The procrastinate backend, web side: hand queued submissions to grader workers (queues
`cpu` and `gpu`) and store what they send back on the `results` queue.

Task names, payloads, the schema set-up and the stalled-job policy are `grader.queue_protocol`,
which `grader/worker.py` uses as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from typing import Any

import procrastinate
import psycopg
from procrastinate import exceptions as pq_errors

from app.db import SessionFactory, utcnow
from app.submissions import jobs
from app.submissions import repository as repo
from app.submissions.exercises import SpecLookup, spec_from_content
from app.submissions.models import Submission
from grader import queue_protocol as protocol
from grader.contract import ExerciseSpec, Job, Result
from grader.i18n import Message

log = logging.getLogger(__name__)

# Seconds between two hints for the same exercise (grader.queue_protocol.send_hint).
HINT_EVERY_S = 30.0


class ResultStore:
    """Applies what grader workers send back. Every call is one unit of work."""

    def __init__(self, session_factory: SessionFactory) -> None:
        self._uow = session_factory

    def events(
        self, submission_id: str, attempt: int, worker: str, events: list[dict[str, Any]]
    ) -> None:
        sid = uuid.UUID(submission_id)
        with self._uow() as session:
            submission = repo.get(session, sid)
            if submission is None or not jobs.is_unfinished(submission.status):
                return
            if attempt < submission.attempts:
                return  # a late line from an attempt the queue already gave up on
            for event in events:
                status = (event.get("data") or {}).get("status")
                if event.get("kind") == "status" and status == "starting":
                    repo.mark_running(
                        session, submission_id=sid, attempt=attempt, owner=worker, now=utcnow()
                    )
                elif event.get("kind") == "status" and status == "retrying":
                    repo.requeue(session, submission_id=sid, owner=None, redispatch=False)
            jobs.record_events(session, sid, attempt, events)

    def result(self, submission_id: str, attempt: int, result: dict[str, Any]) -> None:
        with self._uow() as session:
            jobs.complete(
                session,
                uuid.UUID(submission_id),
                Result.model_validate(result),
                attempt=attempt,
                owner=None,
            )


def build_app(conninfo: str, store: ResultStore) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo))

    @app.task(name=protocol.EVENTS_TASK, queue=protocol.RESULTS_QUEUE)
    async def store_events(
        submission_id: str, attempt: int, worker: str, events: list[dict[str, Any]]
    ) -> None:
        await asyncio.to_thread(store.events, submission_id, attempt, worker, events)

    @app.task(name=protocol.RESULT_TASK, queue=protocol.RESULTS_QUEUE)
    async def store_result(submission_id: str, attempt: int, result: dict[str, Any]) -> None:
        await asyncio.to_thread(store.result, submission_id, attempt, result)

    return app


class ProcrastinateBackend:
    """Defers each committed submission to a grader worker's queue; stores results it gets back."""

    name = "procrastinate"

    def __init__(
        self,
        session_factory: SessionFactory,
        *,
        conninfo: str,
        max_attempts: int = 2,
        spec_for: SpecLookup = spec_from_content,
        results_worker: bool = True,
        poll_seconds: float = 1.0,
        sweep_seconds: float = 10.0,
        heartbeat_seconds: float = 5.0,
        grade_stalled_seconds: float = 60.0,
    ) -> None:
        self._uow = session_factory
        self.conninfo = conninfo
        self._max_attempts = max_attempts
        self._spec_for = spec_for
        self._results_worker = results_worker
        self._poll_seconds = poll_seconds
        self._sweep_seconds = sweep_seconds
        # Shorter than any worker's --stalled-after (30 s by default): a worker that starts
        # prunes the rows of workers silent for that long, and this one must not look dead.
        self._heartbeat_seconds = heartbeat_seconds
        # Longer than the workers' --stalled-after: live workers normally recover first.
        self._grade_stalled_seconds = grade_stalled_seconds
        self.store = ResultStore(session_factory)
        self.app = build_app(conninfo, self.store)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._hinted: dict[str, float] = {}

    def start(self) -> None:
        # procrastinate logs each job with its arguments (output lines, whole Results): keep
        # its warnings and errors only.
        logging.getLogger("procrastinate").setLevel(logging.WARNING)
        self._thread = threading.Thread(target=self._run_loop, name="grading-queue", daemon=True)
        self._thread.start()
        self._ready.wait(30)

    def wake(self) -> None:
        if self._loop is not None and self._wakeup is not None:
            self._loop.call_soon_threadsafe(self._wakeup.set)

    def withdraw(self, job_ids: list[int]) -> int:
        """A deleted account's jobs, through procrastinate's own cancel: one no worker has taken
        yet (`todo`) is deleted, and its arguments, the learner's code, with it; one a worker
        runs gets an abort request, on which the worker cancels its task and sends nothing back
        (a result that came anyway would find no submission and be dropped)."""
        withdrawn = 0
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            for job_id in job_ids:
                row = conn.execute(
                    "SELECT procrastinate_cancel_job_v1(%s, true, true)", (job_id,)
                ).fetchone()
                withdrawn += row is not None and row[0] is not None
        return withdrawn

    def hint_exercise(self, exercise: str) -> None:
        """A learner opened or is editing this exercise: recorded for the workers of its queue,
        which ready its launches while they wait (grader.worker_warm); at most once every
        HINT_EVERY_S per exercise (the editor saves drafts while the learner types)."""
        now = time.monotonic()
        if now - self._hinted.get(exercise, -HINT_EVERY_S) < HINT_EVERY_S or self._loop is None:
            return
        try:
            spec = self._spec_for(exercise)
        except Exception:  # a hint: the learner's draft is saved whatever happens here
            log.exception("could not look up %s to tell the grader workers", exercise)
            return
        if spec is None:
            return
        self._hinted[exercise] = now
        asyncio.run_coroutine_threadsafe(self._send_hint(exercise, spec), self._loop)

    async def _send_hint(self, exercise: str, spec: ExerciseSpec) -> None:
        try:
            async with await psycopg.AsyncConnection.connect(
                self.conninfo, autocommit=True
            ) as conn:
                await protocol.send_hint(conn, exercise, spec)
        except (OSError, psycopg.Error) as exc:  # a hint: the learner's draft is saved anyway
            log.warning("could not tell the grader workers about %s: %s", exercise, exc)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)

    def _run_loop(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wakeup, self._stop = asyncio.Event(), asyncio.Event()
        self._ready.set()  # wake() and stop() work from here on, even while connecting
        await self._connect()
        if self._stop.is_set():
            return
        side: list[asyncio.Task[Any]] = [asyncio.create_task(self._dispatch_forever())]
        if self._results_worker:
            side.append(asyncio.create_task(self._results_forever()))
        await self._stop.wait()
        for task in side:
            task.cancel()
        await asyncio.gather(*side, return_exceptions=True)
        await self.app.close_async()

    async def _connect(self) -> None:
        """Reach the queue's database, retrying while it is down (PostgreSQL still starting)."""
        assert self._stop is not None
        delay = 1.0
        while not self._stop.is_set():
            try:
                await protocol.ensure_schema(self.conninfo)
                await self.app.open_async()
                return
            except (OSError, psycopg.Error) as exc:
                log.error(
                    "cannot reach the grading queue's database (%s); retrying in %.0f s", exc, delay
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
                delay = min(delay * 2, 30.0)

    async def _results_forever(self) -> None:
        """The results worker; restarted if it ever stops (e.g. its row was pruned as stalled)."""
        while True:
            try:
                await self.app.run_worker_async(
                    queues=[protocol.RESULTS_QUEUE],
                    name="rendezvous-web-results",
                    concurrency=4,
                    install_signal_handlers=False,
                    delete_jobs="successful",
                    # A job held back by its submission's lock gets no notification when the
                    # lock frees: poll often so live lines are not late by seconds.
                    fetch_job_polling_interval=0.2,
                    update_heartbeat_interval=self._heartbeat_seconds,
                    stalled_worker_timeout=self._heartbeat_seconds * 3,
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the results worker stopped; restarting it")
            await asyncio.sleep(1)

    async def _dispatch_forever(self) -> None:
        assert self._wakeup is not None
        next_sweep = 0.0
        loop = asyncio.get_running_loop()
        while True:
            try:
                if loop.time() >= next_sweep:
                    await self.sweep()
                    next_sweep = loop.time() + self._sweep_seconds
                await self.dispatch_pending()
            except Exception:
                log.exception("grading queue dispatcher failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), self._poll_seconds)
            self._wakeup.clear()

    async def dispatch_pending(self) -> int:
        """Defer every committed, not yet handed-over submission; returns how many."""
        pending = await asyncio.to_thread(self._pending_jobs)
        for submission, job in pending:
            if job is None:
                await asyncio.to_thread(self._fail, submission, jobs.no_spec(submission.exercise))
                continue
            queue = protocol.queue_for(job)
            try:
                job_id: int | None = await self.app.configure_task(
                    name=protocol.GRADE_TASK, queue=queue, queueing_lock=str(submission.id)
                ).defer_async(**protocol.grade_payload(job, self._max_attempts))
            except pq_errors.AlreadyEnqueued:
                job_id = None  # deferred before a crash; that job still stands
            await asyncio.to_thread(self._mark_dispatched, submission.id, queue, job_id)
        return len(pending)

    async def sweep(self) -> None:
        """Results jobs of a dead web worker are retried; grade jobs the queue gave up on
        end their submission as a platform error (never `running` forever)."""
        for stalled in await self.app.job_manager.get_stalled_jobs(queue=protocol.RESULTS_QUEUE):
            if stalled.id is not None:
                await self.app.job_manager.retry_job(stalled)
        await self._recover_stalled_grades()
        dispatched = dict(await asyncio.to_thread(self._dispatched_unfinished))
        if not dispatched:
            return
        rows = await self.app.connector.execute_query_all_async(
            "SELECT id, status::text AS status FROM procrastinate_jobs WHERE id = ANY(%(ids)s)",
            ids=list(dispatched.values()),
        )
        gave_up = {row["id"] for row in rows if row["status"] in ("failed", "cancelled", "aborted")}
        ended = [sid for sid, job_id in dispatched.items() if job_id in gave_up]
        if not ended:
            return
        # A job the stalled-job policy ended has its own result (`worker_lost`) on the way in the
        # results queue: that one tells the learner why; a later sweep catches it if it is lost.
        locks = {protocol.submission_lock(str(sid)): sid for sid in ended}
        pending = await self.app.connector.execute_query_all_async(
            "SELECT DISTINCT lock FROM procrastinate_jobs WHERE queue_name = %(queue)s"
            " AND status IN ('todo', 'doing') AND lock = ANY(%(locks)s)",
            queue=protocol.RESULTS_QUEUE,
            locks=list(locks),
        )
        arriving = {locks[row["lock"]] for row in pending}
        for submission_id in ended:
            if submission_id not in arriving:
                await asyncio.to_thread(self._fail_by_id, submission_id, jobs.queue_gave_up())

    async def _recover_stalled_grades(self) -> None:
        """Grade jobs whose worker went silent and that no live worker took back (the whole
        fleet may be down): the workers' own policy, so a submission is never `running`
        forever."""
        await protocol.recover_stalled_grades(
            self.app, seconds_since_heartbeat=self._grade_stalled_seconds, by="web-sweep"
        )

    def _pending_jobs(self) -> list[tuple[Submission, Job | None]]:
        with self._uow() as session:
            rows = repo.next_queued(session, limit=50, undispatched_only=True)
            return [(row, jobs.build_job(row, self._spec_for)) for row in rows]

    def _mark_dispatched(self, submission_id: uuid.UUID, queue: str, job_id: int | None) -> None:
        with self._uow() as session:
            repo.mark_dispatched(
                session, submission_id=submission_id, queue=queue, job_id=job_id, now=utcnow()
            )

    def _dispatched_unfinished(self) -> list[tuple[uuid.UUID, int]]:
        with self._uow() as session:
            return repo.dispatched_unfinished(session)

    def _fail(self, submission: Submission, message: Message) -> None:
        with self._uow() as session:
            jobs.fail_for_platform(session, submission, message)

    def _fail_by_id(self, submission_id: uuid.UUID, message: Message) -> None:
        with self._uow() as session:
            submission = repo.get(session, submission_id)
            if submission is not None:
                jobs.fail_for_platform(session, submission, message)
