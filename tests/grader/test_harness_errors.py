"""A failure of the harness itself is recorded, never raised into the learner's program, and ends
the grading as a platform `error` with its stack in the log (never a verdict on half a run)."""

from __future__ import annotations

import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from grader.checks.base import RankView, RunView
from grader.contract import ExerciseSpec, Job
from grader.harness.tracer import Tracer
from grader.judge import harness_failure
from grader.launch.wire import HarnessSettings


def _tracer(tmp_path: Path) -> Tracer:
    return Tracer(
        tmp_path,
        rank=0,
        local_rank=0,
        world_size=1,
        attempt=0,
        learner_file=str(tmp_path / "main.py"),
        settings=HarnessSettings(),
    )


def _events(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "rank-0-a0.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_fail_records_the_error_and_its_stack(tmp_path: Path) -> None:
    tracer = _tracer(tmp_path)
    try:
        raise KeyError("missing")
    except KeyError as exc:
        tracer.fail("somewhere", exc)
    (event,) = _events(tmp_path)
    assert (event["kind"], event["where"], event["error"]) == (
        "harness_error",
        "somewhere",
        "KeyError('missing')",
    )
    assert 'File "' in event["traceback"] and "KeyError: 'missing'" in event["traceback"]


def test_a_failing_finalizer_or_import_callback_is_recorded_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracer = _tracer(tmp_path)

    def broken(_: Any = None) -> None:
        raise RuntimeError("hook bug")

    tracer.finalizers.append(broken)
    tracer.finish()
    (tmp_path / "rdv_watched_module.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    tracer.when_imported("rdv_watched_module", broken)
    import rdv_watched_module

    assert rdv_watched_module.VALUE == 42  # the learner's import still works
    sys.modules.pop("rdv_watched_module", None)
    assert [(e["kind"], e["error"]) for e in _events(tmp_path)] == [
        ("harness_error", "RuntimeError('hook bug')"),
        ("harness_error", "RuntimeError('hook bug')"),
    ]


def _signal_exception() -> Exception:
    from torch.distributed.elastic.multiprocessing.api import SignalException

    return SignalException("Process 6 got signal: 15", sigval=signal.SIGTERM)


def test_the_launcher_stopping_the_rank_in_a_finalizer_is_no_harness_error(tmp_path: Path) -> None:
    """torchrun stops the other ranks with SIGTERM when one fails; torch raises it where the rank
    is. Landing in the hooks' end-of-program work, it skips what is left and is said, never a
    platform error (it flaked elastic-resume/fail_never_loads in CI)."""
    tracer = _tracer(tmp_path)
    ran: list[str] = []

    def stopped() -> None:
        raise _signal_exception()

    tracer.finalizers += [stopped, lambda: ran.append("after")]
    tracer.finish()
    (event,) = _events(tmp_path)
    assert event["kind"] == "terminated" and "signal: 15" in event["error"]
    assert ran == []


def test_the_launcher_stopping_the_rank_in_a_hook_reaches_the_learners_code(tmp_path: Path) -> None:
    tracer = _tracer(tmp_path)
    exc = _signal_exception()
    with pytest.raises(type(exc)):
        tracer.fail("somewhere", exc)
    assert not (tmp_path / "rank-0-a0.jsonl").read_text()


def test_a_harness_error_in_any_rank_is_a_platform_error_logged_with_its_stack(
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = Job(
        exercise="ddp-fundamentals/train",
        code="print(1)\n",
        spec=ExerciseSpec(checks=["run.completed"]),
        submission_id="s1",
    )
    error = {"kind": "harness_error", "where": "replay", "error": "E()", "traceback": "STACK"}
    view = RunView(
        world_size=2,
        device="cpu",
        ranks=[RankView(0, 0), RankView(1, 0, events=[error])],
    )
    with caplog.at_level(logging.ERROR, logger="grader.judge"):
        message = harness_failure(job, view)
    assert message == "the grader's harness failed (replay, rank 1): E()"
    assert "STACK" in caplog.text and "s1" in caplog.text
    assert harness_failure(job, RunView(world_size=1, device="cpu", ranks=[RankView(0, 0)])) is None
