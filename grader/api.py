"""The grader's entry point: `grade(job) -> Result`, plan -> run -> judge (the app's local backend
calls it, and `prewarm`/`hint_exercise` with the pool it owns; what else the app may import of
the grader: docs/architecture.md, "The app/grader boundary").

Plan: the launches of `launch.plan.plan_launches`. Run: each in a fresh sandbox and job dir
(`launch.host.run_launch`), those that build on no other overlapping (`launch.schedule`), handed
back and judged in plan order; a program that cannot run to the end at one world size
(`run.completed` fails) gets no other (a launch already running for it is stopped). Judge
(`grader.judge`): a check fails overall if it failed in any judged launch; it is skipped if it
was skipped in all of them. A failure of the harness in any launch ends the grading as a
platform `error`. The whole path: docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader import judge, timeline
from grader.checks.base import RunView, get_check
from grader.contract import ExerciseSpec, GradeEvent, Job, Result, Timings
from grader.i18n import msg
from grader.judge import JudgedRun
from grader.launch.faults import place_faults
from grader.launch.host import prewarm_for, run_launch
from grader.launch.plan import Launch, plan_launches
from grader.launch.schedule import LaunchRunner, launches_at_once, needs
from grader.sandbox.base import SandboxUnavailable
from grader.sandbox.choose import get_sandbox
from grader.sandbox.pool import Pool
from grader.stages import launch_event, tag_launch

log = logging.getLogger(__name__)

EventSink = Callable[[GradeEvent], None]


def grade(
    job: Job,
    *,
    on_event: EventSink | None = None,
    sandbox: str | None = None,
    pool: Pool | None = None,
) -> Result:
    """Grade one submission. Never raises for learner faults; platform faults give "error".
    With a `pool` (grader.sandbox.pool, owned by the caller) launches take prepared sandboxes;
    without one every launch starts cold."""
    started = time.monotonic()
    emit = _safe(on_event)
    try:
        with pool.grading() if pool is not None else contextlib.nullcontext():
            result = _grade(job, emit, sandbox, started, pool)
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


def _grade(
    job: Job, emit: EventSink, sandbox_name: str | None, started: float, pool: Pool | None
) -> Result:
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
    runs: list[JudgedRun] = []
    checks_ms = 0
    first_start_ms = int((time.monotonic() - started) * 1000)
    emit(GradeEvent(kind="status", data={"status": "running"}))
    views: list[RunView] = []
    # Plan.
    launches = plan_launches(job.spec)
    prewarm_for(job.spec, sandbox, pool)  # the warm pool readies this grading's launches
    # `launch.resume`: each launch starts from the files the previous one left (launch.host);
    # the directory goes when this function returns or raises (TemporaryDirectory's finalizer).
    carried = tempfile.TemporaryDirectory(prefix="rdv-carry-") if job.spec.launch.resume else None
    carry = Path(carried.name) if carried is not None else None

    # Run, each launch judged in plan order as it ends; independent launches overlap.
    def before_start(index: int) -> None:
        launch = launches[index]
        if launch.faults and launch.reference is not None:
            # Placed from what the program did in its uninterrupted run, back before this starts.
            launch.faults = place_faults(launch.faults, views[launch.reference])

    def run_one(index: int, launch: Launch, sink: EventSink, cancel: threading.Event) -> RunView:
        sink(launch_event(launches, index, job.spec.launch.resume))
        return run_launch(job, launch, sandbox, tag_launch(sink, index + 1), pool, carry, cancel)[0]

    runner = LaunchRunner(
        launches,
        run_one,
        emit,
        parallel=launches_at_once(launches),
        waits_for=needs(launches, job.spec.launch.resume),
        before_start=before_start,
    )
    t0 = time.monotonic()
    try:
        with contextlib.closing(runner.views()) as launched:
            for index, view in launched:
                launch = launches[index]
                views.append(view)
                if view.platform_error:
                    return Result.platform_error(view.platform_error)
                harness_error = judge.harness_failure(job, view)
                if harness_error:
                    return Result.platform_error(harness_error)
                if launch.reference is not None:
                    view.reference = views[launch.reference]
                if carry is not None and index:
                    view.resumed_from = views[index - 1]
                if not launch.judged:
                    continue
                t1 = time.monotonic()
                runs.append(judge.JudgedRun(launch, view, judge.evaluate_all(job, view)))
                checks_ms += int((time.monotonic() - t1) * 1000)
                completed = runs[-1].outcomes.get("run.completed")
                if completed is not None and completed.status == "fail":
                    runner.stop(index)  # a program that cannot run to the end here gets no other
                    break
    except SandboxUnavailable as exc:
        return Result.platform_error(_no_sandbox(exc))
    run_ms = int((time.monotonic() - t0) * 1000) - checks_ms
    # Judge: the runs again knowing each other, the checks combined, the Result.
    t1 = time.monotonic()
    runs = judge.with_siblings(job, runs)
    checks_ms += int((time.monotonic() - t1) * 1000)
    emit(GradeEvent(kind="status", data={"status": "checking"}))
    checks = judge.check_results(job, runs)
    for c in checks:
        emit(GradeEvent(kind="check", data=c.model_dump(mode="json")))
    result = judge.verdict(
        runs,
        checks,
        views=views,
        sandbox=sandbox.name,
        timings=Timings(start=first_start_ms, run=run_ms, checks=checks_ms),
    )
    result.timeline = _timeline(job, launches, views, runs)
    return result


def _timeline(
    job: Job, launches: list[Launch], views: list[RunView], runs: list[JudgedRun]
) -> dict[str, Any] | None:
    """The Result's timeline of every launch made (`grader.timeline`). A picture, not a verdict:
    should drawing it fail, the Result goes without it and the worker log says why."""
    failing = {id(r.view) for r in runs if any(o.status == "fail" for o in r.outcomes.values())}
    try:
        return timeline.build(
            [
                timeline.LaunchRun(
                    index=index + 1,
                    view=view,
                    judged=launches[index].judged,
                    failing=id(view) in failing,
                    faulted=bool(launches[index].faults),
                )
                for index, view in enumerate(views)
            ]
        )
    except Exception:
        log.exception("grading %s: the timeline could not be built", job.submission_id)
        return None


def _no_sandbox(exc: Exception) -> str:
    return msg("platform.no_sandbox", "the sandbox is not available: {error}", error=str(exc))


def hint_exercise(spec: ExerciseSpec, pool: Pool, sandbox: str | None = None) -> None:
    """A grading of `spec` is likely next (a learner opened or is editing it): `pool` prepares
    its launches, in order, in place of what the last grading left. Returns at once."""
    prewarm_for(spec, get_sandbox(sandbox), pool)


def prewarm(pool: Pool, sandbox: str | None = None) -> None:
    """Start filling `pool` (bwrap and docker) before any submission, so the first finds a
    sandbox ready. Returns at once: the pool starts them in the background."""
    from grader.contract import LaunchSpec

    # Most gradings launch 2 ranks first, and many 1 next: the first submission's plan (or the
    # first exercise a learner opens) replaces this one.
    spec = ExerciseSpec(checks=["run.completed"], launch=LaunchSpec(world_sizes=[2, 1]))
    hint_exercise(spec, pool, sandbox)
