"""A grader worker: `python -m grader.worker --queue cpu|gpu [--dsn postgresql://...]`.

Takes grading jobs from the procrastinate queue on PostgreSQL, one at a time, runs them with
`grader.api.grade`, and hands everything back through the same queue: live events and the Result
are deferred as tasks on the `results` queue, which the web side's worker stores. It needs only
this package, torch and the queue's database; it never imports `app/`.

A worker killed mid-job (even SIGKILL) loses nothing: its heartbeat stops, and the periodic
`rendezvous.retry_stalled` task (run by any live worker) runs the job again, or, after
`max_attempts`, ends it as a platform `error`, never as the learner's failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any, cast

import procrastinate
import psycopg
from procrastinate.schema import SchemaManager
from procrastinate.types import JSONValue

from grader.contract import GradeEvent, Job, Result

log = logging.getLogger("grader.worker")

# The contract with app/submissions/queue.py (pinned by a test on both sides).
GRADE_TASK = "rendezvous.grade"
EVENTS_TASK = "rendezvous.submission_events"
RESULT_TASK = "rendezvous.submission_result"
RETRY_TASK = "rendezvous.retry_stalled"
RESULTS_QUEUE = "results"
SCHEMA_LOCK_ID = 727_001

WORKER_LOST = (
    "The grading machine stopped while running your program ({attempts} attempts). "
    "This is our fault and does not count against you: please submit again."
)

GradeFn = Callable[..., Result]


def _default_grade(
    job: Job, *, on_event: Callable[[GradeEvent], None], sandbox: str | None
) -> Result:
    from grader.api import grade

    return grade(job, on_event=on_event, sandbox=sandbox)


class EventForwarder:
    """Collects the grader's events (from its threads) and defers them in ordered batches."""

    def __init__(self, app: procrastinate.App, submission_id: str, attempt: int, worker: str):
        self._app = app
        self._submission_id, self._attempt, self._worker = submission_id, attempt, worker
        self._lock_name = f"submission:{submission_id}"
        self._pending: list[dict[str, Any]] = []
        self._mutex = threading.Lock()

    def add(self, event: dict[str, Any]) -> None:
        with self._mutex:
            self._pending.append(event)

    def on_grade_event(self, event: GradeEvent) -> None:
        if event.kind != "done":  # the Result travels in its own task
            self.add(event.model_dump(mode="json"))

    async def flush(self) -> None:
        with self._mutex:
            batch, self._pending = self._pending, []
        if batch:
            await self._app.configure_task(
                name=EVENTS_TASK, queue=RESULTS_QUEUE, lock=self._lock_name
            ).defer_async(
                submission_id=self._submission_id,
                attempt=self._attempt,
                worker=self._worker,
                events=cast(list[JSONValue], batch),
            )

    async def send_result(self, result: Result) -> None:
        await self.flush()
        await self._app.configure_task(
            name=RESULT_TASK, queue=RESULTS_QUEUE, lock=self._lock_name
        ).defer_async(
            submission_id=self._submission_id,
            attempt=self._attempt,
            result=result.model_dump(mode="json"),
        )


def build_app(
    dsn: str,
    *,
    queue: str,
    grade: GradeFn = _default_grade,
    sandbox: str | None = None,
    stalled_after: float = 30.0,
    retry_cron: str = "* * * * * */10",
    flush_interval: float = 0.1,
) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))
    worker_name = f"{socket.gethostname()}:{os.getpid()}:{queue}"

    @app.task(name=GRADE_TASK, pass_context=True)
    async def grade_task(
        context: procrastinate.JobContext, job: dict[str, Any], max_attempts: int = 2
    ) -> None:
        assert context.job is not None
        parsed = Job.model_validate(job)
        attempt = context.job.attempts + 1
        log.info("grading submission %s (attempt %d)", parsed.submission_id, attempt)
        forwarder = EventForwarder(app, parsed.submission_id, attempt, worker_name)
        forwarder.add({"kind": "status", "data": {"status": "starting"}})
        await forwarder.flush()
        done = asyncio.Event()

        async def pump() -> None:
            while not done.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), flush_interval)
                await forwarder.flush()

        pumping = asyncio.create_task(pump())
        try:
            result = await asyncio.to_thread(
                _grade_safely, grade, parsed, forwarder.on_grade_event, sandbox
            )
        finally:
            done.set()
            await pumping
        await forwarder.send_result(result)

    @app.periodic(cron=retry_cron)
    @app.task(name=RETRY_TASK, queue=queue, queueing_lock=RETRY_TASK)
    async def retry_stalled(timestamp: int) -> None:
        await retry_stalled_jobs(app, seconds_since_heartbeat=stalled_after)

    return app


def _grade_safely(
    grade: GradeFn, job: Job, on_event: Callable[[GradeEvent], None], sandbox: str | None
) -> Result:
    try:
        return grade(job, on_event=on_event, sandbox=sandbox)
    except Exception as exc:  # the grader must not crash; if it does, it is ours, not theirs
        log.exception("grading %s crashed", job.submission_id)
        return Result.platform_error(f"The grader crashed: {exc}")


async def retry_stalled_jobs(app: procrastinate.App, *, seconds_since_heartbeat: float) -> int:
    """Grade jobs of workers that stopped sending heartbeats: run again or end as `error`."""
    stalled = await app.job_manager.get_stalled_jobs(
        task_name=GRADE_TASK, seconds_since_heartbeat=seconds_since_heartbeat
    )
    handled = 0
    for job in stalled:
        assert job.id is not None
        kwargs: dict[str, Any] = dict(job.task_kwargs)
        max_attempts = int(kwargs.get("max_attempts", 2))
        submission_id = str(kwargs["job"]["submission_id"])
        lock = f"submission:{submission_id}"
        attempts_made = job.attempts + 1
        if attempts_made < max_attempts:
            await app.job_manager.retry_job(job)
            await app.configure_task(name=EVENTS_TASK, queue=RESULTS_QUEUE, lock=lock).defer_async(
                submission_id=submission_id,
                attempt=attempts_made,
                worker="retry_stalled",
                events=[{"kind": "status", "data": {"status": "retrying"}}],
            )
            log.warning("job %s stalled on attempt %d: retrying", job.id, attempts_made)
        else:
            await app.job_manager.finish_job_by_id_async(
                job.id, status=procrastinate.jobs.Status.FAILED, delete_job=False
            )
            result = Result.platform_error(WORKER_LOST.format(attempts=attempts_made))
            await app.configure_task(name=RESULT_TASK, queue=RESULTS_QUEUE, lock=lock).defer_async(
                submission_id=submission_id,
                attempt=attempts_made,
                result=result.model_dump(mode="json"),
            )
            log.warning("job %s stalled %d times: ended as a platform error", job.id, attempts_made)
        handled += 1
    return handled


async def ensure_schema(dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_ID,))
        try:
            row = await (await conn.execute("SELECT to_regclass('procrastinate_jobs')")).fetchone()
            if row is None or row[0] is None:
                await conn.execute(SchemaManager.get_schema())
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_ID,))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m grader.worker", description="Run a grader worker on a queue."
    )
    parser.add_argument("--queue", choices=["cpu", "gpu"], required=True)
    parser.add_argument(
        "--dsn",
        default=os.environ.get("RDV_QUEUE_URL") or os.environ.get("RDV_DATABASE_URL"),
        help="the queue's PostgreSQL URL (default: $RDV_QUEUE_URL, then $RDV_DATABASE_URL)",
    )
    parser.add_argument(
        "--sandbox",
        default=os.environ.get("RDV_GRADER_SANDBOX"),
        help="bwrap (default), docker, or none (tests only)",
    )
    parser.add_argument(
        "--gpus",
        default=None,
        help="GPU ids this worker owns, e.g. 0,1 (sets RDV_GPUS for the launcher)",
    )
    parser.add_argument(
        "--heartbeat", type=float, default=10.0, help="seconds between this worker's heartbeats"
    )
    parser.add_argument(
        "--stalled-after",
        type=float,
        default=30.0,
        help="a worker silent for this long is dead; its job is retried",
    )
    parser.add_argument(
        "--retry-every", type=int, default=10, help="seconds between checks for stalled jobs"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, *, grade: GradeFn = _default_grade) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # procrastinate logs every job with its arguments (the learner's whole program): keep its
    # warnings and errors, and say ourselves which submission runs.
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    if not args.dsn:
        print("Set --dsn or RDV_QUEUE_URL to the queue's postgresql:// URL.", file=sys.stderr)
        return 2
    dsn = args.dsn.replace("postgresql+psycopg://", "postgresql://", 1)
    if args.gpus is not None:
        os.environ["RDV_GPUS"] = args.gpus  # the launcher hands these to each sandbox
    app = build_app(
        dsn,
        queue=args.queue,
        grade=grade,
        sandbox=args.sandbox,
        stalled_after=args.stalled_after,
        retry_cron=f"* * * * * */{max(1, args.retry_every)}",
    )

    async def run() -> None:
        await ensure_schema(dsn)
        async with app.open_async():
            await app.run_worker_async(
                queues=[args.queue],
                name=f"grader-{args.queue}",
                concurrency=1,  # one job at a time: a job owns this worker's CPUs or GPUs
                update_heartbeat_interval=args.heartbeat,
                stalled_worker_timeout=args.stalled_after,
                delete_jobs="successful",
            )

    log.info("grader worker on queue %s", args.queue)
    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
