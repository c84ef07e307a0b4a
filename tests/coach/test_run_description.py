"""Runs described exactly: a rank ended by a signal is a crash, not a timeout; what the coach
quotes of a stack holds no interpreter noise; the grader never calls a step a hair off the mean
"1.01× too small"."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from app.coach.cases import case_of, explanation, learner_frames
from grader.checks.accum import _off_mean

KILLED = (
    "With 2 ranks: Rank 1 was killed by SIGABRT; its output says: [c10d] ProcessGroupGloo "
    "watchdog timeout after 30000 ms. Then rank 0 failed too."
)


@pytest.mark.parametrize("locale", ["en", "tr", "pt-BR"])
def test_a_rank_killed_by_a_signal_is_a_crash_not_a_timeout(locale: str) -> None:
    check = {"id": "run.completed", "message": KILLED, "message_id": "combine.with_ranks"}
    assert case_of(check) == "signal"
    text = explanation("run.completed", "signal", locale)
    assert text and "SIGABRT" in text
    assert case_of({"id": "run.completed", "message": "Rank 0 timed out in all_reduce"}) == (
        "timeout"
    )


def test_faulthandlers_module_list_and_server_paths_are_not_quoted() -> None:
    stack = "\n".join(
        [
            "Fatal Python error: Aborted",
            "",
            "Thread 0x00007f (most recent call first):",
            '  File "/srv/rendezvous/grader/harness/boot.py", line 40 in run',
            '  File "/tmp/sandbox/main.py", line 45 in main',
            "    dist.all_reduce(t)",
            '  File "/srv/venv/lib/python3.11/site-packages/torch/distributed/c10d.py", line 9',
            "Extension modules: numpy._core._multiarray_umath, torch._C, torch._C._dynamo "
            "(total: 22)",
        ]
    )
    quoted = learner_frames(stack)
    assert quoted is not None
    assert 'File "main.py", line 45, in main' in quoted and "dist.all_reduce(t)" in quoted
    for noise in ("Extension modules", "numpy", "harness", "/srv/", "site-packages", "Fatal"):
        assert noise not in quoted


def _replay(ratio: float, **more: Any) -> Any:
    values = {
        "mean_rel_error": abs(ratio - 1) + 0.01,
        "mean_ratio": ratio,
        "clipped": False,
        "carried": False,
        "mean_cosine": 1.0,
    }
    return SimpleNamespace(**{**values, **more})


@pytest.mark.parametrize("ratio", [1.01, 0.99, 1.015])
def test_a_step_a_hair_off_the_mean_is_not_called_divided_again(ratio: float) -> None:
    why = _off_mean(_replay(ratio))
    assert why is not None and "too small" not in str(why)


def test_a_step_divided_once_more_is_still_said_so() -> None:
    why = _off_mean(_replay(0.5))
    assert why is not None and "2× too small" in str(why)


@pytest.mark.parametrize("locale", ["en", "tr", "pt-BR"])
def test_how_could_it_be_faster_says_what_was_observed_and_how_to_measure(locale: str) -> None:
    from app.coach.builtin import BuiltinCoach
    from app.coach.evidence import gather
    from app.coach.index import get_index
    from app.coach.intent import classify
    from app.content.service import get_catalog
    from grader.contract import Result
    from tests.coach.handmade import exercises, starter_run

    info = next(item for item in exercises() if item.slug == "overlap-buckets")
    run = starter_run(info)
    assert run is not None
    lesson = get_catalog().lessons[info.lesson_id].lesson
    evidence = gather(
        exercise_id=info.id,
        exercise=next(item for item in lesson.exercises if item.id == info.slug),
        code=run.code,
        result=Result.model_validate(run.result),
        failed_attempts=1,
        locale=locale,
    )
    question = {
        "en": "How could this be faster?",
        "tr": "Bu nasıl daha hızlı olur?",
        "pt-BR": "como deixo isso mais rápido?",
    }[locale]
    coach = BuiltinCoach(get_index(), locale)
    text = coach.about_run(evidence, classify(question), question, None).markdown
    observed = [check for check in evidence.seen if check.id == "overlap.grad_mean"]
    assert observed and observed[0].message in text  # what the checks saw, quoted
    assert "torch.profiler" in text and "torch.cuda.synchronize()" in text
    alone = coach.answer_question(classify(question), question, info.lesson_id).markdown
    assert "torch.profiler" in alone
