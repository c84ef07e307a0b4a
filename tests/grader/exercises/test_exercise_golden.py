"""Golden cases of the exercises beyond ddp-fundamentals/train (whose cases live in
tests/grader/cases), graded in the real sandbox (bwrap)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from grader.api import grade
from grader.contract import ExerciseSpec, Job
from grader.exercises import load_spec

HERE = Path(__file__).parent
EXERCISES = {
    "allreduce-by-hand": "data-vs-model-parallelism/allreduce-by-hand",
    "accumulate": "ddp-fundamentals/accumulate",
    "evaluate": "ddp-fundamentals/evaluate",
    "syncbn": "syncbn-sharded-state/syncbn",
    "zero-checkpoint": "syncbn-sharded-state/zero-checkpoint",
    "env-launch": "torchrun-launch/env-launch",
    "elastic-resume": "torchrun-launch/elastic-resume",
}
CASES = sorted(
    (name, case.name)
    for name in EXERCISES
    if (HERE / name).is_dir()
    for case in (HERE / name).iterdir()
    if (case / "main.py").is_file()
)


# Exercises whose checks do not depend on the world size are graded at the first size of their
# spec (the shipped solution runs the full spec in test_exercise_shipped); a case whose bug only
# shows at another size names its own sizes in expected.json ("world_sizes").
ONE_SIZE = {"allreduce-by-hand"}  # env-launch pass cases name [2] (+ the 2-node run)


def _spec(exercise_id: str, expected: dict[str, Any]) -> ExerciseSpec:
    spec = load_spec(exercise_id)
    sizes = expected.get("world_sizes")
    if sizes is None and exercise_id.split("/")[1] in ONE_SIZE:
        sizes = spec.launch.world_sizes[:1]
    if sizes is None:
        return spec
    return spec.model_copy(update={"launch": spec.launch.model_copy(update={"world_sizes": sizes})})


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.usefixtures("forked_ranks")  # tests/grader/conftest.py; the 2-node launch spawns
@pytest.mark.parametrize(("exercise", "case"), CASES, ids=[f"{e}/{c}" for e, c in CASES])
def test_golden(exercise: str, case: str) -> None:
    grade_and_compare(exercise, case)


def grade_and_compare(exercise: str, case: str) -> None:
    folder = HERE / exercise / case
    expected = json.loads((folder / "expected.json").read_text())
    exercise_id = EXERCISES[exercise]
    job = Job(
        exercise=exercise_id,
        code=(folder / "main.py").read_text(),
        spec=_spec(exercise_id, expected),
        submission_id=f"golden-{exercise}-{case}",
    )
    result = grade(job, sandbox=os.environ.get("RDV_GOLDEN_SANDBOX"))
    checks = {c.id: c for c in result.checks}
    report = "\n".join(f"{c.status} {c.id}: {c.message}" for c in result.checks) + (
        f"\nerror: {result.error}" if result.error else ""
    )
    assert result.status == expected["status"], report
    for cid in expected.get("failed", []):
        assert checks[cid].status == "fail", report
    for cid in expected.get("passed", []):
        assert checks[cid].status == "pass", report
    for cid, text in expected.get("contains", {}).items():
        assert text in checks[cid].message, report
    if expected["status"] == "pass":
        assert all(c.status in ("pass", "skip") for c in result.checks), report
    else:  # every failed check says where and what, with the hint
        for c in result.checks:
            if c.status == "fail":
                assert c.message and c.hint, report
