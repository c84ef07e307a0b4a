"""grader.launch.wire: every hand-over across the sandbox boundary survives its round trip, and
a payload of the wrong shape is refused with the type and field named."""

from __future__ import annotations

import json

import pytest

from grader.launch.wire import (
    FRAME,
    Frame,
    HarnessSettings,
    NodeResult,
    NodeSpec,
    PlacedFault,
    RankReport,
    Report,
    SpareHandover,
    SupervisorConfig,
    WireError,
)

FAULT = PlacedFault(rank=1, after_steps=5, exit_code=3, placed="snapshot", snapshot_path="/w/s")
CONFIG = SupervisorConfig(
    nonce="abc",
    world_size=4,
    wall_seconds=60.0,
    output_cap=65536,
    nnodes=2,
    max_restarts=1,
    script_args=("--epochs", "2"),
    sandboxed=True,
    harness=HarnessSettings(pg_timeout_seconds=12.5, faults=(FAULT,), checks=("run.completed",)),
    env={"CUDA_VISIBLE_DEVICES": "0,1"},
    env_unset=("TORCH_DISABLE_SHARE_RDZV_TCP_STORE",),
)
REPORT = Report(
    world_size=2,
    timed_out=True,
    inspect_error=None,
    ranks=(
        RankReport(rank=0, exit_code=0, output="hi\n", output_bytes=3, events=({"kind": "x"},)),
        RankReport(rank=1, exit_code=None, truncated=True, stack="Thread 0x1"),
    ),
    checkpoints={"/w/s.pt": {"keys": ["model"]}},
    duration_s=1.5,
    spare_ranks=2,
)


def test_each_hand_over_survives_its_round_trip() -> None:
    assert SupervisorConfig.from_json(CONFIG.to_json()) == CONFIG
    assert HarnessSettings.from_json(CONFIG.harness.to_json()) == CONFIG.harness
    assert Report.from_json(REPORT.to_json()) == REPORT
    spec = NodeSpec(
        node=1,
        nnodes=2,
        nproc_per_node=1,
        port=29500,
        run_id="r",
        log_dir="/l/node1",
        result="/l/node1.json",
        args=("-m", "grader.harness", "main.py"),
        max_restarts=1,
    )
    assert NodeSpec.from_json(spec.to_json()) == spec
    result = NodeResult(failures={0: 1, 1: None}, error=None, spare_ranks=1)
    assert NodeResult.from_json(result.to_json()) == result


def test_frames_are_told_from_the_program_s_own_output() -> None:
    frame = Frame(kind="output", rank=1, line="step 3")
    line = frame.encode("n1")
    assert line.startswith(f"{FRAME}n1:") and line.endswith("\n")
    assert Frame.decode(line.rstrip("\n"), "n1") == frame
    assert Frame.decode(line, "n2") is None  # another launch's (or a forged) nonce
    assert Frame.decode("step 3", "n1") is None
    assert Frame.decode(f"{FRAME}n1:{{not json", "n1") is None
    assert Frame.decode(f'{FRAME}n1:{{"kind": "output", "rank": "one"}}', "n1") is None


def test_a_payload_of_older_supervisors_takes_the_defaults() -> None:
    report = Report.from_dict({"ranks": [{"rank": 0}]})
    assert report.ranks == (RankReport(rank=0),)
    assert not report.timed_out and report.launch_error is None and report.spare_ranks == 0
    assert HarnessSettings.from_json("{}") == HarnessSettings()
    assert HarnessSettings.from_json("{}").checks is None  # every costly hook observes
    assert NodeResult.from_json("{}") == NodeResult()


@pytest.mark.parametrize(
    ("reader", "payload", "named"),
    [
        (SupervisorConfig.from_dict, {**CONFIG.to_dict(), "world_size": "4"}, "world_size"),
        (SupervisorConfig.from_dict, {**CONFIG.to_dict(), "nonce": None}, "nonce"),
        (SupervisorConfig.from_dict, {**CONFIG.to_dict(), "env": {"A": 1}}, "env"),
        (SupervisorConfig.from_dict, {**CONFIG.to_dict(), "sandboxed": 1}, "sandboxed"),
        (
            SupervisorConfig.from_dict,
            {**CONFIG.to_dict(), "harness": {"faults": [{"rank": "1"}]}},
            "PlacedFault.rank",
        ),
        (HarnessSettings.from_dict, {"checks": "run.completed"}, "checks"),
        (Report.from_dict, {"ranks": [{"rank": 0, "exit_code": 1.5}]}, "RankReport.exit_code"),
        (Report.from_dict, {"checkpoints": []}, "checkpoints"),
        (NodeResult.from_dict, {"failures": {"zero": 1}}, "failures"),
        (NodeSpec.from_dict, {"node": 0}, "nnodes"),
        (Report.from_dict, [], "Report"),
    ],
)
def test_a_payload_of_the_wrong_shape_names_the_field(
    reader: object, payload: object, named: str
) -> None:
    assert callable(reader)
    with pytest.raises(WireError) as caught:
        reader(payload)
    assert named in str(caught.value)


def test_a_damaged_file_is_a_wire_error() -> None:
    with pytest.raises(WireError, match="Report: not JSON"):
        Report.from_json('{"ranks": [')
    with pytest.raises(ValueError):  # the callers' except ValueError covers it
        SupervisorConfig.from_json(json.dumps({"nonce": "n"}))


def test_a_spare_handover_round_trips_and_names_a_bad_field() -> None:
    handover = SpareHandover(
        argv=("python", "-u", "-m", "grader.harness"), env={"A": "1"}, cwd="/w"
    )
    assert SpareHandover.from_json(handover.to_json()) == handover
    assert SpareHandover.from_json(handover.to_json().encode()) == handover
    with pytest.raises(WireError, match=r"SpareHandover.*env"):
        SpareHandover.from_json('{"argv": ["x"], "env": ["A"], "cwd": "/"}')
    with pytest.raises(WireError, match="SpareHandover"):
        SpareHandover.from_json("not json")
