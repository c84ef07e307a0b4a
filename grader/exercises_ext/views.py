"""Helpers shared by this package's checks: what a run is, and what its ranks did."""

from __future__ import annotations

from typing import Any

from grader.checks.base import RankView, RunView


def nnodes(run: RunView) -> int:
    return int(getattr(run, "nnodes", 1) or 1)


def reference(run: RunView) -> RunView | None:
    """The uninterrupted run launched next to a run with injected faults (None if none)."""
    return getattr(run, "reference", None)


def faults(run: RunView) -> list[dict[str, Any]]:
    return list(getattr(run, "faults", None) or [])


def where(run: RunView, line: int | None) -> str:
    return run.at(line) or "(line unknown)"


def attempts(rank: RankView) -> list[int]:
    return sorted({int(e.get("attempt", 0)) for e in rank.events})


def in_attempt(rank: RankView, attempt: int, kind: str | None = None) -> list[dict[str, Any]]:
    return [
        e
        for e in rank.events
        if int(e.get("attempt", 0)) == attempt and (kind is None or e.get("kind") == kind)
    ]


def last_attempt(run: RunView) -> int:
    return max((a for r in run.ranks for a in attempts(r)), default=0)


def steps(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The optimizer steps of the first optimizer that stepped (the core's `step` events)."""
    all_steps = [e for e in events if e.get("kind") == "step"]
    if not all_steps:
        return []
    first = all_steps[0].get("opt", 0)
    return [e for e in all_steps if e.get("opt", 0) == first]


def last_line(rank: RankView) -> int | None:
    """The last line of the learner's file this rank was seen at (stack first, then events)."""
    from grader.checks.base import stack_line

    line = stack_line(rank.stack, rank.learner_file)
    if line is not None:
        return line
    for e in reversed(rank.events):
        if isinstance(e.get("line"), int):
            return int(e["line"])
    return None


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
