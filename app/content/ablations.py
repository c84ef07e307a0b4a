"""An exercise's ablations: the solution with named edits applied, each a program that must fail
with a given check (docs/authoring.md, "Ablations"). `ablated` builds one; `ablation_issues`
says, for `validate`, which edit does not apply (its `find` must occur exactly once)."""

from __future__ import annotations

from pathlib import Path

from app.content.hintcheck import Issue
from app.content.schemas import Ablation, Exercise
from grader.contract import ExerciseSpec


class EditDoesNotApply(ValueError):
    """An edit's `find` occurs zero or several times in the program it is applied to."""

    def __init__(self, edit: int, count: int) -> None:
        self.edit = edit
        self.count = count
        where = "does not occur" if count == 0 else f"occurs {count} times"
        super().__init__(
            f"`find` {where} in the solution (after the edits before it); it must occur exactly "
            "once: quote more of the line to make it unique"
        )


def ablated(solution: str, ablation: Ablation) -> str:
    """The solution with the ablation's edits applied in order; raises EditDoesNotApply."""
    code = solution
    for index, edit in enumerate(ablation.edits):
        count = code.count(edit.find)
        if count != 1:
            raise EditDoesNotApply(index, count)
        code = code.replace(edit.find, edit.replace, 1)
    if code == solution:
        raise ValueError("the edits leave the solution unchanged")
    return code


def graded_spec(spec: ExerciseSpec, ablation: Ablation) -> ExerciseSpec:
    """The spec an ablation is graded with: only its launch when it names one."""
    return spec if ablation.launch is None else spec.only_launch(ablation.launch)


def ablation_issues(index: int, exercise: Exercise, folder: Path) -> list[Issue]:
    """For the lesson's `index`th exercise, whose files are in `folder`: each ablation whose
    edits do not apply to solution.py (a missing solution is reported by the loader)."""
    if not exercise.ablations:
        return []
    try:
        solution = (folder / "solution.py").read_text(encoding="utf-8")
    except OSError:
        return []
    issues = []
    for number, ablation in enumerate(exercise.ablations):
        loc: tuple[str | int, ...] = ("exercises", index, "ablations", number)
        try:
            ablated(solution, ablation)
        except EditDoesNotApply as exc:
            issues.append(Issue((*loc, "edits", exc.edit, "find"), f"{ablation.id}: {exc}"))
        except ValueError as exc:
            issues.append(Issue((*loc, "edits"), f"{ablation.id}: {exc}"))
    return issues
