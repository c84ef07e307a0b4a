"""The merge rules as pure functions: any order, any duplication, the same state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from app.learning.merge import StoredEvent, apply_event, apply_exercise_result, empty_state

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STEPS = ["a", "b", "c", "d"]


def _event(i: int, kind: str, step: str, seconds: int, **payload: object) -> StoredEvent:
    body: dict[str, object] = {"step_id": step, **payload}
    if kind == "quiz_answered":
        body = {
            "question_id": step,
            "choice": payload.get("choice", "x"),
            "correct": payload.get("correct", False),
        }
    if kind == "quiz_completed":
        body = {"score": seconds % 5, "max_score": 4}
    return StoredEvent(f"e{i}", kind, "lesson", T0 + timedelta(seconds=seconds), body)


events_strategy = st.lists(
    st.builds(
        lambda kind, step, seconds, correct: (kind, step, seconds, correct),
        st.sampled_from(
            ["step_seen", "step_completed", "position", "quiz_answered", "quiz_completed"]
        ),
        st.sampled_from(STEPS),
        st.integers(0, 5),  # few distinct times: plenty of ties
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
).map(
    lambda items: [
        _event(i, kind, step, seconds, correct=correct, choice="yes" if correct else "no")
        for i, (kind, step, seconds, correct) in enumerate(items)
    ]
)


def _fold(events: list[StoredEvent]) -> dict[str, object]:
    state = empty_state()
    for event in events:
        state = apply_event(state, event)
    return state


@settings(max_examples=200, deadline=None)
@given(events=events_strategy, data=st.data())
def test_order_and_duplicates_do_not_matter(events: list[StoredEvent], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(events))
    repeated = data.draw(st.lists(st.sampled_from(events), max_size=6))
    assert _fold(list(shuffled) + repeated) == _fold(events)


def test_union_max_and_latest_position() -> None:
    state = _fold(
        [
            _event(1, "step_completed", "a", 10),
            _event(2, "position", "c", 30),
            _event(3, "position", "b", 20),  # older: does not move the learner back
            _event(4, "step_completed", "b", 5),
            _event(5, "quiz_completed", "", 3),
            _event(6, "quiz_completed", "", 1),
        ]
    )
    assert state["completed_steps"] == ["a", "b"]
    assert state["seen_steps"] == ["a", "b", "c"]
    assert state["last_step"] == "c"
    assert state["quiz"]["best_score"] == 3  # type: ignore[index]


def test_position_ties_are_broken_by_event_id_the_same_way_everywhere() -> None:
    x = StoredEvent("device-a-7", "position", "lesson", T0, {"step_id": "a"})
    y = StoredEvent("device-b-1", "position", "lesson", T0, {"step_id": "b"})
    assert _fold([x, y])["last_step"] == _fold([y, x])["last_step"] == "b"


def test_exercise_results_count_attempts_and_keep_the_best() -> None:
    state = empty_state()
    for status, passed, seconds in (("fail", 7, 1), ("pass", 12, 2), ("fail", 3, 3)):
        state = apply_exercise_result(
            state,
            exercise_id="l/ex",
            status=status,
            passed_checks=passed,
            total_checks=12,
            at=T0 + timedelta(seconds=seconds),
        )
    entry = state["exercises"]["l/ex"]
    assert entry["attempts"] == 3
    assert entry["passed"] is True
    assert (entry["best_status"], entry["best_passed_checks"]) == ("pass", 12)
    assert entry["last_status"] == "fail"
