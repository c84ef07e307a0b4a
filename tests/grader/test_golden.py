"""Golden cases, graded for real: torchrun (elastic launch) + harness inside the sandbox.

Every correct program must pass, every buggy one must fail with its expected check ids. The
sandbox is bwrap unless RDV_GOLDEN_SANDBOX says otherwise ("none" for a quick local loop).
"""

from __future__ import annotations

import os

import pytest

from grader.launcher import FORK_ENV
from grader.sandbox.base import get_sandbox
from tests.grader.golden import case_names, expected, grade_case, mismatch

SANDBOX = os.environ.get("RDV_GOLDEN_SANDBOX", "bwrap")

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.usefixtures("forked_ranks")]


@pytest.fixture(scope="session")
def golden_sandbox() -> str:
    """The backend every golden case runs in; created once per session (fails if unavailable)."""
    get_sandbox(SANDBOX)
    return SANDBOX


@pytest.mark.parametrize("name", case_names())
def test_golden_case(name: str, golden_sandbox: str) -> None:
    result = grade_case(name, golden_sandbox)
    assert result.error is None, result.error
    assert result.launch is not None and result.launch.sandbox == golden_sandbox
    problem = mismatch(name, result)
    details = "\n".join(f"{c.status} {c.id}: {c.message}" for c in result.checks)
    assert problem is None, f"{name}: {problem}\n{details}"
    for c in result.checks:
        if c.status == "fail":
            # Feedback a learner can act on: a sentence with what happened, and a hint.
            assert len(c.message) > 30 and c.hint, c
    if expected(name)["status"] == "fail":
        assert any(c.rank is not None for c in result.checks if c.status == "fail")


def test_cases_cover_every_check_and_style() -> None:
    names = case_names()
    assert len(names) >= 25
    assert sum(expected(n)["status"] == "pass" for n in names) >= 10
    caught = {c for n in names for c in expected(n)["failing"]}
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


SPAWN_CASES = ["ok_base_script", "bug_allreduce_on_top_of_ddp", "bug_crash_on_rank1"]


@pytest.mark.parametrize("name", SPAWN_CASES)
def test_spawned_ranks_give_the_same_verdict(
    name: str, golden_sandbox: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spawned ranks (the production default, as torchrun does) judge like the forked ranks the
    golden suite runs with."""
    monkeypatch.setenv(FORK_ENV, "0")
    result = grade_case(name, golden_sandbox)
    assert result.error is None, result.error
    assert mismatch(name, result) is None, [(c.id, c.status, c.message) for c in result.checks]
