"""Golden cases of lesson 2, graded for real: torchrun (elastic launch) + harness in the sandbox.

Every correct program must pass, every buggy one must fail with its expected check ids. The
sandbox is bwrap unless RDV_GOLDEN_SANDBOX says otherwise ("none" for a quick local loop). Layout,
`expected.json` and the runner: tests/grader/golden.py.
"""

from __future__ import annotations

import pytest

from grader.sandbox.choose import get_sandbox
from grader.sandbox.pool import Pool
from tests.grader.golden import CASES, Case, assert_graded_as_expected, report

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
BY_NAME = {case.name: case for case in CASES.cases()}


@pytest.fixture(scope="session")
def golden_sandbox() -> str:
    """The backend every golden case runs in; created once per session (fails if unavailable)."""
    name = CASES.sandbox_name()
    assert name is not None
    get_sandbox(name)
    return name


def check_case(case: Case, sandbox: str, pool: Pool) -> None:
    result = assert_graded_as_expected(case, pool)
    assert result.launch is not None and result.launch.sandbox == sandbox, report(result)
    for c in result.checks:
        if c.status == "fail":
            # Feedback a learner can act on: a sentence with what happened, and a hint.
            assert len(c.message) > 30 and c.hint, c
    if case.expected.status == "fail":
        assert any(c.rank is not None for c in result.checks if c.status == "fail")


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_golden_case(name: str, golden_sandbox: str, production_launch: Pool) -> None:
    check_case(BY_NAME[name], golden_sandbox, production_launch)


def test_cases_cover_every_check_and_style() -> None:
    cases = list(BY_NAME.values())
    assert len(cases) >= 25
    assert sum(c.expected.status == "pass" for c in cases) >= 10
    caught = {cid for c in cases for cid in c.expected.failing}
    for check_id in (
        "run.completed",
        "ddp.wrapped",
        "ddp.in_sync",
        "ddp.grad_average",
        "sampler.shards",
        "sampler.set_epoch",
        "ckpt.rank0_only",
        "ckpt.unwrapped",
        "ckpt.barrier",
        "dist.cleanup",
    ):
        assert check_id in caught, f"no golden case catches {check_id}"


WARM_CASES = ["ok_base_script", "bug_allreduce_on_top_of_ddp", "bug_crash_on_rank1"]


@pytest.mark.parametrize("name", WARM_CASES)
def test_the_suite_grades_the_production_way(
    name: str, golden_sandbox: str, production_launch: Pool
) -> None:
    """The suite's cases grade as production does (production_launch): in a warm sandbox from
    the pool, each rank a spare interpreter."""
    result = assert_graded_as_expected(BY_NAME[name], production_launch)
    assert result.launch is not None and result.launch.warm_launches > 0
    assert result.launch.spare_ranks > 0
