"""What the learner is told while and after the grader works, beyond each check's own verdict.

- `launch_event`: the "launch k of n" status event, with the world size and why this launch
  exists (e.g. again with 1 process, to catch a rank or world size hard-coded to 2; in a
  `launch.resume` exercise, resuming the previous launch's checkpoint at another world size).
- `not_judged_without_distribution`: a program that never started distributed training cannot
  show that DDP, the sampler or the checkpoints behave across ranks; a check that passed there
  passed vacuously, so it is reported as not judged (skip) instead of PASS. Only for exercises
  that ask for a process group (their checks include `dist.init`): an exercise that does not
  (a single-process one, a toy added from files alone) keeps its own verdicts.
- `not_judged_without_premise`: some checks only mean something once the program did what they
  build on (`PREMISES`): ranks that never built a DDP model hold the same parameters and save a
  bare state_dict trivially; a restarted run that loaded no snapshot ends where an uninterrupted
  run ends because it trained again from scratch. Their passes become "not judged" with the
  reason, so a green check always means the behaviour was observed.
- `tag_launch`: every `output` event says which launch (1-based, as in the launch event) it
  belongs to, so the page keeps each launch's output in its own panes.
- `in_launch`: a failure seen in one launch of several says which one ("With 1 rank: ..."),
  unless the message already names its launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from grader.checks.base import RunView
from grader.checks.elastic import resumed_from_snapshot
from grader.contract import CheckResult, GradeEvent
from grader.events import DdpInit, Init, TorchInternals
from grader.i18n import AS_NODES, WITH_ONE_RANK, WITH_RANKS, Message, message_fields, msg
from grader.torch_internals import checks_not_judged

# Checks that judge a program whether or not it distributes (they say themselves what is missing).
ALWAYS_JUDGED = frozenset({"run.completed", "dist.init"})
NOT_JUDGED_MESSAGE = msg(
    "stages.not_judged",
    "Not judged: the program never started distributed training (no `init_process_group` on "
    "any rank), so this check cannot hold yet.",
)


class LaunchPlan(Protocol):
    world_size: int
    nnodes: int
    faults: list[dict[str, Any]]
    judged: bool


REASONS = {
    "first": "as the exercise asks",
    "other_size": "again with {size}, to catch a rank or world size hard-coded to {first}",
    "reference": "once without interruption, to compare the restarted run with",
    "faults": "with a worker stopped mid-run, to check that training resumes",
    "multinode": "as a job on {nodes} machines, to catch local and global ranks mixed up",
    "resume": "resuming the checkpoint the previous launch saved with {previous}",
}


def _processes(world_size: int) -> str:
    return "1 process" if world_size == 1 else f"{world_size} processes"


def launch_reason(plans: Sequence[LaunchPlan], index: int, resume: bool = False) -> str:
    """Why plans[index] is launched: a key of REASONS. With `resume` (the exercise's
    `launch.resume`), every launch after the first starts from the previous one's files."""
    plan = plans[index]
    if resume and index > 0:
        return "resume"
    if plan.nnodes > 1:
        return "multinode"
    if not plan.judged:
        return "reference"
    if plan.faults:
        return "faults"
    first = plans[0].world_size
    return "first" if plan.world_size == first else "other_size"


def launch_event(plans: Sequence[LaunchPlan], index: int, resume: bool = False) -> GradeEvent:
    """status "launch": index (1-based), count, world_size, nnodes, first_world_size,
    previous_world_size (None for the first launch), reason_id, reason (English)."""
    plan = plans[index]
    reason_id = launch_reason(plans, index, resume)
    size = _processes(plan.world_size)
    first = plans[0].world_size
    previous = plans[index - 1].world_size if index else None
    reason = REASONS[reason_id].format(
        size=size, first=first, nodes=plan.nnodes, previous=_processes(previous or 0)
    )
    return GradeEvent(
        kind="status",
        data={
            "status": "launch",
            "index": index + 1,
            "count": len(plans),
            "world_size": plan.world_size,
            "nnodes": plan.nnodes,
            "first_world_size": first,
            "previous_world_size": previous,
            "reason_id": reason_id,
            "reason": f"Launch {index + 1} of {len(plans)}: {size}, {reason}.",
        },
    )


def distributed(views: Sequence[RunView]) -> bool:
    """Whether any rank of any launch called init_process_group."""
    return any(view.typed(Init) for view in views)


def not_judged_without_distribution(
    checks: list[CheckResult], views: Sequence[RunView]
) -> list[CheckResult]:
    """Passes of a program that never distributed become skips that say why (see module doc)."""
    if not any(c.id == "dist.init" for c in checks):
        return checks  # the exercise does not ask for a process group
    if not views or distributed(views) or not any(view.ranks for view in views):
        return checks
    return [
        _not_judged(c, NOT_JUDGED_MESSAGE)
        if c.status == "pass" and c.id not in ALWAYS_JUDGED
        else c
        for c in checks
    ]


def _built_ddp(view: RunView) -> bool:
    return bool(view.typed(DdpInit))


NO_DDP = msg(
    "stages.not_judged_no_ddp",
    "Not judged: no rank wrapped its model in DistributedDataParallel, so identical processes on "
    "identical data pass this without any averaging. Wrap the model first.",
)
NO_SNAPSHOT_LOADED = msg(
    "stages.not_judged_no_resume",
    "Not judged: after the restart no rank loaded a snapshot saved before the failure, so the "
    "run trained again from scratch, and ending where an uninterrupted run ends shows nothing "
    "about resuming.",
)
# check id -> (what the check builds on, observed in some judged run; the reason when it is not)
PREMISES: dict[str, tuple[Callable[[RunView], bool], Message]] = {
    "ddp.in_sync": (_built_ddp, NO_DDP),
    "ckpt.unwrapped": (_built_ddp, NO_DDP),
    "elastic.equivalent": (resumed_from_snapshot, NO_SNAPSHOT_LOADED),
}


def _not_judged(check: CheckResult, reason: Message) -> CheckResult:
    message_id, params = message_fields(reason)
    update = {
        "status": "skip",
        "message": str(reason),
        "message_id": message_id,
        "params": params,
        "hint": None,
        "hint_of": None,
    }
    return check.model_copy(update=update)


def not_judged_without_premise(
    checks: list[CheckResult], views: Sequence[RunView]
) -> list[CheckResult]:
    """A pass whose premise no judged run showed becomes not judged, with the reason."""
    out = []
    for c in checks:
        premise = PREMISES.get(c.id)
        if c.status == "pass" and premise and not any(premise[0](view) for view in views):
            c = _not_judged(c, premise[1])
        out.append(c)
    return out


def torch_version(views: Sequence[RunView]) -> str | None:
    """The torch the ranks ran, as the harness recorded it (None: no rank got so far)."""
    return next((e.version for view in views for _, e in view.typed(TorchInternals)), None)


def not_judged_on_this_torch(
    checks: list[CheckResult], views: Sequence[RunView]
) -> list[CheckResult]:
    """A check judged from a hook that this torch could not run (it lacks an internal the hook
    reads, `grader.torch_internals`) is not judged, pass or fail, with the reason."""
    records = [e for view in views for _, e in view.typed(TorchInternals)]
    missing = sorted({key for e in records for key in e.missing})
    lacking = checks_not_judged(missing)
    if not lacking:
        return checks
    version = torch_version(views) or "?"
    return [
        _not_judged(
            c,
            msg(
                "stages.not_judged_torch",
                "Not judged: torch {version} lacks {internal}, which the grader reads to judge "
                "this check.",
                version=version,
                internal=lacking[c.id],
            ),
        )
        if c.id in lacking
        else c
        for c in checks
    ]


def tag_launch(emit: Callable[[GradeEvent], None], index: int) -> Callable[[GradeEvent], None]:
    """`emit` for launch `index` (1-based): its output events carry `launch`."""

    def tagged(event: GradeEvent) -> None:
        if event.kind == "output":
            event = event.model_copy(update={"data": {**event.data, "launch": index}})
        emit(event)

    return tagged


def in_launch(message: str, nnodes: int, world_size: int) -> str:
    """A failure seen in one launch of several, saying which (a message that already names its
    launch, with a `nodes` parameter, is left as it is: no "As a 2-node job: As a 2-node job")."""
    if nnodes > 1:
        if "nodes" in getattr(message, "params", {}):
            return message
        return msg("combine.as_nodes", AS_NODES, nodes=nnodes, ranks=world_size, message=message)
    if world_size == 1:
        return msg("combine.with_one_rank", WITH_ONE_RANK, message=message)
    return msg("combine.with_ranks", WITH_RANKS, ranks=world_size, message=message)
