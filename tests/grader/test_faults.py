"""Fault placement from the uninterrupted reference run (grader/launch/faults.py)."""

from __future__ import annotations

from typing import Any

from grader.checks.base import RankView, RunView
from grader.launch.faults import first_snapshot, place_faults

FAULT = {"kind": "exit", "rank": 1, "after": "snapshot", "after_steps": 1, "attempt": 0}


def step() -> dict[str, Any]:
    return {"kind": "step"}


def save(path: str, model: bool = True) -> dict[str, Any]:
    return {"kind": "save", "ok": True, "path": path, "model_state": model}


def reference(rank0: list[dict[str, Any]], steps: int) -> RunView:
    ranks = [
        RankView(rank=0, exit_code=0, events=rank0),
        RankView(rank=1, exit_code=0, events=[step() for _ in range(steps)]),
    ]
    return RunView(world_size=2, device="cpu", ranks=ranks)


def test_the_fault_follows_the_first_complete_snapshot_whatever_the_epoch_length() -> None:
    # 15 steps per epoch, a snapshot through a temp file every 6 steps, 45 steps in all.
    rank0: list[dict[str, Any]] = []
    for n in range(1, 46):
        rank0.append(step())
        if n % 6 == 0:
            rank0 += [
                save("/w/run/latest.ckpt.partial"),
                {
                    "kind": "rename",
                    "src": "/w/run/latest.ckpt.partial",
                    "dst": "/w/run/latest.ckpt",
                },
            ]
    assert first_snapshot(reference(rank0, 45).ranks) == (6, "/w/run/latest.ckpt")
    (placed,) = place_faults([FAULT], reference(rank0, 45))
    assert placed["after_steps"] == 7 and placed["placed"] == "snapshot"
    assert placed["reference_steps"] == 45 and placed["snapshot_step"] == 6


def test_a_save_that_holds_no_model_is_no_snapshot() -> None:
    rank0 = [save("/w/config.pt", model=False), *[step() for _ in range(8)], save("/w/m.pt")]
    rank0 += [step() for _ in range(8)]
    (placed,) = place_faults([FAULT], reference(rank0, 16))
    assert placed["after_steps"] == 9 and placed["snapshot_path"] == "/w/m.pt"


def test_a_program_that_never_saves_is_stopped_halfway() -> None:
    (placed,) = place_faults([FAULT], reference([step() for _ in range(12)], 12))
    assert placed["placed"] == "no_snapshot" and placed["after_steps"] == 6


def test_a_snapshot_only_after_the_last_step_falls_back_too() -> None:
    rank0 = [*[step() for _ in range(10)], save("/w/final.pt")]
    (placed,) = place_faults([FAULT], reference(rank0, 10))
    assert placed["placed"] == "late_snapshot" and placed["after_steps"] == 5


def test_a_fixed_step_count_is_kept_and_a_rank_that_never_stepped_is_left_alone() -> None:
    fixed = {**FAULT, "after": "steps", "after_steps": 3}
    assert place_faults([fixed], reference([], 0))[0]["after_steps"] == 3
    (placed,) = place_faults([FAULT], reference([save("/w/m.pt")], 0))
    assert placed["placed"] == "no_steps"
