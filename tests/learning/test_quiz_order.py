"""The quiz's choices in each learner's own order: the page (also the no-JavaScript form) and the
API agree, the order is stable for a learner and differs between learners, and answers are still
checked by choice id."""

from __future__ import annotations

import re

from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.content import service as content
from app.content.shuffle import VISITOR_SEED, shuffled_for
from tests.auth.factories import browser_sign_up, register_and_sign_in

LESSON = "ddp-fundamentals"


def _page_orders(html: str) -> dict[str, list[str]]:
    """question id -> the choice ids in the order the page's forms list them."""
    forms = re.findall(r'<form class="quiz-question" id="quiz-([^"]+)"(.*?)</form>', html, re.S)
    assert forms, "the page has no quiz"
    return {qid: re.findall(r'name="choice" value="([^"]+)"', body) for qid, body in forms}


def _api_orders(client: TestClient, headers: dict[str, str] | None = None) -> dict[str, list[str]]:
    lesson = client.get(f"/api/v1/lessons/{LESSON}", headers=headers or {})
    assert lesson.status_code == 200, lesson.text
    return {q["id"]: [c["id"] for c in q["choices"]] for q in lesson.json()["quiz"]}


def test_page_and_api_show_a_learner_the_same_order(client: TestClient) -> None:
    browser_sign_up(client)
    page = _page_orders(client.get(f"/lessons/{LESSON}").text)
    assert page == _api_orders(client)  # the same session cookie
    assert page == _page_orders(client.get(f"/lessons/{LESSON}?step=2").text)


def test_visitors_get_one_stable_order_on_the_page_and_in_the_api(client: TestClient) -> None:
    first = _page_orders(client.get(f"/lessons/{LESSON}").text)
    assert first == _page_orders(client.get(f"/lessons/{LESSON}").text)
    assert first == _api_orders(client)


def test_learners_get_different_orders(app: FastAPI) -> None:
    orders = set()
    for _ in range(6):
        with TestClient(app) as device:
            orders.add(str(_api_orders(device, register_and_sign_in(device))))
    assert len(orders) > 1


def test_the_etag_covers_the_order_and_caches_key_on_the_credentials(client: TestClient) -> None:
    visitor = client.get(f"/api/v1/lessons/{LESSON}")
    expected = shuffled_for(content.localized_lesson(LESSON, "en"), VISITOR_SEED).etag
    assert visitor.headers["etag"] == expected != content.localized_lesson(LESSON, "en").etag
    learner = client.get(f"/api/v1/lessons/{LESSON}", headers=register_and_sign_in(client))
    assert {"Accept-Language", "Authorization", "Cookie"} <= {
        part.strip() for part in learner.headers["vary"].split(",")
    }


def test_answers_are_checked_by_choice_id_whatever_the_order(client: TestClient) -> None:
    headers = register_and_sign_in(client)
    shown = _api_orders(client, headers)
    for question in content.get_catalog().lessons[LESSON].lesson.quiz:
        assert sorted(shown[question.id]) == sorted(c.id for c in question.choices)
        verdict = client.post(
            f"/api/v1/quiz/{LESSON}/{question.id}",
            json={"choice": question.answer},
            headers=headers,
        )
        assert verdict.status_code == 200
        assert verdict.json()["correct"] is True
