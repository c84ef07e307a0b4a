"""Every golden case of the three suites has the one layout and a valid `expected.json`."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from grader.checks.base import all_checks
from tests.grader.golden import SUITES, Expected, Suite


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.root.name)
def test_every_case_folder_is_a_case(suite: Suite) -> None:
    tops = [suite.root / folder if folder else suite.root for folder in suite.exercises]
    folders = {
        d
        for top in tops
        for d in top.iterdir()
        if d.is_dir() and not d.name.startswith((".", "_")) and d not in tops
    }
    assert folders == {case.folder for case in suite.cases()}, "a case folder lacks a file"
    others = {
        d.name for d in suite.root.iterdir() if d.is_dir() and not d.name.startswith((".", "_"))
    }
    if "" not in suite.exercises:
        assert others == set(suite.exercises), "a folder names no exercise of the suite"


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.root.name)
def test_expected_files_are_valid_and_name_real_checks(suite: Suite) -> None:
    known = set(all_checks())
    for case in suite.cases():
        exp = case.expected  # validates
        spec = suite.spec_for(case)
        named = set(exp.failing) | set(exp.may_also_fail) | set(exp.passing)
        named |= set(exp.contains) | set(exp.not_judged)
        assert named <= known, f"{case.name}: unknown checks {sorted(named - known)}"
        assert named <= set(spec.checks), f"{case.name}: checks its exercise does not run"


def test_the_schema_refuses_unknown_keys_and_contradictions() -> None:
    with pytest.raises(ValidationError):
        Expected.model_validate({"status": "fail", "failed": ["run.completed"]})
    with pytest.raises(ValidationError):
        Expected.model_validate({"status": "pass", "failing": ["run.completed"]})
    with pytest.raises(ValidationError):
        Expected.model_validate(
            {"status": "fail", "failing": ["ddp.wrapped"], "passing": ["ddp.wrapped"]}
        )
    with pytest.raises(ValidationError):
        Expected.model_validate({"status": "pass", "spec": {"lanuch": {"world_sizes": [2]}}})
