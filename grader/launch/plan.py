"""Which launches one grading makes (`plan_launches`), on which devices (`available_gpus`), and
and what a warm sandbox is started for, for each (`launch_shape`)."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any

from grader.contract import ExerciseSpec
from grader.settings import settings


@dataclass
class Launch:
    world_size: int
    device: str  # "cpu" | "cuda"
    gpus: list[int]
    # > 1: a simulated job of that many nodes with world_size // nnodes ranks each.
    nnodes: int = 1
    # The faults the harness injects into this launch.
    faults: list[dict[str, Any]] = field(default_factory=list)
    # Index (in the plan) of the uninterrupted twin of a faulted launch.
    reference: int | None = None
    # A reference is launched only to be compared with; its checks are not evaluated.
    judged: bool = True
    # What the learner's script is given after `main.py` (spec.launch.script_args and this
    # world size's `script_args_per_launch`).
    script_args: tuple[str, ...] = ()


def available_gpus() -> list[int]:
    """GPU indices this worker may use: $RDV_GPUS ("0,1") or the /dev/nvidiaN devices."""
    gpus = settings().gpus
    if gpus is not None:
        return list(gpus)
    names = os.listdir("/dev") if os.path.isdir("/dev") else []
    return sorted(int(m.group(1)) for n in names if (m := re.fullmatch(r"nvidia(\d+)", n)))


def plan_launch(world_size: int, device: str) -> Launch:
    """NCCL with one GPU per rank where there are enough GPUs, else gloo on CPU."""
    gpus = available_gpus() if device in ("auto", "cuda") else []
    if len(gpus) >= world_size:
        return Launch(world_size, "cuda", gpus[:world_size])
    return Launch(world_size, "cpu", [])


def plan_launches(spec: ExerciseSpec) -> list[Launch]:
    """Every launch one grading makes, in order.

    - one launch per world size of the spec, given `script_args` and that world size's
      `script_args_per_launch`;
    - with `launch.faults`: each of those launches gets an uninterrupted twin, run first and not
      judged on its own: it is the faulted launch's `reference` (elastic.equivalent compares them);
    - with `launch.multinode`: one more launch as a simulated job of `max(2, launch.nnodes)` nodes
      with one rank each (LOCAL_RANK is 0 on every node, so local-vs-global rank mix-ups show;
      `grader.inside.multinode` runs it).
    """
    device = spec.launch.device
    faults = [f.model_dump() for f in spec.launch.faults]
    launches: list[Launch] = []
    per_launch = spec.launch.script_args_per_launch
    for index, ws in enumerate(spec.launch.world_sizes):
        extra = per_launch[index] if index < len(per_launch) else []
        args = (*spec.launch.script_args, *extra)
        if faults:
            launches.append(
                dataclasses.replace(plan_launch(ws, device), judged=False, script_args=args)
            )
            faulted = dataclasses.replace(plan_launch(ws, device), script_args=args)
            faulted.faults, faulted.reference = faults, len(launches) - 1
            launches.append(faulted)
        else:
            launches.append(dataclasses.replace(plan_launch(ws, device), script_args=args))
    if spec.launch.multinode:
        nodes = max(2, spec.launch.nnodes)
        args = tuple(spec.launch.script_args)
        launches.append(
            dataclasses.replace(plan_launch(nodes, device), nnodes=nodes, script_args=args)
        )
    return launches


def launch_shape(launch: Launch) -> tuple[int, int]:
    """(ranks per node, nodes) of `launch`: the cores it keeps busy, which the warm pool weighs
    (grader.sandbox.pool_plan.WarmKey); any prepared sandbox serves it."""
    return launch.world_size // launch.nnodes, launch.nnodes
