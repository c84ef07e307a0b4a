"""When each launch of one grading starts: as soon as what it builds on has ended and a slot is
free, so that a grading of several launches takes about as long as its longest, not their sum.

- `needs`: the launch each one must wait for. Under `launch.resume` the previous one (it starts
  from the files that one left); a faulted launch its uninterrupted `reference` (its faults are
  placed from what that one did). The others start at once.
- how many run at once: `grader.sandbox.pool_plan.parallel_launches` (RDV_PARALLEL_LAUNCHES, else
  by the cores; the warm pool is sized to feed them).
- `LaunchRunner` runs them in threads and hands their views back in plan order. It holds a
  launch's events back until every launch before it was handed back and did not end the
  grading, so the learner's stream is exactly a sequential grading's, only sooner. `stop` cancels
  the launches after the one that ended the grading: their sandboxes are killed, their events
  dropped, and the runner returns only once they are gone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from grader.checks.base import RunView
from grader.contract import GradeEvent
from grader.launch.plan import Launch
from grader.sandbox.pool_plan import parallel_launches

EventSink = Callable[[GradeEvent], None]
# run(index, launch, emit, cancel) -> the launch's view (grader.launch.host.run_launch).
RunOne = Callable[[int, Launch, EventSink, threading.Event], RunView]


def needs(launches: Sequence[Launch], resume: bool) -> list[int | None]:
    """For each launch, the index of the launch it must wait for (None: none)."""
    found: list[int | None] = []
    for index, launch in enumerate(launches):
        if resume and index:
            found.append(index - 1)
        elif launch.faults and launch.reference is not None:
            found.append(launch.reference)
        else:
            found.append(None)
    return found


def launches_at_once(launches: Sequence[Launch]) -> int:
    """How many of one grading's launches run at once: `parallel_launches()`, but one at a time
    when they use GPUs (each launch takes the worker's first GPUs: two at once would share)."""
    return 1 if any(launch.gpus for launch in launches) else parallel_launches()


@dataclass
class _Slot:
    launch: Launch
    cancel: threading.Event = field(default_factory=threading.Event)
    held: list[GradeEvent] = field(default_factory=list)
    released: bool = False
    dropped: bool = False
    future: Future[RunView] | None = None


class LaunchRunner:
    """Runs one grading's launches, at most `parallel` at once (see the module docstring)."""

    def __init__(
        self,
        launches: Sequence[Launch],
        run: RunOne,
        emit: EventSink,
        *,
        parallel: int,
        waits_for: Sequence[int | None],
        before_start: Callable[[int], None] = lambda index: None,
    ) -> None:
        self.slots = [_Slot(launch) for launch in launches]
        self.run, self.emit, self.parallel = run, emit, max(1, parallel)
        self.waits_for, self.before_start = list(waits_for), before_start
        self.lock = threading.Lock()  # every event goes through it, in order
        self.handed_back = 0
        self.stopped = False

    def emitter(self, index: int) -> EventSink:
        slot = self.slots[index]

        def emit(event: GradeEvent) -> None:
            with self.lock:
                if slot.dropped:
                    return
                if slot.released:
                    self.emit(event)
                else:
                    slot.held.append(event)

        return emit

    def views(self) -> Generator[tuple[int, RunView], None, None]:
        """(index, view) of each launch in plan order; the caller judges each before it asks for
        the next, and calls `stop` when one ends the grading. Close the iterator (or run it out)
        to be sure no launch of the grading is left running."""
        # One thread more than `parallel`: the launch next in turn never queues behind others.
        with ThreadPoolExecutor(self.parallel + 1, thread_name_prefix="launch") as executor:
            try:
                self._release(0)
                for index, slot in enumerate(self.slots):
                    self._submit(executor)
                    if slot.future is None:  # stopped before it started
                        return
                    view = slot.future.result()
                    self.handed_back = index + 1
                    yield index, view
                    if self.stopped:
                        return
                    self._release(index + 1)
            finally:
                self.stop(self.handed_back - 1)
            # Leaving the executor waits for the launches just cancelled to end.

    def stop(self, last: int) -> None:
        """No launch after `last` is needed: cancel them and drop their events."""
        with self.lock:
            self.stopped = True
            for slot in self.slots[last + 1 :]:
                slot.dropped = True
                slot.held.clear()
                slot.cancel.set()

    def _submit(self, executor: ThreadPoolExecutor) -> None:
        """Start, in plan order, each launch whose dependency is back while a slot is free; the
        next one to hand back always starts (its dependency is back by then)."""
        for index in range(self.handed_back, len(self.slots)):
            slot = self.slots[index]
            dependency = self.waits_for[index]
            if self.stopped or slot.future is not None:
                continue
            if dependency is not None and dependency >= self.handed_back:
                continue
            running = sum(
                1 for s in self.slots[self.handed_back :] if s.future and not s.future.done()
            )
            if index > self.handed_back and running >= self.parallel:
                return
            self.before_start(index)
            slot.future = executor.submit(
                self.run, index, slot.launch, self.emitter(index), slot.cancel
            )

    def _release(self, index: int) -> None:
        """Launch `index` is next in the stream: what it held goes out, the rest flows."""
        if index >= len(self.slots):
            return
        with self.lock:
            slot = self.slots[index]
            if slot.dropped:
                return
            for event in slot.held:
                self.emit(event)
            slot.held.clear()
            slot.released = True
