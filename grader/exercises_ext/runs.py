"""Which launches one grading makes (the grader core's `api` asks `plan_runs`).

- one launch per world size of the spec;
- with `launch.faults`: each of those launches gets an uninterrupted twin, run first and not
  judged on its own: it is the faulted run's `reference` (elastic.equivalent compares them);
- with `launch.multinode`: one more launch as a simulated job of `max(2, launch.nnodes)` nodes
  with one rank each (LOCAL_RANK is 0 on every node, so local-vs-global rank mix-ups show).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grader.contract import ExerciseSpec


@dataclass
class RunPlan:
    world_size: int
    nnodes: int = 1
    faults: list[dict[str, Any]] = field(default_factory=list)
    # Index (in the plan) of the uninterrupted twin of a faulted run.
    reference: int | None = None
    # A reference is launched only to be compared with; its checks are not evaluated.
    judged: bool = True

    @property
    def label(self) -> str:
        if self.nnodes > 1:
            return f"As a {self.nnodes}-node job ({self.world_size} ranks)"
        return f"With {self.world_size} ranks"


def plan_runs(spec: ExerciseSpec) -> list[RunPlan]:
    plans: list[RunPlan] = []
    faults = [f.model_dump() for f in spec.launch.faults]
    for ws in spec.launch.world_sizes:
        if faults:
            plans.append(RunPlan(ws, judged=False))
            plans.append(RunPlan(ws, faults=faults, reference=len(plans) - 1))
        else:
            plans.append(RunPlan(ws))
    if spec.launch.multinode:
        nodes = max(2, spec.launch.nnodes)
        plans.append(RunPlan(nodes, nnodes=nodes))
    return plans
