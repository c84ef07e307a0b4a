"""Where each rank was when a launch ended, and the collective where the ranks parted.

A lane's `end`: "finished" (the program ran to its end), "crashed" (an uncaught exception),
"exited" (a non-zero exit), "killed" (the grader stopped it as the exercise asks, and no restart
followed), "waiting" (still inside a collective or a barrier when the run was stopped), "stopped"
(stopped elsewhere: its line from the stack dumped then). The ranks parted at the first
collective of their last attempt that not every rank made alike, in the order each made them:
the collectives the learner's file called and one DDP gradient all-reduce per synchronised
backward pass, as `hang.same_collectives` compares them; a rank that never made it
`never_arrived` there.
"""

from __future__ import annotations

from typing import Any

from grader.checks.base import RankView, RunView, stack_line
from grader.events import CollectiveCall, End, Event, Fault, ProgramException, SyncedForward
from grader.timeline.lanes import BARRIERS, Clock, Item


def stop_time(run: RunView) -> float:
    """The launch's last recorded wall time."""
    times = [float(e.get("t") or 0) for r in run.ranks for e in r.events]
    return max(times, default=0.0)


def lane_end(rank: RankView, items: list[Item], clock: Clock, stop: float) -> dict[str, Any]:
    last = rank.last_attempt
    view = rank.attempt_view(last)
    end = view.end
    crash = view.first_typed(ProgramException)
    if end is not None and end.status == "ok":
        return _end("finished", end, clock, end.line)
    if crash is not None:
        return {**_end("crashed", crash, clock, crash.line), "error": crash.type}
    if end is not None:
        return {**_end("exited", end, clock, end.line), "exit_code": end.exit_code}
    fault = view.first_typed(Fault)
    if fault is not None:
        return _end("killed", fault, clock, None)
    stuck = [i for i in items if i.get("open") and i.get("attempt", 0) == last]
    if stuck:
        return {"state": "waiting", "at": clock.ms(stop), "line": stuck[-1].get("line")}
    line = stack_line(rank.stack, rank.learner_file) or rank.last_line
    return {"state": "stopped", "at": clock.ms(stop), "line": line}


def _end(state: str, e: End | ProgramException | Fault, clock: Clock, line: int | None) -> Item:
    found: Item = {"state": state, "at": clock.ms(e.t)}
    if line is not None:
        found["line"] = line
    return found


def _entries(rank: RankView) -> list[tuple[tuple[Any, ...], Event]]:
    """The rank's collectives of its last attempt, in order, with what every rank must agree on."""
    out: list[tuple[tuple[Any, ...], Event]] = []
    view = rank.attempt_view(rank.last_attempt)
    for e in view.typed_sequence(CollectiveCall, SyncedForward):
        if isinstance(e, CollectiveCall) and e.direct:
            out.append(((e.op, e.numel, e.dtype, e.redop, e.src), e))
        elif isinstance(e, SyncedForward) and not e.in_join:
            out.append((("ddp", e.numel), e))
    return out


def parting(run: RunView, lanes: dict[int, list[Item]], ends: dict[int, Item]) -> Item | None:
    """The collective where the ranks parted (None: they never did). Marks the item of each rank
    that made it (`parted`) and the end of each rank that never arrived (`never_arrived`)."""
    seqs = {r.rank: _entries(r) for r in run.ranks}
    if len(seqs) < 2:
        return None
    for n in range(max(len(s) for s in seqs.values())):
        made = {rank: seq[n] for rank, seq in seqs.items() if n < len(seq)}
        if len(made) == len(seqs) and len({key for key, _ in made.values()}) == 1:
            continue
        missing = sorted(set(seqs) - set(made))
        for rank, (_, e) in made.items():
            _mark(lanes[rank], e)
        for rank in missing:
            ends[rank]["never_arrived"] = n + 1
        calls = [{"rank": rank, **_call(e)} for rank, (_, e) in sorted(made.items())]
        return {
            "n": n + 1,
            "op": calls[0]["op"],
            "line": calls[0]["line"],
            "made": sorted(made),
            "missing": missing,
            "calls": calls,  # what each rank that got there called
        }
    return None


def _call(e: Event) -> dict[str, Any]:
    if isinstance(e, SyncedForward):
        return {"op": "ddp", "line": e.line}
    assert isinstance(e, CollectiveCall)
    return {"op": e.op, "line": e.line}


def _mark(items: list[Item], e: Event) -> None:
    """Mark the item of event `e` (a barrier's item is its BarrierEnter, written right after)."""
    seq = e.seq + 1 if isinstance(e, CollectiveCall) and e.op in BARRIERS else e.seq
    for item in items:
        if item.get("_seq") == (e.attempt, seq):
            item["parted"] = True
            return
