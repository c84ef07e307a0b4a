"""The result's timeline (grader/timeline/) on hand-made traces: lanes on one clock, collectives
from call to completion, where the ranks parted, the restart, the size bound."""

from __future__ import annotations

import json
from typing import Any

from grader.checks.base import RankView, RunView
from grader.timeline import LaunchRun, build
from grader.timeline.bound import MAX_BYTES

T0 = 1_700_000_000.0


def rec(kind: str, t: float, seq: int, attempt: int = 0, **fields: Any) -> dict[str, Any]:
    """A raw trace record `t` seconds after T0."""
    return {"kind": kind, "t": T0 + t, "seq": seq, "attempt": attempt, **fields}


def trace(*records: tuple[str, float, dict[str, Any]], attempt: int = 0) -> list[dict[str, Any]]:
    return [rec(k, t, seq, attempt, **f) for seq, (k, t, f) in enumerate(records, start=1)]


def view(ranks: dict[int, list[dict[str, Any]]], **kw: Any) -> RunView:
    return RunView(
        world_size=len(ranks),
        device="cpu",
        ranks=[RankView(rank=r, exit_code=0, events=ev) for r, ev in ranks.items()],
        **kw,
    )


def call(i: int, line: int, numel: int = 4, op: str = "all_reduce") -> dict[str, Any]:
    return {"i": i, "line": line, "op": op, "numel": numel, "dtype": "float32", "direct": True}


def lane(timeline: dict[str, Any], rank: int, launch: int = 0) -> dict[str, Any]:
    return next(x for x in timeline["launches"][launch]["lanes"] if x["rank"] == rank)


def kinds(lane_: dict[str, Any]) -> list[str]:
    return [item["kind"] for item in lane_["items"]]


def test_a_collective_is_a_bar_from_its_call_to_its_completion_on_the_launchs_clock() -> None:
    rank0 = trace(
        ("start", 0.0, {}),
        ("collective_call", 0.5, call(1, 12)),
        ("collective_done", 0.8, {"i": 1}),
        ("end", 1.0, {"status": "ok"}),
    )
    rank1 = trace(
        ("start", 0.1, {}),
        ("collective_call", 0.7, call(1, 12)),
        ("collective_done", 0.8, {"i": 1}),
        ("end", 1.2, {"status": "ok"}),
    )
    timeline = build([LaunchRun(1, view({0: rank0, 1: rank1}))])
    one = lane(timeline, 1)
    bar = next(i for i in one["items"] if i["kind"] == "collective")
    assert (bar["at"], bar["to"], bar["op"], bar["bytes"], bar["line"]) == (
        700.0,
        800.0,
        "all_reduce",
        16,
        12,
    )
    assert one["end"] == {"state": "finished", "at": 1200.0}
    assert timeline["launches"][0]["parted"] is None
    assert timeline["version"] == 1


def test_an_async_call_ends_when_its_handle_was_waited_on() -> None:
    rank0 = trace(
        ("collective_call", 0.1, call(1, 20)),
        ("collective_done", 0.4, {"i": 1, "waited": True, "line": 25}),
    )
    item = lane(build([LaunchRun(1, view({0: rank0}))]), 0)["items"][0]
    assert (item["to"], item["waited"], item["wait_line"]) == (300.0, True, 25)


def test_the_rank_that_never_arrived_and_the_collective_where_the_ranks_parted() -> None:
    rank0 = trace(
        ("collective_call", 0.1, call(1, 12)),
        ("collective_done", 0.2, {"i": 1}),
        ("collective_call", 0.3, call(2, 40, numel=1)),
    )
    rank1 = trace(
        ("collective_call", 0.1, call(1, 12)),
        ("collective_done", 0.2, {"i": 1}),
        ("end", 0.4, {"status": "ok"}),
    )
    run = view({0: rank0, 1: rank1}, timed_out=True)
    launch = build([LaunchRun(1, run, failing=True)])["launches"][0]
    assert launch["parted"] == {
        "n": 2,
        "op": "all_reduce",
        "line": 40,
        "made": [0],
        "missing": [1],
        "calls": [{"rank": 0, "op": "all_reduce", "line": 40}],
    }
    waiting = lane({"launches": [launch]}, 0)
    stuck = waiting["items"][-1]
    assert stuck["open"] and stuck["parted"] and "to" not in stuck
    assert waiting["end"] == {"state": "waiting", "at": 300.0, "line": 40}  # clock: first event
    assert lane({"launches": [launch]}, 1)["end"]["never_arrived"] == 2


def test_the_fault_the_restart_and_the_snapshot_loaded() -> None:
    before = trace(
        ("start", 0.0, {}),
        ("step", 0.3, {"began": T0 + 0.25}),
        ("save", 0.35, {"began": T0 + 0.32, "line": 50, "path": "/job/ckpt.pt", "ok": True}),
        ("fault", 0.4, {"rank": 1, "after_steps": 1}),
    )
    after = trace(
        ("start", 1.0, {}),
        ("load", 1.2, {"began": T0 + 1.1, "line": 30, "path": "/job/ckpt.pt", "ok": True}),
        ("end", 1.5, {"status": "ok"}),
        attempt=1,
    )
    one = lane(build([LaunchRun(2, view({0: before + after}), faulted=True)]), 0)
    assert kinds(one) == ["start", "step", "save", "fault", "restart", "load"]
    save, load = one["items"][2], one["items"][5]
    assert (save["at"], save["to"], save["path"]) == (320.0, 350.0, "ckpt.pt")
    assert (load["at"], load["to"], load["attempt"], load["line"]) == (1100.0, 1200.0, 1, 30)
    assert one["items"][4] == {"kind": "restart", "at": 1000.0, "attempt": 1}


def test_overlap_shows_each_backward_and_each_gradient_ready() -> None:
    step = {
        "n": 1,
        "timeline": [["r", 1], ["a", 0], ["r", 0], ["a", 1], ["e"], ["s"]],
        "times": [T0 + 0.11, T0 + 0.12, T0 + 0.13, T0 + 0.14, T0 + 0.15, T0 + 0.2],
        "backward": [[T0 + 0.1, T0 + 0.15]],
    }
    rank0 = trace(
        ("overlap_params", 0.0, {"names": ["w", "b"], "numels": [4, 1], "itemsizes": [4, 4]}),
        ("overlap_step", 0.2, step),
    )
    timeline = build([LaunchRun(1, view({0: rank0}))])
    one = lane(timeline, 0)
    assert [(i["kind"], i["at"], i.get("param")) for i in one["items"]] == [
        ("backward", 100.0, None),
        ("ready", 110.0, 1),
        ("ready", 130.0, 0),
    ]
    assert timeline["launches"][0]["params"] == ["w", "b"]


def test_failing_launches_come_first_and_each_lane_names_its_node() -> None:
    ok = view({0: trace(("end", 0.1, {"status": "ok"}))})
    node1 = trace(("launch_env", 0.0, {"group_rank": "1"}), ("end", 0.1, {"status": "exit"}))
    bad = view({0: trace(("end", 0.1, {"status": "ok"})), 1: node1}, nnodes=2)
    timeline = build([LaunchRun(1, ok), LaunchRun(2, bad, failing=True)])
    assert [x["launch"] for x in timeline["launches"]] == [2, 1]
    reference = build([LaunchRun(1, ok, judged=False), LaunchRun(2, ok, faulted=True)])
    assert [x["launch"] for x in reference["launches"]] == [2, 1]  # the restart first
    assert [(x["rank"], x["node"]) for x in timeline["launches"][0]["lanes"]] == [(0, 0), (1, 1)]
    assert timeline["launches"][0]["lanes"][1]["end"]["state"] == "exited"


def test_past_a_few_steps_a_lane_keeps_its_first_and_last_and_counts_the_rest() -> None:
    records: list[tuple[str, float, dict[str, Any]]] = []
    for n in range(20):
        records.append(("collective_call", n + 0.1, call(n + 1, 12)))
        records.append(("collective_done", n + 0.2, {"i": n + 1}))
        records.append(("step", n + 0.5, {}))
    one = lane(build([LaunchRun(1, view({0: trace(*records)}))]), 0)
    kept_steps = [i["n"] for i in one["items"] if i["kind"] == "step"]
    assert kept_steps == [1, 2, 3, 19, 20]
    assert one["omitted"] == [
        {"attempt": 0, "from_step": 4, "to_step": 18, "counts": {"collective": 15, "step": 15}}
    ]


def test_a_huge_run_stays_under_the_bound() -> None:
    records: list[tuple[str, float, dict[str, Any]]] = []
    for n in range(3000):  # a program that never steps: no window to summarise by
        records.append(("collective_call", n * 0.01, call(n + 1, 12)))
        records.append(("collective_done", n * 0.01 + 0.005, {"i": n + 1}))
    run = view({r: trace(*records) for r in range(4)})
    timeline = build([LaunchRun(1, run), LaunchRun(2, run)])
    assert len(json.dumps(timeline, separators=(",", ":"))) <= MAX_BYTES
    first = timeline["launches"][0]["lanes"][0]
    assert len(first["items"]) + first["omitted"][-1]["counts"]["collective"] == 3000


def test_ranks_in_different_collectives_both_parted_there() -> None:
    forward = {"kind": "synced_forward", "n": 1, "line": 49, "numel": 18}
    rank0 = trace(("collective_call", 0.3, call(1, 54, numel=1)))
    rank1 = trace(
        ("synced_forward", 0.3, {k: v for k, v in forward.items() if k != "kind"}),
        ("exception", 0.5, {"type": "RuntimeError", "line": 50}),
    )
    launch = build([LaunchRun(1, view({0: rank0, 1: rank1}), failing=True)])["launches"][0]
    assert launch["parted"]["calls"] == [
        {"rank": 0, "op": "all_reduce", "line": 54},
        {"rank": 1, "op": "ddp", "line": 49},
    ]
    assert launch["parted"]["missing"] == []
    lanes = {x["rank"]: x for x in launch["lanes"]}
    assert [i["kind"] for i in lanes[1]["items"] if i.get("parted")] == ["ddp_sync"]
    assert lanes[1]["end"] == {"state": "crashed", "at": 200.0, "line": 50, "error": "RuntimeError"}
    assert lanes[0]["end"]["state"] == "waiting"
