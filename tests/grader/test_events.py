"""The trace events shared by the hooks and the checks (`grader.events`)."""

from __future__ import annotations

import dataclasses

import grader.events as events
from grader.checks.base import RankView


def event_classes() -> list[type[events.Event]]:
    return [
        value
        for value in vars(events).values()
        if isinstance(value, type) and issubclass(value, events.Event) and value is not events.Event
    ]


def test_every_kind_is_declared_once() -> None:
    kinds = [cls.KIND for cls in event_classes()]
    assert all(kinds) and len(kinds) == len(set(kinds)), kinds


def test_a_record_round_trips_and_unknown_keys_are_ignored() -> None:
    end = events.End(status="exit", exit_code=3, line=12)
    raw = {"kind": "end", "seq": 7, "t": 1.5, "sync": 2, "attempt": 1, "extra": True, **end.data()}
    parsed = events.End.parse(raw)
    assert parsed == dataclasses.replace(end, seq=7, t=1.5, sync=2, attempt=1)
    assert "seq" not in end.data() and end.data()["exit_code"] == 3


def test_a_rank_view_types_its_records_and_sees_records_added_later() -> None:
    view = RankView(
        rank=0,
        exit_code=0,
        events=[{"kind": "start", "pid": 1, "rank": 0, "world_size": 2, "file": "/w/main.py"}],
    )
    assert view.learner_file == "/w/main.py" and view.end is None and not view.ended_ok
    view.events.append({"kind": "end", "status": "ok", "exit_code": 0, "seq": 3})
    assert view.end is not None and view.end.seq == 3 and view.ended_ok
