"""The verdict of one grading from its runs: each check evaluated over each judged run, the runs
judged again knowing each other, the check results combined over them, the deciding run, the
summary and the Result. A failure of the harness in a run is reported here too (`harness_failure`):
a run observed only in part gets no verdict. `grader.api.grade` calls these in order.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from grader.checks.base import Outcome, RankView, RunView, get_check
from grader.checks.sampler import sampler_artifact
from grader.contract import (
    CheckResult,
    Job,
    LaunchInfo,
    RankResult,
    Result,
    Timings,
    localize,
)
from grader.events import HarnessError, Init, ProgramException
from grader.i18n import (
    SUMMARY_FAILED,
    SUMMARY_PASSED,
    SUMMARY_PASSED_SKIPPED,
    message_fields,
    msg,
)
from grader.launch.plan import Launch
from grader.stacks import learner_stack
from grader.stages import (
    in_launch,
    not_judged_on_this_torch,
    not_judged_without_distribution,
    not_judged_without_premise,
    torch_version,
)

log = logging.getLogger(__name__)


class JudgedRun(NamedTuple):
    """A judged launch, what it did, and each check's outcome over it."""

    launch: Launch
    view: RunView
    outcomes: dict[str, Outcome]


def evaluate_all(job: Job, view: RunView) -> dict[str, Outcome]:
    """Every check of the exercise over one run."""
    return {cid: evaluate(cid, view, job) for cid in job.spec.checks}


def with_siblings(job: Job, runs: list[JudgedRun]) -> list[JudgedRun]:
    """Some checks compare world sizes (a loss scale that follows the world size is a division by
    it; a constant is not): every run judged again, knowing the others."""
    judged = [run.view for run in runs]
    for view in judged:
        view.siblings = [other for other in judged if other is not view]
    return [JudgedRun(run.launch, run.view, evaluate_all(job, run.view)) for run in runs]


def check_results(job: Job, runs: list[JudgedRun]) -> list[CheckResult]:
    """The checks as the learner sees them: combined over the runs, then those whose premise the
    program never met (no distribution, no premise) or that this torch cannot show marked not
    judged (`grader.stages`)."""
    judged = [run.view for run in runs]
    checks = not_judged_without_distribution(combine(job, runs), judged)
    return not_judged_on_this_torch(not_judged_without_premise(checks, judged), judged)


def verdict(
    runs: list[JudgedRun],
    checks: list[CheckResult],
    *,
    views: list[RunView],
    sandbox: str,
    timings: Timings,
) -> Result:
    """The Result: its status and summary from the checks; the launch, ranks and artifacts of the
    deciding run (a failing run decides; otherwise the largest launch, the last of equals, speaks
    for all); `views`: every launch made, judged or not (warm launches, spare ranks)."""
    largest = max(range(len(runs)), key=lambda i: (runs[i].launch.world_size, i))
    deciding = next(
        (r for r in runs if any(o.status == "fail" for o in r.outcomes.values())), runs[largest]
    )
    launch, view = deciding.launch, deciding.view
    status, summary = summarize(checks)
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
            sandbox=sandbox,
            warm_launches=sum(1 for v in views if v.warm),
            spare_ranks=sum(v.spare_ranks for v in views),
            torch=torch_version(views),
        ),
        checks=checks,
        ranks=[_rank_result(r) for r in view.ranks],
        artifacts={"sampler": sampler_artifact(view)} if view.ranks else {},
        timings_ms=timings,
    )


def summarize(checks: list[CheckResult]) -> tuple[str, str]:
    """("pass" | "fail", the summary line)."""
    failed = [c for c in checks if c.status == "fail"]
    skipped = [c for c in checks if c.status == "skip"]
    passed = len(checks) - len(skipped)
    if failed:
        return "fail", msg("summary.failed", SUMMARY_FAILED, failed=len(failed), total=len(checks))
    if skipped:
        return "pass", msg(
            "summary.passed_skipped", SUMMARY_PASSED_SKIPPED, passed=passed, skipped=len(skipped)
        )
    return "pass", msg("summary.passed", SUMMARY_PASSED, passed=passed)


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


def evaluate(check_id: str, view: RunView, job: Job) -> Outcome:
    """One check over one run; a check that crashes is the grader's fault (a RuntimeError)."""
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


def combine(job: Job, runs: list[JudgedRun]) -> list[CheckResult]:
    """One CheckResult per check over every judged run: the first failure, else the pass at the
    largest world size, else the skip."""
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
    # The learner reads it: their frames first, no server path, no grader frame.
    stack = learner_stack(stack, r.learner_file)
    return RankResult(
        rank=r.rank, exit_code=r.exit_code, output=r.output, truncated=r.truncated, stack=stack
    )
