"""The coach's quality set (cases.yaml): ask each case's question through the API and judge the
answer against what a good one must hold. Shared by the test of the built-in coach
(tests/coach/test_quality.py) and the benchmark of the model path (benchmarks/coach_quality.py).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from app.coach.guard import SolutionGuard
from app.coach.index import get_index
from app.coach.language import detect
from app.coach.service import public_text
from app.content import service as content
from app.i18n import translate
from app.submissions.models import DONE, Submission
from grader.i18n import render

CASES_FILE = Path(__file__).parent / "cases.yaml"
RUNS = Path(__file__).parent.parent / "runs"
GOLDEN_CASES = Path(__file__).parent.parent.parent / "grader" / "cases"
RUN_EXERCISE = "ddp-fundamentals/train"  # the exercise of every stored run
NOT_COVERED = (
    "This course does not cover that: it teaches distributed training with PyTorch (DDP, "
    "torchrun, collectives, sharded state). Ask about one of those, or about your own run."
)
NOT_TAUGHT = "This course does not teach {topic}."
REFUSES = (
    "The coach will not write the solution for you: working it out is how it sticks, and the "
    "grader checks what your own program does."
)
_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)


@dataclass(frozen=True)
class Case:
    id: str
    question: str
    page: str
    expect: dict[str, Any]
    lesson: str = "ddp-fundamentals"
    exercise: str | None = None
    run: str | None = None
    check: str | None = None
    asked_before: int = 0

    @property
    def exercise_id(self) -> str | None:
        return RUN_EXERCISE if self.run else self.exercise


@dataclass
class Judged:
    case: Case
    answer: str
    provider: str
    failures: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return not self.failures


def load_cases() -> list[Case]:
    raw = YAML(typ="safe").load(CASES_FILE.read_text(encoding="utf-8"))
    return [Case(**item) for item in raw]


def run_of(name: str) -> tuple[str, dict[str, Any]]:
    """A golden program and the Result the real grader gave it."""
    code = (GOLDEN_CASES / name / "main.py").read_text()
    return code, json.loads((RUNS / name / "result.json").read_text())


def stored_run(name: str, user_id: uuid.UUID) -> Submission:
    """A graded submission of the learner holding a stored run (its program and Result)."""
    code, result = run_of(name)
    return Submission(
        id=uuid.uuid4(),
        user_id=user_id,
        exercise=RUN_EXERCISE,
        code=code,
        status=DONE,
        result=result,
        created_at=datetime.now(UTC),
    )


Submitter = Callable[[str], uuid.UUID]  # stores a graded run for the learner, gives its id
Asker = Callable[[str, dict[str, Any]], tuple[int, str, dict[str, Any]]]  # (url, body) -> ...


def ask(case: Case, post: Asker, submit: Submitter) -> Judged:
    body: dict[str, Any] = {"question": case.question, "lesson_id": case.lesson}
    if case.run:
        body["submission_id"] = str(submit(case.run))
        body["check_id"] = case.check
    elif case.exercise:
        body["exercise"] = case.exercise
    url = f"/api/v1/coach?locale={case.page}"
    for _ in range(case.asked_before):
        post(url, body)
    status, language, answer = post(url, body)
    if status != 200:
        return Judged(case, str(answer), "", [f"status {status}"])
    judged = Judged(case, str(answer["answer"]), str(answer["provider"]))
    judged.failures = judge(case, language, answer)
    return judged


def judge(case: Case, language: str, answer: dict[str, Any]) -> list[str]:
    """What the answer lacks (or holds that it must not); empty when it is a good answer."""
    expect = case.expect
    text = str(answer["answer"])
    lang = str(expect.get("language", case.page))
    failures = []
    if language != lang:
        failures.append(f"answered in {language}, not {lang}")
    written_in = detect(_CODE.sub(" ", text))
    if written_in is not None and written_in != lang:
        failures.append(f"the answer reads as {written_in}")
    steps = [source["step_id"] for source in answer.get("sources") or []]
    if "step" in expect and expect["step"] not in steps:
        failures.append(f"does not link the step {expect['step']} (links {steps})")
    if "check" in expect and _title(case, expect["check"], lang) not in text:
        failures.append(f"does not name the check {expect['check']}")
    if "level" in expect:
        levels = _levels(case.exercise_id, _focus(case))
        wanted = getattr(levels, expect["level"]) if levels else None
        if wanted is None or (wanted.get(lang) or wanted.en) not in text:
            failures.append(f"is not at the level {expect['level']}")
    not_covered = text == translate(lang, NOT_COVERED) or text.startswith(
        translate(lang, NOT_TAUGHT).split("{topic}")[0]
    )
    if bool(expect.get("not_covered")) != not_covered:
        failures.append("says 'not covered'" if not_covered else "does not say 'not covered'")
    if expect.get("refuses") and translate(lang, REFUSES) not in text:
        failures.append("does not say it will not write the solution")
    failures += [f"lacks {part!r}" for part in expect.get("contains", []) if part not in text]
    failures += [f"holds {part!r}" for part in expect.get("not_contains", []) if part in text]
    leak = _leak(case, text)
    if leak:
        failures.append(f"gives the solution away: {leak}")
    return failures


def _title(case: Case, check_id: str, locale: str) -> str:
    english = check_id
    if case.run:
        _, result = run_of(case.run)
        english = next(
            (str(check["title"]) for check in result["checks"] if check["id"] == check_id),
            check_id,
        )
    return render(f"title.{check_id}", english, {}, locale)


def _focus(case: Case) -> str | None:
    """The check the answer is about: the clicked one, else the run's first failed check."""
    if case.check or not case.run:
        return case.check
    _, result = run_of(case.run)
    return next((str(c["id"]) for c in result["checks"] if c["status"] == "fail"), None)


def _levels(exercise_id: str | None, check_id: str | None) -> Any:
    if exercise_id is None or check_id is None:
        return None
    lesson_id, _, slug = exercise_id.partition("/")
    lesson = content.get_catalog().lessons[lesson_id].lesson
    exercise = next(item for item in lesson.exercises if item.id == slug)
    return exercise.hint_levels.get(check_id)


def _leak(case: Case, text: str) -> str | None:
    exercise_id = case.exercise_id
    if exercise_id is None:
        return None
    info = content.get_exercise(exercise_id)
    code = run_of(case.run)[0] if case.run else ""
    guard = SolutionGuard.for_exercise(
        info.solution_path, info.starter_code, code, public_text(get_index(), "en", info)
    )
    return guard.refusal(text) if guard is not None else None
