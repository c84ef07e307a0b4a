"""The built-in coach on golden programs the real grader failed (tests/coach/runs/<case> holds the
Result `python -m grader grade --json` gave each): the first failed check explained from its
evidence in en, tr and pt-BR and the others a line each, the lesson step linked, escalation per
check over attempts, and never a line of the solution file."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.coach.guard import SolutionGuard
from app.content import service as content
from app.i18n import translate
from grader.i18n import LOCALES as SUPPORTED_LOCALES
from grader.i18n import TRANSLATED_LOCALES, localize_check
from tests.coach.conftest import EXERCISE, RUNS, GradedFactory, ask_about, run_of

CASES = sorted(path.name for path in RUNS.iterdir() if (path / "result.json").is_file())
LOCALES = SUPPORTED_LOCALES


def failed_checks(case: str) -> list[dict[str, object]]:
    _, result = run_of(case)
    checks = result["checks"]
    assert isinstance(checks, list)
    return [check for check in checks if check["status"] == "fail"]


def test_the_stored_runs_are_real_failures() -> None:
    assert len(CASES) >= 3
    for case in CASES:
        _, result = run_of(case)
        assert result["status"] == "fail" and failed_checks(case), case


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("locale", LOCALES)
def test_each_failed_check_is_explained_from_its_evidence(
    client: TestClient, auth: dict[str, str], graded: GradedFactory, case: str, locale: str
) -> None:
    submission = graded(case)
    answer = ask_about(client, auth, submission.id, locale)
    text = str(answer["answer"])
    assert answer["provider"] == "builtin"
    code_lines = submission.code.splitlines()
    for number, check in enumerate(failed_checks(case)):
        shown = localize_check(check, locale)  # as the submissions API shows it in `locale`
        assert str(shown["title"]) in text
        # What happened, as the grader saw it, in the learner's language (as the API shows it).
        assert str(shown["message"]) in text
        if check["rank"] is not None and check["line"] is not None:
            where = translate(locale, "rank {rank}, line {line}").format(**check)
            assert where in text
            learner_line = code_lines[int(str(check["line"])) - 1].strip()
            if number == 0:  # the first is explained in full, with the learner's own line
                assert learner_line and learner_line in text
    for heading in ("What happened", "What to change first"):
        assert translate(locale, heading) in text
    assert answer["sources"], "each explained check links the step that teaches it"
    for source in answer["sources"]:  # type: ignore[attr-defined]
        assert f"]({source['url']})" in text


@pytest.mark.parametrize("case", CASES)
def test_the_answer_never_holds_a_line_of_the_solution(
    client: TestClient, auth: dict[str, str], graded: GradedFactory, case: str
) -> None:
    info = content.get_exercise(EXERCISE)
    for _attempt in range(4):  # up to the worked fix
        submission = graded(case)
        text = str(ask_about(client, auth, submission.id)["answer"])
    guard = SolutionGuard.for_exercise(info.solution_path, info.starter_code, submission.code)
    assert guard is not None and guard.telling
    assert guard.leaked_lines(text) == []


def test_hints_escalate_per_submission_only_when_asked_again(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    """Failing again does not skip levels: each submission starts with the nudge, and only
    asking again about the same check of it moves on."""
    exercise = next(
        item
        for item in content.get_catalog().lessons["ddp-fundamentals"].lesson.exercises
        if item.id == "train"
    )
    levels = exercise.hint_levels["sampler.set_epoch"]
    firsts = [
        str(ask_about(client, auth, graded("bug_no_set_epoch").id, "pt-BR")["answer"])
        for _attempt in range(3)
    ]
    assert all(levels.nudge.get("pt-BR") in text for text in firsts)
    submission = graded("bug_no_set_epoch")
    seen = [str(ask_about(client, auth, submission.id, "pt-BR")["answer"]) for _ in range(4)]
    assert levels.nudge.get("pt-BR") and levels.nudge.get("pt-BR") in seen[0]
    assert levels.pointer.get("pt-BR") and levels.pointer.get("pt-BR") in seen[1]
    assert levels.fix.get("pt-BR") and levels.fix.get("pt-BR") in seen[2]
    assert levels.fix.get("pt-BR") in seen[3] and seen[3] != seen[2]
    assert levels.nudge.get("pt-BR") not in seen[1] and levels.pointer.get("pt-BR") not in seen[2]


def test_another_learners_failures_do_not_escalate_mine(
    client: TestClient,
    auth: dict[str, str],
    graded: GradedFactory,
    session: object,
) -> None:
    from tests.auth.factories import create_user

    other = create_user(session, name="Mallory")  # type: ignore[arg-type]
    for _attempt in range(3):
        graded("bug_no_set_epoch", user=other)
    mine = graded("bug_no_set_epoch")
    text = str(ask_about(client, auth, mine.id, "en")["answer"])
    assert "First a nudge" in text


def test_a_passing_run_has_nothing_to_explain_and_points_at_steps(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    submission = graded(CASES[0])
    submission.result = {**submission.result, "status": "pass", "checks": []}  # type: ignore[dict-item]
    answer = ask_about(client, auth, submission.id, "tr")
    assert str(answer["answer"]).startswith(
        translate("tr", "Every check of this submission passed: there is no failure to explain.")
    )


@pytest.mark.parametrize("locale", TRANSLATED_LOCALES)
def test_the_graders_evidence_is_quoted_in_the_learners_language(
    client: TestClient, auth: dict[str, str], graded: GradedFactory, locale: str
) -> None:
    submission = graded("bug_no_set_epoch")
    (check,) = failed_checks("bug_no_set_epoch")
    nested = check["params"]["message"]  # type: ignore[index]
    assert str(nested["id"]).startswith("sampler.")  # type: ignore[index]
    text = str(ask_about(client, auth, submission.id, locale)["answer"])
    translated = str(localize_check(check, locale)["message"])
    assert translated != check["message"]
    assert translated in text
    assert str(check["message"]) not in text
    assert str(nested["en"]) not in text  # type: ignore[index]
    assert "Rank 0 trained on the same shuffle" not in text
