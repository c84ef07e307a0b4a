"""The analytics consumer as a procrastinate task (RDV_ANALYTICS_CONSUMER=queue, PostgreSQL):
for several app processes, each running a worker of the analytics queue.

A commit that recorded domain events defers one job per partition it touched; the job applies
that partition's events (app.analytics.consumer.apply_batch) until none is left. Per partition,
at most one job waits (`queueing_lock`: a second deferral while one waits is a no-op, the
waiting one will see the new events) and one runs (`lock`: jobs of one partition run one after
the other, so one learner's events are applied in order). The partition's row lock
(`consumer.hold`) holds that too, should a thread consumer run beside. A sweep every
`poll_seconds` defers a job for each partition with events (a process that stopped between
its commit and its deferral, a job that failed: retried by the next sweep).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

import procrastinate
from procrastinate import exceptions as pq_errors
from sqlalchemy import distinct, select

from app.analytics.consumer import apply_batch
from app.db import SessionFactory
from app.domain_events.models import DomainEvent
from grader.queue_protocol import ensure_schema

log = logging.getLogger(__name__)

QUEUE = "rdv_analytics"
TASK = "rdv.analytics.apply"


def _lock(partition: int) -> str:
    return f"rdv-analytics-{partition}"


def drain_partition(session_factory: SessionFactory, partition: int) -> int:
    """Apply the partition's events, a batch per unit of work, until none is left."""
    applied = 0
    while True:
        with session_factory() as session:
            done = apply_batch(session, partition)
        if not done:
            return applied
        applied += done


def build_app(conninfo: str, session_factory: SessionFactory) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo))

    @app.task(name=TASK, queue=QUEUE)
    async def apply_partition(partition: int) -> None:
        await asyncio.to_thread(drain_partition, session_factory, partition)

    return app


class QueueConsumer:
    """Defers the analytics jobs after each commit and runs a worker of the analytics queue in a
    thread of its own (its event loop)."""

    def __init__(
        self, session_factory: SessionFactory, *, conninfo: str, poll_seconds: float = 5.0
    ) -> None:
        self._uow = session_factory
        self.conninfo = conninfo
        self.app = build_app(conninfo, session_factory)
        self._poll_seconds = poll_seconds
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def start(self) -> None:
        logging.getLogger("procrastinate").setLevel(logging.WARNING)
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)
        self._thread.name = "analytics-queue"
        self._thread.start()
        self._ready.wait(30)

    def notify(self, partitions: frozenset[int]) -> None:
        if self._loop is not None and partitions:
            asyncio.run_coroutine_threadsafe(self.defer(partitions), self._loop)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)

    async def defer(self, partitions: frozenset[int]) -> None:
        for partition in sorted(partitions):
            job = self.app.configure_task(
                TASK, lock=_lock(partition), queueing_lock=_lock(partition)
            )
            with contextlib.suppress(pq_errors.AlreadyEnqueued):
                await job.defer_async(partition=partition)

    def pending_partitions(self) -> frozenset[int]:
        with self._uow() as session:
            return frozenset(session.scalars(select(distinct(DomainEvent.partition))))

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._ready.set()
        await ensure_schema(self.conninfo)
        await self.app.open_async()
        side: list[asyncio.Task[Any]] = [
            asyncio.create_task(self._work_forever()),
            asyncio.create_task(self._sweep_forever()),
        ]
        await self._stop.wait()
        for task in side:
            task.cancel()
        await asyncio.gather(*side, return_exceptions=True)
        await self.app.close_async()

    async def _work_forever(self) -> None:
        while True:
            try:
                await self.app.run_worker_async(
                    queues=[QUEUE],
                    name="rendezvous-web-analytics",
                    concurrency=2,
                    install_signal_handlers=False,
                    delete_jobs="always",
                    fetch_job_polling_interval=1.0,
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the analytics worker stopped; restarting it")
            await asyncio.sleep(1)

    async def _sweep_forever(self) -> None:
        while True:
            try:
                await self.defer(await asyncio.to_thread(self.pending_partitions))
            except Exception:
                log.exception("the analytics sweep failed; retrying")
            await asyncio.sleep(self._poll_seconds)
