"""A grader worker: `python -m grader.worker --queue cpu|gpu [--dsn postgresql://...]`.

Takes grading jobs from the procrastinate queue on PostgreSQL, one at a time, runs them with
`grader.api.grade`, and hands everything back through the same queue: live events and the Result
are deferred as tasks on the `results` queue, which the web side's worker stores. It needs only
this package, torch and the queue's database; it never imports `app/`.

Between jobs its warm pool readies what the queue holds next (`grader.worker_warm`: the pending
jobs, then the exercises learners opened); a job with nothing warm for it starts cold at once.

A worker killed mid-job (even SIGKILL) loses nothing: its heartbeat stops, and the periodic
`rendezvous.retry_stalled` task (run by any live worker) runs the job again, or, after
`max_attempts`, ends it as a platform `error`, never as the learner's failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import procrastinate

from grader import heartbeat
from grader import queue_protocol as protocol
from grader.contract import GradeEvent, Job, Result
from grader.i18n import msg
from grader.sandbox.pool import Pool, open_pool
from grader.settings import configure, load, parse_gpus, settings
from grader.worker_warm import QueueWarmer

log = logging.getLogger("grader.worker")

GradeFn = Callable[..., Result]


def _default_grade(
    job: Job,
    *,
    on_event: Callable[[GradeEvent], None],
    sandbox: str | None,
    pool: Pool | None = None,
) -> Result:
    from grader.api import grade

    return grade(job, on_event=on_event, sandbox=sandbox, pool=pool)


class EventForwarder:
    """Collects the grader's events (from its threads) and defers them in ordered batches."""

    def __init__(self, app: procrastinate.App, submission_id: str, attempt: int, worker: str):
        self._app = app
        self._submission_id, self._attempt, self._worker = submission_id, attempt, worker
        self._lock_name = protocol.submission_lock(submission_id)
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
                name=protocol.EVENTS_TASK, queue=protocol.RESULTS_QUEUE, lock=self._lock_name
            ).defer_async(
                **protocol.events_payload(self._submission_id, self._attempt, self._worker, batch)
            )

    async def send_result(self, result: Result) -> None:
        await self.flush()
        await self._app.configure_task(
            name=protocol.RESULT_TASK, queue=protocol.RESULTS_QUEUE, lock=self._lock_name
        ).defer_async(**protocol.result_payload(self._submission_id, self._attempt, result))


def build_app(
    dsn: str,
    *,
    queue: str,
    grade: GradeFn = _default_grade,
    sandbox: str | None = None,
    stalled_after: float = 30.0,
    retry_cron: str = "* * * * * */10",
    flush_interval: float = 0.1,
    warmer: QueueWarmer | None = None,
) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))
    worker_name = f"{socket.gethostname()}:{os.getpid()}:{queue}"

    @app.task(name=protocol.GRADE_TASK, pass_context=True)
    async def grade_task(
        context: procrastinate.JobContext,
        job: dict[str, Any],
        max_attempts: int = protocol.DEFAULT_MAX_ATTEMPTS,
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
            with warmer.job() if warmer is not None else contextlib.nullcontext():
                result = await asyncio.to_thread(
                    _grade_safely, grade, parsed, forwarder.on_grade_event, sandbox
                )
        finally:
            done.set()
            await pumping
        await forwarder.send_result(result)

    @app.periodic(cron=retry_cron)
    @app.task(name=protocol.RETRY_TASK, queue=queue, queueing_lock=protocol.RETRY_TASK)
    async def retry_stalled(timestamp: int) -> None:
        await retry_stalled_jobs(app, seconds_since_heartbeat=stalled_after)
        await asyncio.to_thread(reap_sandboxes, sandbox, starting=False)

    return app


def reap_sandboxes(sandbox: str | None, *, starting: bool) -> int:
    """With the Docker sandbox: remove sandbox containers of dead workers (and, when this worker
    is `starting`, its own from before a restart). Never fails the caller."""
    if (sandbox or settings().sandbox) != "docker":
        return 0
    from grader.sandbox.docker import DockerSandbox

    try:
        return len(DockerSandbox().reap_orphans(include_own=starting))
    except Exception as exc:
        log.warning("could not look for orphaned sandbox containers: %s", exc)
        return 0


async def beat_forever(path: Path, every: float) -> None:
    """The liveness file behind the container healthcheck (`python -m grader.heartbeat`)."""
    while True:
        with contextlib.suppress(OSError):
            heartbeat.beat(path)
        await asyncio.sleep(every)


def _grade_safely(
    grade: GradeFn, job: Job, on_event: Callable[[GradeEvent], None], sandbox: str | None
) -> Result:
    try:
        return grade(job, on_event=on_event, sandbox=sandbox)
    except Exception as exc:  # the grader must not crash; if it does, it is ours, not theirs
        log.exception("grading %s crashed", job.submission_id)
        return Result.platform_error(
            msg("platform.crashed", "The grader crashed: {error}", error=str(exc))
        )


async def retry_stalled_jobs(app: procrastinate.App, *, seconds_since_heartbeat: float) -> int:
    """Grade jobs of workers that stopped sending heartbeats: run again or end as `error`."""
    return await protocol.recover_stalled_grades(
        app, seconds_since_heartbeat=seconds_since_heartbeat, by="retry_stalled"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m grader.worker", description="Run a grader worker on a queue."
    )
    parser.add_argument("--queue", choices=protocol.GRADE_QUEUES, required=True)
    parser.add_argument(
        "--dsn",
        default=settings().queue_url,
        help="the queue's PostgreSQL URL (default: $RDV_QUEUE_URL, then $RDV_DATABASE_URL)",
    )
    parser.add_argument(
        "--sandbox",
        default=None,
        help="bwrap, docker, or none (tests only); default: $RDV_SANDBOX, else bwrap",
    )
    parser.add_argument(
        "--gpus",
        default=None,
        help="GPU ids this worker owns, e.g. 0,1 (default: $RDV_GPUS, else /dev/nvidiaN)",
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
    load()  # this process starts: read the settings now (grader.settings)
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
        configure(gpus=parse_gpus(args.gpus))  # the launcher hands these to each sandbox
    # The worker owns its warm pool: closed when it stops (nothing of it outlives the worker).
    pool = open_pool() if grade is _default_grade else None
    warmer = QueueWarmer(pool, dsn, args.queue, args.sandbox) if pool is not None else None
    if pool is not None:
        grade = functools.partial(_default_grade, pool=pool)
    app = build_app(
        dsn,
        queue=args.queue,
        grade=grade,
        sandbox=args.sandbox,
        stalled_after=args.stalled_after,
        retry_cron=f"* * * * * */{max(1, args.retry_every)}",
        warmer=warmer,
    )

    async def run() -> None:
        beating = asyncio.create_task(beat_forever(heartbeat.heartbeat_path(), args.heartbeat))
        await protocol.ensure_schema(dsn)
        await asyncio.to_thread(reap_sandboxes, args.sandbox, starting=True)
        if pool is not None:
            from grader.api import prewarm

            prewarm(pool, args.sandbox)  # warm sandboxes start while the worker connects
        # Between jobs the pool readies what the queue holds next (grader.worker_warm).
        looking = asyncio.create_task(warmer.forever()) if warmer is not None else None
        async with app.open_async():
            await app.run_worker_async(
                queues=[args.queue],
                name=f"grader-{args.queue}",
                concurrency=1,  # one job at a time: a job owns this worker's CPUs or GPUs
                update_heartbeat_interval=args.heartbeat,
                stalled_worker_timeout=args.stalled_after,
                delete_jobs="successful",
            )
        beating.cancel()
        if looking is not None:
            looking.cancel()

    log.info("grader worker on queue %s", args.queue)
    try:
        asyncio.run(run())
    finally:
        if pool is not None:
            pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
