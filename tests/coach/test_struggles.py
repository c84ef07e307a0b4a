"""The instructors' view of where learners struggle (both databases): GET /api/v1/coach/struggles
and the page /instructor/coach, for instructors only; `python -m app role` makes one."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from app.auth import service as auth_service
from app.auth.models import INSTRUCTOR, LEARNER, User
from app.coach.models import CoachExchange
from app.config import REPO_ROOT
from app.content import service as content
from grader.i18n import render
from tests.auth.factories import bearer, browser_sign_up, create_token, create_user
from tests.coach.conftest import GradedFactory

LESSON = "ddp-fundamentals"
EXERCISE = "ddp-fundamentals/train"


@pytest.fixture
def instructor(session: Session) -> User:
    user = create_user(session, name="Prof. Noether", email="teacher@example.org")
    auth_service.set_role(session, email="Teacher@Example.org ", role=INSTRUCTOR)
    return user


@pytest.fixture
def instructor_auth(session: Session, instructor: User) -> dict[str, str]:
    return bearer(create_token(session, instructor))


def ask(client: TestClient, headers: dict[str, str], **body: object) -> None:
    payload = {"question": "What does set_epoch do?", "lesson_id": LESSON, **body}
    answered = client.post("/api/v1/coach", json=payload, headers=headers)
    assert answered.status_code == 200, answered.text


@pytest.fixture
def asked(
    client: TestClient,
    session: Session,
    learner: User,
    auth: dict[str, str],
    graded: GradedFactory,
) -> dict[str, User]:
    """Two learners' questions: a step, a free exercise question, three about failed runs."""
    other = create_user(session, name="Mallory Secret", email="mallory@example.org")
    other_auth = bearer(create_token(session, other))
    ask(client, auth, step_id="set-epoch")
    ask(client, other_auth, step_id="set-epoch", question="Why set_epoch and not shuffle=True?")
    no_epoch = graded("bug_no_set_epoch")
    ask(
        client,
        auth,
        question="Why did this fail: Each epoch reshuffles the data?",
        submission_id=str(no_epoch.id),
        check_id="sampler.set_epoch",
    )
    mine_again = graded("bug_save_on_every_rank")
    ask(client, auth, question="Why two files?", submission_id=str(mine_again.id))
    theirs = graded("bug_no_set_epoch", user=other)
    ask(
        client,
        other_auth,
        question="Same shuffle twice??",
        submission_id=str(theirs.id),
        check_id="ckpt.rank0_only",  # not a check this submission failed: not counted as one
    )
    return {"learner": learner, "other": other}


def struggles(client: TestClient, headers: dict[str, str], **params: object) -> dict[str, object]:
    answered = client.get("/api/v1/coach/struggles", params=params, headers=headers)
    assert answered.status_code == 200, answered.text
    assert answered.headers["cache-control"] == "no-store"
    return dict(answered.json())


def test_questions_are_counted_per_place_and_per_failed_check(
    client: TestClient, instructor_auth: dict[str, str], asked: dict[str, User]
) -> None:
    report = struggles(client, instructor_auth)
    assert report["questions"] == 5 and report["learners"] == 2
    places = {(p["step_id"], p["exercise"]): p for p in report["places"]}  # type: ignore[attr-defined]
    assert places[("set-epoch", None)]["questions"] == 2
    assert places[("set-epoch", None)]["learners"] == 2
    lesson = content.localized_lesson(LESSON, "en")
    assert places[("set-epoch", None)]["step_title"] == next(
        step.title for step in lesson.steps if step.id == "set-epoch"
    )
    assert places[(None, EXERCISE)]["questions"] == 3
    assert places[(None, EXERCISE)]["learners"] == 2
    assert report["places"][0]["exercise"] == EXERCISE  # type: ignore[index]  # most asked first
    checks = {c["check_id"]: c for c in report["checks"]}  # type: ignore[attr-defined]
    assert set(checks) == {"sampler.set_epoch", "ckpt.rank0_only"}
    assert checks["sampler.set_epoch"]["questions"] == 2
    assert checks["sampler.set_epoch"]["why_questions"] == 1
    assert checks["sampler.set_epoch"]["learners"] == 2
    assert checks["ckpt.rank0_only"]["questions"] == 1
    assert checks["ckpt.rank0_only"]["why_questions"] == 0  # the button named a passed check


def test_recent_questions_show_learners_by_pseudonym_only(
    client: TestClient, instructor_auth: dict[str, str], asked: dict[str, User]
) -> None:
    report = struggles(client, instructor_auth, recent=3)
    recent = report["recent"]
    assert [item["question"] for item in recent] == [  # type: ignore[attr-defined]
        "Same shuffle twice??",
        "Why two files?",
        "Why did this fail: Each epoch reshuffles the data?",
    ]
    names = [item["learner"] for item in recent]  # type: ignore[attr-defined]
    assert names[1] == names[2] != names[0]  # one learner, one pseudonym
    shown = str(report)
    for user in asked.values():
        assert user.display_name not in shown and user.email not in shown
        assert str(user.id) not in shown
    why = recent[2]  # type: ignore[index]
    assert why["check_id"] == "sampler.set_epoch"
    assert why["failed_checks"] == ["sampler.set_epoch"]
    assert recent[0]["check_id"] is None  # type: ignore[index]


def test_the_report_speaks_the_instructors_language_and_filters(
    client: TestClient, instructor_auth: dict[str, str], asked: dict[str, User]
) -> None:
    report = struggles(client, {**instructor_auth, "Accept-Language": "tr"})
    checks = {c["check_id"]: c for c in report["checks"]}  # type: ignore[attr-defined]
    turkish = render("title.sampler.set_epoch", "", {}, "tr")
    assert turkish and checks["sampler.set_epoch"]["title"] == turkish
    assert report["recent"][0]["learner"].startswith("Öğrenci ")  # type: ignore[index]
    assert struggles(client, instructor_auth, lesson_id="syncbn-sharded-state")["questions"] == 0
    assert struggles(client, instructor_auth, lesson_id=LESSON)["questions"] == 5


def test_old_questions_leave_the_period(
    client: TestClient,
    session: Session,
    instructor_auth: dict[str, str],
    asked: dict[str, User],
) -> None:
    rows = session.scalars(select(CoachExchange)).all()
    for row in rows[:2]:
        row.created_at = datetime.now(UTC) - timedelta(days=40)
    session.flush()
    assert struggles(client, instructor_auth)["questions"] == 3
    assert struggles(client, instructor_auth, days=60)["questions"] == 5


def test_learners_and_visitors_are_refused(
    client: TestClient, auth: dict[str, str], asked: dict[str, User]
) -> None:
    refused = client.get("/api/v1/coach/struggles", headers=auth)
    assert refused.status_code == 403
    assert refused.json()["code"] == "instructors_only"
    assert client.get("/api/v1/coach/struggles").status_code == 401
    page = client.get("/instructor/coach", headers={**auth, "Accept": "text/html"})
    assert page.status_code == 404
    assert "Mallory" not in page.text and "set_epoch" not in page.text
    visitor = client.get("/instructor/coach", follow_redirects=False)
    assert visitor.status_code == 303
    assert visitor.headers["location"] == "/login?next=/instructor/coach"


def test_a_learner_signed_in_in_the_browser_gets_the_404_page(client: TestClient) -> None:
    browser_sign_up(client)  # the session cookie: the page's header reads the learner
    page = client.get("/instructor/coach", headers={"Accept": "text/html"})
    assert page.status_code == 404
    assert "Where learners struggle" not in page.text


def test_a_check_id_needs_a_submission(client: TestClient, auth: dict[str, str]) -> None:
    payload = {"question": "Why?", "lesson_id": LESSON, "check_id": "sampler.set_epoch"}
    assert client.post("/api/v1/coach", json=payload, headers=auth).status_code == 422


def test_the_page_shows_the_report(
    client: TestClient, instructor_auth: dict[str, str], asked: dict[str, User]
) -> None:
    page = client.get("/instructor/coach?locale=pt-BR", headers=instructor_auth)
    assert page.status_code == 200
    assert page.headers["content-language"] == "pt-BR"
    assert "Onde os alunos têm dificuldade" in page.text
    assert 'data-check="sampler.set_epoch"' in page.text
    assert "Same shuffle twice??" in page.text
    assert "Mallory" not in page.text


def test_the_struggles_are_in_the_openapi_document(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/api/v1/coach/struggles"]["get"]
    assert {"200", "401", "403", "422"} <= set(operation["responses"])
    assert {p["name"] for p in operation["parameters"]} == {"lesson_id", "days", "recent", "locale"}


@pytest.fixture
def committed_database(committed_url: str) -> Iterator[str]:
    engine = create_engine(committed_url)
    with Session(engine) as session, session.begin():
        create_user(session, email="ada@example.org")
    engine.dispose()
    yield committed_url


def role_command(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RDV_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "app", "role", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def role_of(url: str, email: str) -> str:
    engine = create_engine(url)
    with Session(engine) as session:
        role = session.scalars(select(User.role).where(User.email == email)).one()
    engine.dispose()
    return role


def test_the_role_command_makes_an_instructor_and_a_learner_again(
    committed_database: str,
) -> None:
    assert role_of(committed_database, "ada@example.org") == LEARNER  # every account starts so
    made = role_command(committed_database, "ADA@example.org", "instructor")
    assert made.returncode == 0, made.stderr
    assert role_of(committed_database, "ada@example.org") == INSTRUCTOR
    back = role_command(committed_database, "ada@example.org", "learner")
    assert back.returncode == 0, back.stderr
    assert role_of(committed_database, "ada@example.org") == LEARNER
    missing = role_command(committed_database, "nobody@example.org", "instructor")
    assert missing.returncode == 1
    assert "nobody@example.org" in missing.stderr
    wrong = role_command(committed_database, "ada@example.org", "admin")
    assert wrong.returncode == 2


def test_a_question_about_a_run_counts_once_not_under_every_failed_check() -> None:
    """Issue 38: a question about a run that failed two checks counted under both, so both fsdp
    checks showed 7 and hang.pg_timeout 2 though nobody asked about it."""
    from types import SimpleNamespace

    from app.coach.struggles import _checks

    exercise = "syncbn-sharded-state/fsdp-reshard"
    failed = [
        {"id": "fsdp.rank0_gathers", "title": "Rank 0 gathers"},
        {"id": "fsdp.optimizer_resumed", "title": "Optimizer resumed"},
    ]
    one, two = uuid.uuid4(), uuid.uuid4()
    rows = [
        SimpleNamespace(exercise=exercise, failed_checks=failed, check_id=None, user_id=one),
        SimpleNamespace(exercise=exercise, failed_checks=failed, check_id=None, user_id=one),
        SimpleNamespace(
            exercise=exercise, failed_checks=failed, check_id="fsdp.optimizer_resumed", user_id=two
        ),
    ]
    checks = {c.check_id: c for c in _checks(rows, "en")}  # type: ignore[arg-type]
    assert sum(c.questions for c in checks.values()) == len(rows)
    assert checks["fsdp.rank0_gathers"].questions == 2  # the run's first failed check
    assert checks["fsdp.rank0_gathers"].learners == 1
    assert checks["fsdp.optimizer_resumed"].questions == 1  # the one its button named
    assert checks["fsdp.optimizer_resumed"].why_questions == 1
