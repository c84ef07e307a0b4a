"""Golden grader cases: one layout, one `expected.json` schema and one runner for the three suites.

A case is a folder holding a learner program `main.py` and `expected.json` (an `Expected`):
`tests/grader/cases/<case>/` and `tests/grader/redteam/<case>/` (lesson 2's
`ddp-fundamentals/train`), `tests/grader/exercises/<exercise>/<case>/` (every other exercise).
Each suite keeps its own launch choices (`Suite`), tuned to keep CI short: lesson 2 at 2 ranks with
short limits, allreduce-by-hand at the first world size of its spec, the other exercises at their
spec's sizes; a case whose bug shows only elsewhere overrides that in its `spec`.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grader.api import grade
from grader.checks.base import all_checks
from grader.contract import ExerciseSpec, Job, Result
from grader.exercises import graded_exercises, load_spec
from grader.i18n import TRANSLATED_LOCALES, catalog
from grader.sandbox.pool import Pool

HERE = Path(__file__).parent
# Faster failure on hangs than the lesson's own limits; the wall clock still covers torch start-up.
TEST_LIMITS = {"pg_timeout_seconds": 10, "wall_seconds": 120}
# Check ids (by prefix) whose every message is written with grader.i18n.msg, so a graded Result
# carries its message_id and renders in the viewer's language: a plain English string from one of
# them fails every golden case that shows it. Every check's prefix: all of them speak through msg
# (run.completed too, also when grader/checks/elastic.py rewrites it after a torchrun restart).
TRANSLATED_CHECKS: tuple[str, ...] = tuple(
    sorted({check_id.split(".", 1)[0] + "." for check_id in all_checks()})
)


class Expected(BaseModel):
    """What grading a golden case must give."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Literal["pass", "fail"]
    # Check ids that must fail.
    failing: list[str] = Field(default_factory=list)
    # Check ids allowed to fail as well (e.g. a race decides which of two checks sees the bug).
    may_also_fail: list[str] = Field(default_factory=list)
    # Check ids that must pass, not merely be skipped.
    passing: list[str] = Field(default_factory=list)
    # Check id -> texts its message must hold.
    contains: dict[str, list[str]] = Field(default_factory=dict)
    # Check ids that must be skipped as not judged (the run stopped early, or what the check
    # builds on never happened: no DDP model, no snapshot loaded after the restart).
    not_judged: list[str] = Field(default_factory=list)
    # One sentence: what the program does and why it is right or wrong (red-team cases).
    why: str | None = None
    # Partial ExerciseSpec overrides per section, e.g. {"launch": {"world_sizes": [2, 3]}}.
    spec: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Expected:
        if (self.status == "pass") and self.failing:
            raise ValueError("a passing case names checks that must fail")
        if set(self.passing) & set(self.failing):
            raise ValueError("a check cannot both pass and fail")
        unknown = set(self.spec) - set(ExerciseSpec.model_fields)
        if unknown:
            raise ValueError(f"spec overrides unknown sections {sorted(unknown)}")
        return self


@dataclass(frozen=True)
class Case:
    suite: Suite
    folder: Path

    @property
    def name(self) -> str:
        return self.folder.relative_to(self.suite.root).as_posix()

    @property
    def expected(self) -> Expected:
        return Expected.model_validate_json((self.folder / "expected.json").read_text())


@dataclass(frozen=True)
class Suite:
    """A folder of golden cases and how they are launched."""

    root: Path
    # Exercise id per first-level folder ("" when the cases sit directly in `root`).
    exercises: dict[str, str]
    # The sandbox: RDV_GOLDEN_SANDBOX if set, else this (None: grader's default, RDV_SANDBOX).
    sandbox: str | None
    # Lesson-2 suites: 2 ranks and TEST_LIMITS unless a case says otherwise.
    short_launch: bool = False
    # Exercises graded at the first world size of their spec unless a case says otherwise.
    one_size: frozenset[str] = frozenset()
    # Whether checks beyond `failing` + `may_also_fail` may fail too.
    others_may_fail: bool = False

    def cases(self) -> list[Case]:
        found = []
        for folder in sorted(self.exercises):
            base = self.root / folder if folder else self.root
            if not base.is_dir():
                continue
            found += [
                Case(self, d)
                for d in sorted(base.iterdir())
                if (d / "main.py").is_file() and (d / "expected.json").is_file()
            ]
        return found

    def exercise_of(self, case: Case) -> str:
        folder = case.folder.parent.relative_to(self.root).as_posix()
        return self.exercises["" if folder == "." else folder]

    def spec_for(self, case: Case) -> ExerciseSpec:
        exercise = self.exercise_of(case)
        base = _lesson_spec(exercise).model_dump()
        # A hang fails after the tests' process-group timeout, in every suite.
        base["limits"]["pg_timeout_seconds"] = min(
            base["limits"]["pg_timeout_seconds"], TEST_LIMITS["pg_timeout_seconds"]
        )
        if self.short_launch:
            base["launch"]["world_sizes"] = [2]
            base["limits"].update(TEST_LIMITS)
        elif exercise in self.one_size:
            base["launch"]["world_sizes"] = base["launch"]["world_sizes"][:1]
        for section, values in case.expected.spec.items():
            base[section].update(values)
        return ExerciseSpec.model_validate(base)

    def sandbox_name(self) -> str | None:
        return os.environ.get("RDV_GOLDEN_SANDBOX", self.sandbox)


@functools.cache
def _lesson_spec(exercise: str) -> ExerciseSpec:
    return load_spec(exercise)  # reads every lesson file: once per exercise and session


LESSON2 = {"": "ddp-fundamentals/train"}
CASES = Suite(HERE / "cases", LESSON2, sandbox="bwrap", short_launch=True)
REDTEAM = Suite(HERE / "redteam", LESSON2, sandbox=None, short_launch=True)
# tests/grader/exercises/<exercise>/: the folder is named after the exercise's id in its lesson.
EXERCISES = Suite(
    HERE / "exercises",
    {
        exercise.split("/")[1]: exercise
        for exercise in graded_exercises()
        if (HERE / "exercises" / exercise.split("/")[1]).is_dir()
    },
    sandbox=None,
    one_size=frozenset({"data-vs-model-parallelism/allreduce-by-hand"}),
    others_may_fail=True,
)
SUITES = (CASES, REDTEAM, EXERCISES)


def grade_case(case: Case, pool: Pool | None = None) -> Result:
    job = Job(
        exercise=case.suite.exercise_of(case),
        code=(case.folder / "main.py").read_text(),
        spec=case.suite.spec_for(case),
        submission_id=f"golden-{case.suite.root.name}-{case.name.replace('/', '-')}",
    )
    return grade(job, sandbox=case.suite.sandbox_name(), pool=pool)


def report(result: Result) -> str:
    lines = [f"status {result.status}: {result.summary}"]
    lines += [f"  {c.status:4} {c.id}: {c.message}" for c in result.checks]
    if result.error:
        lines.append(f"  error: {result.error}")
    return "\n".join(lines)


def problems(case: Case, result: Result) -> list[str]:
    """How the result differs from what the case expects (empty when it matches)."""
    exp = case.expected
    if result.status == "error":  # a learner program never makes the platform fail
        return [f"error: {result.error}"]
    found = []
    if result.status != exp.status:
        found.append(f"status {result.status}, expected {exp.status}")
    by_id = {c.id: c for c in result.checks}
    failed = {c.id for c in result.checks if c.status == "fail"}
    passed = {c.id for c in result.checks if c.status == "pass"}
    if missing := set(exp.failing) - failed:
        found.append(f"checks {sorted(missing)} did not fail")
    extra = failed - set(exp.failing) - set(exp.may_also_fail)
    if extra and not case.suite.others_may_fail:
        found.append(f"checks {sorted(extra)} failed unexpectedly")
    if missing := set(exp.passing) - passed:
        found.append(f"checks {sorted(missing)} did not pass")
    for cid, texts in exp.contains.items():
        message = by_id[cid].message if cid in by_id else ""
        found += [f"{cid}: {text!r} not in its message" for text in texts if text not in message]
    for cid in exp.not_judged:
        c = by_id.get(cid)
        if c is None or c.status != "skip" or not c.message.startswith("Not judged"):
            found.append(f"{cid} was judged, expected 'Not judged'")
    for c in result.checks:
        if c.status == "fail" and not (c.message and c.hint):
            found.append(f"{c.id} failed without a message and a hint")
    return found + untranslated(result)


def untranslated(result: Result, prefixes: tuple[str, ...] = TRANSLATED_CHECKS) -> list[str]:
    """Texts of the Result that could not be shown in the viewer's language: a summary without
    its id, and a message of a check in `prefixes` that is plain English (no message_id, an id no
    catalog knows, or plain English inside a "With 2 ranks: ..." wrapper)."""
    found = []
    if result.summary_id is None:
        found.append(f"the summary {result.summary!r} has no summary_id")
    for c in result.checks:
        if not (c.id.startswith(prefixes) and c.message):
            continue
        if c.message_id is None:
            found.append(f"{c.id}: plain English message, no message_id: {c.message!r}")
        elif any(c.message_id not in catalog(locale) for locale in TRANSLATED_LOCALES):
            found.append(f"{c.id}: message id {c.message_id!r} has no tr or pt-BR translation")
        elif c.message_id.startswith("combine.") and not isinstance(c.params.get("message"), dict):
            found.append(f"{c.id}: plain English inside {c.message_id}: {c.message!r}")
    return found


def assert_graded_as_expected(case: Case, pool: Pool | None = None) -> Result:
    """Grade the case (in `pool`'s prepared sandboxes when given) and fail the test with every
    difference and the whole report."""
    result = grade_case(case, pool)
    found = problems(case, result)
    assert not found, f"{case.name}: {found}\n{report(result)}"
    return result
