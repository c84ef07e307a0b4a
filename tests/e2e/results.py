"""A failed Result of lesson 2's starter, as the grader reports it, for browser tests that render
a result without waiting for a grading run (tests/e2e/test_submit.py grades for real).

`fixtures/starter_result.json` was written by
`python -m grader grade --exercise ddp-fundamentals/train lessons/02-ddp-fundamentals/exercises/
train/starter.py --json --sandbox none`; `failed_result()` adds a failed check with a rank and
line so the "rank N, line L" link shows. `locale` renders it as the API does for that viewer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.content.service import get_exercise
from grader.i18n import localize_result

STARTER_RESULT = Path(__file__).parent / "fixtures" / "starter_result.json"


EXERCISE = "ddp-fundamentals/train"


def failed_result(locale: str = "en") -> dict[str, Any]:
    result: dict[str, Any] = json.loads(STARTER_RESULT.read_text("utf-8"))
    result["checks"].append(
        {
            "id": "ckpt.barrier",
            "status": "fail",
            "title": "Other ranks wait for the checkpoint",
            "message": "Rank 1 loaded the checkpoint before rank 0 had saved it.",
            "hint": "Call `dist.barrier()` after rank 0 saves.",
            "rank": 1,
            "line": 12,
        }
    )
    result["status"] = "fail"
    return localize_result(result, locale, get_exercise(EXERCISE).spec.hints)


def passed_result() -> dict[str, Any]:
    result = failed_result()
    for check in result["checks"]:
        check.update(status="pass", hint=None)
    result.update(status="pass", summary="All checks passed")
    return result
