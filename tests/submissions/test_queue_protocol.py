"""Both ends of the grading queue speak `grader.queue_protocol`: the tasks each side registers
take exactly the payloads the other side sends. No database: procrastinate apps connect lazily."""

from __future__ import annotations

import inspect
from typing import Any

import procrastinate

from app.submissions.queue import ResultStore
from app.submissions.queue import build_app as build_web_app
from grader import queue_protocol as protocol
from grader.contract import Job, Result
from grader.exercises import load_spec
from grader.worker import build_app as build_worker_app

DSN = "postgresql://nobody@127.0.0.1:1/none"


def web_app() -> procrastinate.App:
    return build_web_app(DSN, ResultStore(session_factory=None))  # type: ignore[arg-type]


def accepts(app: procrastinate.App, task_name: str, payload: dict[str, Any]) -> None:
    """The task registered as `task_name` can be called with exactly these keyword arguments."""
    task = app.tasks[task_name]
    signature = inspect.signature(task.func)
    params = list(signature.parameters)
    if task.pass_context:
        params = params[1:]
    assert set(payload) <= set(params), (task_name, sorted(payload), params)
    required = {
        name for name in params if signature.parameters[name].default is inspect.Parameter.empty
    }
    assert required <= set(payload), (task_name, sorted(required - set(payload)))


def test_each_side_registers_the_tasks_the_other_sends() -> None:
    web, worker = web_app(), build_worker_app(DSN, queue="cpu")
    ours = {name for name in web.tasks if name.startswith("rendezvous.")}
    assert ours == {protocol.EVENTS_TASK, protocol.RESULT_TASK}
    assert {protocol.GRADE_TASK, protocol.RETRY_TASK} <= set(worker.tasks)
    for name in (protocol.EVENTS_TASK, protocol.RESULT_TASK):
        assert web.tasks[name].queue == protocol.RESULTS_QUEUE


def test_payloads_fit_the_receiving_tasks() -> None:
    job = Job(
        exercise="ddp-fundamentals/train",
        code="print('hi')\n",
        spec=load_spec("ddp-fundamentals/train"),
        submission_id="3f1c0e4e-0000-4000-8000-000000000001",
    )
    web, worker = web_app(), build_worker_app(DSN, queue="cpu")
    grade = protocol.grade_payload(job, max_attempts=3)
    accepts(worker, protocol.GRADE_TASK, grade)
    assert Job.model_validate(grade["job"]) == job
    events = protocol.events_payload(job.submission_id, 1, "w", [protocol.RETRYING_EVENT])
    accepts(web, protocol.EVENTS_TASK, events)
    result = protocol.result_payload(job.submission_id, 2, Result.platform_error("x"))
    accepts(web, protocol.RESULT_TASK, result)
    assert Result.model_validate(result["result"]).status == "error"


def test_a_cpu_exercise_goes_to_the_cpu_queue() -> None:
    spec = load_spec("ddp-fundamentals/train")
    job = Job(exercise="ddp-fundamentals/train", code="x = 1\n", spec=spec, submission_id="s")
    assert protocol.queue_for(job) == "cpu"
    gpu = spec.model_copy(update={"launch": spec.launch.model_copy(update={"device": "cuda"})})
    assert protocol.queue_for(job.model_copy(update={"spec": gpu})) == "gpu"
    assert set(protocol.GRADE_QUEUES) == {"cpu", "gpu"}


def test_the_worker_lost_message_is_a_grader_message_with_its_attempts() -> None:
    lost = protocol.worker_lost(3)
    assert lost.message_id == "platform.worker_lost"
    assert lost.params == {"attempts": 3}
    stored = Result.platform_error(lost)
    assert (stored.error_id, stored.error_params) == ("platform.worker_lost", {"attempts": 3})
