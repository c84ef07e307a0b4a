"""Every button of the result page, for every check that each exercise's starter (its recorded
Result) and a hand-made run fail, in en, tr and pt-BR: the answer talks about that check in that
run (its message, its line) and never sends the learner back to the button. No torch here: the
Results are stored or made by hand."""

from __future__ import annotations

import pytest

from app.coach.builtin import BuiltinCoach
from app.coach.evidence import gather, line_of_code
from app.coach.index import get_index
from app.coach.intent import BUTTON_INTENTS, from_button
from app.content.service import get_catalog
from app.i18n import SUPPORTED_LOCALES, translate
from grader.contract import Result
from grader.i18n import localize_check
from tests.coach.handmade import Run, exercises, failing_runs, starter_run

RUNS = list(failing_runs())


def answer(run: Run, check_id: str, locale: str, intent: str) -> str:
    lesson = get_catalog().lessons[run.info.lesson_id].lesson
    exercise = next(item for item in lesson.exercises if item.id == run.info.slug)
    evidence = gather(
        exercise_id=run.info.id,
        exercise=exercise,
        code=run.code,
        result=Result.model_validate(run.result),
        failed_attempts=1,
        locale=locale,
    )
    coach = BuiltinCoach(get_index(), locale)
    question = translate(locale, "Why did this fail?")
    return coach.about_run(
        evidence, from_button(intent), question, check_id, asked_check=check_id
    ).markdown


def test_every_exercise_has_a_failing_starter_run_and_a_hand_made_one() -> None:
    infos = exercises()
    assert len(infos) >= 11
    assert {run.info.id for run in RUNS} == {info.id for info in infos}
    assert sum(1 for run in RUNS if run.name.startswith("every-check-")) == len(infos)
    starters = [starter_run(info) for info in infos]
    assert all(run is not None and run.failed() for run in starters), [
        info.id for info, run in zip(infos, starters, strict=True) if run is None
    ]


@pytest.mark.parametrize("locale", SUPPORTED_LOCALES)
@pytest.mark.parametrize("intent", sorted(BUTTON_INTENTS))
def test_each_button_explains_the_check_it_was_pressed_on(locale: str, intent: str) -> None:
    back_to_the_button = translate(locale, "Why did this fail?").rstrip("?")
    asked = 0
    for run in RUNS:
        for check in run.failed():
            text = answer(run, check["id"], locale, intent)
            shown = localize_check(check, locale)
            where = f"{run.name}:{check['id']}:{locale}:{intent}"
            assert shown["message"] in text, where
            assert shown["title"] in text.split("### ", 1)[-1].splitlines()[0], where
            if check.get("line") is not None:
                assert str(check["line"]) in text, where
                mine = line_of_code(run.code, check["line"])
                level_quotes_it = mine is None or mine.strip() in text
                assert level_quotes_it, where
            assert back_to_the_button not in text, where
            asked += 1
    assert asked >= 100
