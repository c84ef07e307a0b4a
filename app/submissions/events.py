"""Batches the grader's events and writes them in order, a few times a second.

The grader reports one event per output line; writing each in its own transaction would make a
chatty program slow. A background thread flushes the batch every `interval` seconds and at close.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from grader.contract import GradeEvent

log = logging.getLogger(__name__)

Batch = list[dict[str, Any]]


class EventBuffer:
    def __init__(self, write: Callable[[Batch], None], *, interval: float = 0.1) -> None:
        self._write = write
        self._interval = interval
        self._pending: Batch = []
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="submission-events", daemon=True)
        self._thread.start()

    def add(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._pending.append(event)

    def on_grade_event(self, event: GradeEvent) -> None:
        """The callback handed to `grader.api.grade`."""
        self.add(event.model_dump(mode="json"))

    def flush(self) -> None:
        with self._write_lock:
            with self._lock:
                batch, self._pending = self._pending, []
            if not batch:
                return
            try:
                self._write(batch)
            except Exception:
                log.exception("could not store %d grading events; will retry", len(batch))
                with self._lock:
                    self._pending[:0] = batch

    def close(self) -> None:
        self._closed.set()
        self._thread.join()
        self.flush()

    def _run(self) -> None:
        while not self._closed.wait(self._interval):
            self.flush()
