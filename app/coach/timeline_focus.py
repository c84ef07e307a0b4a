"""Where in a Result's timeline (grader/timeline/, `Result.timeline`) the coach can point a learner:
the one moment that shows what went wrong, as plain data ("rank 1's lane at 0.8 s").

A hook for the coach's answers (`focus(result)`), not yet quoted by them: the collective where the
ranks parted (the rank that waited there), else a collective a rank never left, else the rank the
grader stopped and the restart, else an error. None for a timeline with nothing to point at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.contract import Result


@dataclass(frozen=True)
class Focus:
    launch: int  # the launch's index, as the page labels its figure
    rank: int
    seconds: float  # on the launch's clock
    kind: str  # the item's kind: "collective", "ddp_sync", "fault", "restart", "exception"
    line: int | None  # the learner's line, when the item has one


def focus(result: Result) -> Focus | None:
    timeline = result.timeline or {}
    if timeline.get("version") != 1:
        return None
    for launch in timeline.get("launches") or []:
        found = _in_launch(launch)
        if found is not None:
            return found
    return None


def _in_launch(launch: dict[str, Any]) -> Focus | None:
    lanes = launch.get("lanes") or []
    for wanted in (
        lambda item: bool(item.get("parted")),
        lambda item: bool(item.get("open")),
        lambda item: item.get("kind") == "fault",
        lambda item: item.get("kind") == "exception",
    ):
        for lane in lanes:
            for item in lane.get("items") or []:
                if wanted(item):
                    return Focus(
                        launch=int(launch.get("launch", 1)),
                        rank=int(lane["rank"]),
                        seconds=round(float(item.get("at") or 0.0) / 1000.0, 1),
                        kind=str(item.get("kind")),
                        line=item.get("line"),
                    )
    return None
