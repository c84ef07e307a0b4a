"""Every exercise's solution and starter give a Result whose timeline (grader/timeline/) holds the
events of the trace: each rank's collectives from call to completion, barriers, steps, saves,
loads, the fault and the restart, the overlap hook's backward passes and ready gradients; kept or
counted as left out, never lost; under the size bound. And where the timeline teaches:
overlap-buckets' all-reduces inside backward, find-the-hang's parting, elastic-resume's restart.

Each program is graded once, at its spec's first world size only (no extra multi-node launch;
elastic-resume's faulted launch needs its uninterrupted reference, two launches): 22 gradings,
24 launches; and the heaviest grading whole (overlap-buckets' starter at 2, 3 and 1 ranks): one
more, three launches. The RunViews are caught on their way from `run_launch` to the judge, so the
Result compared is the one production gives (with one world size, they come back in plan order:
the faulted launch waits for its reference).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import grader.api
from grader.api import grade
from grader.checks.base import RankView, RunView
from grader.contract import ExerciseSpec, Job, Result
from grader.events import (
    BarrierEnter,
    CollectiveCall,
    CollectiveDone,
    Event,
    Fault,
    Load,
    OverlapStep,
    Save,
    Start,
    Step,
    SyncedForward,
)
from grader.exercises import exercise_dir, graded_exercises, load_spec
from grader.sandbox.pool import Pool
from grader.timeline.bound import MAX_BYTES

CASES = [(ex, kind) for ex in graded_exercises() for kind in ("solution", "starter")]
# Trace kind -> the timeline's item kind, one item per event.
ONE_ITEM: dict[type[Event], str] = {
    BarrierEnter: "barrier",
    Step: "step",
    Save: "save",
    Load: "load",
    Fault: "fault",
    SyncedForward: "ddp_sync",
}


def _spec(exercise: str) -> ExerciseSpec:
    data = load_spec(exercise).model_dump()
    data["launch"]["world_sizes"] = data["launch"]["world_sizes"][:1]
    data["launch"]["multinode"] = False
    data["limits"]["pg_timeout_seconds"] = min(10, data["limits"]["pg_timeout_seconds"])
    return ExerciseSpec.model_validate(data)


@pytest.fixture(scope="module")
def graded() -> dict[tuple[str, str], tuple[Result, list[RunView]]]:
    """Each case's Result and the views of its launches, graded on first use."""
    return {}


def _grade(
    cache: dict[tuple[str, str], tuple[Result, list[RunView]]],
    pool: Pool,
    exercise: str,
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Result, list[RunView]]:
    if (exercise, kind) not in cache:
        views: list[RunView] = []
        original = grader.api.run_launch

        def caught(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            views.append(out[0])
            return out

        monkeypatch.setattr(grader.api, "run_launch", caught)
        folder = exercise_dir(exercise)
        assert folder is not None
        job = Job(
            exercise=exercise,
            code=(folder / f"{kind}.py").read_text(),
            spec=_spec(exercise),
            submission_id=f"timeline-{exercise.replace('/', '-')}-{kind}",
        )
        cache[(exercise, kind)] = (grade(job, pool=pool), views)
        keep = os.environ.get("RDV_TIMELINE_RESULTS")  # a folder: keep each Result for the e2e
        if keep:
            name = f"{exercise.split('/')[1]}-{kind}.json"
            (Path(keep) / name).write_text(cache[(exercise, kind)][0].model_dump_json())
    return cache[(exercise, kind)]


def _ms(t: float, t0: float) -> float:
    return round((t - t0) * 1000.0, 2)


def _expected(rank: RankView) -> Counter[str]:
    """How many items of each kind the rank's trace makes."""
    want: Counter[str] = Counter()
    for kind, name in ONE_ITEM.items():
        want[name] += len(rank.typed(kind))
    want["collective"] = sum(
        1 for e in rank.typed(CollectiveCall) if e.op not in ("barrier", "monitored_barrier")
    )
    want["restart"] = sum(1 for e in rank.typed(Start) if e.attempt)
    for e in rank.typed(OverlapStep):
        want["backward"] += len(e.backward)
        want["ready"] += sum(1 for token in e.timeline if token and token[0] == "r")
    return +want


def _shown(lane: dict[str, Any]) -> Counter[str]:
    """The items of each kind a lane holds, kept or counted as left out."""
    got = Counter(item["kind"] for item in lane["items"])
    for left in lane.get("omitted", []):
        got.update(left["counts"])
    return +Counter({k: n for k, n in got.items() if k not in ("start", "init", "destroy")})


def _assert_trace_equals_timeline(view: RunView, launch: dict[str, Any]) -> None:
    t0 = min(float(e["t"]) for r in view.ranks for e in r.events if e.get("t"))
    lanes = {lane["rank"]: lane for lane in launch["lanes"]}
    assert sorted(lanes) == sorted(r.rank for r in view.ranks)
    for rank in view.ranks:
        lane = lanes[rank.rank]
        want = _expected(rank)
        got = _shown(lane)
        assert {k: got[k] for k in want} == dict(want), f"rank {rank.rank}"
        done = {(d.attempt, d.i): d for d in rank.typed(CollectiveDone)}
        calls = {(c.attempt, c.i): c for c in rank.typed(CollectiveCall)}
        for item in lane["items"]:
            if item["kind"] != "collective":
                continue
            key = (item.get("attempt", 0), item["i"])
            assert item["at"] == _ms(calls[key].t, t0) and item["line"] == calls[key].line
            if key in done:
                assert item["to"] == _ms(done[key].t, t0)
            else:
                assert item["open"]


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize(("exercise", "kind"), CASES, ids=[f"{e}:{k}" for e, k in CASES])
def test_the_timeline_holds_the_trace(
    exercise: str,
    kind: str,
    graded: dict[tuple[str, str], tuple[Result, list[RunView]]],
    suite_pool: Pool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result, views = _grade(graded, suite_pool, exercise, kind, monkeypatch)
    assert result.status == ("pass" if kind == "solution" else "fail"), result.summary
    timeline = result.timeline
    assert timeline is not None and timeline["version"] == 1
    assert len(json.dumps(timeline, separators=(",", ":"))) <= MAX_BYTES
    by_index = {launch["launch"]: launch for launch in timeline["launches"]}
    assert sorted(by_index) == [i + 1 for i, v in enumerate(views) if v.ranks]
    if result.status == "fail":
        assert timeline["launches"][0]["failing"]
    for index, view in enumerate(views, start=1):
        if view.ranks:
            _assert_trace_equals_timeline(view, by_index[index])


def _items(launch: dict[str, Any], kind: str) -> list[tuple[int, dict[str, Any]]]:
    return [
        (lane["rank"], i) for lane in launch["lanes"] for i in lane["items"] if i["kind"] == kind
    ]


def _overlapped(launch: dict[str, Any]) -> int:
    """All-reduces issued while their rank's backward pass was still running."""
    backward = _items(launch, "backward")
    found = 0
    for rank, item in _items(launch, "collective"):
        spans = [(i["at"], i["to"]) for r, i in backward if r == rank]
        found += any(a <= item["at"] < b for a, b in spans)
    return found


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["solution", "starter"])
def test_overlap_buckets_shows_the_all_reduces_against_backward(
    kind: str,
    graded: dict[tuple[str, str], tuple[Result, list[RunView]]],
    suite_pool: Pool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exercise = "data-vs-model-parallelism/overlap-buckets"
    result, _ = _grade(graded, suite_pool, exercise, kind, monkeypatch)
    assert result.timeline is not None
    launch = result.timeline["launches"][0]
    assert _items(launch, "backward") and _items(launch, "ready")
    assert launch["params"]
    if kind == "solution":
        assert _overlapped(launch) > 0
    else:
        assert _overlapped(launch) == 0


@pytest.mark.sandbox
@pytest.mark.slow
def test_find_the_hang_shows_where_the_ranks_parted(
    graded: dict[tuple[str, str], tuple[Result, list[RunView]]],
    suite_pool: Pool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result, _ = _grade(graded, suite_pool, "torchrun-launch/find-the-hang", "starter", monkeypatch)
    assert result.timeline is not None
    launch = result.timeline["launches"][0]
    parted = launch["parted"]
    assert parted is not None and parted["n"] >= 1
    marked = [
        i for _, i in _items(launch, "collective") + _items(launch, "ddp_sync") if i.get("parted")
    ]
    assert marked
    ends = [lane["end"] for lane in launch["lanes"]]
    assert any(e["state"] in ("waiting", "crashed", "stopped") for e in ends)
    if parted["missing"]:
        assert all(
            lane["end"].get("never_arrived") == parted["n"]
            for lane in launch["lanes"]
            if lane["rank"] in parted["missing"]
        )


@pytest.mark.sandbox
@pytest.mark.slow
def test_elastic_resume_shows_the_kill_the_restart_and_the_snapshot_loaded(
    graded: dict[tuple[str, str], tuple[Result, list[RunView]]],
    suite_pool: Pool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result, _ = _grade(
        graded, suite_pool, "torchrun-launch/elastic-resume", "solution", monkeypatch
    )
    assert result.timeline is not None
    faulted = next(x for x in result.timeline["launches"] if x["faulted"])
    ((rank, fault),) = _items(faulted, "fault")
    assert rank == 1
    restarts = _items(faulted, "restart")
    assert {r for r, _ in restarts} == {0, 1}
    assert all(i["at"] > fault["at"] for _, i in restarts)
    loads = [i for _, i in _items(faulted, "load") if i.get("attempt") == 1]
    assert loads and all(i["at"] >= min(r["at"] for _, r in restarts) for i in loads)


@pytest.mark.sandbox
@pytest.mark.slow
def test_the_heaviest_grading_stays_under_the_bound(
    suite_pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """overlap-buckets' starter at every world size of its spec (2, 3, 1: it runs to the end at
    each) makes the largest timeline of the course (~18 KB per launch at 2 ranks, measured with
    the cases above): one grading, three launches, kept under MAX_BYTES and still whole."""
    exercise = "data-vs-model-parallelism/overlap-buckets"
    data = load_spec(exercise).model_dump()
    data["limits"]["pg_timeout_seconds"] = min(10, data["limits"]["pg_timeout_seconds"])
    spec = ExerciseSpec.model_validate(data)
    assert len(spec.launch.world_sizes) == 3
    views: list[RunView] = []
    original = grader.api.run_launch

    def caught(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        views.append(out[0])
        return out

    monkeypatch.setattr(grader.api, "run_launch", caught)
    folder = exercise_dir(exercise)
    assert folder is not None
    job = Job(
        exercise=exercise,
        code=(folder / "starter.py").read_text(),
        spec=spec,
        submission_id="timeline-heaviest",
    )
    result = grade(job, pool=suite_pool)
    assert result.status == "fail" and result.timeline is not None
    assert len(json.dumps(result.timeline, separators=(",", ":"))) <= MAX_BYTES
    # The launches overlap: their views come back as they end, so match them by world size.
    by_size = {launch["world_size"]: launch for launch in result.timeline["launches"]}
    assert sorted(by_size) == sorted(v.world_size for v in views) == [1, 2, 3]
    for view in views:
        _assert_trace_equals_timeline(view, by_size[view.world_size])
