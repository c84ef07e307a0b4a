"""Fixtures for the coach: learners with tokens, submissions graded for real (their stored
Results in runs/<case>/), and the fake OpenAI-compatible model server."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.orm import Session

from app.auth.models import User
from app.i18n import translate
from app.submissions.models import DONE, Submission
from tests.coach.fake_llm import FakeModel
from tests.submissions.conftest import auth, committed_url, learner, other_auth, stream_sessions

__all__ = ["auth", "committed_url", "learner", "other_auth", "stream_sessions"]

RUNS = Path(__file__).parent / "runs"
GOLDEN_CASES = Path(__file__).parent.parent / "grader" / "cases"
EXERCISE = "ddp-fundamentals/train"


def run_of(case: str) -> tuple[str, dict[str, object]]:
    """A golden program (tests/grader/cases/<case>/main.py) and the Result the real grader gave
    it (tests/coach/runs/<case>/result.json: `python -m grader grade --json`, bwrap)."""
    program = GOLDEN_CASES / case / "main.py"
    return program.read_text(), json.loads((RUNS / case / "result.json").read_text())


GradedFactory = Callable[..., Submission]


def ask_about(
    client: TestClient,
    auth: dict[str, str],
    submission_id: object,
    locale: str = "en",
    question: str | None = None,
    check_id: str | None = None,
) -> dict[str, object]:
    """Ask the coach about one of the learner's submissions (by default with the page's "Why did
    this fail?" in `locale`); the answer's JSON."""
    answered = client.post(
        f"/api/v1/coach?locale={locale}",
        json={
            "question": question or translate(locale, "Why did this fail?"),
            "check_id": check_id,
            "lesson_id": "ddp-fundamentals",
            "submission_id": str(submission_id),
        },
        headers=auth,
    )
    assert answered.status_code == 200, answered.text
    return dict(answered.json())


@pytest.fixture
def graded(session: Session, learner: User) -> GradedFactory:
    """Store a graded submission of `case` for a learner (the default one unless given)."""
    made = 0

    def make(case: str, user: User | None = None) -> Submission:
        nonlocal made
        code, result = run_of(case)
        made += 1
        submission = Submission(
            id=uuid.uuid4(),
            user_id=(user or learner).id,
            exercise=EXERCISE,
            code=code,
            status=DONE,
            result=result,
            created_at=datetime.now(UTC) - timedelta(hours=2) + timedelta(minutes=made),
        )
        session.add(submission)
        session.flush()
        return submission

    return make


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    model = FakeModel().start()
    yield model
    model.stop()


@pytest.fixture
def with_model(app: FastAPI, fake_model: FakeModel) -> FakeModel:
    """The app configured with the fake model (a short time limit for the slow cases)."""
    app.state.settings = app.state.settings.model_copy(
        update={
            "coach_url": fake_model.url,
            "coach_model": "tutor-7b",
            "coach_api_key": SecretStr("sk-test"),
            "coach_timeout_seconds": 2.0,
        }
    )
    return fake_model
