"""Where an injected fault goes, learned from the program's own uninterrupted run.

A fault spec with `after: snapshot` (the default) stops its rank once the program's first
snapshot is completely written plus `after_steps` more optimizer steps of that rank, whatever the
dataset size, epoch length, snapshot cadence, file name or layout. The uninterrupted reference
run, launched first, shows both numbers: how many optimizer steps each rank had taken when the
first save of the model (or the rename that published it) returned, and how many it takes in
all. The harness then counts this rank's optimizer steps (every optimizer's) and stops it at the
placed count.

When the reference shows no snapshot before its last step, the fault falls back to the middle
of training (bounded by the reference's step count) and says why, so that the checks can tell the
learner that there was nothing to resume from.
"""

from __future__ import annotations

from typing import Any

from grader.checks.base import RankView, RunView
from grader.events import Rename, Save, Step


def place_faults(faults: list[dict[str, Any]], reference: RunView | None) -> list[dict[str, Any]]:
    """The faults to inject into a run, with `after_steps` as an absolute step count."""
    return [_place(fault, reference) for fault in faults]


def _place(fault: dict[str, Any], reference: RunView | None) -> dict[str, Any]:
    if fault.get("after") == "steps":
        return {**fault, "placed": "steps"}
    extra = int(fault.get("after_steps", 1))
    rank = int(fault.get("rank", 1))
    ranks = reference.ranks if reference is not None else []
    own = next((r for r in ranks if r.rank == rank), None)
    total = len(own.typed(Step)) if own is not None else 0
    if total == 0:
        # The reference never stepped on that rank: its own failure is what the checks report.
        return {**fault, "after_steps": extra, "placed": "no_steps", "reference_steps": 0}
    first = first_snapshot(ranks)
    if first is None:
        return {
            **fault,
            "after_steps": _fallback(total),
            "placed": "no_snapshot",
            "reference_steps": total,
        }
    at, path = first
    if at >= total:
        return {
            **fault,
            "after_steps": _fallback(total),
            "placed": "late_snapshot",
            "reference_steps": total,
            "snapshot_step": at,
            "snapshot_path": path,
        }
    return {
        **fault,
        "after_steps": min(at + extra, total),
        "placed": "snapshot",
        "reference_steps": total,
        "snapshot_step": at,
        "snapshot_path": path,
    }


def _fallback(total: int) -> int:
    return max(1, total // 2)


def first_snapshot(ranks: list[RankView]) -> tuple[int, str | None] | None:
    """(optimizer steps taken when the first model snapshot was completely written, its final
    path), the earliest over the ranks; None when no rank saved the model."""
    found: list[tuple[int, str | None]] = []
    for r in ranks:
        steps, saved, path = 0, False, None
        for e in r.typed_sequence(Step, Save, Rename):
            if isinstance(e, Step):
                if saved:
                    break
                steps += 1
            elif isinstance(e, Save) and e.ok and e.model_state and e.target != "memory":
                # The first model save to storage (an io.BytesIO is no snapshot), its own path.
                saved, path = True, e.path
            elif isinstance(e, Rename) and saved and e.src == path:
                path = e.dst
        if saved:
            found.append((steps, path))
    return min(found, key=lambda f: f[0]) if found else None
