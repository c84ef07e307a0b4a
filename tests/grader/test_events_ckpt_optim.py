"""The checkpoint, optimizer-step, fault, replay and fatal events: what a hook or the supervisor
writes parses back into the same typed record the checks read."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import torch

from grader.checks.base import RankView, first_optimizer
from grader.events import Fatal, Fault, Load, Rename, Replay, Save, SavedStateDict, Step
from grader.harness.hooks.ckpt import analyze
from grader.harness.hooks.optim import fault_event
from grader.inside.supervisor import _read_dumps
from grader.launch.wire import PlacedFault
from tests.grader.test_harness_errors import _events as _records
from tests.grader.test_harness_errors import _tracer


def test_a_saved_snapshot_is_written_and_read_back_typed(tmp_path: Path) -> None:
    tracer = _tracer(tmp_path)
    compiled = OrderedDict(
        (f"_orig_mod.{k}", v) for k, v in torch.nn.Linear(2, 1).state_dict().items()
    )
    snapshot = {"model": compiled, "epoch": 3}
    saved = analyze(snapshot, tracer)
    tracer.record(
        Save(
            path="/w/s.pt",
            line=12,
            ok=True,
            type=saved.type,
            holds=saved.holds,
            model_state=saved.model_state,
            state_dicts=saved.state_dicts,
        )
    )
    tracer.record(Rename(src="/w/s.pt", dst="/w/snap.pt", line=13))
    (raw_save, raw_rename) = _records(tmp_path)
    assert raw_save["kind"] == "save" and isinstance(raw_save["state_dicts"], list)
    view = RankView(rank=0, exit_code=0, events=[raw_save, raw_rename])
    save = view.typed(Save)[0]
    assert (save.path, save.line, save.ok, save.holds, save.type) == (
        "/w/s.pt",
        12,
        True,
        "state",
        "dict",
    )
    (sd,) = save.state_dicts
    assert isinstance(sd, SavedStateDict)
    assert (sd.where, sd.n, sd.compiled_prefixed, sd.model, sd.loadable) == (
        "['model']",
        2,
        2,
        True,
        None,
    )
    assert sd.sample == ["_orig_mod.weight", "_orig_mod.bias"]
    assert [type(e) for e in view.typed_sequence(Rename, Save)] == [Save, Rename]


def test_a_record_from_an_older_harness_takes_the_defaults() -> None:
    save = Save.parse({"kind": "save", "path": "/w/m.pt", "unknown_field": 1})
    assert (save.ok, save.model_state, save.state_dicts, save.line) == (False, False, [], None)
    load = Load.parse({"kind": "load", "path": "/w/m.pt", "ok": True, "attempt": 1})
    assert (load.ok, load.attempt, load.error) == (True, 1, None)


def test_attempts_and_the_first_optimizer_are_read_typed() -> None:
    events = [
        {"kind": "step", "opt": 1, "n": 1, "attempt": 0, "optimizer": "SGD"},
        {"kind": "step", "opt": 0, "n": 1, "attempt": 0},
        {"kind": "step", "opt": 1, "n": 2, "attempt": 0},
        {"kind": "load", "path": "/w/snap.pt", "ok": True, "attempt": 1},
        {"kind": "step", "opt": 1, "n": 1, "attempt": 1},
    ]
    view = RankView(rank=1, exit_code=0, events=events)
    assert [e.path for e in view.typed_in_attempt(1, Load)] == ["/w/snap.pt"]
    assert view.typed_in_attempt(0, Load) == []
    first = first_optimizer(view.typed_in_attempt(0, Step))
    assert [(s.opt, s.n) for s in first] == [(1, 1), (1, 2)] and first[0].optimizer == "SGD"
    assert first_optimizer([]) == []


def test_a_placed_fault_is_recorded_without_the_spec_s_kind(tmp_path: Path) -> None:
    tracer = _tracer(tmp_path)
    spec = {
        "kind": "exit",
        "rank": 1,
        "after": "snapshot",
        "after_steps": 5,
        "attempt": 0,
        "exit_code": 3,
        "placed": "snapshot",
        "reference_steps": 8,
        "snapshot_step": 4,
        "snapshot_path": "/w/snap.pt",
    }
    tracer.record(fault_event(PlacedFault.from_dict(spec)))
    (raw,) = _records(tmp_path)
    assert raw["kind"] == "fault"
    fault = Fault.parse(raw)
    assert (fault.rank, fault.after_steps, fault.exit_code, fault.placed) == (1, 5, 3, "snapshot")
    assert (fault.reference_steps, fault.snapshot_step, fault.snapshot_path) == (8, 4, "/w/snap.pt")


def test_the_replay_outcome_round_trips(tmp_path: Path) -> None:
    tracer = _tracer(tmp_path)
    replay = Replay(
        status="ok",
        world_size=2,
        ratio=0.5,
        micro_steps={"0": 2, "1": 2},
        loss_scales={"0": [[0.5], [0.5]]},
        root_scales={"0": [None, 0.5]},
        mean_status="ok",
        micro_total=4,
        mean_ratio=1.0,
    )
    tracer.record(replay)
    (raw,) = _records(tmp_path)
    assert Replay.parse(raw).data() == replay.data()
    unavailable = Replay.parse({"kind": "replay", "status": "unavailable", "reason": "r"})
    assert (unavailable.step_parallel, unavailable.micro_steps, unavailable.mean_status) == (
        True,
        {},
        "",
    )


def test_the_supervisor_writes_a_fatal_record_per_aborted_attempt(tmp_path: Path) -> None:
    (tmp_path / "stack-1-a2.txt").write_text("Fatal Python error: Aborted\n\nThread 0x1:\n")
    (tmp_path / "stack-1-a0.txt").write_text("Thread 0x1 (most recent call first):\n")
    stack, fatal = _read_dumps(tmp_path, 1)
    assert stack is not None and "Aborted" in stack
    view = RankView(rank=1, exit_code=-6, events=fatal)
    (record,) = view.typed(Fatal)
    assert (record.error, record.attempt) == ("Aborted", 2) and record.t > 0
