"""The result's timeline: what every rank of every launch did, on one clock per launch.

`build(launches)` turns the runs of one grading into the Result's optional `timeline` (a
compatible extension of Result version 1: docs/architecture.md, "The result's timeline"): one
lane per rank (with its node), items from the trace events the harness recorded
(`grader.timeline.lanes`), where each rank was at the end and where the ranks parted
(`grader.timeline.ends`), summarised and bounded in size (`grader.timeline.bound`). Failing
launches come first, reference runs last. It holds no text: the page and the app label it in
the viewer's language.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.checks.base import RunView
from grader.events import OverlapParams
from grader.timeline.bound import KEEP, MAX_BYTES, cap_items, size, summarise
from grader.timeline.ends import lane_end, parting, stop_time
from grader.timeline.lanes import Clock, Item, launch_start, node_of, rank_items

TIMELINE_VERSION = 1


@dataclass(frozen=True)
class LaunchRun:
    """One launch of a grading as the timeline shows it."""

    index: int  # 1-based, in plan order (the index the live output events carry)
    view: RunView
    judged: bool = True  # False: an uninterrupted reference run, only compared with
    failing: bool = False  # a check failed in it
    faulted: bool = False  # the grader stopped a rank in it as the exercise asks


@dataclass
class _Lanes:
    """One launch's full lanes, before the size bound."""

    run: LaunchRun
    head: dict[str, Any]
    lanes: list[tuple[dict[str, Any], list[Item]]]


def build(launches: list[LaunchRun]) -> dict[str, Any]:
    """The timeline of one grading, at most MAX_BYTES of JSON: failing launches first, then the
    judged ones, uninterrupted reference runs last (a restart shows before its reference)."""
    ordered = sorted(launches, key=lambda run: (not run.failing, not run.judged, run.index))
    full = [_launch(run) for run in ordered if run.view.ranks]
    for first, last in KEEP:
        timeline = _bounded(full, first, last)
        if size(timeline) <= MAX_BYTES:
            return timeline
    limit = 64
    while size(timeline) > MAX_BYTES and limit > 2:
        timeline = _bounded(full, 0, 0, cap=limit)
        limit //= 2
    return timeline


def _launch(run: LaunchRun) -> _Lanes:
    view = run.view
    clock = Clock(launch_start(view.ranks))
    stop = stop_time(view)
    by_rank = {r.rank: rank_items(r, clock) for r in view.ranks}
    ends = {r.rank: lane_end(r, by_rank[r.rank], clock, stop) for r in view.ranks}
    parted = parting(view, by_rank, ends)
    head: dict[str, Any] = {
        "launch": run.index,
        "world_size": view.world_size,
        "nnodes": view.nnodes,
        "role": "judged" if run.judged else "reference",
        "failing": run.failing,
        "faulted": run.faulted,
        "timed_out": view.timed_out,
        "duration_ms": clock.ms(stop) or 0.0,
        "parted": parted,
    }
    params = view.typed(OverlapParams)
    if params:
        head["params"] = params[0][1].names
    lanes = [
        ({"rank": r.rank, "node": node_of(r), "end": ends[r.rank]}, by_rank[r.rank])
        for r in sorted(view.ranks, key=lambda r: r.rank)
    ]
    return _Lanes(run, head, lanes)


def _bounded(full: list[_Lanes], first: int, last: int, cap: int | None = None) -> dict[str, Any]:
    launches = []
    for one in full:
        lanes = []
        for lane, items in one.lanes:
            kept, omitted = summarise(items, first, last)
            if cap is not None:
                kept, capped = cap_items(kept, cap)
                if capped:
                    omitted.append({"attempt": None, "counts": capped})
            out = {**lane, "items": [_public(item) for item in kept]}
            if omitted:
                out["omitted"] = omitted
            lanes.append(out)
        launches.append({**one.head, "lanes": lanes})
    return {
        "version": TIMELINE_VERSION,
        "clock": "ms",
        "steps_kept": {"first": first, "last": last},
        "launches": launches,
    }


def _public(item: Item) -> Item:
    return {key: value for key, value in item.items() if not key.startswith("_")}
