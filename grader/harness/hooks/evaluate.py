"""Evaluation: the samples each rank fed a model with gradients off (`torch.no_grad()`,
`torch.inference_mode()`), one short hash per sample, so that checks can tell a rank's own shard
from the whole dataset and find the duplicates a DistributedSampler pads in.

Only the outermost module call counts (a model's layers see the same batch again). Only runs whose
exercise has an `eval.*` check install it: a global module hook costs a little on every call.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.modules.module import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
)

from grader.events import EvalRows
from grader.harness.hooks.ddp import _row_hashes
from grader.harness.tracer import Tracer

MAX_ROWS = 16_384  # per rank


def wanted(tracer: Tracer) -> bool:
    return any(str(c).startswith("eval.") for c in tracer.settings.checks or ())


def install(tracer: Tracer) -> None:
    if not wanted(tracer):
        return
    seen: dict[str, Any] = {"depth": 0, "rows": [], "forwards": 0, "line": None, "failed": False}

    def pre_hook(module: Any, args: Any) -> None:
        seen["depth"] += 1
        if seen["depth"] != 1 or torch.is_grad_enabled():
            return
        seen["forwards"] += 1
        if seen["line"] is None:
            seen["line"] = tracer.where()

    def post_hook(module: Any, args: Any, kwargs: Any, output: Any) -> None:
        # Global pre-hooks see positional arguments only: the samples are read here, where the
        # keyword arguments (`model(**batch)`, `model(input_ids=...)`) are seen too.
        outermost = seen["depth"] == 1 and not torch.is_grad_enabled()
        seen["depth"] = max(0, seen["depth"] - 1)
        room = MAX_ROWS - len(seen["rows"])
        if outermost and room > 0 and not seen["failed"]:
            try:
                seen["rows"].extend(_row_hashes(args, kwargs)[:room])
            except Exception as exc:  # recorded once: the run then grades as a platform error
                seen["failed"] = True
                tracer.fail("evaluate.rows", exc)

    register_module_forward_pre_hook(pre_hook)
    register_module_forward_hook(post_hook, with_kwargs=True, always_call=True)
    tracer.finalizers.append(
        lambda: tracer.record(
            EvalRows(rows=seen["rows"], forwards=seen["forwards"], line=seen["line"])
        )
    )
