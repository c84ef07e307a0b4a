"""The content service: localized views with per-field fallback, exercises, quiz answers."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from app.content import service
from tests.content.conftest import FIXTURE_LESSONS

UseLessons = Callable[[Path], None]


@pytest.fixture
def fixtures(use_lessons: UseLessons) -> None:
    use_lessons(FIXTURE_LESSONS)


@pytest.mark.usefixtures("fixtures")
class TestLocalizedLesson:
    def test_english_never_falls_back(self) -> None:
        assert service.localized_lesson("second-lesson", "en").fallback_fields == []

    def test_fully_translated_lesson_has_no_fallback(self) -> None:
        for locale in ("tr", "pt-BR"):
            lesson = service.localized_lesson("first-steps", locale)
            assert lesson.fallback_fields == []
        assert service.localized_lesson("first-steps", "tr").steps[0].title == "Merhaba"

    def test_each_missing_translation_is_named(self) -> None:
        lesson = service.localized_lesson("second-lesson", "tr")
        assert lesson.fallback_fields == [
            "steps.two.title",
            "steps.two.body",
            "quiz.count.question",
            "quiz.count.choices.a.text",
            "quiz.count.choices.b.text",
            "quiz.count.choices.c.text",
            "exercises.hello.prompt",
        ]
        assert lesson.title == "İkinci ders"
        assert lesson.steps[1].title == "Two"  # English, because tr is missing
        pt = service.localized_lesson("second-lesson", "pt-BR")
        assert "summary" in pt.fallback_fields and "title" not in pt.fallback_fields
        assert pt.summary == "More to learn."

    def test_markdown_is_rendered_and_raw_html_escaped(self) -> None:
        step = service.localized_lesson("second-lesson", "en").steps[0]
        assert "&lt;script&gt;" in step.body_html
        assert "<script>" not in step.body_html
        assert '<code class="language-python">' in step.body_html
        assert 'class="hl-' in step.body_html  # highlighted by Pygments

    def test_code_snippet_is_highlighted(self) -> None:
        step = service.localized_lesson("first-steps", "en").steps[1]
        assert step.code is not None and step.code.startswith("import torch.distributed")
        assert step.code_html is not None and step.code_html.startswith('<pre class="code">')

    def test_etag_is_stable_and_differs_by_locale(self) -> None:
        en = service.localized_lesson("second-lesson", "en").etag
        service.reset()
        assert service.localized_lesson("second-lesson", "en").etag == en
        assert service.localized_lesson("second-lesson", "tr").etag != en

    def test_quiz_answers_are_not_in_the_localized_lesson(self) -> None:
        dumped = service.localized_lesson("second-lesson", "en").model_dump_json()
        assert "answer" not in dumped
        assert "There are three cards." not in dumped

    def test_unknown_lesson(self) -> None:
        with pytest.raises(service.ContentNotFound):
            service.localized_lesson("nope", "en")


@pytest.mark.usefixtures("fixtures")
def test_course_in_order_with_faq() -> None:
    course = service.localized_course("pt-BR")
    assert course.title == "Curso de teste"
    assert [item.id for item in course.lessons] == ["first-steps", "second-lesson"]
    assert [item.step_count for item in course.lessons] == [2, 3]
    assert course.faq[0].answer_html == "<p>Sim. <strong>Sempre</strong>.</p>\n"
    # The lesson summaries shown on the course page count as course fields.
    assert course.fallback_fields == ["lessons.second-lesson.summary"]
    assert service.localized_course("tr").fallback_fields == []


@pytest.mark.usefixtures("fixtures")
def test_get_exercise() -> None:
    exercise = service.get_exercise("second-lesson/hello")
    assert exercise.lesson_id == "second-lesson" and exercise.slug == "hello"
    assert exercise.starter_code == "# TODO: print hello from every rank\n"
    assert exercise.solution_path.is_file()
    assert exercise.solution_path.name == "solution.py"
    assert exercise.spec.checks == ["run.completed"]
    assert exercise.spec.limits.wall_seconds == 60
    for missing in ("second-lesson/nope", "nope/hello", "second-lesson"):
        with pytest.raises(service.ContentNotFound):
            service.get_exercise(missing)


@pytest.mark.usefixtures("fixtures")
def test_check_answer() -> None:
    right = service.check_answer("second-lesson", "count", "b", "tr")
    assert (right.correct, right.explanation) == (True, "There are three cards.")
    wrong = service.check_answer("first-steps", "greeting", "b", "tr")
    assert (wrong.correct, wrong.explanation) == (False, "Merhaba ile başlarız.")
    with pytest.raises(service.ContentNotFound):
        service.check_answer("first-steps", "nope", "a")


def test_an_edited_file_is_picked_up(
    use_lessons: UseLessons, lessons_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "RELOAD_CHECK_SECONDS", 0.0)
    use_lessons(lessons_copy)
    assert service.localized_lesson("first-steps", "en").title == "First steps"
    file = lessons_copy / "01-first-steps" / "lesson.yaml"
    file.write_text(file.read_text("utf-8").replace("en: First steps", "en: Very first steps"))
    stat = file.stat()
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert service.localized_lesson("first-steps", "en").title == "Very first steps"


def test_broken_lesson_is_logged_with_its_location(
    use_lessons: UseLessons, lessons_copy: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = lessons_copy / "02-second-lesson" / "lesson.yaml"
    file.write_text(file.read_text("utf-8").replace("    answer: b", "    answer: z"))
    use_lessons(lessons_copy)
    with caplog.at_level("ERROR", logger="app.content.service"):
        catalog = service.get_catalog()
    assert list(catalog.lessons) == ["first-steps"]
    assert "lesson.yaml:31: quiz[0].answer: the answer 'z' is not one of the choices" in caplog.text
    with pytest.raises(service.LessonUnavailable):
        service.localized_lesson("second-lesson", "en")
    assert service.localized_lesson("first-steps", "en").id == "first-steps"
