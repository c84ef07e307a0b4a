"""The coach's quality set (tests/coach/quality/cases.yaml, 40+ questions as learners write them,
in three languages, over every exercise, with graded runs where they apply) answered by the
built-in coach, each case by a learner of its own: at least MIN_SHARE of the cases must hold (the
check named, the step linked, no solution code, the right language, an honest "not covered").
Prints the share that holds and what the missed cases lacked."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.i18n import SUPPORTED_LOCALES
from tests.auth.factories import bearer, create_token, create_user
from tests.coach.conftest import GradedFactory
from tests.coach.quality.judge import ask, load_cases

# The share of the cases the built-in coach must hold (it held 46 of 47 when this was set; the
# miss is printed).
MIN_SHARE = 0.9


def test_the_quality_set_covers_three_languages_and_every_exercise() -> None:
    cases = load_cases()
    assert len(cases) >= 40
    assert len({case.id for case in cases}) == len(cases)
    assert {case.page for case in cases} == set(SUPPORTED_LOCALES)
    assert {case.expect.get("language", case.page) for case in cases} == set(SUPPORTED_LOCALES)
    from app.content.service import get_catalog

    exercises = {
        f"{loaded.id}/{exercise.id}"
        for loaded in get_catalog().ordered
        for exercise in loaded.lesson.exercises
    }
    assert exercises <= {case.exercise_id for case in cases}
    assert sum(1 for case in cases if case.run) >= 15
    assert sum(1 for case in cases if case.expect.get("not_covered")) >= 5


def test_the_built_in_coach_holds_the_quality_set(
    app: FastAPI, client: TestClient, session: Session, graded: GradedFactory
) -> None:
    app.state.settings = app.state.settings.model_copy(update={"coach_questions_per_hour": 500})
    judged = []
    for case in load_cases():  # each case a learner of its own: levels count their own tries
        learner = create_user(session, name=case.id)
        headers = bearer(create_token(session, learner))

        def post(url: str, body: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
            answered = client.post(url, json=body, headers=headers)  # noqa: B023
            return (
                answered.status_code,
                answered.headers.get("content-language", ""),
                answered.json(),
            )

        def submit(run: str) -> uuid.UUID:
            return graded(run, user=learner).id  # noqa: B023

        judged.append(ask(case, post, submit))
    held = [item for item in judged if item.holds]
    missed = {item.case.id: item.failures for item in judged if not item.holds}
    print(f"\nbuilt-in coach: {len(held)} of {len(judged)} cases hold; missed: {missed}")
    assert [item.provider for item in judged] == ["builtin"] * len(judged)
    assert len(held) / len(judged) >= MIN_SHARE, missed
