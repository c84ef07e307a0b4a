"""How progress events merge into a lesson's state. Pure functions, no database.

The merge is a small CRDT, so two devices that were offline end in the same state whatever order
their events arrive in, and applying an event twice changes nothing:
- seen and completed steps, questions ever answered correctly: set union;
- best quiz score: max;
- last position, and the latest answer to each question: the event with the greatest
  (`at`, event id) wins. The id breaks ties between events stamped with the same time, so every
  server orders them the same way.
Exercise results (recorded by the grader, not sent by clients) count attempts and keep the best.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

LessonState = dict[str, Any]

STATUS_RANK = {"error": 0, "fail": 1, "pass": 2}


@dataclass(frozen=True)
class StoredEvent:
    """A validated event as stored: `payload` holds the type's own fields."""

    client_id: str
    type: str
    lesson_id: str
    at: datetime
    payload: dict[str, Any]


def empty_state() -> LessonState:
    return {
        "seen_steps": [],
        "completed_steps": [],
        "last_step": None,
        "last_position_at": None,
        "last_position_event": None,
        "quiz": {"answers": {}, "correct_questions": [], "best_score": None, "max_score": None},
        "exercises": {},
    }


def iso(at: datetime) -> str:
    """UTC, fixed width: strings compare in time order."""
    aware = at if at.tzinfo else at.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _add(values: list[str], value: str) -> list[str]:
    return values if value in values else sorted([*values, value])


def _newer(at: str, event_id: str, than_at: str | None, than_id: str | None) -> bool:
    return than_at is None or (at, event_id) > (than_at, than_id or "")


def apply_event(state: LessonState, event: StoredEvent) -> LessonState:
    """The state after `event`; the input is not modified."""
    return apply_events(state, [event])


def apply_events(state: LessonState, events: Iterable[StoredEvent]) -> LessonState:
    """The state after `events` (in any order: the result is the same); the input is kept."""
    new = copy.deepcopy(state)
    for event in events:
        _apply_in_place(new, event)
    return new


def _apply_in_place(new: LessonState, event: StoredEvent) -> None:
    at = iso(event.at)
    step_id = event.payload.get("step_id")
    if event.type in ("step_seen", "step_completed", "position") and step_id:
        new["seen_steps"] = _add(new["seen_steps"], step_id)
    if event.type == "step_completed" and step_id:
        new["completed_steps"] = _add(new["completed_steps"], step_id)
    if event.type == "position" and _newer(
        at, event.client_id, new["last_position_at"], new["last_position_event"]
    ):
        new["last_step"] = step_id
        new["last_position_at"] = at
        new["last_position_event"] = event.client_id
    if event.type == "quiz_answered":
        _apply_answer(new["quiz"], event, at)
    if event.type == "quiz_completed":
        quiz = new["quiz"]
        score = int(event.payload["score"])
        quiz["best_score"] = score if quiz["best_score"] is None else max(quiz["best_score"], score)
        max_score = int(event.payload["max_score"])
        quiz["max_score"] = max(quiz["max_score"] or 0, max_score)


def _apply_answer(quiz: dict[str, Any], event: StoredEvent, at: str) -> None:
    question_id = str(event.payload["question_id"])
    correct = bool(event.payload.get("correct"))
    if correct:
        quiz["correct_questions"] = _add(quiz["correct_questions"], question_id)
    previous = quiz["answers"].get(question_id)
    if previous is None or _newer(at, event.client_id, previous["at"], previous["event"]):
        quiz["answers"][question_id] = {
            "choice": event.payload["choice"],
            "correct": correct,
            "at": at,
            "event": event.client_id,
        }


def apply_exercise_result(
    state: LessonState,
    *,
    exercise_id: str,
    status: str,
    passed_checks: int,
    total_checks: int,
    at: datetime,
) -> LessonState:
    """Count an attempt and keep the best result (pass beats fail beats error, then checks)."""
    new = copy.deepcopy(state)
    previous = new["exercises"].get(exercise_id)
    entry = {
        "attempts": 1,
        "passed": status == "pass",
        "best_status": status,
        "best_passed_checks": passed_checks,
        "total_checks": total_checks,
        "last_status": status,
        "last_attempt_at": iso(at),
    }
    if previous is not None:
        entry["attempts"] = previous["attempts"] + 1
        entry["passed"] = previous["passed"] or entry["passed"]
        mine = (STATUS_RANK.get(status, 0), passed_checks)
        best = (STATUS_RANK.get(previous["best_status"], 0), previous["best_passed_checks"])
        if best >= mine:
            entry["best_status"] = previous["best_status"]
            entry["best_passed_checks"] = previous["best_passed_checks"]
            entry["total_checks"] = previous["total_checks"]
        if previous["last_attempt_at"] > entry["last_attempt_at"]:
            entry["last_status"] = previous["last_status"]
            entry["last_attempt_at"] = previous["last_attempt_at"]
    new["exercises"][exercise_id] = entry
    return new
