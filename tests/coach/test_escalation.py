"""Escalation per submission and check, through the API with the buttons' intents: nudge, then
pointer, then fix only when the learner asks again about the same check; a concept question
never moves it; asking twice never gets the same text; a check that passed is said to have."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.content import service as content
from app.content.schemas import HintLevels
from tests.coach.conftest import GradedFactory

LESSON = "ddp-fundamentals"


def levels_of(check_id: str) -> HintLevels:
    lesson = content.get_catalog().lessons[LESSON].lesson
    exercise = next(item for item in lesson.exercises if item.id == "train")
    return exercise.hint_levels[check_id]


def ask(
    client: TestClient,
    auth: dict[str, str],
    submission_id: object,
    locale: str = "en",
    **body: Any,
) -> str:
    answered = client.post(
        f"/api/v1/coach?locale={locale}",
        json={"lesson_id": LESSON, "submission_id": str(submission_id), **body},
        headers=auth,
    )
    assert answered.status_code == 200, answered.text
    return str(answered.json()["answer"])


def test_a_button_moves_on_only_the_check_it_names_and_concepts_never_do(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    submission = graded("bug_no_ddp_wrap")  # fails ddp.wrapped and ddp.in_sync
    wrapped, in_sync = levels_of("ddp.wrapped"), levels_of("ddp.in_sync")
    first = ask(client, auth, submission.id, "tr", intent="why_failed", check_id="ddp.in_sync")
    assert in_sync.nudge.get("tr") in first
    concept = ask(client, auth, submission.id, "tr", question="DDP nedir?")
    assert in_sync.pointer.get("tr") not in concept
    # The other check has not been asked about: it starts at the nudge.
    other = ask(client, auth, submission.id, "tr", intent="hint", check_id="ddp.wrapped")
    assert wrapped.nudge.get("tr") in other and wrapped.pointer.get("tr") not in other
    second = ask(client, auth, submission.id, "tr", intent="still_stuck", check_id="ddp.in_sync")
    assert in_sync.pointer.get("tr") in second and in_sync.nudge.get("tr") not in second
    typed = ask(
        client, auth, submission.id, "tr", question="Hala anlamadim", check_id="ddp.in_sync"
    )
    assert in_sync.fix.get("tr") in typed
    again = ask(client, auth, submission.id, "tr", intent="still_stuck", check_id="ddp.in_sync")
    assert in_sync.fix.get("tr") in again and again != typed
    assert (
        ask(client, auth, submission.id, "tr", intent="still_stuck", check_id="ddp.in_sync")
        != again
    )


def test_a_free_question_about_a_failure_moves_on_the_check_it_names(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    submission = graded("bug_no_ddp_wrap")
    in_sync = levels_of("ddp.in_sync")
    ask(client, auth, submission.id, question="why did ddp.in_sync fail?")
    text = ask(client, auth, submission.id, question="I still don't get ddp.in_sync")
    assert in_sync.pointer.en in text


def test_still_stuck_asked_first_is_the_pointer_and_the_answer_outright_is_refused(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    submission = graded("bug_no_set_epoch")
    epoch = levels_of("sampler.set_epoch")
    stuck = ask(client, auth, submission.id, "pt-BR", question="ainda não entendi")
    assert epoch.pointer.get("pt-BR") in stuck
    refused = ask(client, auth, submission.id, "pt-BR", question="me passa o código")
    assert "O coach não vai escrever a solução por você" in refused
    assert epoch.fix.get("pt-BR") in refused


def test_asking_about_a_check_that_passed_says_so(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    submission = graded("bug_no_set_epoch")
    text = ask(client, auth, submission.id, intent="why_failed", check_id="sampler.shards")
    assert text.startswith("The check “Each rank trains on its own shard of the data” passed")
    assert "sampler.set_epoch" not in text and "The shuffle changes every epoch" in text
    typed = ask(client, auth, submission.id, "pt-BR", question="Por que sampler.shards falhou?")
    assert "passou nesta execução" in typed
