"""The instructors' analytics on a seeded database with known figures (both databases): the
service at a cohort threshold of 1 (every number), the API and CSV at the default of 5 (small
counts hidden), who may read it, and the page."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.analytics import service
from app.auth import service as auth_service
from app.auth.models import INSTRUCTOR, User
from tests.analytics.conftest import EXERCISE, LESSON
from tests.auth.factories import bearer, create_token, create_user

SINCE = datetime(2026, 1, 1, tzinfo=UTC)


def figures(session: Session, **options: Any) -> dict[str, Any]:
    report = service.report(session, lesson_id=LESSON, locale="en", min_cohort=1, **options)
    return report.model_dump(mode="json")


def steps(report: dict[str, Any], locale: str | None = None) -> list[tuple[str, Any, Any]]:
    return [
        (row["step_id"], row["reached"], row["completed"])
        for row in report["steps"]
        if row["locale"] == locale
    ]


def question(report: dict[str, Any], locale: str | None = None) -> tuple[Any, ...]:
    (row,) = [row for row in report["questions"] if row["locale"] == locale]
    chosen = {choice["choice_id"]: choice["learners"] for choice in row["choices"]}
    return row["answered"], row["first_try_right"], chosen


def exercise(report: dict[str, Any], locale: str | None = None) -> dict[str, Any]:
    (row,) = [row for row in report["exercises"] if row["locale"] == locale]
    assert row["exercise"] == EXERCISE
    return row


def checks(row: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    return [(c["check_id"], c["first_failing"], c["share"]) for c in row["checks"]]


def test_every_figure_of_the_lesson(session: Session, seeded: dict[str, User]) -> None:
    report = figures(session)
    assert [(item["kind"], item["id"]) for item in report["sequence"]] == [
        ("step", "one"), ("step", "two"), ("step", "three"),
        ("question", "count"), ("exercise", EXERCISE),
    ]  # fmt: skip
    assert steps(report) == [("one", 9, 8), ("two", 6, 4), ("three", 3, 0)]
    assert question(report) == (9, 4, {"a": 4, "b": 7, "c": 1})
    right = {c["choice_id"]: c["correct"] for c in report["questions"][0]["choices"]}
    assert right == {"a": False, "b": True, "c": False}
    row = exercise(report)
    assert (row["opened"], row["submitted"], row["passed"], row["passed_first"]) == (8, 8, 6, 3)
    assert (row["median_submissions"], row["median_minutes_to_pass"]) == (1.5, 0.5)
    assert row["failed_submissions"] == 7
    assert checks(row) == [
        ("run.completed", 4, 0.5714), ("dist.init", 2, 0.2857), ("", 1, 0.1429),
    ]  # fmt: skip


def test_a_date_range_leaves_out_what_happened_outside_it(
    session: Session, seeded: dict[str, User]
) -> None:
    report = figures(session, since=SINCE)
    assert steps(report) == [("one", 8, 7), ("two", 6, 4), ("three", 3, 0)]
    assert question(report) == (8, 4, {"a": 3, "b": 7, "c": 1})
    row = exercise(report)
    assert (row["opened"], row["submitted"], row["passed"], row["passed_first"]) == (7, 7, 5, 2)
    assert (row["median_submissions"], row["median_minutes_to_pass"]) == (2.0, 1.0)
    assert figures(session, until=SINCE)["steps"][0]["reached"] == 1  # L8 alone, in 2025


def test_figures_split_by_locale_add_up(session: Session, seeded: dict[str, User]) -> None:
    report = figures(session, since=SINCE, by_locale=True)
    assert steps(report, "en") == [("one", 6, 6), ("two", 6, 4), ("three", 3, 0)]
    assert steps(report, "tr") == [("one", 2, 1), ("two", 0, 0), ("three", 0, 0)]
    assert question(report, "en") == (6, 3, {"a": 2, "b": 5, "c": 1})
    assert question(report, "tr") == (2, 1, {"a": 1, "b": 2, "c": 0})
    en, tr = exercise(report, "en"), exercise(report, "tr")
    assert (en["opened"], en["submitted"], en["passed"], en["passed_first"]) == (6, 6, 4, 2)
    assert (en["median_submissions"], en["median_minutes_to_pass"]) == (1.5, 0.5)
    assert checks(en) == [("run.completed", 3, 0.5), ("dist.init", 2, 0.3333), ("", 1, 0.1667)]
    assert (tr["opened"], tr["submitted"], tr["passed"], tr["passed_first"]) == (1, 1, 1, 0)
    assert (tr["median_submissions"], tr["median_minutes_to_pass"]) == (2.0, 3.0)
    assert checks(tr) == [("run.completed", 1, 1.0)]
    assert {row["locale"] for row in report["steps"]} == {None, "en", "tr"}


@pytest.fixture
def instructor_auth(session: Session) -> dict[str, str]:
    user = create_user(session, name="Prof. Noether", email="teacher@example.org")
    auth_service.set_role(session, email=user.email, role=INSTRUCTOR)
    return bearer(create_token(session, user))


def read(client: TestClient, headers: dict[str, str], **params: Any) -> dict[str, Any]:
    answered = client.get(
        "/api/v1/instructor/analytics",
        params={"lesson_id": LESSON, "since": "2026-01-01", **params},
        headers=headers,
    )
    assert answered.status_code == 200, answered.text
    assert answered.headers["cache-control"] == "no-store"
    return dict(answered.json())


def test_the_api_hides_counts_of_fewer_than_five_learners(
    client: TestClient, seeded: dict[str, User], instructor_auth: dict[str, str]
) -> None:
    report = read(client, instructor_auth)
    assert report["min_cohort"] == 5
    assert steps(report) == [("one", 8, 7), ("two", 6, None), ("three", None, 0)]
    assert question(report) == (8, None, {"a": None, "b": 7, "c": None})
    row = exercise(report)
    assert (row["opened"], row["submitted"], row["passed"], row["passed_first"]) == (
        7, 7, 5, None,
    )  # fmt: skip
    assert (row["median_submissions"], row["median_minutes_to_pass"]) == (2.0, 1.0)
    assert row["failed_submissions"] == 7  # five learners failed
    assert checks(row) == [("run.completed", None, None), ("dist.init", None, None),
                           ("", None, None)]  # fmt: skip


def csv_rows(client: TestClient, headers: dict[str, str], table: str) -> list[list[str]]:
    answered = client.get(
        f"/api/v1/instructor/analytics/{table}.csv",
        params={"lesson_id": LESSON, "since": "2026-01-01"},
        headers=headers,
    )
    assert answered.status_code == 200
    assert answered.headers["content-type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(answered.text)))


def test_each_table_exports_as_csv(
    client: TestClient, seeded: dict[str, User], instructor_auth: dict[str, str]
) -> None:
    assert csv_rows(client, instructor_auth, "steps") == [
        ["lesson_id", "step_id", "title", "locale", "reached", "completed"],
        [LESSON, "one", "One", "all", "8", "7"],
        [LESSON, "two", "Two", "all", "6", "<5"],
        [LESSON, "three", "Three", "all", "<5", "0"],
    ]
    assert [row[2:] for row in csv_rows(client, instructor_auth, "choices")][1:] == [
        ["a", "2", "False", "all", "<5"],
        ["b", "3", "True", "all", "7"],
        ["c", "no", "False", "all", "<5"],
    ]
    checks = csv_rows(client, instructor_auth, "checks")
    assert checks[1][:3] == [EXERCISE, "all", "run.completed"]
    exercises = csv_rows(client, instructor_auth, "exercises")
    assert exercises[1] == [
        EXERCISE, "Say hello from every rank", "all", "7", "7", "5", "<5", "2.0", "1.0", "7",
    ]  # fmt: skip


def test_learners_and_visitors_are_refused(
    client: TestClient, seeded: dict[str, User], session: Session
) -> None:
    learner = bearer(create_token(session, seeded["L0"]))
    for path in ("/api/v1/instructor/analytics", "/api/v1/instructor/analytics/steps.csv"):
        assert client.get(path, params={"lesson_id": LESSON}).status_code == 401
        refused = client.get(path, params={"lesson_id": LESSON}, headers=learner)
        assert refused.status_code == 403
        assert refused.json()["code"] == "instructors_only"


def test_an_unknown_lesson_is_404(client: TestClient, instructor_auth: dict[str, str]) -> None:
    answered = client.get(
        "/api/v1/instructor/analytics", params={"lesson_id": "no-such"}, headers=instructor_auth
    )
    assert answered.status_code == 404


def test_the_page_shows_the_figures_and_bars(
    client: TestClient, seeded: dict[str, User], instructor_auth: dict[str, str]
) -> None:
    page = client.get(
        "/instructor/analytics",
        params={"lesson_id": LESSON, "since": "2026-01-01"},
        headers=instructor_auth,
    )
    assert page.status_code == 200
    html = page.text
    assert 'data-step="one" data-locale="">' in html
    assert '<td data-col="reached">8</td>' in html
    assert '<td data-col="completed">&lt;5</td>' in html
    assert '<span data-col="passed">5</span>' in html
    assert 'class="bar__fill" width="75.0"' in html  # two's 6 learners of one's 8
    assert (
        "/api/v1/instructor/analytics/checks.csv?lesson_id=second-lesson&amp;since=2026-01-01"
        in html
    )


def test_the_page_is_for_instructors_only(client: TestClient, seeded: dict[str, User]) -> None:
    visitor = client.get("/instructor/analytics", follow_redirects=False)
    assert visitor.status_code == 303
    assert visitor.headers["location"] == "/login?next=/instructor/analytics"


def test_the_analytics_are_in_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    operation = paths["/api/v1/instructor/analytics"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {
        "lesson_id",
        "since",
        "until",
        "by_locale",
    }
    assert "403" in operation["responses"] and "401" in operation["responses"]
    assert "/api/v1/instructor/analytics/{table}.csv" in paths


def test_empty_dates_mean_no_bound_and_a_bad_date_is_explained(
    client: TestClient, seeded: dict[str, User], instructor_auth: dict[str, str]
) -> None:
    report = read(client, instructor_auth, since="", until="")  # the page's empty date fields
    assert report["since"] is None and steps(report)[0] == ("one", 9, 8)
    answered = client.get(
        "/api/v1/instructor/analytics",
        params={"lesson_id": LESSON, "since": "2026-02-30"},
        headers={**instructor_auth, "Accept-Language": "tr"},
    )
    assert answered.status_code == 422
    assert answered.json()["code"] == "invalid_date"
    assert answered.json()["message"] == (
        "since: günü YYYY-AA-GG biçiminde verin, örneğin 2026-12-01."
    )


def test_the_sequence_follows_the_lesson_authors_interleaved_order(session: Session) -> None:
    """Lesson 2 interleaves its cards (`sequence:` in its YAML): the funnel follows that order,
    exercises by their full id, not steps-then-quiz-then-exercises."""
    from app.content import service as content

    lesson_id = "ddp-fundamentals"
    lesson = content.localized_lesson(lesson_id, "en")
    report = service.report(session, lesson_id=lesson_id, locale="en", min_cohort=1)
    expected = [
        (card.kind, f"{lesson_id}/{card.id}" if card.kind == "exercise" else card.id)
        for card in lesson.sequence
    ]
    got = [(item.kind, item.id) for item in report.sequence]
    assert got == expected
    kinds = [kind for kind, _ in got]
    # Interleaved: an exercise comes before the last step.
    assert kinds.index("exercise") < len(kinds) - 1 - kinds[::-1].index("step")
