"""Progress on the pages, on SQLite and PostgreSQL: the course page's per-lesson counts and its
Start / Continue / Review links, and the quick check's plain form (no JavaScript), which records a
signed-in learner's answer through the same service as the API and redirects to the verdict."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.repository import get_user_by_email
from app.learning import service
from app.learning.models import ProgressEvent
from tests.auth.factories import browser_sign_up, page_csrf_token
from tests.content.conftest import FIXTURE_LESSONS

SAME_SITE = {"Origin": "http://testserver"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _fixture_lessons(use_lessons: Callable[[Path], None]) -> None:
    # first-steps: steps hello, world; question greeting (answer a).
    # second-lesson: steps one, two, three; question count (answer b); exercise hello.
    use_lessons(FIXTURE_LESSONS)


def cards(html: str) -> list[str]:
    return (
        html.split('<ol class="lesson-cards">')[1]
        .split("</ol>")[0]
        .split('<li class="lesson-card')[1:]
    )


def actions(html: str) -> dict[str, tuple[str, str]]:
    """Each lesson card's action link: lesson id -> (data-action, href)."""
    found = {}
    for card in cards(html):
        lesson = re.search(r'<h3><a href="/lessons/([^"]+)">', card)
        link = re.search(r'class="button[^"]*" href="([^"]+)" data-action="(\w+)"', card)
        assert lesson and link, card
        found[lesson.group(1)] = (link.group(2), link.group(1).replace("&amp;", "&"))
    return found


def progress_block(html: str, lesson_id: str) -> str:
    card = next(card for card in cards(html) if f'<h3><a href="/lessons/{lesson_id}">' in card)
    block = re.search(r'data-testid="lesson-progress".*?</ul>', card, re.S)
    return re.sub(r"\s+", " ", block.group(0)) if block else ""


def sign_up(client: TestClient, session: Session) -> tuple[str, Any]:
    email = f"progress-{uuid.uuid4().hex[:12]}@example.org"
    token = browser_sign_up(client, email)
    user = get_user_by_email(session, email)
    assert user is not None
    return token, user


def sync(client: TestClient, token: str, *events: dict[str, str]) -> None:
    body = [
        {"id": f"t-{uuid.uuid4().hex}", "at": "2026-01-01T10:00:00Z", **event} for event in events
    ]
    response = client.post(
        "/api/v1/progress/events",
        headers={"X-CSRF-Token": token, **SAME_SITE},
        json={"events": body},
    )
    assert response.status_code == 200, response.text
    assert response.json()["rejected"] == []


def completed(lesson_id: str, step_id: str) -> dict[str, str]:
    return {"type": "step_completed", "lesson_id": lesson_id, "step_id": step_id}


def answered(lesson_id: str, question_id: str, choice: str) -> dict[str, str]:
    return {
        "type": "quiz_answered",
        "lesson_id": lesson_id,
        "question_id": question_id,
        "choice": choice,
    }


def events_stored(session: Session) -> int:
    return int(session.scalar(select(func.count()).select_from(ProgressEvent)) or 0)


class TestCoursePage:
    def test_a_visitor_gets_start_links_and_no_progress(self, client: TestClient) -> None:
        page = client.get("/").text
        assert actions(page) == {
            "first-steps": ("start", "/lessons/first-steps"),
            "second-lesson": ("start", "/lessons/second-lesson"),
        }
        assert 'data-testid="lesson-progress"' not in page
        # The link names its lesson for screen readers (several "Start" links on one page).
        assert '<span class="visually-hidden">: First steps</span>' in page

    def test_a_new_learner_sees_zero_counts_and_start(
        self, client: TestClient, session: Session
    ) -> None:
        sign_up(client, session)
        page = client.get("/").text
        assert actions(page)["first-steps"] == ("start", "/lessons/first-steps")
        first = progress_block(page, "first-steps")
        assert 'data-status="new"' in first
        assert "0 of 2 steps done" in first
        assert "0 of 1 question answered correctly" in first
        assert "exercise" not in first  # first-steps has none
        assert "0 of 1 exercise passed" in progress_block(page, "second-lesson")

    def test_continue_goes_to_the_first_thing_left_to_do(
        self, client: TestClient, session: Session
    ) -> None:
        token, user = sign_up(client, session)
        sync(client, token, completed("first-steps", "hello"), completed("second-lesson", "one"))
        sync(client, token, completed("second-lesson", "three"))
        page = client.get("/").text
        assert actions(page) == {
            "first-steps": ("continue", "/lessons/first-steps?step=2#steps"),
            "second-lesson": ("continue", "/lessons/second-lesson?step=2#steps"),
        }
        second = progress_block(page, "second-lesson")
        assert 'data-status="in_progress"' in second and "In progress" in second
        assert "2 of 3 steps done" in second

        # Steps done, the question answered wrongly: Continue goes to the question.
        sync(
            client,
            token,
            completed("second-lesson", "two"),
            answered("second-lesson", "count", "a"),
        )
        page = client.get("/").text
        assert actions(page)["second-lesson"] == (
            "continue",
            "/lessons/second-lesson?question=count#quiz-count",
        )
        assert "0 of 1 question answered correctly" in progress_block(page, "second-lesson")

        # Answered correctly: the exercise is left (its card, the 5th, with or without JS).
        sync(client, token, answered("second-lesson", "count", "b"))
        page = client.get("/").text
        assert actions(page)["second-lesson"] == (
            "continue",
            "/lessons/second-lesson?step=5#exercise-hello",
        )
        service.record_exercise_result(session, user.id, "second-lesson/hello", "pass", 1, 1)
        page = client.get("/").text
        assert actions(page)["second-lesson"] == ("review", "/lessons/second-lesson?step=1#steps")
        second = progress_block(page, "second-lesson")
        assert 'data-status="done"' in second and "Completed" in second
        assert "3 of 3 steps done" in second
        assert "1 of 1 question answered correctly" in second
        assert "1 of 1 exercise passed" in second

    def test_counts_and_actions_are_translated(self, client: TestClient, session: Session) -> None:
        token, _user = sign_up(client, session)
        sync(client, token, completed("first-steps", "hello"))
        client.cookies.set("rdv_locale", "tr")
        page = client.get("/").text
        assert "2 adımdan 1 tamamlandı" in progress_block(page, "first-steps")
        assert ">1. derse devam et<" in page and ">2. derse başla<" in page
        assert "Devam ediyor" in page
        client.cookies.set("rdv_locale", "pt-BR")
        page = client.get("/").text
        assert "1 de 2 passos concluídos" in progress_block(page, "first-steps")
        assert ">Continuar a lição 1<" in page and ">Começar a lição 2<" in page
        assert "Em andamento" in page


class TestQuizFormWithoutJavaScript:
    def test_a_learner_s_answer_is_recorded_and_the_verdict_shown(
        self, client: TestClient, session: Session
    ) -> None:
        _token, user = sign_up(client, session)
        lesson = client.get("/lessons/first-steps?step=2")
        form = client.post(
            "/lessons/first-steps/quiz/greeting?step=2",
            data={"choice": "a", "csrf_token": page_csrf_token(lesson.text)},
            headers=SAME_SITE,
            follow_redirects=False,
        )
        assert form.status_code == 303
        target = "/lessons/first-steps?step=2&question=greeting&choice=a#quiz-greeting"
        assert form.headers["location"] == target
        page = client.get(target).text
        assert "verdict--correct" in page and "We start with hello." in page
        assert 'data-current="2"' in page  # back at the step the learner was on

        progress = service.lesson_progress(session, user.id, "first-steps")
        assert progress is not None
        assert progress.quiz.answers["greeting"].choice == "a"
        assert progress.quiz.correct_questions == ["greeting"]
        course = client.get("/").text
        assert "1 of 1 question answered correctly" in progress_block(course, "first-steps")
        assert actions(course)["first-steps"] == ("continue", "/lessons/first-steps?step=1#steps")

    def test_a_wrong_answer_is_recorded_as_wrong(
        self, client: TestClient, session: Session
    ) -> None:
        token, user = sign_up(client, session)
        page = client.post(
            "/lessons/first-steps/quiz/greeting?step=1",
            data={"choice": "b", "csrf_token": token},
            headers=SAME_SITE,
        )
        assert page.status_code == 200
        assert page.url.path == "/lessons/first-steps"
        assert "verdict--wrong" in page.text and "We start with hello." in page.text
        progress = service.lesson_progress(session, user.id, "first-steps")
        assert progress is not None
        assert progress.quiz.answers["greeting"].correct is False
        assert progress.quiz.correct_questions == []

    def test_without_the_csrf_token_nothing_is_recorded(
        self, client: TestClient, session: Session
    ) -> None:
        _token, user = sign_up(client, session)
        before = events_stored(session)
        refused = client.post(
            "/lessons/first-steps/quiz/greeting",
            data={"choice": "a"},
            headers=SAME_SITE,
            follow_redirects=False,
        )
        assert refused.status_code == 403
        forged = client.post(
            "/lessons/first-steps/quiz/greeting",
            data={"choice": "a", "csrf_token": "forged"},
            headers={"Origin": "https://evil.example"},
            follow_redirects=False,
        )
        assert forged.status_code == 403
        assert events_stored(session) == before
        assert service.lesson_progress(session, user.id, "first-steps") is None

    def test_a_visitor_gets_the_verdict_without_recording(
        self, client: TestClient, session: Session
    ) -> None:
        token = page_csrf_token(client.get("/lessons/second-lesson").text)
        before = events_stored(session)
        client.cookies.set("rdv_locale", "tr")
        page = client.post(
            "/lessons/first-steps/quiz/greeting?step=2",
            data={"choice": "a", "csrf_token": token},
            headers=SAME_SITE,
        )
        assert page.status_code == 200
        assert "Doğru." in page.text and "Merhaba ile başlarız." in page.text
        assert events_stored(session) == before
        # A visitor's form is CSRF-protected like every other form.
        client.cookies.delete("rdv_csrf")
        refused = client.post(
            "/lessons/first-steps/quiz/greeting", data={"choice": "a", "csrf_token": token}
        )
        assert refused.status_code == 403

    def test_the_locale_in_the_url_survives_the_round_trip(
        self, client: TestClient, session: Session
    ) -> None:
        lesson = client.get("/lessons/first-steps?locale=pt-BR&step=2").text
        action = re.search(r'action="(/lessons/first-steps/quiz/greeting[^"]*)"', lesson)
        assert action
        page = client.post(
            action.group(1).replace("&amp;", "&"),
            data={"choice": "b", "csrf_token": page_csrf_token(lesson)},
            headers=SAME_SITE,
        )
        assert page.url.params["locale"] == "pt-BR"
        assert "Começamos com olá." in page.text
        # Step links drop the verdict again: moving on does not repeat it.
        assert "question=" not in re.search(r'rel="next"[^>]*href="([^"]*)"', page.text).group(1)

    def test_an_unknown_question_goes_back_without_a_verdict(
        self, client: TestClient, session: Session
    ) -> None:
        token, user = sign_up(client, session)
        response = client.post(
            "/lessons/first-steps/quiz/nope?step=2",
            data={"choice": "a", "csrf_token": token},
            headers=SAME_SITE,
            follow_redirects=False,
        )
        assert response.status_code == 303
        assert response.headers["location"] == "/lessons/first-steps?step=2"
        assert service.lesson_progress(session, user.id, "first-steps") is None
        stale = client.get("/lessons/first-steps?question=nope&choice=a")
        assert stale.status_code == 200
        assert 'class="verdict ' not in stale.text


def question_block(html: str, question_id: str) -> str:
    found = re.search(rf'<form class="quiz-question" id="quiz-{question_id}".*?</form>', html, re.S)
    assert found, f"no question {question_id}"
    return found.group(0)


def checked_choice(block: str) -> str | None:
    found = re.search(r'value="(\w+)" required\s+checked', block)
    return found.group(1) if found else None


class TestSavedAnswersOnTheLessonPage:
    """A signed-in learner's saved answers come back with their verdicts when the lesson is
    reloaded, rendered by the server (no JavaScript needed)."""

    def test_answers_synced_through_the_progress_api_are_shown(
        self, client: TestClient, session: Session
    ) -> None:
        token, _user = sign_up(client, session)
        sync(client, token, answered("second-lesson", "count", "a"))
        block = question_block(client.get("/lessons/second-lesson").text, "count")
        assert checked_choice(block) == "a"
        assert "verdict--wrong" in block and "Not quite." in block
        assert block.count("data-your-answer>") == 1 and ">Your answer<" in block

        # The latest answer wins, and a right one says so.
        sync(client, token, {**answered("second-lesson", "count", "b"), "at": "2026-01-02T10:00Z"})
        block = question_block(client.get("/lessons/second-lesson?step=3").text, "count")
        assert checked_choice(block) == "b"
        assert "verdict--correct" in block and "Correct." in block

    def test_an_answer_given_through_the_quiz_api_is_shown(
        self, client: TestClient, session: Session
    ) -> None:
        token, _user = sign_up(client, session)
        answer = client.post(
            "/api/v1/quiz/first-steps/greeting",
            json={"choice": "a"},
            headers={"X-CSRF-Token": token, **SAME_SITE},
        )
        assert answer.status_code == 200 and answer.json()["recorded"] is True
        block = question_block(client.get("/lessons/first-steps").text, "greeting")
        assert checked_choice(block) == "a"
        assert "verdict--correct" in block and "We start with hello." in block

    def test_an_answer_sent_by_the_plain_form_survives_a_reload(
        self, client: TestClient, session: Session
    ) -> None:
        token, _user = sign_up(client, session)
        client.post(
            "/lessons/first-steps/quiz/greeting?step=2",
            data={"choice": "b", "csrf_token": token},
            headers=SAME_SITE,
        )
        client.cookies.set("rdv_locale", "tr")
        page = client.get("/lessons/first-steps").text  # no ?question=&choice= any more
        block = question_block(page, "greeting")
        assert checked_choice(block) == "b"
        assert "verdict--wrong" in block and "Merhaba ile başlarız." in block
        assert ">Yanıtınız<" in block

    def test_a_visitor_and_an_unanswered_question_show_no_verdict(
        self, client: TestClient, session: Session
    ) -> None:
        visitor = question_block(client.get("/lessons/first-steps").text, "greeting")
        assert checked_choice(visitor) is None and 'class="verdict ' not in visitor
        assert "data-your-answer>" not in visitor
        token, _user = sign_up(client, session)
        sync(client, token, completed("first-steps", "hello"))
        learner = question_block(client.get("/lessons/first-steps").text, "greeting")
        assert checked_choice(learner) is None and 'class="verdict ' not in learner

    def test_an_answer_the_lesson_no_longer_offers_is_not_shown(
        self,
        client: TestClient,
        session: Session,
        lessons_copy: Path,
        use_lessons: Callable[[Path], None],
    ) -> None:
        use_lessons(lessons_copy)
        token, _user = sign_up(client, session)
        sync(client, token, answered("first-steps", "greeting", "b"))
        lesson_file = lessons_copy / "01-first-steps" / "lesson.yaml"
        text = lesson_file.read_text(encoding="utf-8")
        edited = text.replace(
            "      - {id: b, text: {en: Goodbye, tr: Hoşça kal, pt-BR: Tchau}}\n",
            "      - {id: c, text: {en: Goodbye, tr: Hoşça kal, pt-BR: Tchau}}\n",
        )
        assert edited != text
        lesson_file.write_text(edited, encoding="utf-8")
        use_lessons(lessons_copy)  # reload now, not after the service's edit-check interval
        block = question_block(client.get("/lessons/first-steps").text, "greeting")
        assert checked_choice(block) is None and 'class="verdict ' not in block


class TestExpiredQuizForm:
    def test_a_quiz_form_without_its_token_gets_a_page_back_to_the_lesson(
        self, client: TestClient, session: Session
    ) -> None:
        _token, user = sign_up(client, session)
        client.cookies.set("rdv_locale", "pt-BR")
        refused = client.post(
            "/lessons/first-steps/quiz/greeting?step=2&locale=pt-BR",
            data={"choice": "a", "csrf_token": "expired"},
            headers={**SAME_SITE, "Accept": "text/html"},
            follow_redirects=False,
        )
        assert refused.status_code == 403
        assert "Este formulário expirou" in refused.text
        assert 'href="/lessons/first-steps?step=2&amp;locale=pt-BR"' in refused.text
        assert service.lesson_progress(session, user.id, "first-steps") is None

        with_referer = client.post(
            "/lessons/first-steps/quiz/greeting?step=2",
            data={"choice": "a"},
            headers={
                **SAME_SITE,
                "Accept": "text/html",
                "Referer": "http://testserver/lessons/first-steps?step=2",
            },
        )
        assert with_referer.status_code == 403
        assert 'href="/lessons/first-steps?step=2"' in with_referer.text
