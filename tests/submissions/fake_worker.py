"""`python -m tests.submissions.fake_worker ARGS`: a grader worker with a stand-in grader
that prints a line per rank, then sleeps RDV_FAKE_GRADE_SLEEP seconds (so a test can kill it
mid-job). Only for tests of the queue mechanics; real-grader tests run `python -m grader.worker`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from grader.contract import GradeEvent, Job, Result
from grader.worker import main
from tests.submissions.fakes import fake_result


def slow_grade(
    job: Job, *, on_event: Callable[[GradeEvent], None], sandbox: str | None = None
) -> Result:
    for rank in (0, 1):
        on_event(GradeEvent(kind="output", rank=rank, data={"line": f"rank {rank} warming up"}))
    time.sleep(float(os.environ.get("RDV_FAKE_GRADE_SLEEP", "0")))
    result = fake_result("pass")
    for check in result.checks:
        on_event(GradeEvent(kind="check", data=check.model_dump(mode="json")))
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], grade=slow_grade))
