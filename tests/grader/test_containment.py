"""Hostile learner programs, graded for real through `grader.api.grade` in the bwrap sandbox.

Each one must be contained and still yield a Result with status "fail" (the learner's fault, never
"error") and a message the learner can read.
"""

from __future__ import annotations

import json
import shutil
import socket
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.contract import Job, Result
from grader.sandbox.pool import Pool
from tests.grader import hostile_programs as programs
from tests.grader.sandbox_helpers import processes_with, token

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]
EXERCISE = "ddp-fundamentals/train"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def warm_pool() -> Iterator[Pool]:
    """Every hostile program here runs in a warm sandbox: containment must hold there as in a
    cold one."""
    global POOL
    with Pool(1) as POOL:
        yield POOL
    POOL = None


POOL: Pool | None = None


def grade_hostile(code: str, **limits: Any) -> Result:
    from grader.api import grade
    from grader.exercises import load_spec

    spec = load_spec(EXERCISE)
    # Generous: the ranks must get to the hostile code even on a busy machine.
    spec.limits = spec.limits.model_copy(update={"wall_seconds": 60, **limits})
    job = Job(
        exercise=EXERCISE,
        code=textwrap.dedent(code),
        spec=spec,
        submission_id=f"hostile-{uuid.uuid4().hex[:8]}",
    )
    pool = POOL
    served = pool.stats.served if pool else 0
    result = grade(job, sandbox="bwrap", pool=pool)
    assert pool is not None and pool.stats.served > served, "not served by a warm sandbox"
    return result


def assert_learner_fail(result: Result) -> None:
    assert result.status == "fail", f"{result.status}: {result.summary} {result.error}"
    assert result.error is None
    assert result.launch is not None and result.launch.sandbox == "bwrap"
    failed = [c for c in result.checks if c.status == "fail"]
    assert failed, result
    assert all(c.message.strip() for c in failed)


def rank_output(result: Result) -> str:
    return "\n".join(r.output for r in result.ranks)


def test_network_is_unreachable_from_a_submission() -> None:
    with socket.create_connection(("127.0.0.1", 5432), timeout=5):
        pass  # the host's PostgreSQL is there ...
    result = grade_hostile(programs.NETWORK)
    assert_learner_fail(result)
    out = rank_output(result)
    assert "NET 127.0.0.1:5432" in out and "NET 1.1.1.1:443" in out  # ... it really ran
    assert "connected" not in out


def test_host_files_are_out_of_reach_of_a_submission() -> None:
    result = grade_hostile(programs.host_files(str(REPO)))
    assert_learner_fail(result)
    out = rank_output(result)
    assert "FILES shadow read" not in out and "FILES shadow" in out
    assert "FILES root ['.pyenv']" in out
    assert "FILES git False" in out


def test_environment_snooping_finds_no_host_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    canary = token()
    monkeypatch.setenv("RDV_HOST_CANARY", canary)
    result = grade_hostile(programs.ENVIRONMENT)
    assert_learner_fail(result)
    assert "ENV" in rank_output(result)
    assert canary not in result.model_dump_json()


def test_fork_bomb_is_contained() -> None:
    result = grade_hostile(
        programs.FORK_BOMB,
        wall_seconds=15,
    )
    assert_learner_fail(result)


def test_memory_bomb_is_contained() -> None:
    result = grade_hostile(
        programs.MEMORY_BOMB,
        memory_mb=1536,
    )
    assert_learner_fail(result)
    completed = next(c for c in result.checks if c.id == "run.completed")
    assert completed.status == "fail"


def test_endless_loop_is_stopped_and_located() -> None:
    result = grade_hostile(
        programs.ENDLESS_LOOP,
        wall_seconds=30,
    )
    assert_learner_fail(result)
    completed = next(c for c in result.checks if c.id == "run.completed")
    assert completed.status == "fail"
    assert "30 s" in completed.message, completed
    # Where every rank got as far as the loop before the wall clock, the message says where.
    if result.ranks and all("LOOPING" in r.output for r in result.ranks):
        assert "line 5" in completed.message or completed.line == 5, completed


def test_output_flood_is_capped_per_rank() -> None:
    cap = 4096
    result = grade_hostile(
        programs.OUTPUT_FLOOD,
        output_bytes_per_rank=cap,
    )
    assert_learner_fail(result)
    assert result.ranks
    for rank in result.ranks:
        assert rank.truncated
        # The head up to the cap, a note, and the last lines (a few KiB) of ~60 MB written.
        assert len(rank.output.encode()) < cap + 4096
    assert len(result.model_dump_json()) < 200_000


def test_left_behind_daemon_is_gone_after_grading() -> None:
    marker = token()
    result = grade_hostile(programs.daemon(marker))
    assert_learner_fail(result)
    assert processes_with(marker) == []


def test_killing_the_supervisor_is_the_learners_fault() -> None:
    result = grade_hostile(programs.KILL_SUPERVISOR)
    assert_learner_fail(result)


def test_filling_the_disk_is_the_learners_fault() -> None:
    result = grade_hostile(
        programs.FILL_DISK,
        disk_mb=64,
    )
    assert_learner_fail(result)


def test_result_of_a_hostile_run_is_plain_json() -> None:
    result = grade_hostile(programs.HOSTILE_BYTES)
    assert_learner_fail(result)
    json.loads(result.model_dump_json())


def test_signals_to_the_supervisor_are_the_learners_fault() -> None:
    result = grade_hostile(programs.SIGNALS)
    assert_learner_fail(result)


def test_the_supervisors_memory_is_out_of_reach() -> None:
    result = grade_hostile(programs.SUPERVISOR_MEMORY)
    assert_learner_fail(result)
    out = rank_output(result)
    assert "PROC /proc/1/maps" in out
    assert "readable" not in out
