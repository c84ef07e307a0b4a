"""The grader's single entry point: `grade(job) -> Result` (the app imports only this and the
contract).

The launches of `launcher.plan_launches`, in order, each in a fresh sandbox and job dir; a
program that cannot run to the end at one world size (`run.completed` fails) gets no other. A
check fails overall if it failed in any judged launch; it is skipped if it was skipped in all of
them. A failure of the harness in any launch ends the grading as a platform `error`. The whole
path: docs/architecture.md.
"""

from __future__ import annotations

import logging
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from grader import warm
from grader.checks.base import Outcome, RankView, RunView, get_check
from grader.checks.sampler import sampler_artifact
from grader.contract import (
    CheckResult,
    ExerciseSpec,
    GradeEvent,
    Job,
    LaunchInfo,
    RankResult,
    Result,
    Timings,
    localize,
)
from grader.events import HarnessError, Init, ProgramException
from grader.faults import place_faults
from grader.i18n import (
    SUMMARY_FAILED,
    SUMMARY_PASSED,
    SUMMARY_PASSED_SKIPPED,
    message_fields,
    msg,
)
from grader.launcher import Launch, plan_launches, prewarm_for, run_launch
from grader.sandbox.base import SandboxUnavailable, get_sandbox
from grader.stages import (
    in_launch,
    launch_event,
    not_judged_without_distribution,
    not_judged_without_premise,
    tag_launch,
)

log = logging.getLogger(__name__)

EventSink = Callable[[GradeEvent], None]


def grade(job: Job, *, on_event: EventSink | None = None, sandbox: str | None = None) -> Result:
    """Grade one submission. Never raises for learner faults; platform faults give "error"."""
    started = time.monotonic()
    emit = _safe(on_event)
    try:
        with warm.grading():
            result = _grade(job, emit, sandbox, started)
    except Exception as exc:
        log.exception("grading %s failed", job.submission_id)
        result = Result.platform_error(
            f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
        )
    result.timings_ms.total = int((time.monotonic() - started) * 1000)
    emit(GradeEvent(kind="done", data=result.model_dump(mode="json")))
    return result


def _safe(on_event: EventSink | None) -> EventSink:
    def emit(event: GradeEvent) -> None:
        if on_event is None:
            return
        try:
            on_event(event)
        except Exception:
            log.warning("an on_event listener failed; grading goes on", exc_info=True)

    return emit


def _grade(job: Job, emit: EventSink, sandbox_name: str | None, started: float) -> Result:
    emit(GradeEvent(kind="status", data={"status": "starting"}))
    unknown = [c for c in job.spec.checks if get_check(c) is None]
    if unknown:
        return Result.platform_error(
            msg(
                "platform.unknown_checks",
                "the exercise names checks the grader does not know: {checks}",
                checks=str(unknown),
            )
        )
    try:
        sandbox = get_sandbox(sandbox_name)
    except (SandboxUnavailable, ValueError, ImportError) as exc:
        return Result.platform_error(_no_sandbox(exc))
    runs: list[tuple[Launch, RunView, dict[str, Outcome]]] = []
    run_ms = checks_ms = 0
    first_start_ms = int((time.monotonic() - started) * 1000)
    emit(GradeEvent(kind="status", data={"status": "running"}))
    views: list[RunView] = []
    launches = plan_launches(job.spec)
    prewarm_for(job.spec, sandbox)
    # `launch.resume`: each launch starts from the files the previous one left (grader.launcher);
    # the directory goes when this function returns or raises (TemporaryDirectory's finalizer).
    carried = tempfile.TemporaryDirectory(prefix="rdv-carry-") if job.spec.launch.resume else None
    carry = Path(carried.name) if carried is not None else None
    for index, launch in enumerate(launches):
        emit(launch_event(launches, index))
        if launch.faults and launch.reference is not None:
            # Placed from what the program did in its uninterrupted run, launched first.
            launch.faults = place_faults(launch.faults, views[launch.reference])
        t0 = time.monotonic()
        try:
            view, _ = run_launch(job, launch, sandbox, tag_launch(emit, index + 1), carry)
        except SandboxUnavailable as exc:
            return Result.platform_error(_no_sandbox(exc))
        run_ms += int((time.monotonic() - t0) * 1000)
        views.append(view)
        if view.platform_error:
            return Result.platform_error(view.platform_error)
        harness_error = harness_failure(job, view)
        if harness_error:
            return Result.platform_error(harness_error)
        if launch.reference is not None:
            view.reference = views[launch.reference]
        if carry is not None and index:
            view.resumed_from = views[index - 1]
        if not launch.judged:
            continue
        t1 = time.monotonic()
        outcomes = {cid: _evaluate(cid, view, job) for cid in job.spec.checks}
        checks_ms += int((time.monotonic() - t1) * 1000)
        runs.append((launch, view, outcomes))
        completed = outcomes.get("run.completed")
        if completed is not None and completed.status == "fail":
            break  # a program that cannot run to the end here gets no other world size
    # Some checks compare world sizes (a loss scale that follows the world size is a division by
    # it; a constant is not): judge every run again, knowing the others.
    judged = [view for _, view, _ in runs]
    for view in judged:
        view.siblings = [other for other in judged if other is not view]
    t1 = time.monotonic()
    runs = [
        (launch, view, {cid: _evaluate(cid, view, job) for cid in job.spec.checks})
        for launch, view, _ in runs
    ]
    checks_ms += int((time.monotonic() - t1) * 1000)
    emit(GradeEvent(kind="status", data={"status": "checking"}))
    checks = not_judged_without_distribution(_combine(job, runs), judged)
    checks = not_judged_without_premise(checks, judged)
    for c in checks:
        emit(GradeEvent(kind="check", data=c.model_dump(mode="json")))
    # A failing run decides; otherwise the largest launch (the last of equals) speaks for all.
    largest = max(range(len(runs)), key=lambda i: (runs[i][0].world_size, i))
    deciding = next(
        (r for r in runs if any(o.status == "fail" for o in r[2].values())), runs[largest]
    )
    launch, view, _ = deciding
    failed = [c for c in checks if c.status == "fail"]
    skipped = [c for c in checks if c.status == "skip"]
    status = "fail" if failed else "pass"
    passed = len(checks) - len(skipped)
    if failed:
        summary = msg("summary.failed", SUMMARY_FAILED, failed=len(failed), total=len(checks))
    elif skipped:
        summary = msg(
            "summary.passed_skipped", SUMMARY_PASSED_SKIPPED, passed=passed, skipped=len(skipped)
        )
    else:
        summary = msg("summary.passed", SUMMARY_PASSED, passed=passed)
    summary_id, summary_params = message_fields(summary)
    return Result(
        status=status,
        summary=summary,
        summary_id=summary_id,
        summary_params=summary_params,
        launch=LaunchInfo(
            world_size=launch.world_size,
            nnodes=launch.nnodes,
            backend=_backend(view, launch),
            device=launch.device,
            sandbox=sandbox.name,
            warm_launches=sum(1 for v in views if v.warm),
            spare_ranks=sum(v.spare_ranks for v in views),
        ),
        checks=checks,
        ranks=[_rank_result(r) for r in view.ranks],
        artifacts={"sampler": sampler_artifact(view)} if view.ranks else {},
        timings_ms=Timings(start=first_start_ms, run=run_ms, checks=checks_ms),
    )


def _no_sandbox(exc: Exception) -> str:
    return msg("platform.no_sandbox", "the sandbox is not available: {error}", error=str(exc))


def harness_failure(job: Job, view: RunView) -> str | None:
    """A failure of the grader's own harness in any rank: the run was observed only in part, so
    no verdict is given; the stacks go to the worker log."""
    failures = view.typed(HarnessError)
    for rank, e in failures:
        log.error(
            "grading %s: the harness failed in %s on rank %s:\n%s",
            job.submission_id,
            e.where,
            rank,
            e.traceback or e.error,
        )
    if not failures:
        return None
    rank, first = failures[0]
    return msg(
        "platform.harness_failed",
        "the grader's harness failed ({where}, rank {rank}): {error}",
        where=first.where,
        rank=rank,
        error=first.error,
    )


def _evaluate(check_id: str, view: RunView, job: Job) -> Outcome:
    definition = get_check(check_id)
    assert definition is not None
    if not view.ranks:  # the sandbox stopped the whole job before the supervisor could report
        if check_id != "run.completed":
            return Outcome(
                "skip",
                msg(
                    "run.stopped_unobserved",
                    "Not judged: the run was stopped before it could be observed.",
                ),
            )
        if view.oom_killed:
            return Outcome(
                "fail",
                msg(
                    "run.job_oom", "The whole job ran out of memory and was stopped by the sandbox."
                ),
            )
        return Outcome(
            "fail",
            msg(
                "run.job_timeout",
                "The whole job did not finish within {seconds:g} s and was stopped by the sandbox.",
                seconds=view.wall_seconds,
            ),
        )
    try:
        return definition.fn(view, job.spec.params.get(check_id, {}))
    except Exception as exc:  # a grader bug: report it as a platform fault, never on the learner
        raise RuntimeError(f"check {check_id} crashed: {exc!r}") from exc


def _combine(job: Job, runs: list[tuple[Launch, RunView, dict[str, Outcome]]]) -> list[CheckResult]:
    results = []
    several = len(runs) > 1 or len(job.spec.launch.world_sizes) > 1
    for cid in job.spec.checks:
        definition = get_check(cid)
        assert definition is not None
        chosen: tuple[Launch, Outcome] | None = None
        for launch, _, outcomes in runs:
            o = outcomes[cid]
            if o.status == "fail":
                chosen = (launch, o)
                break
            # A pass at the largest world size (the last run) speaks for all of them.
            if chosen is None or (
                o.status == "pass"
                and (chosen[1].status != "pass" or launch.world_size >= chosen[0].world_size)
            ):
                chosen = (launch, o)
        assert chosen is not None
        launch, o = chosen
        message: str = o.message
        if several and o.status == "fail":
            message = in_launch(message, launch.nnodes, launch.world_size)
        hint = hint_of = None
        if o.status == "fail":
            # The hint for what the run showed: another check's when the outcome says so (a
            # wrap that never happened gets the wrapping hint). English here; the API renders
            # the Result in each viewer's language (grader.i18n).
            hint_of = o.hint_of
            source = get_check(hint_of) if hint_of else definition
            assert source is not None
            hint = localize(job.spec.hints.get(hint_of or cid), "en") or source.hint
        message_id, params = message_fields(message)
        results.append(
            CheckResult(
                id=cid,
                status=o.status,
                title=definition.title,
                message=message,
                hint=hint,
                rank=o.rank,
                line=o.line,
                message_id=message_id,
                params=params,
                hint_of=hint_of,
            )
        )
    return results


def _backend(view: RunView, launch: Launch) -> str:
    """The backend the group used for the launch's device: a config such as "cpu:gloo,cuda:nccl"
    (what a group made without a backend, or with one per device, reports) names one per device."""
    default = "nccl" if launch.device == "cuda" else "gloo"
    for _, e in view.typed(Init):
        backend = str(e.backend or "")
        if not backend or backend == "undefined":
            return default
        if ":" not in backend:
            return backend
        per_device = dict(part.split(":", 1) for part in backend.split(",") if ":" in part)
        return per_device.get(launch.device, default)
    return default


def _rank_result(r: RankView) -> RankResult:
    """A rank for the Result; `stack` is its dump when stopped, else the traceback it died with."""
    stack = r.stack
    crash = r.first_typed(ProgramException)
    if crash is not None and crash.traceback:
        stack = crash.traceback if not stack else f"{crash.traceback}\n{stack}"
    if stack and r.learner_file:
        stack = stack.replace(r.learner_file, "main.py")
    return RankResult(
        rank=r.rank, exit_code=r.exit_code, output=r.output, truncated=r.truncated, stack=stack
    )


def prewarm_exercise(spec: ExerciseSpec, sandbox: str | None = None) -> None:
    """Ready this process's warm pool for a grading of `spec` that is likely to come (a learner
    is editing it). Returns at once; RDV_WARM_POOL=0: nothing."""
    prewarm_for(spec, get_sandbox(sandbox))


def prewarm(sandbox: str | None = None) -> None:
    """Start the warm pool of this process (bwrap and docker; RDV_WARM_POOL=0: nothing), so the
    first submission finds a sandbox ready. Returns at once: the pool starts them in the
    background."""
    from grader.contract import LaunchSpec

    # Most gradings launch 2 ranks first, and many 1 next: the first submission's plan (or the
    # first exercise a learner opens) replaces this one.
    spec = ExerciseSpec(checks=["run.completed"], launch=LaunchSpec(world_sizes=[2, 1]))
    prewarm_exercise(spec, sandbox)
