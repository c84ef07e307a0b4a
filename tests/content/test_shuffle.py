"""The choices' order per learner (`app.content.shuffle`): a permutation, stable for a seed,
different between seeds."""

from __future__ import annotations

import uuid

from app.content import service as content
from app.content.shuffle import VISITOR_SEED, choice_order, learner_seed, shuffled_for

LESSON = "ddp-fundamentals"


def _orders(seed: str) -> list[list[str]]:
    lesson = shuffled_for(content.localized_lesson(LESSON), seed)
    return [[choice.id for choice in question.choices] for question in lesson.quiz]


def test_order_is_a_permutation_of_the_choices() -> None:
    source = content.localized_lesson(LESSON)
    shuffled = shuffled_for(source, "learner-1")
    for before, after in zip(source.quiz, shuffled.quiz, strict=True):
        assert sorted(c.id for c in after.choices) == sorted(c.id for c in before.choices)
        texts = {c.id: c.text for c in before.choices}
        assert all(texts[c.id] == c.text for c in after.choices)


def test_order_is_stable_for_a_learner() -> None:
    seed = str(uuid.uuid4())
    assert _orders(seed) == _orders(seed)
    assert choice_order(seed, "q", ["a", "b", "c"]) == choice_order(seed, "q", ["c", "b", "a"])


def test_orders_differ_between_learners() -> None:
    orders = {str(_orders(str(uuid.uuid4()))) for _ in range(20)}
    assert len(orders) > 10  # 20 learners: a repeat is possible, twenty equal orders are not


def test_some_learner_sees_the_answer_elsewhere_than_first() -> None:
    question_id = content.get_catalog().lessons[LESSON].lesson.quiz[0].id
    firsts = {choice_order(str(n), question_id, ["a", "b", "c"])[0] for n in range(50)}
    assert firsts == {"a", "b", "c"}


def test_the_etag_follows_the_order() -> None:
    source = content.localized_lesson(LESSON)
    seeds = [str(uuid.uuid4()) for _ in range(10)]
    by_order = {str(_orders(s)): shuffled_for(source, s).etag for s in seeds}
    assert len(set(by_order.values())) == len(by_order)
    assert shuffled_for(source, seeds[0]).etag == shuffled_for(source, seeds[0]).etag


def test_visitors_share_one_seed() -> None:
    assert learner_seed(None) == VISITOR_SEED
    learner = uuid.uuid4()
    assert learner_seed(learner) == str(learner) != VISITOR_SEED


def test_the_visitors_order_does_not_favour_the_right_choice() -> None:
    """Issue 38: visitors share one order, which put the right choice first in 4 of lesson 1's 6
    questions. In every lesson, each position holds the right choice as often as any other, give
    or take one."""
    catalog = content.get_catalog()
    for lesson_id, loaded in catalog.lessons.items():
        questions = loaded.lesson.quiz
        if not questions:
            continue
        answers = {q.id: q.answer for q in questions}
        shown = shuffled_for(content.localized_lesson(lesson_id), VISITOR_SEED)
        positions = [[c.id for c in q.choices].index(answers[q.id]) for q in shown.quiz]
        fewest = min(len(q.choices) for q in questions)
        counts = [positions.count(p) for p in range(fewest)]
        assert max(counts) - min(counts) <= 1, (lesson_id, positions)
        assert positions.count(0) <= -(-len(questions) // fewest), (lesson_id, positions)
