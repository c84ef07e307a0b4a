"""The "Ask the coach" panel in headless Chromium: a question on a step, "Why did this fail?" on a
failed check of a really graded run, a model's answer streamed from the fake OpenAI-compatible
server, keyboard use, and the phone layout."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import User
from app.content.service import localized_lesson
from app.db import make_engine
from app.submissions.models import DONE, Submission
from tests.coach.conftest import EXERCISE, run_of
from tests.coach.fake_llm import FakeModel
from tests.e2e.accounts import register_and_sign_in
from tests.e2e.conftest import LiveServer, start_live_server, stop_live_server

LESSON_URL = "/lessons/ddp-fundamentals"
_numbers = itertools.count(1)


def sign_up(browser: Any, server: LiveServer, **context_options: Any) -> tuple[Any, str]:
    context = browser.new_context(base_url=server.url, **context_options)
    context.set_default_timeout(30_000)
    page = context.new_page()
    email = f"e2e-coach-{next(_numbers)}-{time.time_ns()}@example.org"
    register_and_sign_in(page, name="Ada", email=email, password="correct horse battery staple")
    return page, email


def store_graded_run(server: LiveServer, email: str, case: str) -> None:
    """A submission the real grader failed (its stored Result), in the server's own database."""
    code, result = run_of(case)
    engine = make_engine(server.database_url)
    with Session(engine) as session:
        user = session.scalars(select(User).where(User.email == email)).one()
        session.add(
            Submission(
                id=uuid.uuid4(),
                user_id=user.id,
                exercise=EXERCISE,
                code=code,
                status=DONE,
                result=result,
                created_at=datetime.now(UTC),
                finished_at=datetime.now(UTC),
            )
        )
        session.commit()
    engine.dispose()


def test_a_question_on_a_step_is_answered_with_sources(
    browser: Any, live_server: LiveServer
) -> None:
    page, _ = sign_up(browser, live_server, viewport={"width": 1280, "height": 900})
    cards = [(card.kind, card.id) for card in localized_lesson("ddp-fundamentals", "en").sequence]
    page.goto(f"{LESSON_URL}?step={cards.index(('step', 'set-epoch')) + 1}")
    panel = page.get_by_role("complementary", name="Ask the coach")
    question = panel.get_by_label("Your question")
    question.fill("Why would every epoch replay the same order?")
    question.press("Tab")  # "Ask about the lesson instead" is hidden: Tab goes on to Ask
    assert page.evaluate("document.activeElement.textContent.trim()") == "Ask"
    page.keyboard.press("Enter")
    answer = panel.locator('[data-role="coach-answer"]')
    answer.locator("a").first.wait_for()
    assert page.evaluate("document.activeElement.dataset.role") == "coach-answer"
    sources = panel.get_by_role("navigation", name="Sources").get_by_role("link")
    assert "set_epoch" in sources.first.inner_text()
    assert sources.first.get_attribute("href").startswith("/lessons/ddp-fundamentals?step=")
    assert panel.locator('[data-role="coach-status"]').inner_text() == "The coach answered."
    history = page.request.get("/api/v1/coach/history").json()["exchanges"]
    assert history[0]["step_id"] == "set-epoch"
    page.context.close()


def test_why_did_this_fail_explains_the_check_in_turkish_on_a_phone(
    browser: Any, live_server: LiveServer
) -> None:
    page, email = sign_up(
        browser, live_server, viewport={"width": 390, "height": 844}, is_mobile=True
    )
    store_graded_run(live_server, email, "bug_no_set_epoch")
    page.goto(f"{LESSON_URL}?locale=tr#exercise-train")  # the exercise's card
    failed = page.locator('.sub__check[data-check="sampler.set_epoch"]')
    why = failed.get_by_role("button", name="Bu neden başarısız oldu?")
    why.click()
    panel = page.locator("#coach")
    text = panel.locator('[data-role="coach-text"]')
    text.locator("h3").first.wait_for()
    assert "Ne oldu" in text.inner_text()
    assert "Önce neyi değiştirmeli" in text.inner_text()
    # The panel moved beside the results of that exercise.
    assert (
        page.evaluate("document.querySelector('[data-role=results]').nextElementSibling.id")
        == "coach"
    )
    # Phone layout: nothing wider than the screen.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    box = panel.bounding_box()
    assert box is not None and box["width"] <= 390
    page.context.close()


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModel]:
    fake = FakeModel().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def model_server(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModel
) -> Iterator[LiveServer]:
    server = start_live_server(
        tmp_path_factory.mktemp("coach-model-server"),
        {
            "RDV_COACH_URL": model.url,
            "RDV_COACH_MODEL": "tutor-7b",
            "RDV_COACH_TIMEOUT_SECONDS": "10",
        },
    )
    yield server
    stop_live_server(server)


def test_a_models_answer_streams_in_and_its_html_stays_text(
    browser: Any, model_server: LiveServer, model: FakeModel
) -> None:
    model.answer = (
        "Rank 1 saved too [1].\n"
        "<img src=x onerror=\"document.title='pwned'\"> is just text here.\n"
        "Guard the save with the rank.\n"
    )
    page, _ = sign_up(browser, model_server)
    page.goto(LESSON_URL)
    panel = page.locator("#coach")
    panel.get_by_label("Your question").fill("Why did two ranks write the checkpoint?")
    panel.get_by_role("button", name="Ask", exact=True).click()
    panel.locator('[data-role="coach-provider"]', has_text="language model").wait_for()
    shown = panel.locator('[data-role="coach-text"]')
    assert "is just text here" in shown.inner_text()
    assert shown.locator("img").count() == 0
    assert page.title() != "pwned"
    assert model.requests[-1]["stream"] is True
    page.context.close()
