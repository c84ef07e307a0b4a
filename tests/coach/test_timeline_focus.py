"""The moment of a Result's timeline the coach can point at (app/coach/timeline_focus.py)."""

from __future__ import annotations

import json
from pathlib import Path

from app.coach.timeline_focus import Focus, focus
from grader.contract import Result

FIXTURES = Path(__file__).parents[1] / "e2e" / "fixtures"


def with_timeline(name: str) -> Result:
    timeline = json.loads((FIXTURES / f"timeline_{name}.json").read_text("utf-8"))
    return Result(status="fail", summary="", timeline=timeline)


def test_the_hang_points_at_the_rank_that_waited_where_the_ranks_parted() -> None:
    found = focus(with_timeline("find-the-hang-starter"))
    assert found is not None
    assert (found.launch, found.rank, found.kind, found.line) == (1, 0, "collective", 54)
    assert 0 < found.seconds < 2


def test_the_restart_points_at_the_rank_the_grader_stopped() -> None:
    found = focus(with_timeline("elastic-resume-solution"))
    assert found is not None and (found.rank, found.kind) == (1, "fault")


def test_nothing_to_point_at() -> None:
    assert focus(with_timeline("overlap-buckets-solution")) is None
    assert focus(Result(status="pass", summary="")) is None
    assert focus(Result(status="fail", summary="", timeline={"version": 2})) is None
    assert Focus(1, 0, 0.8, "collective", None).seconds == 0.8
