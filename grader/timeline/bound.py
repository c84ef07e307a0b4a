"""The timeline's size bound: past a few optimizer steps, a lane keeps its first and last steps'
items and counts the rest (`omitted`), and the whole timeline of one grading stays under
`MAX_BYTES` of JSON.

A window is what a rank did up to one optimizer step (window 0 ends with its first step; the
window after its last step holds the program's end). Checkpoint saves and loads, restarts, the
injected fault, exceptions and a collective a rank never left are kept whatever their window.
"""

from __future__ import annotations

import bisect
import json
from typing import Any

from grader.timeline.lanes import Item

MAX_BYTES = 50_000
# (first, last) windows kept per lane, tried in order until the timeline fits.
KEEP = ((3, 2), (2, 1), (1, 1), (1, 0), (0, 0))
ALWAYS = frozenset({"start", "restart", "init", "save", "load", "fault", "exception", "destroy"})


def windows(items: list[Item]) -> list[tuple[int, int]]:
    """(attempt, window) of each item: the optimizer steps its rank had finished, that attempt,
    when it began."""
    ends: dict[int, list[float]] = {}
    for item in items:
        if item["kind"] == "step":
            ends.setdefault(item.get("attempt", 0), []).append(item.get("to") or item["at"])
    for times in ends.values():
        times.sort()
    found = []
    for item in items:
        attempt = item.get("attempt", 0)
        at = item["at"] if item["at"] is not None else 0.0
        found.append((attempt, bisect.bisect_left(ends.get(attempt, []), at)))
    return found


def summarise(items: list[Item], first: int, last: int) -> tuple[list[Item], list[Item]]:
    """(the items kept, what was left out per attempt: steps and counts per kind)."""
    where = windows(items)
    totals: dict[int, int] = {}
    for item, (attempt, _) in zip(items, where, strict=True):
        if item["kind"] == "step":
            totals[attempt] = totals.get(attempt, 0) + 1
    kept: list[Item] = []
    left: dict[int, dict[str, int]] = {}
    for item, (attempt, window) in zip(items, where, strict=True):
        total = totals.get(attempt, 0)
        if _keep(item, window, total, first, last):
            kept.append(item)
        else:
            counts = left.setdefault(attempt, {})
            counts[item["kind"]] = counts.get(item["kind"], 0) + 1
    omitted = [
        {
            "attempt": attempt,
            "from_step": first + 1,
            "to_step": totals.get(attempt, 0) - last,
            "counts": counts,
        }
        for attempt, counts in sorted(left.items())
    ]
    return kept, omitted


def _keep(item: Item, window: int, total: int, first: int, last: int) -> bool:
    if item["kind"] in ALWAYS or item.get("open") or item.get("parted"):
        return True
    return window < first or window >= total - last or total <= first + last


def size(timeline: dict[str, Any]) -> int:
    return len(json.dumps(timeline, separators=(",", ":")).encode())


def cap_items(items: list[Item], limit: int) -> tuple[list[Item], dict[str, int]]:
    """At most `limit` items (the first and last halves), and the counts of those left out: the
    last resort when even one step per lane is too much (a program that never steps)."""
    if len(items) <= limit:
        return items, {}
    head, tail = items[: limit // 2], items[len(items) - (limit - limit // 2) :]
    counts: dict[str, int] = {}
    for item in items[len(head) : len(items) - len(tail)]:
        counts[item["kind"]] = counts.get(item["kind"], 0) + 1
    return head + tail, counts
