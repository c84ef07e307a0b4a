"""grader.launch.schedule: which launches of one grading overlap, in what order their views and
events come back, and how the launches after one that ended the grading are stopped. Fake runs
(threads that wait on events): the real launches are in test_overlap.py."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from grader.checks.base import RunView
from grader.contract import GradeEvent
from grader.launch.plan import Launch
from grader.launch.schedule import LaunchRunner, launches_at_once, needs
from grader.sandbox.pool_plan import auto_parallel, parallel_launches
from grader.settings import override

LIMIT_S = 10.0  # no fake run takes this long unless the runner is broken


def out(index: int, line: str) -> GradeEvent:
    return GradeEvent(kind="output", rank=0, data={"line": line, "launch": index})


class FakeRuns:
    """Launch i emits "i:start", waits until `finish[i]` is set (or its cancel), emits "i:end"."""

    def __init__(self, count: int) -> None:
        self.finish = [threading.Event() for _ in range(count)]
        self.started = [threading.Event() for _ in range(count)]
        self.cancelled = [False] * count
        self.running = 0
        self.most = 0
        self.lock = threading.Lock()

    def run(self, index: int, launch: Launch, emit, cancel: threading.Event) -> RunView:  # type: ignore[no-untyped-def]
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        self.started[index].set()
        emit(out(index, f"{index}:start"))
        deadline = time.monotonic() + LIMIT_S
        while not self.finish[index].wait(0.01) and time.monotonic() < deadline:
            if cancel.is_set():
                self.cancelled[index] = True
                break
        emit(out(index, f"{index}:end"))
        with self.lock:
            self.running -= 1
        return RunView(world_size=launch.world_size, device="cpu", ranks=[], source="")


def launches(*sizes: int) -> list[Launch]:
    return [Launch(size, "cpu", []) for size in sizes]


def lines(events: list[GradeEvent]) -> list[str]:
    return [e.data["line"] for e in events]


def test_what_each_launch_waits_for() -> None:
    plain = launches(2, 3, 1)
    assert needs(plain, resume=False) == [None, None, None]
    assert needs(plain, resume=True) == [None, 0, 1]
    faulted = launches(2, 2, 3, 3)
    for reference, launch in ((0, faulted[1]), (2, faulted[3])):
        launch.faults, launch.reference = [{"kind": "kill"}], reference
    assert needs(faulted, resume=False) == [None, 0, None, 2]


def test_how_many_at_once_follows_the_cores_or_the_setting() -> None:
    assert [auto_parallel(c) for c in (1, 2, 4, 5, 6, 10, 16)] == [1, 2, 2, 2, 3, 4, 5]
    with override(parallel_launches=1):
        assert parallel_launches() == 1
    with override(parallel_launches=3):
        assert parallel_launches() == 3
        assert launches_at_once(launches(2, 3, 1)) == 3
        # On GPUs one at a time: every launch takes the worker's first GPUs.
        assert launches_at_once([Launch(2, "cuda", [0, 1]), Launch(1, "cuda", [0])]) == 1


class Consumer:
    """The grading thread: takes the views in order (as grader.api does), in the background."""

    def __init__(self, runner: LaunchRunner, stop_at: int | None = None) -> None:
        self.got: list[tuple[int, int]] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._take, args=(runner, stop_at), daemon=True)
        self.thread.start()

    def _take(self, runner: LaunchRunner, stop_at: int | None) -> None:
        try:
            with contextlib.closing(runner.views()) as views:
                for index, view in views:
                    self.got.append((index, view.world_size))
                    if index == stop_at:
                        runner.stop(index)
                        break
        except BaseException as exc:  # handed to the test
            self.error = exc

    def join(self) -> None:
        self.thread.join(LIMIT_S)
        assert not self.thread.is_alive()


def test_independent_launches_overlap_and_come_back_in_plan_order() -> None:
    fake = FakeRuns(3)
    emitted: list[GradeEvent] = []
    runner = LaunchRunner(
        launches(2, 3, 1), fake.run, emitted.append, parallel=2, waits_for=[None] * 3
    )
    consumer = Consumer(runner)
    # The second launch starts while the first runs; the third waits for a slot.
    assert fake.started[0].wait(LIMIT_S) and fake.started[1].wait(LIMIT_S)
    time.sleep(0.3)
    assert not fake.started[2].is_set()
    fake.finish[1].set()  # the second ends first
    time.sleep(0.3)
    assert consumer.got == []
    assert lines(emitted) == ["0:start"]  # the second's events wait for the first
    fake.finish[0].set()
    assert fake.started[2].wait(LIMIT_S)
    fake.finish[2].set()
    consumer.join()
    assert consumer.got == [(0, 2), (1, 3), (2, 1)]
    assert fake.most == 2
    # The stream is a sequential grading's: each launch's events whole, in plan order.
    assert lines(emitted) == ["0:start", "0:end", "1:start", "1:end", "2:start", "2:end"]


def test_one_at_a_time_when_parallel_is_one() -> None:
    fake = FakeRuns(3)
    for event in fake.finish:
        event.set()
    runner = LaunchRunner(
        launches(2, 3, 1), fake.run, lambda e: None, parallel=1, waits_for=[None] * 3
    )
    assert [i for i, _v in runner.views()] == [0, 1, 2]
    assert fake.most == 1


def test_a_launch_waits_for_the_one_it_builds_on_and_is_prepared_after_it() -> None:
    fake = FakeRuns(3)
    prepared: list[tuple[int, int]] = []  # (launch, how many launches were back then)
    runner: LaunchRunner = LaunchRunner(
        launches(2, 2, 3),
        fake.run,
        lambda e: None,
        parallel=3,
        waits_for=[None, 0, None],
        before_start=lambda i: prepared.append((i, runner.handed_back)),
    )
    consumer = Consumer(runner)
    assert fake.started[2].wait(LIMIT_S)  # the third builds on nothing: it starts at once
    time.sleep(0.2)
    assert not fake.started[1].is_set()  # its reference is still running
    fake.finish[0].set()
    assert fake.started[1].wait(LIMIT_S)
    fake.finish[1].set()
    fake.finish[2].set()
    consumer.join()
    assert consumer.got == [(0, 2), (1, 2), (2, 3)]
    # The faulted launch was prepared only once its reference was back.
    assert prepared == [(0, 0), (2, 0), (1, 1)]


def test_stop_cancels_the_launches_after_and_drops_their_events() -> None:
    fake = FakeRuns(3)
    emitted: list[GradeEvent] = []
    runner = LaunchRunner(
        launches(2, 3, 1), fake.run, emitted.append, parallel=2, waits_for=[None] * 3
    )
    consumer = Consumer(runner, stop_at=0)
    assert fake.started[1].wait(LIMIT_S)  # running beside the first when that one ends it
    started = time.monotonic()
    fake.finish[0].set()
    consumer.join()
    # Back at once, the second stopped (not waited for), the third never started.
    assert time.monotonic() - started < LIMIT_S / 2
    assert consumer.got == [(0, 2)] and consumer.error is None
    assert fake.cancelled[1] and fake.running == 0
    assert not fake.started[2].is_set()
    assert lines(emitted) == ["0:start", "0:end"]


def test_a_failed_launch_stops_the_others_and_raises() -> None:
    fake = FakeRuns(2)

    def run(index: int, launch: Launch, emit, cancel: threading.Event) -> RunView:  # type: ignore[no-untyped-def]
        if index == 0:
            assert fake.started[1].wait(LIMIT_S)
            raise OSError("the sandbox broke")
        return fake.run(index, launch, emit, cancel)

    runner = LaunchRunner(launches(2, 1), run, lambda e: None, parallel=2, waits_for=[None] * 2)
    with pytest.raises(OSError, match="sandbox broke"):
        list(runner.views())
    assert fake.cancelled[1] and fake.running == 0
