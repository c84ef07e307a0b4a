"""A real hang names the rank that hung (issue 38): with one rank asleep while the other waits in
a collective until the process group's timeout, run.completed names the sleeping rank, with its
line, and the Result holds its Python stack (learner frames first, no server path, no grader
frame). Two programs, graded in the sandbox: 2 launches of 2 ranks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader.api import grade
from grader.contract import ExerciseSpec, Job, Result
from grader.exercises import load_spec
from grader.i18n import localize_result
from grader.sandbox.pool import Pool

HERE = Path(__file__).parent / "hangs"
EXERCISE = "torchrun-launch/find-the-hang"
# What a learner must never read: the server's paths, the grader's own frames.
SERVER = re.compile(r"\.venv|site-packages|/work/|/usr/lib|grader/(harness|inside|launch)|zygote")


def graded(name: str, pool: Pool) -> tuple[Result, str]:
    code = (HERE / name).read_text()
    base = load_spec(EXERCISE).model_dump()
    base["launch"]["world_sizes"] = [2]
    base["limits"].update({"pg_timeout_seconds": 10, "wall_seconds": 120})
    job = Job(
        exercise=EXERCISE,
        code=code,
        spec=ExerciseSpec.model_validate(base),
        submission_id=f"hang-{name}",
    )
    return grade(job, pool=pool), code


def line_of(code: str, text: str) -> int:
    return next(n for n, line in enumerate(code.splitlines(), 1) if text in line)


def assert_learner_readable(result: Result) -> None:
    for check in result.checks:
        assert not SERVER.search(check.message), check.message
    for rank in result.ranks:
        assert not SERVER.search(rank.stack or ""), rank.stack
        assert "Extension modules" not in (rank.stack or "")


def first_frame(stack: str) -> str:
    return next(line.strip() for line in stack.splitlines() if line.strip().startswith("File "))


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_rank_asleep_before_its_first_collective_is_named_with_its_line_and_stack(
    production_launch: Pool,
) -> None:
    result, code = graded("asleep_before.py", production_launch)
    sleep = line_of(code, "time.sleep(120)")
    waited = line_of(code, "dist.all_reduce(batch)")
    run = next(c for c in result.checks if c.id == "run.completed")
    assert run.status == "fail", run
    assert (run.rank, run.line) == (1, sleep), run
    assert f"rank 1 never got there: it was at line {sleep}" in run.message, run.message
    assert f"rank 0 was waiting at line {waited}" in run.message, run.message
    stacks = {rank.rank: rank.stack or "" for rank in result.ranks}
    # Rank 1's own stack: its frames in main.py first, innermost first (the sleep, then main).
    assert first_frame(stacks[1]) == f'File "main.py", line {sleep} in load_batch', stacks[1]
    assert f'File "main.py", line {line_of(code, "batch = load_batch")} in main' in stacks[1]
    assert_learner_readable(result)
    tr = localize_result(result.model_dump(mode="json"), "tr")
    said = next(c["message"] for c in tr["checks"] if c["id"] == run.id)
    assert "rank 1 oraya hiç varmadı" in said, said
    print(run.message, result.timings_ms)
    print(stacks[1])


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_rank_asleep_after_a_collective_is_named_and_the_waiting_rank_s_stack_is_clean(
    production_launch: Pool,
) -> None:
    result, code = graded("asleep_after.py", production_launch)
    sleep = line_of(code, "time.sleep(120)")
    run = next(c for c in result.checks if c.id == "run.completed")
    assert (run.status, run.rank, run.line) == ("fail", 1, sleep), run
    second = [n for n, line in enumerate(code.splitlines(), 1) if "all_reduce(total)" in line][1]
    assert f"rank 0 was waiting at line {second}" in run.message, run.message
    same = next(c for c in result.checks if c.id == "hang.same_collectives")
    assert f"rank 1 was at line {sleep}" in same.message, same.message
    stacks = {rank.rank: rank.stack or "" for rank in result.ranks}
    assert first_frame(stacks[1]) == f'File "main.py", line {sleep} in <module>', stacks[1]
    # Rank 0 raised in the collective: its traceback keeps main.py's line, torch's frames named
    # from the package, not from the server's disk.
    assert f'File "main.py", line {second}' in stacks[0], stacks[0]
    assert_learner_readable(result)
    print(run.message, result.timings_ms)
    print(stacks[0])
