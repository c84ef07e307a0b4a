"""What a queue worker readies in its warm pool (grader.sandbox.pool) before a job arrives.

A worker grades one job at a time, and each grading tells the pool its own launches as it starts
(`grader.api.grade`). Between gradings the worker looks at what is coming on its queue
(`grader.queue_protocol.coming`: the pending jobs first, then the exercises learners opened in the
web app, which it records with `send_hint`) and has the pool ready the launches of the most
likely one (the limits of an exercise that differs from the last one graded). It also tells the
pool how many jobs wait, graded or not: with a backlog the pool starts their sandboxes during a
grading, one per core at once. A job it has nothing warm for still starts at once, cold; it never
waits for the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

import psycopg

from grader import queue_protocol as protocol
from grader.contract import ExerciseSpec
from grader.sandbox.pool import Pool

log = logging.getLogger(__name__)

# Seconds between two looks at the queue while the worker is idle.
LOOK_EVERY_S = 1.0


class QueueWarmer:
    """Hints `pool` with the next grading the queue holds, whenever the worker is not grading."""

    def __init__(self, pool: Pool, dsn: str, queue: str, sandbox: str | None) -> None:
        self.pool, self.dsn, self.queue, self.sandbox = pool, dsn, queue, sandbox
        self.grading = threading.Event()  # set by the worker around each job
        self.last: ExerciseSpec | None = None

    @contextlib.contextmanager
    def job(self) -> Iterator[None]:
        """Around one grading: the grading tells the pool its launches itself."""
        self.grading.set()
        try:
            yield
        finally:
            self.last = None  # the pool now holds the plan of the job that ended
            self.grading.clear()

    async def look(self, conn: psycopg.AsyncConnection[Any]) -> ExerciseSpec | None:
        """One look at the queue: the pool is told how many jobs wait (with some waiting it
        starts their sandboxes during a grading too) and, between gradings, what comes next, if
        that is new to it."""
        self.pool.queued(await protocol.pending_grades(conn, self.queue))
        if self.grading.is_set():
            return None
        specs = await protocol.coming(conn, self.queue, limit=1)
        if not specs or specs[0] == self.last or self.grading.is_set():
            return None
        from grader.api import hint_exercise

        self.last = specs[0]
        await asyncio.to_thread(hint_exercise, specs[0], self.pool, self.sandbox)
        return specs[0]

    async def forever(self, every: float = LOOK_EVERY_S) -> None:
        """Look at the queue every `every` seconds; reconnect after a database error."""
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
                    while True:
                        await self.look(conn)
                        await asyncio.sleep(every)
            except (OSError, psycopg.Error) as exc:
                log.warning("cannot look at the queue for what comes next (%s); retrying", exc)
                await asyncio.sleep(max(every, 5.0))
