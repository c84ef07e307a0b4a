"""Results made by hand, without launching torch: every check of an exercise failed, each at a
line of the starter, with the message, rank and failure an instructor would expect to read. And
the recorded Results of each exercise's starter (tests/coach/starters/<exercise>/result.json:
`python -m grader grade --json` of the starter, graded once and stored)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.content.service import ExerciseInfo, get_catalog, get_exercise

STARTERS = Path(__file__).parent / "starters"


@dataclass(frozen=True)
class Run:
    name: str
    info: ExerciseInfo
    code: str
    result: dict[str, Any]

    def failed(self) -> list[dict[str, Any]]:
        return [check for check in self.result["checks"] if check["status"] == "fail"]


def exercises() -> list[ExerciseInfo]:
    return [
        get_exercise(f"{loaded.id}/{exercise.id}")
        for loaded in get_catalog().ordered
        for exercise in loaded.lesson.exercises
    ]


def _code_lines(code: str) -> list[int]:
    return [
        number
        for number, line in enumerate(code.splitlines(), start=1)
        if line.strip() and not line.strip().startswith(("#", '"', "'"))
    ]


def every_check_failed(info: ExerciseInfo) -> Run:
    """A Result in which every check of the exercise failed, each on its own line and rank."""
    code = info.starter_code
    lines = _code_lines(code)
    checks = []
    for number, check_id in enumerate(info.spec.checks):
        line = lines[(number * 7) % len(lines)]
        checks.append(
            {
                "id": check_id,
                "status": "fail",
                "title": f"Hand-made check {check_id}",
                "message": f"Rank {number % 2} broke {check_id} at line {line} in hand-made run "
                f"{number}.",
                "hint": None,
                "rank": number % 2,
                "line": line,
                "message_id": None,
                "params": {},
            }
        )
    result = {
        "version": 1,
        "status": "fail",
        "summary": f"{len(checks)} of {len(checks)} checks failed",
        "launch": {
            "world_size": 2,
            "nnodes": 1,
            "backend": "gloo",
            "device": "cpu",
            "sandbox": "none",
        },
        "checks": checks,
        "ranks": [{"rank": 0, "exit_code": 0, "output": ""}, {"rank": 1, "exit_code": 1}],
    }
    return Run(f"every-check-{info.slug}", info, code, result)


def starter_run(info: ExerciseInfo) -> Run | None:
    stored = STARTERS / info.slug / "result.json"
    if not stored.exists():
        return None
    result = json.loads(stored.read_text(encoding="utf-8"))
    return Run(f"starter-{info.slug}", info, info.starter_code, result)


def failing_runs() -> Iterator[Run]:
    for info in exercises():
        starter = starter_run(info)
        if starter is not None:
            yield starter
        yield every_check_failed(info)
