"""A grading's launches overlap for real (grader.launch.schedule through grader.api.grade, bwrap):
the verdict and the stream are a sequential grading's, and a launch that is no longer needed is
stopped with its sandbox. The runner's own rules, with fake runs: test_schedule.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from grader.api import grade
from grader.contract import ExerciseSpec, GradeEvent, Job
from grader.sandbox.pool import Pool
from grader.settings import override

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

# Fails at once at two ranks; with one rank it would sleep far past anything a grading waits for.
FAILS_AT_TWO_SLEEPS_AT_ONE = """
import os, time
if os.environ["WORLD_SIZE"] == "2":
    raise SystemExit(f"rank {os.environ['RANK']}: no")
print("one rank, sleeping", flush=True)
time.sleep(600)
"""
SAYS_ITS_SIZE = """
import os
print(f"world size {os.environ['WORLD_SIZE']} rank {os.environ['RANK']}", flush=True)
"""


def _descendants(roots: set[int]) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            parents[int(entry.name)] = int(stat[1])
    found, frontier = set(), set(roots)
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _ours(pool: Pool) -> set[int]:
    """The processes this test process started, directly or not, but the pool's idle sandboxes
    (after the pool has refilled)."""
    if pool.plan:  # a pool that was never asked for anything starts nothing
        pool.wait_idle_ready(120)
    pooled = set(pool.idle_pids())
    return _descendants({os.getpid()}) - pooled - _descendants(pooled)


def _job(code: str, sizes: list[int], wall: int = 60) -> Job:
    spec = ExerciseSpec.model_validate(
        {
            "checks": ["run.completed"],
            "launch": {"world_sizes": sizes},
            "limits": {"wall_seconds": wall},
        }
    )
    return Job(exercise="ddp-fundamentals/train", code=code, spec=spec, submission_id="overlap")


def _stream(events: list[GradeEvent]) -> list[tuple[str, object, object]]:
    """The stream as the page sees it: launch headings and rank lines, in order."""
    shown: list[tuple[str, object, object]] = []
    for e in events:
        if e.kind == "status" and e.data.get("status") == "launch":
            shown.append(("launch", e.data["index"], e.data["world_size"]))
        elif e.kind == "output":
            shown.append(("output", e.data.get("launch"), e.data["line"]))
    return shown


def test_overlapped_launches_give_the_sequential_verdict_and_stream(suite_pool: Pool) -> None:
    graded = {}
    for parallel in (1, 3):
        events: list[GradeEvent] = []
        with override(parallel_launches=parallel):
            result = grade(
                _job(SAYS_ITS_SIZE, [2, 3, 1]),
                on_event=events.append,
                sandbox="bwrap",
                pool=suite_pool,
            )
        assert result.status == "pass", result
        graded[parallel] = (result, _stream(events))
    (one, stream_one), (three, stream_three) = graded[1], graded[3]
    assert [(c.id, c.status) for c in one.checks] == [(c.id, c.status) for c in three.checks]
    # Each launch's heading, then its lines, launch after launch, whichever ended first.
    headings = [s for s in stream_three if s[0] == "launch"]
    assert headings == [("launch", 1, 2), ("launch", 2, 3), ("launch", 3, 1)]
    for stream in (stream_one, stream_three):
        launch_of_line = [s[1] for s in stream if s[0] == "output"]
        assert launch_of_line == sorted(launch_of_line) and set(launch_of_line) == {1, 2, 3}
    assert sorted(stream_one) == sorted(stream_three)


def test_a_launch_no_longer_needed_is_stopped_with_its_sandbox(suite_pool: Pool) -> None:
    before = _ours(suite_pool)
    events: list[GradeEvent] = []
    started = time.monotonic()
    with override(parallel_launches=2):
        result = grade(
            _job(FAILS_AT_TWO_SLEEPS_AT_ONE, [2, 1], wall=600),
            on_event=events.append,
            sandbox="bwrap",
        )
    took = time.monotonic() - started
    assert result.status == "fail", result
    completed = next(c for c in result.checks if c.id == "run.completed")
    assert completed.status == "fail" and "no" in completed.message
    assert result.launch is not None and result.launch.world_size == 2
    # Not waited for: the one-rank launch would have slept 600 s.
    assert took < 300
    # Nothing of the stopped launch reached the stream or outlived the grading.
    assert ("launch", 2, 1) not in _stream(events)
    assert not any("sleeping" in str(e.data.get("line")) for e in events)
    assert _ours(suite_pool) <= before
