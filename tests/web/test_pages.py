"""The course and lesson pages: every shipped lesson in every locale, the fallback notice, steps
without JavaScript, the quick check, the exercise hook, the progress hook, and broken lessons."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import pytest
from fastapi.testclient import TestClient
from markupsafe import escape
from ruamel.yaml import YAML

from app.config import REPO_ROOT
from app.content.service import QuizVerdict
from app.i18n import SUPPORTED_LOCALES, translate
from tests.content.conftest import FIXTURE_LESSONS

UseLessons = Callable[[Path], None]
NOTICE = 'data-testid="fallback-notice"'
SHIPPED = sorted((REPO_ROOT / "lessons").glob("[0-9][0-9]-*/lesson.yaml"))


def _texts(raw: dict[str, Any]) -> list[Any]:
    """Every translatable text the lesson page shows, read straight from the YAML."""
    texts = [raw["title"], raw["summary"]]
    for step in raw.get("steps", []):
        texts += [step["title"], step["body"]]
    for question in raw.get("quiz", []):
        texts.append(question["question"])
        texts += [choice["text"] for choice in question["choices"]]
    for exercise in raw.get("exercises", []):
        texts += [exercise["title"], exercise["prompt"]]
    return texts


def expects_notice(raw: dict[str, Any], locale: str) -> bool:
    if locale == "en":
        return False
    return any(not (isinstance(text, dict) and text.get(locale)) for text in _texts(raw))


def get_page(client: TestClient, path: str, locale: str, **kwargs: Any) -> Any:
    client.cookies.set("rdv_locale", locale)
    response = client.get(path, **kwargs)
    client.cookies.clear()
    return response


@pytest.mark.parametrize("locale", SUPPORTED_LOCALES)
@pytest.mark.parametrize("lesson_file", SHIPPED, ids=[path.parent.name for path in SHIPPED])
def test_every_shipped_lesson_renders_in_every_locale(
    client: TestClient, lesson_file: Path, locale: str
) -> None:
    raw = YAML(typ="safe").load(lesson_file.read_text("utf-8"))
    response = get_page(client, f"/lessons/{raw['id']}", locale)
    assert response.status_code == 200, response.text[:500]
    assert response.headers["content-language"] == locale
    page = response.text
    assert f'<html lang="{locale}">' in page

    def shown(text: Any) -> str:
        value = text if isinstance(text, str) else text.get(locale) or text["en"]
        return str(escape(value))

    assert f'<h1 id="lesson-title">{shown(raw["title"])}</h1>' in page
    for step in raw["steps"]:
        assert shown(step["title"]) in page
    # The sequence: the steps, one card per quick-check question, then each exercise.
    total = len(raw["steps"]) + len(raw.get("quiz") or []) + len(raw.get("exercises") or [])
    status = translate(locale, "Step %(current)s of %(total)s") % {"current": 1, "total": total}
    assert status in page
    assert (NOTICE in page) == expects_notice(raw, locale)
    if expects_notice(raw, locale):
        notice = "Parts of this lesson are not translated yet; they are shown in English."
        assert translate(locale, notice) in page


@pytest.mark.parametrize("locale", SUPPORTED_LOCALES)
def test_course_page_in_every_locale(client: TestClient, locale: str) -> None:
    raw = YAML(typ="safe").load((REPO_ROOT / "lessons" / "course.yaml").read_text("utf-8"))
    response = get_page(client, "/", locale)
    assert response.status_code == 200
    page = response.text
    hrefs = re.findall(r'<h3><a href="/lessons/([a-z0-9-]+)">', page)
    shipped_ids = {YAML(typ="safe").load(path.read_text("utf-8"))["id"] for path in SHIPPED}
    assert hrefs == [lesson for lesson in raw["lessons"] if lesson in shipped_ids]
    for entry in raw.get("faq", []):
        question = entry["question"]
        text = question if isinstance(question, str) else question.get(locale) or question["en"]
        assert str(escape(text)) in page


class TestWithFixtureLessons:
    @pytest.fixture(autouse=True)
    def _fixtures(self, use_lessons: UseLessons) -> None:
        use_lessons(FIXTURE_LESSONS)

    def test_notice_exactly_when_a_field_fell_back(self, client: TestClient) -> None:
        assert NOTICE not in get_page(client, "/lessons/first-steps", "tr").text
        assert NOTICE not in get_page(client, "/lessons/second-lesson", "en").text
        assert NOTICE in get_page(client, "/lessons/second-lesson", "tr").text
        assert NOTICE in get_page(client, "/lessons/second-lesson", "pt-BR").text
        # The course page: fully translated in tr, one lesson summary missing in pt-BR.
        assert NOTICE not in get_page(client, "/", "tr").text
        assert NOTICE in get_page(client, "/", "pt-BR").text

    def test_one_card_at_a_time_with_links(self, client: TestClient) -> None:
        # second-lesson: 3 steps, 1 question, 1 exercise: a sequence of 5 parts.
        page = get_page(client, "/lessons/second-lesson", "en", params={"step": 2}).text
        assert re.search(r'id="step-one"[^>]*\bhidden>', page)
        assert not re.search(r'id="step-two"[^>]*\bhidden>', page)
        assert re.search(r'id="quiz-card-count"[^>]*\bhidden>', page)
        assert "Step 2 of 5" in page
        assert 'href="/lessons/second-lesson?step=1#steps"' in page  # previous
        assert 'href="/lessons/second-lesson?step=3#steps"' in page  # next
        assert 'data-step-nav="after"' not in page  # the last lesson: nothing after its cards

        # After the steps comes the quick check, one question per card, in the same sequence.
        third = get_page(client, "/lessons/second-lesson", "en", params={"step": 3}).text
        assert 'href="/lessons/second-lesson?step=4#steps"' in third
        fourth = get_page(client, "/lessons/second-lesson", "en", params={"step": 4}).text
        assert "Step 4 of 5" in fourth
        assert not re.search(r'id="quiz-card-count"[^>]*\bhidden>', fourth)
        assert re.search(r'id="step-three"[^>]*\bhidden>', fourth)
        assert "Quick check: question 1 of 1" in fourth
        # Its form comes back to its own card without JavaScript.
        assert 'action="/lessons/second-lesson/quiz/count?step=4#quiz-count"' in fourth
        # Then the exercise, a card of the sequence like the others (the last one here).
        last = get_page(client, "/lessons/second-lesson", "en", params={"step": 99}).text
        assert "Step 5 of 5" in last
        assert re.search(r'id="quiz-card-count"[^>]*\bhidden>', last)
        assert re.search(r'id="exercise-hello"[^>]*data-step-index="5"', last)
        assert not re.search(r'id="exercise-hello"[^>]*\bhidden>', last)

        # In the first lesson the last card leads on to the next lesson.
        first = get_page(client, "/lessons/first-steps", "en", params={"step": 99}).text
        assert re.search(r'rel="next"[^>]*\n?[^>]*\bhidden>', first)
        assert re.search(
            r'data-step-nav="after" href="/lessons/second-lesson" data-next-lesson>\s*Next lesson',
            first,
        )

    def test_a_question_link_opens_its_card(self, client: TestClient) -> None:
        page = get_page(client, "/lessons/second-lesson", "en", params={"question": "count"}).text
        assert 'data-current="4"' in page
        assert not re.search(r'id="quiz-card-count"[^>]*\bhidden>', page)
        translated = get_page(client, "/lessons/second-lesson", "tr", params={"step": 4}).text
        assert "Hızlı kontrol: soru 1 / 1" in translated and "Adım 4 / 5" in translated

    def test_quiz_explanation_is_markdown(self, client: TestClient) -> None:
        answered = get_page(
            client, "/lessons/second-lesson", "en", params={"question": "count", "choice": "b"}
        ).text
        verdict = answered[answered.index('class="verdict') :]
        verdict = verdict[: verdict.index("</form>")]
        assert "<p>There are three cards.</p>" in verdict
        marked = QuizVerdict(True, "b", "Call `set_epoch` **each** epoch.").explanation_html
        assert marked == "<p>Call <code>set_epoch</code> <strong>each</strong> epoch.</p>\n"

    def test_quiz_without_javascript(self, client: TestClient) -> None:
        page = get_page(client, "/lessons/second-lesson", "en").text
        assert "There are three cards." not in page  # the explanation is not given away
        assert 'data-api="/api/v1/quiz/second-lesson/count?locale=en"' in page
        # The form posts its CSRF token and is redirected to the page with the verdict
        # (tests/web/test_progress_pages.py: recording a signed-in learner's answer).
        lesson = client.get("/lessons/first-steps").text  # keeps its CSRF cookie
        token = re.search(r'name="csrf_token" value="([^"]+)"', lesson)
        assert token
        client.cookies.set("rdv_locale", "tr")
        form = {"csrf_token": token.group(1)}
        same_site = {"Origin": "http://testserver"}
        url = "/lessons/first-steps/quiz/greeting"
        wrong = client.post(url, data={**form, "choice": "b"}, headers=same_site)
        right = client.post(url, data={**form, "choice": "a"}, headers=same_site)
        client.cookies.delete("rdv_locale")
        assert wrong.status_code == right.status_code == 200
        assert wrong.history[0].status_code == 303
        assert "Tam değil." in wrong.text and "Merhaba ile başlarız." in wrong.text
        assert "Doğru." in right.text and "verdict--correct" in right.text

    def test_exercise_hook_gets_the_exercise(
        self, client: TestClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        fallback = get_page(client, "/lessons/second-lesson", "en").text
        assert "# TODO: print hello from every rank" in fallback
        from app import templating

        partial = "EXERCISE {{ exercise.id }} | {{ exercise.title }} | {{ exercise.prompt_html }}"
        loader = jinja2.ChoiceLoader(
            [jinja2.DictLoader({"submissions/_exercise.html": partial}), templating._env.loader]  # type: ignore[list-item]
        )
        monkeypatch.setattr(templating._env, "loader", loader)
        page = get_page(client, "/lessons/second-lesson", "tr").text
        assert "EXERCISE second-lesson/hello | Her sıradan merhaba de | <p>Print" in page

    def test_progress_hook_resumes_and_marks_steps(self, app: Any, client: TestClient) -> None:
        from app.web.progress import PageProgress, lesson_progress

        app.dependency_overrides[lesson_progress] = lambda: PageProgress(frozenset({"one"}), "two")
        page = get_page(client, "/lessons/second-lesson", "en").text
        assert "Step 2 of 5" in page
        assert 'class="step-card step-card--completed"' in page
        assert get_page(client, "/lessons/second-lesson?step=3", "en").text.count("Step 3 of 5")

    def test_unknown_lesson_is_a_helpful_404(self, client: TestClient) -> None:
        response = get_page(client, "/lessons/nope", "pt-BR")
        assert response.status_code == 404
        assert "Essa lição não existe." in response.text


def test_broken_lesson_does_not_break_the_other_pages(
    client: TestClient, use_lessons: UseLessons, lessons_copy: Path
) -> None:
    file = lessons_copy / "02-second-lesson" / "lesson.yaml"
    file.write_text(file.read_text("utf-8").replace("steps:", "steps: ["), "utf-8")
    use_lessons(lessons_copy)
    course = client.get("/")
    assert course.status_code == 200
    assert '<a href="/lessons/first-steps">' in course.text
    assert "This lesson is not available right now." in course.text
    assert client.get("/lessons/first-steps").status_code == 200
    broken = client.get("/lessons/second-lesson")
    assert broken.status_code == 503
    assert "its file has an error" in broken.text


def test_lesson_page_has_landmarks_and_local_assets(client: TestClient) -> None:
    page = client.get("/").text
    for landmark in ("<header", "<main", "<footer", "<nav"):
        assert landmark in page
    assert not re.search(r'(src|href)="(https?:)?//', page), "every asset comes from /static"
    for asset in re.findall(r'(?:src|href)="(/static/[^"?]+)', page):
        assert client.get(asset).status_code == 200


def test_broken_course_file_still_serves_the_lessons(
    client: TestClient, use_lessons: UseLessons, lessons_copy: Path
) -> None:
    (lessons_copy / "course.yaml").write_text("id: [unclosed\n", "utf-8")
    use_lessons(lessons_copy)
    course = client.get("/")
    assert course.status_code == 200
    assert '<a href="/lessons/first-steps">' in course.text
    assert '<a href="/lessons/second-lesson">' in course.text
    assert client.get("/lessons/second-lesson").status_code == 200
