"""POST /api/v1/coach and GET /api/v1/coach/history (both databases): answers in three languages,
ownership, validation, the rate limit, streaming, the model with its fallbacks, the history."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.auth.models import User
from app.coach.models import CoachExchange
from app.config import REPO_ROOT, get_settings
from app.content import service as content
from tests.coach.conftest import GradedFactory
from tests.coach.fake_llm import FakeModel
from tests.content.conftest import point_app_at

LESSON = "ddp-fundamentals"


def ask(client: TestClient, headers: dict[str, str], locale: str = "en", **body: object) -> object:
    payload = {"question": "What does set_epoch do?", "lesson_id": LESSON, **body}
    return client.post(f"/api/v1/coach?locale={locale}", json=payload, headers=headers)


def sse_events(text: str) -> list[tuple[str, dict[str, object]]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((lines["event"], json.loads(lines["data"])))
    return events


@pytest.mark.parametrize(
    ("locale", "question"),
    [
        ("en", "What does set_epoch do?"),
        ("tr", "set_epoch ne işe yarar?"),
        ("pt-BR", "O que o set_epoch faz?"),
    ],
)
def test_a_free_question_is_answered_with_the_lessons_explanation_in_the_learners_language(
    client: TestClient, auth: dict[str, str], locale: str, question: str
) -> None:
    answered = ask(client, auth, locale, question=question)
    assert answered.status_code == 200, answered.text
    assert answered.headers["content-language"] == locale
    body = answered.json()
    assert body["provider"] == "builtin"
    concept = next(
        item
        for item in content.get_catalog().lessons[LESSON].lesson.concepts
        if item.id == "set-epoch"
    )
    assert body["answer"].startswith(f"**{concept.terms[locale][0]}**: ")
    assert body["sources"][0]["step_id"] == "set-epoch"
    assert body["sources"][0]["url"].startswith(f"/lessons/{LESSON}?step=")
    assert f'href="{body["sources"][0]["url"]}"' in body["answer_html"]
    step = next(
        item for item in content.localized_lesson(LESSON, locale).steps if item.id == "set-epoch"
    )
    assert concept.answer.get(locale) in body["answer"]  # the instructors' explanation, whole
    assert f"[{step.title}]" in body["answer"]


def test_signed_out_is_refused(client: TestClient) -> None:
    refused = ask(client, {})
    assert refused.status_code == 401
    assert refused.json()["code"] == "not_authenticated"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"lesson_id": "no-such-lesson"}, "lesson_not_found"),
        ({"step_id": "no-such-step"}, "step_not_found"),
        ({"exercise": f"{LESSON}/no-such-exercise"}, "exercise_not_found"),
        ({"exercise": "torchrun-launch/env-launch"}, "exercise_not_found"),  # not this lesson's
        ({"submission_id": str(uuid.uuid4())}, "submission_not_found"),
    ],
)
def test_unknown_things_are_404(
    client: TestClient, auth: dict[str, str], body: dict[str, object], code: str
) -> None:
    answered = ask(client, auth, **body)
    assert answered.status_code == 404
    assert answered.json()["code"] == code
    assert answered.json()["message"]


def test_a_lesson_whose_file_is_broken_is_503(
    client: TestClient, auth: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lessons = tmp_path / "lessons"
    shutil.copytree(REPO_ROOT / "lessons", lessons)
    lesson_file = lessons / "02-ddp-fundamentals" / "lesson.yaml"
    lesson_file.write_text(lesson_file.read_text().replace("\nsteps:", "\nstepz:", 1))
    point_app_at(monkeypatch, lessons)
    try:
        answered = ask(client, auth, "tr")
        assert answered.status_code == 503
        assert answered.json()["code"] == "lesson_unavailable"
        assert answered.headers["retry-after"] == "300"
        assert ask(client, auth, lesson_id="torchrun-launch").status_code == 200
    finally:
        get_settings.cache_clear()
        content.reset()


def test_another_learners_submission_is_404(
    client: TestClient, other_auth: dict[str, str], graded: GradedFactory
) -> None:
    mine = graded("bug_no_set_epoch")
    probe = ask(client, other_auth, submission_id=str(mine.id))
    assert probe.status_code == 404
    assert probe.json()["code"] == "submission_not_found"


@pytest.mark.parametrize(
    "body",
    [
        {"question": ""},
        {"question": "   "},
        {"question": "x" * 2001},
        {"lesson_id": "Not A Slug"},
        {"submission_id": "not-a-uuid"},
        {"surprise": 1},
    ],
)
def test_a_bad_body_is_422(
    client: TestClient, auth: dict[str, str], body: dict[str, object]
) -> None:
    answered = ask(client, auth, **body)
    assert answered.status_code == 422
    assert answered.json()["code"] == "invalid_request"


def test_over_the_hourly_limit_is_429_with_retry_after(
    app: FastAPI, client: TestClient, auth: dict[str, str], other_auth: dict[str, str]
) -> None:
    app.state.settings = app.state.settings.model_copy(update={"coach_questions_per_hour": 2})
    assert ask(client, auth).status_code == 200
    assert ask(client, auth).status_code == 200
    refused = ask(client, auth, "tr")
    assert refused.status_code == 429
    assert refused.json()["code"] == "rate_limited"
    assert 3500 <= int(refused.headers["retry-after"]) <= 3600
    assert "2" in refused.json()["message"] and "saat" in refused.json()["message"]
    assert ask(client, other_auth).status_code == 200  # the limit is per learner


def test_every_question_and_answer_is_kept_in_the_learners_history(
    client: TestClient, auth: dict[str, str], other_auth: dict[str, str]
) -> None:
    ask(client, auth, question="What does set_epoch do?")
    ask(client, auth, "pt-BR", question="O que é o world size?", step_id="rank-and-world-size")
    history = client.get("/api/v1/coach/history", headers=auth)
    assert history.status_code == 200
    rows = history.json()["exchanges"]
    assert [row["question"] for row in rows] == ["O que é o world size?", "What does set_epoch do?"]
    assert rows[0]["step_id"] == "rank-and-world-size"
    assert rows[0]["sources"] and rows[0]["provider"] == "builtin"
    assert client.get("/api/v1/coach/history", headers=other_auth).json()["exchanges"] == []


def test_the_history_goes_with_the_account(
    client: TestClient, auth: dict[str, str], learner: User, session: Session
) -> None:
    ask(client, auth)
    count = select(func.count()).select_from(CoachExchange)
    assert session.scalar(count.where(CoachExchange.user_id == learner.id)) == 1
    session.execute(delete(User).where(User.id == learner.id))  # ON DELETE CASCADE
    session.expire_all()
    assert session.scalar(count.where(CoachExchange.user_id == learner.id)) == 0


@pytest.mark.usefixtures("stream_sessions")
def test_the_built_in_coach_streams_its_answer_as_one_done_event(
    client: TestClient, auth: dict[str, str]
) -> None:
    answered = client.post(
        "/api/v1/coach",
        json={"question": "What does set_epoch do?", "lesson_id": LESSON},
        headers={**auth, "Accept": "text/event-stream"},
    )
    assert answered.status_code == 200
    assert answered.headers["content-type"].startswith("text/event-stream")
    events = sse_events(answered.text)
    assert [kind for kind, _ in events] == ["done"]
    assert events[0][1]["provider"] == "builtin"
    assert client.get("/api/v1/coach/history", headers=auth).json()["exchanges"]


def test_the_model_answers_when_configured(
    client: TestClient, auth: dict[str, str], with_model: FakeModel
) -> None:
    answered = ask(client, auth, question="Why did two ranks write the checkpoint?")
    body = answered.json()
    assert body["provider"] == "llm"
    assert body["answer"].startswith(with_model.answer.strip())
    # It cited [1]: that source is listed under the answer and returned.
    assert body["sources"] and "[1]" in body["answer"]
    assert f"]({body['sources'][0]['url']})" in body["answer"]
    prompt = with_model.requests[-1]["messages"]
    assert "Why did two ranks write the checkpoint?" in prompt[1]["content"]
    assert "Cite the lesson steps" in prompt[0]["content"]


def test_the_models_html_is_escaped(
    client: TestClient, auth: dict[str, str], with_model: FakeModel
) -> None:
    with_model.answer = 'Look here <img src=x onerror="alert(1)"> and <script>alert(2)</script>'
    body = ask(client, auth).json()
    assert body["provider"] == "llm"
    assert "<img" not in body["answer_html"] and "<script" not in body["answer_html"]
    assert "&lt;img" in body["answer_html"]


@pytest.mark.parametrize("mode", ["error", "garbage", "slow"])
def test_a_failing_model_falls_back_to_the_built_in_coach(
    client: TestClient, auth: dict[str, str], with_model: FakeModel, mode: str
) -> None:
    with_model.mode = mode
    with_model.delay_s = 4.0  # beyond the 2 s limit the fixture sets
    answered = ask(client, auth)
    assert answered.status_code == 200
    assert answered.json()["provider"] == "builtin"
    assert answered.json()["sources"]


def test_a_model_server_that_is_down_falls_back(
    app: FastAPI, client: TestClient, auth: dict[str, str]
) -> None:
    model = FakeModel().start()
    url = model.url
    model.stop()
    app.state.settings = app.state.settings.model_copy(update={"coach_url": url})
    answered = ask(client, auth)
    assert answered.status_code == 200
    assert answered.json()["provider"] == "builtin"


@pytest.mark.usefixtures("stream_sessions")
def test_the_model_streams_checked_lines_then_done(
    client: TestClient, auth: dict[str, str], with_model: FakeModel
) -> None:
    answered = client.post(
        "/api/v1/coach",
        json={"question": "Why did two ranks write the checkpoint?", "lesson_id": LESSON},
        headers={**auth, "Accept": "text/event-stream"},
    )
    events = sse_events(answered.text)
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "done" and "delta" in kinds and "reset" not in kinds
    streamed = "".join(str(data["text"]) for kind, data in events if kind == "delta")
    assert streamed == with_model.answer
    assert all(str(data["text"]).endswith("\n") for kind, data in events if kind == "delta")
    assert events[-1][1]["provider"] == "llm"


@pytest.mark.usefixtures("stream_sessions")
def test_a_stream_cut_mid_answer_is_reset_and_the_built_in_coach_answers(
    client: TestClient, auth: dict[str, str], with_model: FakeModel
) -> None:
    with_model.mode = "cut"
    answered = client.post(
        "/api/v1/coach",
        json={"question": "Why did two ranks write the checkpoint?", "lesson_id": LESSON},
        headers={**auth, "Accept": "text/event-stream"},
    )
    kinds = [kind for kind, _ in sse_events(answered.text)]
    assert kinds == ["delta", "reset", "done"]
    assert sse_events(answered.text)[-1][1]["provider"] == "builtin"


def test_the_coach_is_in_the_openapi_document(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    operation = document["paths"]["/api/v1/coach"]["post"]
    assert {"200", "401", "404", "422", "429"} <= set(operation["responses"])
    assert "text/event-stream" in operation["responses"]["200"]["content"]
    schemas = document["components"]["schemas"]
    assert schemas["CoachQuestion"]["examples"]
    assert schemas["CoachAnswer"]["examples"]
    assert "/api/v1/coach/history" in document["paths"]
