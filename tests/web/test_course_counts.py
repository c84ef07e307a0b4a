"""The course page counts a lesson's cards as the lesson page does (issue 38: "18 steps" on the
course, "Step 1 of 28" in the lesson), and its buttons can be told apart: one call to action in
the hero, "Start lesson N" on each card."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from markupsafe import escape

from app.config import REPO_ROOT
from app.content import service as content
from app.content.loader import load_catalog
from app.i18n import SUPPORTED_LOCALES, translate

CATALOG = load_catalog(REPO_ROOT / "lessons")
LESSONS = [loaded.lesson for loaded in CATALOG.lessons.values()]


def card_count_on_course(html: str, lesson_id: str) -> int:
    card = html.split(f'<h3><a href="/lessons/{lesson_id}">')[0].rsplit('<p class="eyebrow">', 1)[1]
    return int(re.findall(r"(\d+)", card.split("</p>")[0])[-1])


@pytest.mark.parametrize("locale", SUPPORTED_LOCALES)
def test_the_course_counts_every_card_the_lesson_counts(client: TestClient, locale: str) -> None:
    client.cookies.set("rdv_locale", locale)
    course = client.get("/").text
    for lesson in LESSONS:
        total = len(lesson.cards())
        assert len(lesson.steps) < total  # the old count (steps only) differs
        assert card_count_on_course(course, lesson.id) == total, lesson.id
        page = client.get(f"/lessons/{lesson.id}").text
        shown = translate(locale, "Step %(current)s of %(total)s") % {"current": 1, "total": total}
        assert shown in page, lesson.id


def test_one_call_to_action_and_buttons_that_differ(client: TestClient) -> None:
    client.cookies.set("rdv_locale", "en")
    course = client.get("/").text
    hero = course.split('<section class="hero"')[1].split("</section>")[0]
    first = content.localized_course("en").lessons[0]
    assert re.search(
        rf'href="/lessons/{first.id}" data-testid="course-cta" data-action="start">'
        rf"Start lesson 1: {re.escape(str(escape(first.title)))}",
        hero,
    )
    cards = course.split('<ol class="lesson-cards">')[1]
    buttons = re.findall(r'data-action="start">([^<]+)<span', cards)
    assert buttons == [f"Start lesson {n}" for n in range(1, len(LESSONS) + 1)]
