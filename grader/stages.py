"""What the learner is told while and after the grader works, beyond each check's own verdict.

- `launch_event`: the "launch k of n" status event, with the world size and why this launch
  exists (e.g. again with 1 process, to catch a rank or world size hard-coded to 2).
- `not_judged_without_distribution`: a program that never started distributed training cannot
  show that DDP, the sampler or the checkpoints behave across ranks; a check that passed there
  passed vacuously, so it is reported as not judged (skip) instead of PASS. Only for exercises
  that ask for a process group (their checks include `dist.init`): an exercise that does not
  (a single-process one, a toy added from files alone) keeps its own verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from grader.checks.base import RunView
from grader.contract import CheckResult, GradeEvent
from grader.events import Init
from grader.i18n import message_fields, msg

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
}


def launch_reason(plans: Sequence[LaunchPlan], index: int) -> str:
    """Why plans[index] is launched: a key of REASONS."""
    plan = plans[index]
    if plan.nnodes > 1:
        return "multinode"
    if not plan.judged:
        return "reference"
    if plan.faults:
        return "faults"
    first = plans[0].world_size
    return "first" if plan.world_size == first else "other_size"


def launch_event(plans: Sequence[LaunchPlan], index: int) -> GradeEvent:
    """status "launch": index (1-based), count, world_size, nnodes, reason_id, reason (English)."""
    plan = plans[index]
    reason_id = launch_reason(plans, index)
    size = "1 process" if plan.world_size == 1 else f"{plan.world_size} processes"
    first = plans[0].world_size
    reason = REASONS[reason_id].format(size=size, first=first, nodes=plan.nnodes)
    return GradeEvent(
        kind="status",
        data={
            "status": "launch",
            "index": index + 1,
            "count": len(plans),
            "world_size": plan.world_size,
            "nnodes": plan.nnodes,
            "first_world_size": first,
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
    message_id, params = message_fields(NOT_JUDGED_MESSAGE)
    update = {
        "status": "skip",
        "message": str(NOT_JUDGED_MESSAGE),
        "message_id": message_id,
        "params": params,
        "hint": None,
    }
    return [
        c.model_copy(update=update) if c.status == "pass" and c.id not in ALWAYS_JUDGED else c
        for c in checks
    ]
