"""Gradient accumulation: how many micro-steps and gradient all-reduces each optimizer step took.

The all-reduces are seen where DDP's reducer launches them: a communication hook that counts each
backward's last bucket and then does exactly what DDP's default hook does (divide by the world
size, all-reduce with SUM). A learner's own comm hook is wrapped the same way instead. Only runs
whose exercise has an `accum.*` check register it (it replaces DDP's built-in C++ all-reduce).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.optimizer import register_optimizer_step_post_hook

from grader.events import AccumStep
from grader.harness.tracer import Tracer, wrap

MAX_STEP_EVENTS = 512
HOOKED = "_rdv_counting_comm_hook"


def wanted(tracer: Tracer) -> bool:
    return any(str(c).startswith("accum.") for c in tracer.settings.checks or ())


def install(tracer: Tracer) -> None:
    if not wanted(tracer):
        return
    counts = {"micro": 0, "reductions": 0, "steps": 0}

    def counting(hook: Any) -> Any:
        @functools.wraps(hook)
        def counted(state: Any, bucket: Any) -> Any:
            if bucket.is_last():  # one per backward that all-reduces, however many buckets
                counts["reductions"] += 1
            return hook(state, bucket)

        return counted

    def make_register(original: Any) -> Any:
        def register_comm_hook(self: Any, state: object, hook: Any) -> None:
            original(self, state, counting(hook))
            setattr(self, HOOKED, True)

        return register_comm_hook

    def make_pre_forward(original: Any) -> Any:
        def _pre_forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
            if not getattr(self, HOOKED, False):
                setattr(self, HOOKED, True)
                try:
                    original_register(self, None, counting(default_hooks.allreduce_hook))
                except Exception as exc:  # e.g. a built-in hook the program registered itself
                    tracer.fail("accum.comm_hook", exc)
            if torch.is_grad_enabled():
                counts["micro"] += 1
            return original(self, *inputs, **kwargs)

        return _pre_forward

    original_register = DDP.register_comm_hook
    wrap(DDP, "register_comm_hook", make_register)
    wrap(DDP, "_pre_forward", make_pre_forward)

    def post_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        counts["steps"] += 1
        if counts["steps"] <= MAX_STEP_EVENTS:
            tracer.record(
                AccumStep(
                    n=counts["steps"],
                    micro=counts["micro"],
                    reductions=counts["reductions"],
                    line=tracer.where(),
                )
            )
        counts["micro"] = counts["reductions"] = 0

    register_optimizer_step_post_hook(post_hook)
