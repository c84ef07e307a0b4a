"""One launch's lanes: every rank's recorded events as items on the launch's shared clock.

A rank's trace events (`grader.events`) each carry `t`, the wall time the tracer wrote them; the
ranks of a launch (the nodes of a simulated multi-node job too) run on one machine and share that
clock. An item is a plain JSON object: `kind`, `at` (ms since the launch's first event), `to`
when it lasted (a collective from its call to its completion, a barrier, a save), `attempt` after
a restart, and what the kind says (`op`, `bytes`, `line`, ...). The schema: docs/architecture.md,
"The result's timeline".
"""

from __future__ import annotations

from typing import Any

from grader.checks.base import RankView
from grader.events import (
    Barrier,
    BarrierEnter,
    CollectiveCall,
    CollectiveDone,
    Destroy,
    Event,
    Fault,
    Init,
    LaunchEnv,
    Load,
    OverlapStep,
    ProgramException,
    Save,
    Start,
    Step,
    SyncedForward,
)

Item = dict[str, Any]

# Bytes per element of the dtypes a collective sends (an unknown dtype counts as 4).
_ITEMSIZE = {
    "float64": 8,
    "int64": 8,
    "complex64": 8,
    "float32": 4,
    "int32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}
BARRIERS = ("barrier", "monitored_barrier")
# The kinds a rank's trace turns into items, in the order `rank_items` reads them.
SOURCES: tuple[type[Event], ...] = (
    Start,
    Init,
    CollectiveCall,
    BarrierEnter,
    SyncedForward,
    Step,
    Save,
    Load,
    Fault,
    ProgramException,
    Destroy,
)


class Clock:
    """Wall times of one launch as ms since its first event."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0

    def ms(self, t: float | None) -> float | None:
        if t is None or t <= 0:
            return None
        return round((t - self.t0) * 1000.0, 2)


def launch_start(ranks: list[RankView]) -> float:
    """The launch's first recorded wall time (0.0 with no event at all)."""
    times = [float(e["t"]) for r in ranks for e in r.events if float(e.get("t") or 0) > 0]
    return min(times, default=0.0)


def node_of(rank: RankView) -> int:
    """The node a rank ran on (its GROUP_RANK; 0 in a one-node job)."""
    env = rank.first_typed(LaunchEnv)
    try:
        return int(env.group_rank) if env is not None and env.group_rank is not None else 0
    except ValueError:
        return 0


def _bytes(call: CollectiveCall) -> int | None:
    if call.numel is None:
        return None
    return int(call.numel) * _ITEMSIZE.get(call.dtype or "", 4)


def _item(kind: str, e: Event, clock: Clock, **extra: Any) -> Item:
    item: Item = {"kind": kind, "at": clock.ms(e.t)}
    if e.attempt:
        item["attempt"] = e.attempt
    item.update({k: v for k, v in extra.items() if v is not None})
    return item


def _collective(
    e: CollectiveCall, done: dict[tuple[int, int], CollectiveDone], clock: Clock
) -> Item:
    end = done.get((e.attempt, e.i))
    item = _item(
        "collective",
        e,
        clock,
        op=e.op,
        bytes=_bytes(e),
        line=e.line,
        i=e.i,
        step=e.step,
        redop=e.redop,
    )
    if end is None:
        item["open"] = True  # never completed on this rank: it was still in it when the run ended
    else:
        item["to"] = clock.ms(end.t)
        if end.waited:
            item["waited"] = True
            if end.line is not None:
                item["wait_line"] = end.line
    if not e.direct:
        item["via_library"] = True
    return item


def _barrier(e: BarrierEnter, returned: dict[tuple[int, int], Barrier], clock: Clock) -> Item:
    end = returned.get((e.attempt, e.seq))
    item = _item("barrier", e, clock, line=e.line)
    if end is None:
        item["open"] = True
    else:
        item["to"] = clock.ms(end.t)
    return item


def _barrier_returns(rank: RankView) -> dict[tuple[int, int], Barrier]:
    """Each BarrierEnter (by attempt and seq) paired with the Barrier that returned from it."""
    pairs: dict[tuple[int, int], Barrier] = {}
    open_by_attempt: dict[int, list[int]] = {}
    for e in rank.typed_sequence(BarrierEnter, Barrier):
        stack = open_by_attempt.setdefault(e.attempt, [])
        if isinstance(e, BarrierEnter):
            stack.append(e.seq)
        elif isinstance(e, Barrier) and stack:
            pairs[(e.attempt, stack.pop())] = e
    return pairs


def _span(kind: str, e: Event, began: float | None, clock: Clock, **extra: Any) -> Item:
    item = _item(kind, e, clock, **extra)
    start = clock.ms(began)
    if start is not None:
        item["at"], item["to"] = start, item["at"]
    return item


def _path_name(path: str | None) -> str | None:
    return path.rstrip("/").rsplit("/", 1)[-1] if path else None


def rank_items(rank: RankView, clock: Clock) -> list[Item]:
    """Every item of one rank, in the order its events were written (overlap items after)."""
    done = {(d.attempt, d.i): d for d in rank.typed(CollectiveDone)}
    returned = _barrier_returns(rank)
    items: list[Item] = []
    steps: dict[int, int] = {}  # per attempt: the rank's optimizer steps (every optimizer's)
    for e in rank.typed_sequence(*SOURCES):
        item = _from_event(e, done, returned, clock)
        if isinstance(e, Step):
            steps[e.attempt] = steps.get(e.attempt, 0) + 1
            item["n"] = steps[e.attempt]
        if item:
            item["_seq"] = (e.attempt, e.seq)
            items.append(item)
    items += overlap_items(rank, clock)
    return items


def _from_event(
    e: Event,
    done: dict[tuple[int, int], CollectiveDone],
    returned: dict[tuple[int, int], Barrier],
    clock: Clock,
) -> Item:
    """The item of one event ({} for an event shown otherwise: a barrier's own call record)."""
    if isinstance(e, Start):
        return _item("restart" if e.attempt else "start", e, clock)
    if isinstance(e, Init):
        return _item("init", e, clock, line=e.line, backend=e.backend)
    if isinstance(e, CollectiveCall):
        return {} if e.op in BARRIERS else _collective(e, done, clock)
    if isinstance(e, BarrierEnter):
        return _barrier(e, returned, clock)
    if isinstance(e, SyncedForward):
        return _item("ddp_sync", e, clock, line=e.line, n=e.n, bytes=e.numel * 4)
    if isinstance(e, Step):
        return _span("step", e, e.began, clock, opt=e.opt or None)
    if isinstance(e, Save):
        ok = None if e.ok else False
        return _span("save", e, e.began, clock, line=e.line, path=_path_name(e.path), ok=ok)
    if isinstance(e, Load):
        ok = None if e.ok else False
        return _span("load", e, e.began, clock, line=e.line, path=_path_name(e.path), ok=ok)
    if isinstance(e, Fault):
        return _item("fault", e, clock, after_steps=e.after_steps, exit_code=e.exit_code)
    if isinstance(e, ProgramException):
        return _item("exception", e, clock, line=e.line, error=e.type or None)
    if isinstance(e, Destroy):
        return _item("destroy", e, clock, line=e.line)
    return {}


def overlap_items(rank: RankView, clock: Clock) -> list[Item]:
    """What the overlap hook saw (overlap-buckets): each backward pass, and each parameter's
    gradient becoming ready, of the first optimizer steps."""
    items: list[Item] = []
    for e in rank.typed(OverlapStep):
        for began, returned in (pair for pair in e.backward if len(pair) == 2):
            item = {"kind": "backward", "at": clock.ms(began), "to": clock.ms(returned)}
            items.append(_with_attempt(item, e.attempt))
        for token, t in zip(e.timeline, e.times, strict=False):
            if token and token[0] == "r":
                item = {"kind": "ready", "at": clock.ms(t), "param": int(token[1])}
                items.append(_with_attempt(item, e.attempt))
    return items


def _with_attempt(item: Item, attempt: int) -> Item:
    if attempt:
        item["attempt"] = attempt
    return item
