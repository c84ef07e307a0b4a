"""The order in which a learner sees a question's choices.

Each learner gets the choices of every question in an order of their own: the same on every
visit, on the page, in the no-JavaScript form and in the API, and different from other learners'
orders, so the answer's position teaches nothing. Visitors share one order. Answers stay checked
by choice id, so an app that stored an answer offline sends the same id whatever order it showed.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from app.content.localized import LocalizedLesson, LocalizedQuestion

# The seed of everyone who is not signed in: one stable order, the same for every visitor.
VISITOR_SEED = "visitor"


def choice_order(seed: str, question_id: str, choice_ids: list[str]) -> list[str]:
    """`choice_ids` in this learner's order: sorted by a hash of (seed, question, choice)."""

    def key(choice_id: str) -> bytes:
        return hashlib.sha256(f"{seed}\x00{question_id}\x00{choice_id}".encode()).digest()

    return sorted(choice_ids, key=key)


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x00".join(parts).encode()).digest()


def _answers(lesson_id: str) -> dict[str, str]:
    """The right choice of each of the lesson's questions (none for a lesson not in the catalog)."""
    from app.content import service  # the catalog; imported late: the service builds lessons

    loaded = service.get_catalog().lessons.get(lesson_id)
    return {} if loaded is None else {q.id: q.answer for q in loaded.lesson.quiz}


def _visitor_orders(lesson_id: str, quiz: list[LocalizedQuestion]) -> dict[str, list[str]]:
    """The visitors' order of each question: the right choice at the position used least so far
    in this lesson (ties broken by a hash), so no position holds the answer more often than
    another by more than one; the other choices in the visitor seed's hash order."""
    answers = _answers(lesson_id)
    used: Counter[int] = Counter()
    orders: dict[str, list[str]] = {}
    for question in quiz:
        ids = [choice.id for choice in question.choices]
        answer = answers.get(question.id)
        order = choice_order(VISITOR_SEED, question.id, ids)
        if answer not in ids:
            orders[question.id] = order
            continue
        slot = min(
            range(len(ids)),
            key=lambda p: (used[p], _digest(VISITOR_SEED, lesson_id, question.id, str(p))),
        )
        used[slot] += 1
        others = [i for i in order if i != answer]
        orders[question.id] = [*others[:slot], answer, *others[slot:]]
    return orders


def shuffled_for(lesson: LocalizedLesson, seed: str) -> LocalizedLesson:
    """A copy of `lesson` with every question's choices in the order of `seed`'s learner.

    The ETag covers the order too, so a client's cached copy of another learner's order (a shared
    device) is never answered with 304.
    """
    quiz = []
    orders = []
    visitors = _visitor_orders(lesson.id, lesson.quiz) if seed == VISITOR_SEED else {}
    for question in lesson.quiz:
        by_id = {choice.id: choice for choice in question.choices}
        order = visitors.get(question.id) or choice_order(seed, question.id, list(by_id))
        orders.append(f"{question.id}={','.join(order)}")
        quiz.append(question.model_copy(update={"choices": [by_id[i] for i in order]}))
    digest = hashlib.sha256(f"{lesson.etag}\x00{';'.join(orders)}".encode()).hexdigest()
    return lesson.model_copy(update={"quiz": quiz, "etag": f'"{digest[:32]}"'})


def learner_seed(learner_id: object | None) -> str:
    """The seed of a signed-in learner (their id), or the visitors' shared seed."""
    return VISITOR_SEED if learner_id is None else str(learner_id)
