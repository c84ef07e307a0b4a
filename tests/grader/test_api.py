"""grader.api.grade: streamed events, capped output, hostile programs still yield a Result."""

from __future__ import annotations

import pytest

from grader.api import grade
from grader.contract import ExerciseSpec, GradeEvent, Job

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

FLOOD = """
import os, sys
rank = int(os.environ["RANK"])
print(f"hello from rank {rank}", flush=True)
for i in range(200_000):
    sys.stdout.write(f"rank {rank} line {i} " + "x" * 40 + "\\n")
print("the last line", flush=True)
"""


def _job(code: str, **limits: float) -> Job:
    spec = ExerciseSpec.model_validate(
        {"checks": ["run.completed"], "limits": {"output_bytes_per_rank": 4096, **limits}}
    )
    return Job(exercise="ddp-fundamentals/train", code=code, spec=spec, submission_id="t")


def test_events_stream_and_output_is_capped_per_rank() -> None:
    events: list[GradeEvent] = []
    result = grade(_job(FLOOD), on_event=events.append, sandbox="bwrap")
    assert result.status == "pass", result
    kinds = [e.kind for e in events]
    assert kinds[0] == "status" and kinds[-1] == "done"
    assert "check" in kinds
    lines = [e for e in events if e.kind == "output"]
    assert {e.rank for e in lines} == {0, 1}
    assert any(e.data["line"] == "hello from rank 1" for e in lines)
    for rank in result.ranks:
        assert rank.truncated
        assert rank.output.startswith(f"hello from rank {rank.rank}")
        assert "[output truncated" in rank.output and "the last line" in rank.output
        assert len(rank.output) < 4096 + 3000


def test_a_program_that_kills_itself_is_a_learner_failure_not_an_error() -> None:
    code = (
        "import os, signal\n"
        "if os.environ['RANK'] == '1':\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    result = grade(_job(code), sandbox="bwrap")
    assert result.status == "fail"
    check = result.checks[0]
    assert check.rank == 1 and "SIGKILL" in check.message


def test_a_program_that_fills_the_job_dir_still_gets_a_result() -> None:
    code = (
        "import os\n"
        "for i in range(1000):\n"
        "    try:\n"
        "        with open(f'fill-{os.environ[\"RANK\"]}-{i}.bin', 'wb') as f:\n"
        "            f.write(b'x' * (1 << 20))\n"
        "    except OSError:\n"
        "        break\n"
        "print('filled', i)\n"
    )
    result = grade(_job(code, disk_mb=16), sandbox="bwrap")
    assert result.status == "pass", result
