"""What the coach knows about a graded run: each failed check with its evidence.

Built from the stored submission (the learner's code) and its grader Result (checks, ranks,
stacks). Every text quoted from the Result (summary, check titles, messages, hints) is rendered in
the learner's locale through grader.i18n, as the submissions API renders it; a message the grader
has no id for yet stays English. The solution file is never read here: nothing downstream can
leak it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.coach.cases import case_of, explanation, learner_frames
from app.coach.levels import Level
from app.content.schemas import Exercise, HintLevels
from grader.contract import Result, localize
from grader.i18n import localize_check, render


@dataclass(frozen=True)
class FailedCheck:
    id: str
    title: str
    message: str  # what happened, as the grader saw it
    hint: (
        str | None
    )  # why it is wrong: the lesson's hint in the learner's locale, else the grader's
    rank: int | None
    line: int | None
    code_line: str | None  # the learner's own line the check points at
    stack: str | None  # that rank's stack in the learner's own frames, when it hung or crashed
    levels: HintLevels | None
    level: Level = "nudge"  # how far the coach goes on this check (app/coach/levels.py)
    case: str | None = None  # which failure of the check the run showed (app/coach/cases.py)
    case_text: str | None = None  # that case explained, in the learner's language
    asked_before: int = 0  # earlier questions about this check of this submission


@dataclass(frozen=True)
class SeenCheck:
    """A check that did not fail: it passed, or was not judged (skip)."""

    id: str
    title: str
    status: str  # pass | skip
    message: str


@dataclass(frozen=True)
class RunEvidence:
    exercise_id: str
    lesson_id: str
    code: str
    status: str  # pass | fail | error
    summary: str
    failed: list[FailedCheck] = field(default_factory=list)
    failed_attempts: int = 0
    world_size: int | None = None
    seen: list[SeenCheck] = field(default_factory=list)  # the checks that did not fail


def line_of_code(code: str, line: int | None) -> str | None:
    if line is None:
        return None
    lines = code.splitlines()
    if 1 <= line <= len(lines) and lines[line - 1].strip():
        return lines[line - 1].rstrip()
    return None


def _learner_stack(result: Result, rank: int | None) -> str | None:
    for rank_result in result.ranks:
        if rank_result.stack and (rank is None or rank_result.rank == rank):
            return learner_frames(rank_result.stack)
    return None


def gather(
    *,
    exercise_id: str,
    exercise: Exercise,
    code: str,
    result: Result,
    failed_attempts: int,
    locale: str,
    levels: dict[str, Level] | None = None,
    asked: dict[str, int] | None = None,
) -> RunEvidence:
    failed = []
    seen = []
    for check in result.checks:
        if check.status != "fail":
            shown_ok = localize_check(check.model_dump(mode="json"), locale)
            seen.append(
                SeenCheck(
                    check.id, shown_ok["title"] or check.id, check.status, shown_ok["message"]
                )
            )
            continue
        lesson_hint = localize(exercise.grading.hints.get(check.id), locale)
        raw = check.model_dump(mode="json")
        shown = localize_check(raw, locale)
        case = case_of(raw)
        failed.append(
            FailedCheck(
                id=check.id,
                title=shown["title"] or check.id,
                message=shown["message"],
                hint=lesson_hint or shown.get("hint"),
                rank=check.rank,
                line=check.line,
                code_line=line_of_code(code, check.line),
                stack=_learner_stack(result, check.rank),
                levels=exercise.hint_levels.get(check.id),
                level=(levels or {}).get(check.id, "nudge"),
                case=case,
                case_text=explanation(check.id, case, locale),
                asked_before=(asked or {}).get(check.id, 0),
            )
        )
    return RunEvidence(
        exercise_id=exercise_id,
        lesson_id=exercise_id.partition("/")[0],
        code=code,
        status=result.status,
        summary=render(result.summary_id, result.summary, result.summary_params, locale),
        failed=failed,
        failed_attempts=failed_attempts,
        world_size=result.launch.world_size if result.launch else None,
        seen=seen,
    )
