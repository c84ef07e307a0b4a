"""The shapes of the Server-Sent Events of `GET /api/v1/submissions/{id}/events`, for OpenAPI.

Each SSE message has `event: <name>` and `data: <JSON>`; these models describe the JSON per
name. Every stored event also carries `attempt` (the grading attempt, from 1). The stream goes:
queued (while waiting) -> status starting -> per launch: status launch, output lines (each with
that launch's index) -> status checking -> check (one per check) -> done; or it ends with
`signed_out` when the device's token is revoked. A `status: retrying` means the grading machine
restarted and the run begins again (clear what was shown).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from grader.contract import CheckResult, Result


class QueuedEvent(BaseModel):
    """`event: queued`: waiting for a grader; sent again when the position changes."""

    position: int = Field(description="1 = next to be graded.")
    attempt: int


class StatusEvent(BaseModel):
    """`event: status` for a stage without details."""

    status: Literal["starting", "running", "checking", "retrying"] = Field(
        description="starting: preparing the sandbox; running: launches begin; checking: judging "
        "the traces; retrying: the machine restarted, everything shown so far is void."
    )
    attempt: int


class LaunchEvent(BaseModel):
    """`event: status` with `status: launch`: one launch of the program begins."""

    status: Literal["launch"]
    index: int = Field(description="This launch, from 1.")
    count: int = Field(description="How many launches this grading makes.")
    world_size: int = Field(description="Processes (ranks) in this launch.")
    nnodes: int = Field(description="Simulated machines; 1 for a single-node launch.")
    first_world_size: int = Field(description="The first launch's world size.")
    previous_world_size: int | None = Field(
        None, description="The previous launch's world size; null for the first launch."
    )
    reason_id: Literal["first", "other_size", "reference", "faults", "multinode", "resume"] = Field(
        description="Why this launch exists; clients translate it (see `reason` for English)."
    )
    reason: str = Field(
        description="The whole line in English, e.g. 'Launch 2 of 2: 1 process, again with "
        "1 process, to catch a rank or world size hard-coded to 2.'"
    )
    attempt: int


class OutputEvent(BaseModel):
    """`event: output`: one line a rank printed."""

    rank: int
    line: str
    world_size: int = Field(description="Processes (ranks) in the launch it belongs to.")
    launch: int | None = Field(
        None,
        description="The launch it belongs to: the `index` of the `status: launch` event before "
        "it (one pane per rank and launch: a restarted run and its reference, or a 2-node job, "
        "have the same world size). Absent only in events stored before it existed.",
    )
    attempt: int


class CheckEvent(CheckResult):
    """`event: check`: one decided check (the same fields as in the Result)."""

    attempt: int


class DoneEvent(BaseModel):
    """`event: done`: the end of the stream."""

    status: str = Field(description="The submission's status: done or error.")
    result: Result | None


class SignedOutEvent(BaseModel):
    """`event: signed_out`: the device's token was revoked while the stream was open; the stream
    ends here (sign in again to follow the submission)."""

    message: str


EVENTS: dict[str, list[type[BaseModel]]] = {
    "queued": [QueuedEvent],
    "status": [StatusEvent, LaunchEvent],
    "output": [OutputEvent],
    "check": [CheckEvent],
    "done": [DoneEvent],
    "signed_out": [SignedOutEvent],
}


def openapi_response() -> dict[str, Any]:
    """The 200 response of the events route: text/event-stream, each event's JSON documented."""
    schemas: dict[str, Any] = {}
    for name, models in EVENTS.items():
        shapes = [model.model_json_schema() for model in models]
        schemas[name] = shapes[0] if len(shapes) == 1 else {"oneOf": shapes}
    return {
        "description": "Server-Sent Events. Each message is `event: <name>` and `data: <JSON>`; "
        "`x-sse-events` gives the JSON Schema of `data` per event name.",
        "content": {
            "text/event-stream": {
                "schema": {"type": "string"},
                "x-sse-events": schemas,
            }
        },
    }
