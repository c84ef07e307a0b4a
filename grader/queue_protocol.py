"""The grading queue's protocol: what the web side (`app/submissions/queue.py`) and the grader
workers (`grader/worker.py`) say to each other through procrastinate on PostgreSQL.

Task names, queues, the payload of each task, the schema set-up, the stalled-job policy, the
message a learner sees when the grading machine was lost, and what a worker learns of the
gradings to come (`send_hint`, `coming`: the pending jobs, and the exercises learners opened)
live here once; both sides import this
module (`grader/` never imports `app/`; what `app/` may import: docs/architecture.md, "The
app/grader boundary").
"""

from __future__ import annotations

import logging
from typing import Any, cast

import procrastinate
import psycopg
from procrastinate.schema import SchemaManager
from procrastinate.types import JSONValue

from grader.contract import ExerciseSpec, Job, Result
from grader.i18n import Message, msg

log = logging.getLogger(__name__)

GRADE_TASK = "rendezvous.grade"  # on queue cpu|gpu: grade(job=<Job JSON>, max_attempts=<int>)
EVENTS_TASK = "rendezvous.submission_events"  # on RESULTS_QUEUE: see events_payload
RESULT_TASK = "rendezvous.submission_result"  # on RESULTS_QUEUE: see result_payload
RETRY_TASK = "rendezvous.retry_stalled"  # periodic, on every grader worker's queue
RESULTS_QUEUE = "results"
GRADE_QUEUES = ("cpu", "gpu")
SCHEMA_LOCK_ID = 727_001  # pg_advisory_lock key while creating procrastinate's tables
DEFAULT_MAX_ATTEMPTS = 2
# Exercises learners opened, per queue: the web side writes them, idle workers ready their launches.
HINTS_TABLE = "rdv_grading_hints"
# A learner who opened an exercise this long ago is still likely to submit it.
HINT_FRESH_S = 300
HINTS_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {HINTS_TABLE} (
    queue text NOT NULL,
    exercise text NOT NULL,
    spec jsonb NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, exercise)
)"""


def worker_lost(attempts: int) -> Message:
    """The platform error of a job whose grading machine stopped on every attempt: a message id
    with its parameters (grader/locales/*/platform.json), rendered in the reader's language."""
    return msg(
        "platform.worker_lost",
        "The grading machine stopped while running your program ({attempts} attempts). "
        "This is our fault and does not count against you: please submit again.",
        attempts=attempts,
    )


def queue_for(job: Job) -> str:
    return spec_queue(job.spec)


def spec_queue(spec: ExerciseSpec) -> str:
    return "gpu" if spec.launch.device == "cuda" else "cpu"


def submission_lock(submission_id: str) -> str:
    """The procrastinate lock that keeps one submission's results tasks in order."""
    return f"submission:{submission_id}"


def grade_payload(job: Job, max_attempts: int) -> dict[str, Any]:
    return {"job": job.model_dump(mode="json"), "max_attempts": max_attempts}


def events_payload(
    submission_id: str, attempt: int, worker: str, events: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "submission_id": submission_id,
        "attempt": attempt,
        "worker": worker,
        "events": cast(list[JSONValue], events),
    }


def result_payload(submission_id: str, attempt: int, result: Result) -> dict[str, Any]:
    return {
        "submission_id": submission_id,
        "attempt": attempt,
        "result": result.model_dump(mode="json"),
    }


RETRYING_EVENT: dict[str, Any] = {"kind": "status", "data": {"status": "retrying"}}


async def ensure_schema(dsn: str) -> None:
    """Create procrastinate's tables once, whoever (web or worker) starts first."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_ID,))
        try:
            row = await (await conn.execute("SELECT to_regclass('procrastinate_jobs')")).fetchone()
            if row is None or row[0] is None:
                await conn.execute(SchemaManager.get_schema())
            await conn.execute(HINTS_SCHEMA)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_ID,))


async def send_hint(conn: psycopg.AsyncConnection[Any], exercise: str, spec: ExerciseSpec) -> None:
    """A learner opened (or is editing) `exercise`: the workers of its queue may ready it."""
    await conn.execute(
        f"INSERT INTO {HINTS_TABLE} (queue, exercise, spec, at) VALUES (%s, %s, %s, now()) "
        "ON CONFLICT (queue, exercise) DO UPDATE SET spec = excluded.spec, at = now()",
        (spec_queue(spec), exercise, spec.model_dump_json()),
    )


async def coming(
    conn: psycopg.AsyncConnection[Any], queue: str, limit: int = 4
) -> list[ExerciseSpec]:
    """What a worker of `queue` is likely to grade next, most likely first, one per exercise:
    the pending grade jobs (oldest first), then the exercises learners opened in the last
    HINT_FRESH_S seconds (newest first)."""
    pending = await conn.execute(
        "SELECT args->'job'->>'exercise', args->'job'->'spec' FROM procrastinate_jobs "
        "WHERE queue_name = %s AND task_name = %s AND status = 'todo' ORDER BY id LIMIT %s",
        (queue, GRADE_TASK, limit),
    )
    rows = list(await pending.fetchall())
    opened = await conn.execute(
        f"SELECT exercise, spec FROM {HINTS_TABLE} WHERE queue = %s "
        "AND at > now() - make_interval(secs => %s) ORDER BY at DESC LIMIT %s",
        (queue, HINT_FRESH_S, limit),
    )
    rows += await opened.fetchall()
    specs: list[ExerciseSpec] = []
    seen: set[str] = set()
    for exercise, spec in rows:
        if exercise in seen or len(specs) >= limit:
            continue
        seen.add(exercise)
        try:
            specs.append(ExerciseSpec.model_validate(spec))
        except ValueError:  # pydantic's ValidationError: a row of another version; not a hint
            log.info("skipping an unreadable hint for %s", exercise)
    return specs


async def pending_grades(conn: psycopg.AsyncConnection[Any], queue: str, at_most: int = 8) -> int:
    """How many grade jobs of `queue` wait for a worker, counted up to `at_most`."""
    found = await conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM procrastinate_jobs WHERE queue_name = %s "
        "AND task_name = %s AND status = 'todo' LIMIT %s) AS waiting",
        (queue, GRADE_TASK, at_most),
    )
    row = await found.fetchone()
    return int(row[0]) if row else 0


async def recover_stalled_grades(
    app: procrastinate.App, *, seconds_since_heartbeat: float, by: str
) -> int:
    """The stalled-job policy. A grade job whose worker stopped sending heartbeats (killed, even
    by SIGKILL) runs again while attempts are left, or else ends as a platform error
    (`worker_lost`), never as the learner's failure. Returns how many jobs it handled; a job that
    another process (a worker's RETRY_TASK, the web's sweep) handled first is skipped."""
    stalled = await app.job_manager.get_stalled_jobs(
        task_name=GRADE_TASK, seconds_since_heartbeat=seconds_since_heartbeat
    )
    handled = 0
    for job in stalled:
        assert job.id is not None
        kwargs: dict[str, Any] = dict(job.task_kwargs)
        submission_id = str(kwargs["job"]["submission_id"])
        max_attempts = int(kwargs.get("max_attempts", DEFAULT_MAX_ATTEMPTS))
        attempts_made = job.attempts + 1
        results = app.configure_task(
            name=EVENTS_TASK, queue=RESULTS_QUEUE, lock=submission_lock(submission_id)
        )
        try:
            if attempts_made < max_attempts:
                await app.job_manager.retry_job(job)
                await results.defer_async(
                    **events_payload(submission_id, attempts_made, by, [RETRYING_EVENT])
                )
                log.warning("job %s stalled on attempt %d: retrying", job.id, attempts_made)
            else:
                await app.job_manager.finish_job_by_id_async(
                    job.id, status=procrastinate.jobs.Status.FAILED, delete_job=False
                )
                lost = Result.platform_error(worker_lost(attempts_made))
                await app.configure_task(
                    name=RESULT_TASK, queue=RESULTS_QUEUE, lock=submission_lock(submission_id)
                ).defer_async(**result_payload(submission_id, attempts_made, lost))
                log.warning("job %s stalled %d times: ended as an error", job.id, attempts_made)
        except Exception:
            log.info("stalled job %s was taken care of elsewhere", job.id, exc_info=True)
            continue
        handled += 1
    return handled
