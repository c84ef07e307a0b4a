"""What the model is told about a really graded run, and the check on what it answers."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.coach.guard import SolutionGuard
from app.content import service as content
from grader.i18n import localize_check
from tests.coach.conftest import EXERCISE, GradedFactory, ask_about, run_of
from tests.coach.fake_llm import FakeModel
from tests.coach.test_api import sse_events

CASE = "bug_save_on_every_rank"
TURKISH_ANSWER = (
    "Kaydeden satırı her rank çalıştırıyor, bu yüzden iki rank da aynı dosyaya yazdı [1].\n"
    "Bu satırı yalnızca rank 0 için çalışacak bir koşulun içine alın.\n"
)


def test_the_prompt_carries_question_code_evidence_steps_and_rules_never_the_solution(
    client: TestClient, auth: dict[str, str], graded: GradedFactory, with_model: FakeModel
) -> None:
    submission = graded(CASE)
    question = "Neden iki rank da checkpoint yazdı?"
    with_model.answer = TURKISH_ANSWER
    assert ask_about(client, auth, submission.id, "tr", question)["provider"] == "llm"
    system, user = (message["content"] for message in with_model.requests[-1]["messages"])
    assert "Answer in Türkçe" in system
    assert "Never write out a complete program" in system
    assert "Neden iki rank da checkpoint yazdı?" in user
    for line in submission.code.splitlines():
        if line.strip():
            assert line in user  # the learner's whole program, numbered
    _, result = run_of(CASE)
    for check in result["checks"]:  # type: ignore[union-attr]
        if check["status"] == "fail":
            assert f"Failed check {check['id']}" in user
            assert localize_check(check, "tr")["message"] in user  # in the learner's language
    assert "Lesson steps:\n[1] " in user
    info = content.get_exercise(EXERCISE)
    solution = info.solution_path.read_text()
    guard = SolutionGuard.for_exercise(info.solution_path, info.starter_code, submission.code)
    assert guard is not None and guard.telling and not guard.leaked_lines(user)
    assert solution not in user


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.usefixtures("stream_sessions")
def test_an_answer_holding_a_solution_line_is_not_shown(
    client: TestClient,
    auth: dict[str, str],
    graded: GradedFactory,
    with_model: FakeModel,
    streamed: bool,
) -> None:
    submission = graded(CASE)
    info = content.get_exercise(EXERCISE)
    guard = SolutionGuard.for_exercise(info.solution_path, info.starter_code, submission.code)
    assert guard is not None
    solution_lines = info.solution_path.read_text().splitlines()
    leaked = next(
        line.strip() for line in solution_lines if guard.leaked_lines(line) and "#" not in line
    )
    with_model.answer = f"Here is the fix [1]:\n\n    {leaked}\n\nand more.\n"
    headers = {**auth, "Accept": "text/event-stream"} if streamed else auth
    answered = client.post(
        "/api/v1/coach",
        json={
            "question": "Just give me the code",
            "lesson_id": "ddp-fundamentals",
            "submission_id": str(submission.id),
        },
        headers=headers,
    )
    if streamed:
        events = sse_events(answered.text)
        shown = "".join(str(data.get("text", "")) for kind, data in events if kind == "delta")
        assert [kind for kind, _ in events][-2:] == ["reset", "done"]
        final = events[-1][1]
    else:
        shown, final = "", answered.json()
    assert final["provider"] == "builtin"
    assert leaked not in shown and leaked not in str(final["answer"])


def test_an_answer_in_another_language_than_the_question_is_not_shown(
    client: TestClient, auth: dict[str, str], graded: GradedFactory, with_model: FakeModel
) -> None:
    submission = graded(CASE)
    # The fake model answers in English; the question is Turkish.
    answered = ask_about(client, auth, submission.id, "tr", "Neden iki rank da checkpoint yazdı?")
    assert answered["provider"] == "builtin"
    assert "Kaydet" in str(answered["answer"]) or "kayd" in str(answered["answer"]).lower()


def test_a_question_the_course_does_not_cover_is_not_sent_to_the_model(
    client: TestClient, auth: dict[str, str], graded: GradedFactory, with_model: FakeModel
) -> None:
    submission = graded(CASE)
    answered = ask_about(client, auth, submission.id, "en", "Can you give me a pancake recipe?")
    assert answered["provider"] == "builtin"
    assert str(answered["answer"]).startswith("This course does not cover that")
    assert with_model.requests == []


def test_the_prompt_leads_with_the_clicked_checks_step_text_and_level(
    client: TestClient, auth: dict[str, str], graded: GradedFactory, with_model: FakeModel
) -> None:
    submission = graded("bug_no_ddp_wrap")
    ask_about(client, auth, submission.id, "en", check_id="ddp.in_sync")
    ask_about(client, auth, submission.id, "en", check_id="ddp.in_sync")  # asked again
    system, user = (message["content"] for message in with_model.requests[-1]["messages"])
    assert "Go no further than the coaching level" in system
    evidence = user[user.index("The grader's result") :]
    assert evidence.index("Failed check ddp.in_sync") < evidence.index("Failed check ddp.wrapped")
    assert "coaching level: a pointer" in evidence  # the second question about it
    lesson = content.get_catalog().lessons["ddp-fundamentals"].lesson
    exercise = next(item for item in lesson.exercises if item.id == "train")
    levels = exercise.hint_levels["ddp.in_sync"]
    assert f"the course's text for this level: {levels.pointer.en}" in evidence
    steps = user[user.index("Lesson steps:\n") :]
    assert steps.startswith("Lesson steps:\n[1] ") and f"/{levels.step})" in steps.splitlines()[1]
    step_text = content.localized_lesson("ddp-fundamentals", "en").steps
    body = next(step.body for step in step_text if step.id == levels.step)
    assert body.strip().splitlines()[0] in steps  # the step's own text, not an empty excerpt
