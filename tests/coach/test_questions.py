"""The built-in coach answers the question that was asked (both databases), on runs the real grader
failed: the clicked check first, escalation when asked again, a concept with its run, a line of the
run, "give me the answer", off-topic, the language of the question, the failure mode the run
showed."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from app.content import service as content
from app.i18n import translate
from grader.i18n import localize_check
from tests.coach.conftest import RUNS, GradedFactory, ask_about

LESSON = "ddp-fundamentals"
NOT_COVERED = (
    "This course does not cover that: it teaches distributed training with PyTorch (DDP, "
    "torchrun, collectives, sharded state). Ask about one of those, or about your own run."
)


def levels_of(check_id: str) -> object:
    source = content.get_catalog().lessons[LESSON]
    exercise = next(item for item in source.lesson.exercises if item.id == "train")
    return exercise.hint_levels[check_id]


def failed(case: str) -> list[dict[str, object]]:
    result = json.loads((RUNS / case / "result.json").read_text())
    return [check for check in result["checks"] if check["status"] == "fail"]


def test_the_clicked_check_comes_first_and_the_others_get_a_line_each(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    submission = graded("bug_no_ddp_wrap")
    first, second = failed("bug_no_ddp_wrap")
    text = str(ask_about(client, auth, submission.id, check_id=str(second["id"]))["answer"])
    assert text.index(f"### {second['title']}") < text.index(str(first["title"]))
    assert text.count("### ") == 1  # one check explained in full
    assert "Here is the one you asked about." in text
    other = text[text.index("The other failed checks:") :]
    assert f"**{first['title']}**" in other and str(first["message"]) in other
    assert "more checks failed" not in text
    unclicked = str(ask_about(client, auth, submission.id)["answer"])
    assert unclicked.index(f"### {first['title']}") < unclicked.index(str(second["title"]))


def test_asking_again_about_the_same_check_moves_on_a_level(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    submission = graded("bug_no_set_epoch")
    levels = levels_of("sampler.set_epoch")
    answers = [
        str(ask_about(client, auth, submission.id, "tr", check_id="sampler.set_epoch")["answer"])
        for _ in range(4)
    ]
    assert levels.nudge.get("tr") in answers[0]
    assert levels.pointer.get("tr") in answers[1] and levels.nudge.get("tr") not in answers[1]
    assert levels.fix.get("tr") in answers[2] and levels.pointer.get("tr") not in answers[2]
    assert levels.fix.get("tr") in answers[3]  # the fix is as far as it goes
    # A new submission starts the other checks afresh: levels are counted per check.
    crash = graded("bug_crash_on_rank1")
    assert levels_of("run.completed").nudge.en in str(ask_about(client, auth, crash.id)["answer"])


def test_give_me_the_answer_is_a_plain_no_and_the_next_level(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    submission = graded("bug_save_on_every_rank")
    text = str(ask_about(client, auth, submission.id, question="Just give me the answer")["answer"])
    assert text.startswith("The coach will not write the solution for you")
    assert levels_of("ckpt.rank0_only").pointer.en in text
    assert levels_of("ckpt.rank0_only").nudge.en not in text
    pt = ask_about(client, auth, submission.id, "pt-BR", "Me dá a resposta certa")
    assert str(pt["answer"]).startswith("O coach não vai escrever a solução por você")


def test_a_concept_question_with_a_run_gets_the_lesson_and_one_sentence_on_the_run(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    submission = graded("bug_no_distributed_sampler")
    answer = ask_about(client, auth, submission.id, question="What is a DistributedSampler for?")
    text = str(answer["answer"])
    assert answer["sources"][0]["step_id"] == "distributed-sampler"  # type: ignore[index]
    assert text.startswith("**DistributedSampler**: ")
    assert "What happened" not in text  # not the failure report
    (check,) = failed("bug_no_distributed_sampler")
    assert f"In your run the check “{check['title']}” failed (rank 1, line 35): " in text
    assert check["message"] in text  # what the run showed, not "press the button"
    pt = ask_about(client, auth, submission.id, "pt-BR", "O que é all_reduce?")
    assert str(pt["answer"]).startswith("**all-reduce**: ")
    assert "Na sua execução a verificação" in str(pt["answer"])


def test_what_a_line_of_the_run_means_quotes_that_line_and_the_learners_frames_once(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    submission = graded("bug_barrier_only_on_rank0")
    text = str(
        ask_about(client, auth, submission.id, question="What does rank 0 line 45 mean?")["answer"]
    )
    line = submission.code.splitlines()[44].strip()
    assert text.startswith(f"Line 45 of your program:\n\n```python\n{line}\n```")
    assert "What the grader saw there:" in text
    assert text.count("Where the rank was") == 1
    assert 'File "main.py", line 45' in text
    assert "site-packages" not in text and ".venv" not in text and "/__w/" not in text
    assert "Your run did not crash: it ran out of time" in text  # the case the run showed


def test_off_topic_questions_are_told_so_never_given_unrelated_steps(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    submission = graded("bug_no_set_epoch")
    for question, locale in (
        ("Can you give me a pancake recipe?", "en"),
        ("What is the capital of Australia?", "en"),
        ("Qual é a capital da Austrália?", "pt-BR"),
        ("Avustralya'nın başkenti neresi?", "tr"),
    ):
        answer = ask_about(client, auth, submission.id, locale, question)
        assert str(answer["answer"]) == translate(locale, NOT_COVERED), question
        assert answer["sources"] == [], question
    slurm = ask_about(client, auth, submission.id, question="How do I launch this with sbatch?")
    assert str(slurm["answer"]).startswith("This course does not teach Slurm.")
    assert [source["step_id"] for source in slurm["sources"]] == ["multi-node"]  # type: ignore[union-attr]


def test_a_turkish_question_on_an_english_page_is_answered_in_turkish_and_says_so(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    submission = graded("bug_no_set_epoch")
    answered = client.post(
        "/api/v1/coach?locale=en",
        json={
            "question": "Bu neden başarısız oldu?",
            "lesson_id": LESSON,
            "submission_id": str(submission.id),
        },
        headers=auth,
    )
    assert answered.status_code == 200
    assert answered.headers["content-language"] == "tr"
    text = answered.json()["answer"]
    assert text.startswith("Türkçe sordunuz; koç da bu dilde yanıtlıyor (sayfa İngilizce).")
    (check,) = failed("bug_no_set_epoch")
    assert str(localize_check(check, "tr")["message"]) in text
    assert levels_of("sampler.set_epoch").nudge.get("tr") in text
    same = ask_about(client, auth, submission.id, "tr", "Bu neden başarısız oldu?")
    assert not str(same["answer"]).startswith("Türkçe sordunuz")  # no note on a Turkish page


def test_the_explanation_follows_the_failure_mode_the_run_showed(
    client: TestClient, auth: dict[str, str], graded: GradedFactory
) -> None:
    missing = str(ask_about(client, auth, graded("bug_hardcoded_num_replicas_2").id)["answer"])
    assert "samples that no rank trained on (not samples seen twice)" in missing
    assert "their shards overlap" not in missing
    overlap = str(ask_about(client, auth, graded("bug_no_distributed_sampler").id)["answer"])
    assert "their shards overlap" in overlap
    assert "no rank trained on" not in overlap
    pt = str(ask_about(client, auth, graded("bug_hardcoded_num_replicas_2").id, "pt-BR")["answer"])
    assert "amostras com que nenhum rank treinou" in pt
    assert "e mais 66 intervalos" in pt and "more ranges" not in pt
