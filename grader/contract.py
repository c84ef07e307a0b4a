"""The grader's contract: Job in, Result out (docs/architecture.md, "The grader's contract").

`app/` imports it, among the few grader modules docs/architecture.md's boundary line names
(checked by tests/test_architecture.py). The exercise's `grading` block in its lesson YAML is
an `ExerciseSpec`. A Result is written as JSON with `Result.model_dump_json()`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from grader.i18n import PLATFORM_FAILED, message_fields, msg

MAX_CODE_BYTES = 64 * 1024
RESULT_VERSION = 1

# A text the lesson author may translate: a plain (English) string or
# {en: ..., tr: ..., pt-BR: ...}.
LocalizedText = str | dict[str, str]


def localize(text: LocalizedText | None, locale: str = "en") -> str | None:
    """The text in `locale`, falling back to English."""
    if text is None or isinstance(text, str):
        return text
    return text.get(locale) or text.get("en") or next(iter(text.values()), None)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FaultSpec(_Strict):
    """A failure the grader injects, e.g. a rank that exits mid-training on the first attempt."""

    kind: Literal["exit"] = "exit"
    rank: int = 1
    # "snapshot": stop the rank `after_steps` optimizer steps after the program's first snapshot
    # was completely written, as its uninterrupted reference run shows (grader/launch/faults.py);
    # "steps": after `after_steps` optimizer steps of the given attempt (restart count).
    after: Literal["snapshot", "steps"] = "snapshot"
    after_steps: int = Field(1, ge=1)
    attempt: int = 0
    exit_code: int = 1


class LaunchSpec(_Strict):
    world_sizes: list[int] = Field(default_factory=lambda: [2], min_length=1)
    nnodes: int = Field(1, ge=1, le=4)
    # Extra runs as a simulated multi-node job (two agents on the sandbox's loopback).
    multinode: bool = False
    max_restarts: int = Field(0, ge=0, le=3)
    faults: list[FaultSpec] = Field(default_factory=list)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # Arguments passed to the learner's script after `main.py`.
    script_args: list[str] = Field(default_factory=list)
    # More arguments for each world size's launch, by position in `world_sizes`, after
    # `script_args` (e.g. another dataset length per launch); a launch past its end gets none.
    script_args_per_launch: list[list[str]] = Field(default_factory=list)
    # Each launch after the first starts from the files the previous one left in its working
    # directory (a checkpoint written at one world size, resumed at the next).
    resume: bool = False


class Limits(_Strict):
    wall_seconds: float = Field(90, gt=0, le=900)
    # Whole-job memory (memory+swap) and per-process address space.
    memory_mb: int = Field(6144, ge=512)
    address_space_mb: int = Field(8192, ge=1024)
    pids: int = Field(256, ge=16)
    output_bytes_per_rank: int = Field(64 * 1024, ge=1024)
    disk_mb: int = Field(256, ge=16)
    # Process-group timeout the harness forces, so a collective mismatch fails fast.
    pg_timeout_seconds: float = Field(30, gt=0)


class ExerciseSpec(_Strict):
    """The `grading` block of an exercise in its lesson YAML."""

    checks: list[str] = Field(min_length=1)
    # Per-check parameters, e.g. {"ckpt.rank0_only": {"min_saves": 1}}.
    params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Per-check hints shown when the check fails; override the grader's defaults.
    hints: dict[str, LocalizedText] = Field(default_factory=dict)
    launch: LaunchSpec = Field(default_factory=LaunchSpec)
    limits: Limits = Field(default_factory=Limits)

    @field_validator("params", "hints")
    @classmethod
    def _keys_are_checks(cls, value: dict[str, Any], info: Any) -> dict[str, Any]:
        checks = set(info.data.get("checks", []))
        unknown = sorted(set(value) - checks)
        if unknown:
            raise ValueError(f"names checks that are not in `checks`: {', '.join(unknown)}")
        return value

    def launch_count(self) -> int:
        """How many judged launches a grading makes: one per world size, in order, then the
        simulated multi-node one (`launch.multinode`). A fault's uninterrupted twin is not one."""
        return len(self.launch.world_sizes) + (1 if self.launch.multinode else 0)

    def only_launch(self, index: int) -> ExerciseSpec:
        """This spec judged at its launch `index` alone (of `launch_count()`), for a quick grading
        that must catch one thing there (an exercise's ablations, docs/authoring.md). What that
        launch needs comes along: its fault's twin; under `launch.resume` the launches before it,
        whose files it starts from; for the multi-node launch, the first world size."""
        if not 0 <= index < self.launch_count():
            raise ValueError(
                f"launch {index} is out of range: this spec makes {self.launch_count()}"
            )
        sizes = self.launch.world_sizes
        multinode = index == len(sizes)
        if multinode:
            kept = sizes[:1]
        elif self.launch.resume:
            kept = sizes[: index + 1]
        else:
            kept = [sizes[index]]
        per_launch = self.launch.script_args_per_launch
        if multinode or self.launch.resume:
            args = per_launch[: len(kept)]
        else:
            args = per_launch[index : index + 1]
        launch = self.launch.model_copy(
            update={"world_sizes": kept, "multinode": multinode, "script_args_per_launch": args}
        )
        return self.model_copy(update={"launch": launch})


class Job(_Strict):
    exercise: str
    code: str
    spec: ExerciseSpec
    submission_id: str
    locale: str = "en"

    @field_validator("code")
    @classmethod
    def _code_size(cls, code: str) -> str:
        size = len(code.encode("utf-8"))
        if size > MAX_CODE_BYTES:
            raise ValueError(
                f"the program is {size // 1024} KiB; the limit is {MAX_CODE_BYTES // 1024} KiB"
            )
        return code


Status = Literal["pass", "fail", "error"]
CheckStatus = Literal["pass", "fail", "skip"]


class CheckResult(BaseModel):
    id: str
    status: CheckStatus
    title: str
    message: str = ""
    hint: str | None = None
    rank: int | None = None
    line: int | None = None
    # The message's id and parameters, for rendering it in another language (grader.i18n).
    message_id: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    # The check whose hint fits what the run showed, when not this one's (e.g. a SyncBatchNorm
    # check failed because no model was wrapped in DDP gets the wrapping hint).
    hint_of: str | None = None


class RankResult(BaseModel):
    rank: int
    exit_code: int | None
    output: str = ""
    truncated: bool = False
    # On a hang or crash: the rank's Python stack (innermost frame in the learner's file last).
    stack: str | None = None


class LaunchInfo(BaseModel):
    world_size: int
    nnodes: int = 1
    backend: str
    device: str
    sandbox: str
    # Of this grading's launches: how many ran in a pre-started (warm) sandbox, and how many of
    # all their ranks a zygote forked with the imports done (grader.sandbox.pool,
    # grader.inside.zygote; the others started cold, each its own interpreter).
    warm_launches: int = 0
    spare_ranks: int = 0
    # The torch version the ranks ran (None: no rank got as far as the harness's hooks).
    torch: str | None = None


class Timings(BaseModel):
    queued: int = 0
    start: int = 0
    run: int = 0
    checks: int = 0
    total: int = 0


class Result(BaseModel):
    version: int = RESULT_VERSION
    status: Status
    summary: str
    # The summary's id and parameters, for rendering it in another language (grader.i18n).
    summary_id: str | None = None
    summary_params: dict[str, Any] = Field(default_factory=dict)
    launch: LaunchInfo | None = None
    checks: list[CheckResult] = Field(default_factory=list)
    ranks: list[RankResult] = Field(default_factory=list)
    artifacts: dict[str, Any] = Field(default_factory=dict)
    timings_ms: Timings = Field(default_factory=Timings)
    error: str | None = None
    # The error's id and parameters when the grader wrote it with grader.i18n.msg.
    error_id: str | None = None
    error_params: dict[str, Any] = Field(default_factory=dict)
    # What every rank of every launch did, on one clock per launch (grader.timeline; its own
    # `version`; docs/architecture.md, "The result's timeline"). Absent from older Results and
    # from platform errors: an optional key, so clients of version 1 read a Result as before.
    timeline: dict[str, Any] | None = Field(
        default=None,
        description="What every rank of every launch did, on one clock per launch (its own "
        "`version`; failing launch first; lanes per rank with items such as collectives from "
        "call to completion, steps, saves, loads, restarts; at most 50 KB). Schema: "
        'docs/architecture.md, "The result\'s timeline".',
    )

    @classmethod
    def platform_error(cls, message: str) -> Result:
        """A failure of the platform, never charged to the learner. `message` made with
        `grader.i18n.msg` keeps its id, so the API renders it in the viewer's language."""
        summary = msg("platform.failed", PLATFORM_FAILED)
        summary_id, summary_params = message_fields(summary)
        error_id, error_params = message_fields(message)
        return cls(
            status="error",
            summary=summary,
            summary_id=summary_id,
            summary_params=summary_params,
            error=message,
            error_id=error_id,
            error_params=error_params,
        )


class GradeEvent(BaseModel):
    """What the grader reports while it works (streamed to the browser as Server-Sent Events).

    kind: "status" (data: {"status": "starting" | "running" | "checking"}, or
          {"status": "launch", index, count, world_size, nnodes, first_world_size,
          previous_world_size, reason_id,
          reason}: see grader.stages.launch_event),
          "output" (rank, data: {"line": str, "world_size": int, "launch": int: the launch's
          index, from 1}), "check" (data: CheckResult as a dict),
          "done" (data: Result as a dict).
    """

    kind: Literal["status", "output", "check", "done"]
    rank: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)
