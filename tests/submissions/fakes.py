"""A stand-in for grader.api.grade for unit tests of the submission lifecycle only.

The end-to-end path and the worker tests use the real grader."""

from __future__ import annotations

import threading
from collections.abc import Callable

from grader.contract import CheckResult, GradeEvent, Job, RankResult, Result


def fake_result(status: str = "pass") -> Result:
    check = CheckResult(
        id="run.completed",
        status="pass" if status == "pass" else "fail",
        title="The program ran to the end",
        hint=None if status == "pass" else "Call destroy_process_group() at the end.",
        rank=None if status == "pass" else 1,
        line=None if status == "pass" else 12,
    )
    return Result(
        status="pass" if status == "pass" else "fail",
        summary="All checks passed" if status == "pass" else "1 of 1 checks failed",
        checks=[check],
        ranks=[RankResult(rank=r, exit_code=0, output=f"rank {r} says hi\n") for r in (0, 1)],
    )


class FakeGrader:
    """Emits a few events like the real grader; optionally waits on `gate` before finishing."""

    def __init__(self, status: str = "pass", gate: threading.Event | None = None) -> None:
        self.status = status
        self.gate = gate
        self.started = threading.Event()
        self.jobs: list[Job] = []

    def __call__(self, job: Job, *, on_event: Callable[[GradeEvent], None] | None = None) -> Result:
        self.jobs.append(job)
        emit = on_event or (lambda _event: None)
        emit(GradeEvent(kind="status", data={"status": "running"}))
        for rank in (0, 1):
            emit(GradeEvent(kind="output", rank=rank, data={"line": f"rank {rank} says hi"}))
        self.started.set()
        if self.gate is not None:
            self.gate.wait(60)
        result = fake_result(self.status)
        for check in result.checks:
            emit(GradeEvent(kind="check", data=check.model_dump(mode="json")))
        emit(GradeEvent(kind="done", data=result.model_dump(mode="json")))
        return result
