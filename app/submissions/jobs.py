"""A submission's life as a grading job, shared by every backend.

Each function takes the session of one unit of work (the backend's own transaction) and
returns what changed; none of them commits.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.db import as_utc, utcnow
from app.domain_events import Event, Kind, record
from app.submissions import repository as repo
from app.submissions.exercises import SpecLookup
from app.submissions.models import DONE, ERROR, QUEUED, RUNNING, Submission
from grader.contract import Job, Result
from grader.i18n import Message, msg
from grader.queue_protocol import worker_lost

# Kinds of stored events; the grader's own "done" is replaced by ours, written with the result.
STORED_KINDS = ("status", "output", "check")


# The platform errors the web side writes: grader message ids with parameters, translated in
# grader/locales/*/platform.json like the grader's own, stored untranslated and rendered in the
# reader's language when shown (app.submissions.rendering), whichever backend wrote them.
def no_spec(exercise: str) -> Message:
    return msg(
        "platform.no_spec",
        "The exercise “{exercise}” could not be loaded for grading.",
        exercise=exercise,
    )


def grader_stopped(error: object) -> Message:
    return msg(
        "platform.grader_stopped", "The grader stopped unexpectedly: {error}", error=str(error)
    )


def queue_gave_up() -> Message:
    return msg(
        "platform.queue_gave_up",
        "The grading queue gave up on your program after the grading machine stopped. "
        "This is our fault and does not count against you: please submit again.",
    )


def new_owner() -> str:
    """A lease owner token: host, process and a random part (a restarted container reuses pids)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_is_gone(owner: str | None, me: str) -> bool:
    """True when `owner` was a process on this host that no longer runs."""
    if not owner or owner == me:
        return False
    try:
        host, pid_text, _ = owner.split(":", 2)
        pid = int(pid_text)
    except ValueError:
        return False
    my_host, my_pid, _ = me.split(":", 2)
    if host != my_host:
        return False
    if pid == int(my_pid):
        return True  # this pid, another token: an earlier incarnation of this process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def build_job(submission: Submission, spec_for: SpecLookup) -> Job | None:
    spec = spec_for(submission.exercise)
    if spec is None:
        return None
    return Job(
        exercise=submission.exercise,
        code=submission.code,
        spec=spec,
        submission_id=str(submission.id),
        locale=submission.locale,
    )


def claim(session: Session, submission_id: uuid.UUID, owner: str) -> Submission | None:
    """Take a queued submission to run here; None if another runner took it first."""
    if repo.claim(session, submission_id=submission_id, owner=owner, now=utcnow()) != 1:
        return None
    submission = repo.get(session, submission_id)
    if submission is not None:
        session.refresh(submission)
    return submission


def record_events(
    session: Session, submission_id: uuid.UUID, attempt: int, events: Iterable[dict[str, Any]]
) -> int:
    """Append grader events (GradeEvent dicts) in order; returns how many were kept."""
    kept = 0
    for event in events:
        if event.get("kind") not in STORED_KINDS:
            continue
        repo.add_event(
            session,
            submission_id=submission_id,
            attempt=attempt,
            kind=event["kind"],
            rank=event.get("rank"),
            data=event.get("data") or {},
        )
        kept += 1
    return kept


def complete(
    session: Session,
    submission_id: uuid.UUID,
    result: Result,
    *,
    attempt: int,
    owner: str | None,
) -> bool:
    """Store the Result and the final `done` event. False if the submission already ended."""
    submission = repo.get(session, submission_id)
    if submission is None:
        return False
    if submission.started_at is not None and not result.timings_ms.queued:
        queued_ms = (submission.started_at - submission.created_at).total_seconds()
        result.timings_ms.queued = max(0, int(queued_ms * 1000))
    status = ERROR if result.status == "error" else DONE
    payload = result.model_dump(mode="json")
    if (
        repo.finish(
            session, submission_id=submission_id, status=status, result=payload, owner=owner
        )
        != 1
    ):
        return False
    day = as_utc(submission.created_at).date()
    record(session, [Event(Kind.SUBMISSION, submission.user_id, submission.exercise, day)])
    repo.add_event(
        session,
        submission_id=submission_id,
        attempt=attempt,
        kind="done",
        data={"status": status, "result": payload},
    )
    if result.status != "error":  # a platform error is never counted as an attempt
        record_attempt(session, submission, result)
    return True


def record_attempt(session: Session, submission: Submission, result: Result) -> None:
    """The learner's progress counts the graded attempt and keeps the best result."""
    from app.learning import service as learning

    judged = [check for check in result.checks if check.status != "skip"]
    learning.record_exercise_result(
        session,
        submission.user_id,
        submission.exercise,
        result.status,
        passed_checks=sum(check.status == "pass" for check in judged),
        total_checks=len(judged),
    )


def fail_for_platform(
    session: Session,
    submission: Submission,
    message: Message,
    *,
    owner: str | None = None,
) -> bool:
    """End the submission as `error` with `message`, stored with its id and parameters (never
    in the submitter's language: each reader sees it in theirs)."""
    return complete(
        session,
        submission.id,
        Result.platform_error(message),
        attempt=max(submission.attempts, 1),
        owner=owner,
    )


def heartbeat(session: Session, owner: str) -> int:
    return repo.heartbeat(session, owner=owner, now=utcnow())


@dataclass(frozen=True)
class Reclaimed:
    requeued: list[uuid.UUID]
    ended: list[uuid.UUID]


def reclaim_stale(
    session: Session, *, me: str, lease_seconds: float, max_attempts: int
) -> Reclaimed:
    """Running submissions whose runner died: run them again, or end them as a platform error.

    Never the learner's failure: a dead runner says nothing about their code.
    """
    deadline = utcnow() - timedelta(seconds=lease_seconds)
    requeued: list[uuid.UUID] = []
    ended: list[uuid.UUID] = []
    for submission in repo.running(session):
        expired = submission.heartbeat_at is None or submission.heartbeat_at < deadline
        if not (expired or owner_is_gone(submission.lease_owner, me)):
            continue
        if submission.attempts < max_attempts:
            if repo.requeue(session, submission_id=submission.id, owner=submission.lease_owner):
                repo.add_event(
                    session,
                    submission_id=submission.id,
                    attempt=submission.attempts,
                    kind="status",
                    data={"status": "retrying"},
                )
                requeued.append(submission.id)
        elif fail_for_platform(
            session, submission, worker_lost(submission.attempts), owner=submission.lease_owner
        ):
            ended.append(submission.id)
    return Reclaimed(requeued=requeued, ended=ended)


def is_unfinished(status: str) -> bool:
    return status in (QUEUED, RUNNING)
