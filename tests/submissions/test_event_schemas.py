"""The live events' shapes in OpenAPI match what the grader and the app really send."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.submissions.event_schemas import LaunchEvent, OutputEvent, QueuedEvent, StatusEvent
from grader.contract import GradeEvent
from grader.stages import launch_event, tag_launch
from tests.grader.test_stages import Plan

EVENTS_PATH = "/api/v1/submissions/{submission_id}/events"


def test_openapi_documents_each_event(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    stream = document["paths"][EVENTS_PATH]["get"]["responses"]["200"]["content"]
    events = stream["text/event-stream"]["x-sse-events"]
    assert set(events) == {"queued", "status", "output", "check", "done", "signed_out"}
    launch = next(s for s in events["status"]["oneOf"] if s["title"] == "LaunchEvent")
    assert {"index", "count", "world_size", "reason_id", "reason"} <= set(launch["required"])
    assert "position" in events["queued"]["properties"]
    assert "message" in events["signed_out"]["required"]


def test_the_grader_s_launch_event_has_the_documented_shape() -> None:
    plans = [Plan(2), Plan(1)]
    for index in range(len(plans)):
        sent = LaunchEvent.model_validate({**launch_event(plans, index).data, "attempt": 1})
        assert sent.count == 2
    StatusEvent.model_validate({"status": "checking", "attempt": 1})
    OutputEvent.model_validate({"rank": 1, "line": "hi", "world_size": 2, "attempt": 1})
    QueuedEvent.model_validate({"position": 3, "attempt": 1})


def test_an_output_event_says_which_launch_it_belongs_to(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    stream = document["paths"][EVENTS_PATH]["get"]["responses"]["200"]["content"]
    output = stream["text/event-stream"]["x-sse-events"]["output"]
    assert "launch" in output["properties"]
    assert "launch" in output["properties"]["launch"]["description"]
    # What the grader sends for launch 2 (the restarted run after its reference, same size).
    seen: list[GradeEvent] = []
    tag_launch(seen.append, 2)(
        GradeEvent(kind="output", rank=0, data={"line": "x", "world_size": 2})
    )
    sent = OutputEvent.model_validate({**seen[0].data, "rank": 0, "attempt": 1})
    assert sent.launch == 2
