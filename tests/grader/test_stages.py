"""grader.stages: the "launch k of n" event and why, and passes that cannot hold without
distributed training, or without what a check builds on (a DDP model, a resumed snapshot),
reported as not judged; output events tagged with their launch; a launch named once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grader.checks.base import RankView, RunView
from grader.contract import CheckResult, GradeEvent
from grader.i18n import msg
from grader.stages import (
    NO_DDP,
    NO_SNAPSHOT_LOADED,
    NOT_JUDGED_MESSAGE,
    in_launch,
    launch_event,
    not_judged_without_distribution,
    not_judged_without_premise,
    tag_launch,
)


@dataclass
class Plan:
    world_size: int
    nnodes: int = 1
    faults: list[dict[str, Any]] = field(default_factory=list)
    judged: bool = True


def test_the_second_size_says_it_catches_a_hard_coded_size() -> None:
    plans = [Plan(2), Plan(1)]
    first, second = (launch_event(plans, i).data for i in range(2))
    assert (first["status"], first["index"], first["count"], first["world_size"]) == (
        "launch",
        1,
        2,
        2,
    )
    assert first["reason_id"] == "first"
    assert second["reason_id"] == "other_size" and second["first_world_size"] == 2
    assert second["reason"] == (
        "Launch 2 of 2: 1 process, again with 1 process, to catch a rank or world size "
        "hard-coded to 2."
    )


def test_reference_fault_and_multinode_launches_say_why() -> None:
    plans = [Plan(2, judged=False), Plan(2, faults=[{"kind": "kill"}]), Plan(2, nnodes=2)]
    assert [launch_event(plans, i).data["reason_id"] for i in range(3)] == [
        "reference",
        "faults",
        "multinode",
    ]
    assert "as a job on 2 machines" in launch_event(plans, 2).data["reason"]


def _run(*rank_events: list[dict[str, Any]]) -> RunView:
    ranks = [RankView(rank=i, exit_code=0, events=ev) for i, ev in enumerate(rank_events)]
    return RunView(world_size=len(ranks), device="cpu", ranks=ranks)


def _checks() -> list[CheckResult]:
    return [
        CheckResult(id="run.completed", status="pass", title="t", message="ran"),
        CheckResult(id="dist.init", status="fail", title="t", message="no init", hint="h"),
        CheckResult(id="ckpt.rank0_only", status="pass", title="t", message="only rank 0 saved"),
        CheckResult(id="sampler.shards", status="skip", title="t", message="no sampler"),
    ]


def test_passes_of_a_program_that_never_distributed_are_not_judged() -> None:
    never = _run([{"kind": "start"}], [{"kind": "start"}])
    judged = {c.id: c for c in not_judged_without_distribution(_checks(), [never])}
    assert judged["run.completed"].status == "pass"  # says itself what happened
    assert judged["dist.init"].status == "fail" and judged["dist.init"].hint == "h"
    assert judged["ckpt.rank0_only"].status == "skip"
    assert judged["ckpt.rank0_only"].message == NOT_JUDGED_MESSAGE
    assert judged["sampler.shards"].message == "no sampler"  # its own reason stays


def test_a_program_that_initialised_keeps_its_passes() -> None:
    inited = _run([{"kind": "init", "backend": "gloo"}], [])
    assert not_judged_without_distribution(_checks(), [inited]) == _checks()
    # A run stopped before anything was observed has its own "not judged" reasons.
    assert not_judged_without_distribution(_checks(), [_run()]) == _checks()


def test_an_exercise_that_asks_for_no_process_group_keeps_its_passes() -> None:
    never = _run([{"kind": "start"}], [{"kind": "start"}])
    without_init = [c for c in _checks() if c.id != "dist.init"]
    assert not_judged_without_distribution(without_init, [never]) == without_init


def _premised() -> list[CheckResult]:
    return [
        CheckResult(id="ddp.wrapped", status="fail", title="t", message="never wrapped", hint="h"),
        CheckResult(id="ddp.in_sync", status="pass", title="t", message="same parameters"),
        CheckResult(id="ckpt.unwrapped", status="pass", title="t", message="bare keys"),
        CheckResult(id="elastic.equivalent", status="pass", title="t", message="same weights"),
    ]


def test_passes_without_their_premise_are_not_judged_with_the_reason() -> None:
    # Two identical processes that never built a DDP model and a restart that loaded nothing.
    plain = _run([{"kind": "init"}, {"kind": "fault", "rank": 1, "attempt": 0}], [{"kind": "init"}])
    judged = {c.id: c for c in not_judged_without_premise(_premised(), [plain])}
    assert judged["ddp.wrapped"].status == "fail" and judged["ddp.wrapped"].hint == "h"
    for cid in ("ddp.in_sync", "ckpt.unwrapped"):
        assert judged[cid].status == "skip" and judged[cid].message == NO_DDP
        assert judged[cid].message_id == "stages.not_judged_no_ddp"
    assert judged["elastic.equivalent"].status == "skip"
    assert judged["elastic.equivalent"].message == NO_SNAPSHOT_LOADED


def test_passes_whose_premise_was_observed_stand() -> None:
    snap = "/work/snap.pt"
    resumed = _run(
        [
            {"kind": "ddp_init"},
            {"kind": "save", "path": snap, "ok": True, "attempt": 0},
            {"kind": "load", "path": snap, "ok": True, "attempt": 1},
        ],
        [{"kind": "fault", "rank": 1, "attempt": 0}, {"kind": "ddp_init"}],
    )
    assert not_judged_without_premise(_premised(), [resumed]) == _premised()
    # A snapshot saved but never loaded after the restart is no resume.
    saved_only = _run(
        [{"kind": "ddp_init"}, {"kind": "save", "path": snap, "ok": True, "attempt": 0}],
        [{"kind": "fault", "rank": 1, "attempt": 0}],
    )
    judged = {c.id: c for c in not_judged_without_premise(_premised(), [saved_only])}
    assert judged["elastic.equivalent"].status == "skip"
    assert judged["ddp.in_sync"].status == "pass"


def test_output_events_carry_their_launch() -> None:
    seen: list[GradeEvent] = []
    emit = tag_launch(seen.append, 3)
    emit(GradeEvent(kind="output", rank=1, data={"line": "hi", "world_size": 2}))
    emit(GradeEvent(kind="status", data={"status": "checking"}))
    assert seen[0].data == {"line": "hi", "world_size": 2, "launch": 3}
    assert seen[1].data == {"status": "checking"}


def test_a_failure_names_its_launch_once() -> None:
    plain = msg("run.job_oom", "oom")
    assert str(in_launch(plain, 1, 1)) == "With 1 rank: oom"
    assert str(in_launch(plain, 2, 4)) == "As a 2-node job (4 ranks): oom"
    named = msg("launch.multinode_ok", "As a {nodes}-node job ({world} ranks)", nodes=2, world=4)
    assert in_launch(named, 2, 4) == named


def test_a_resuming_launch_says_it_resumes_the_previous_checkpoint() -> None:
    """Issue 38: fsdp-reshard's later launches reshard the 2-rank checkpoint at 3 and 1 ranks;
    their lines gave lesson 2's reason ("to catch a world size hard-coded to 2")."""
    plans = [Plan(2), Plan(3), Plan(1)]
    events = [launch_event(plans, i, resume=True).data for i in range(3)]
    assert [e["reason_id"] for e in events] == ["first", "resume", "resume"]
    assert [e["previous_world_size"] for e in events] == [None, 2, 3]
    assert events[1]["reason"] == (
        "Launch 2 of 3: 3 processes, resuming the checkpoint the previous launch saved with "
        "2 processes."
    )
    assert "hard-coded" not in events[2]["reason"]
    assert launch_event(plans, 1).data["reason_id"] == "other_size"  # without launch.resume
