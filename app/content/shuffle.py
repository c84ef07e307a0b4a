"""The order in which a learner sees a question's choices.

Each learner gets the choices of every question in an order of their own: the same on every
visit, on the page, in the no-JavaScript form and in the API, and different from other learners'
orders, so the answer's position teaches nothing. Visitors share one order. Answers stay checked
by choice id, so an app that stored an answer offline sends the same id whatever order it showed.
"""

from __future__ import annotations

import hashlib

from app.content.localized import LocalizedLesson

# The seed of everyone who is not signed in: one stable order, the same for every visitor.
VISITOR_SEED = "visitor"


def choice_order(seed: str, question_id: str, choice_ids: list[str]) -> list[str]:
    """`choice_ids` in this learner's order: sorted by a hash of (seed, question, choice)."""

    def key(choice_id: str) -> bytes:
        return hashlib.sha256(f"{seed}\x00{question_id}\x00{choice_id}".encode()).digest()

    return sorted(choice_ids, key=key)


def shuffled_for(lesson: LocalizedLesson, seed: str) -> LocalizedLesson:
    """A copy of `lesson` with every question's choices in the order of `seed`'s learner.

    The ETag covers the order too, so a client's cached copy of another learner's order (a shared
    device) is never answered with 304.
    """
    quiz = []
    orders = []
    for question in lesson.quiz:
        by_id = {choice.id: choice for choice in question.choices}
        order = choice_order(seed, question.id, list(by_id))
        orders.append(f"{question.id}={','.join(order)}")
        quiz.append(question.model_copy(update={"choices": [by_id[i] for i in order]}))
    digest = hashlib.sha256(f"{lesson.etag}\x00{';'.join(orders)}".encode()).hexdigest()
    return lesson.model_copy(update={"quiz": quiz, "etag": f'"{digest[:32]}"'})


def learner_seed(learner_id: object | None) -> str:
    """The seed of a signed-in learner (their id), or the visitors' shared seed."""
    return VISITOR_SEED if learner_id is None else str(learner_id)
