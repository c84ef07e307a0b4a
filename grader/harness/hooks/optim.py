"""Optimizer steps: a digest of the parameters after every step, replay data, clipping,
and the faults the exercise asks to inject."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import time
from typing import Any

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from grader.events import ClosureLoss, Fault, Replay, Step
from grader.harness import replay, replay_judge
from grader.harness.tracer import Tracer, wrap
from grader.launch.wire import PlacedFault

MAX_SUMS = 64
DIGEST_SAMPLE = 4096  # elements per tensor hashed once a model is large
LARGE_MODEL = 5_000_000
MAX_CLOSURE_EVENTS = 200


def _digest(params: list[torch.Tensor]) -> tuple[str, list[float], list[float]]:
    """A hash of the parameters, and each tensor's sum and sum of squares (the sum alone cannot
    tell some updates apart: a two-class softmax layer's rows move in opposite directions)."""
    h = hashlib.blake2b(digest_size=16)
    large = sum(p.numel() for p in params) > LARGE_MODEL
    sums: list[float] = []
    squares: list[float] = []
    with torch.no_grad():
        for p in params:
            to_local = getattr(p, "to_local", None)  # a DTensor (FSDP2): this rank's shard
            p = to_local() if callable(to_local) else p
            flat = p.detach().reshape(-1)
            if large and flat.numel() > DIGEST_SAMPLE:
                step = max(1, flat.numel() // DIGEST_SAMPLE)
                flat = flat[::step]
            flat = flat.to("cpu")
            h.update(flat.contiguous().view(torch.uint8).numpy().tobytes())
            if len(sums) < MAX_SUMS:
                values = p.detach().double()
                sums.append(float(values.sum()))
                squares.append(float(values.square().sum()))
    return h.hexdigest(), sums, squares


def fault_event(fault: PlacedFault) -> Fault:
    """The record of a placed fault spec (`grader.launch.faults`); its "kind" (what to inject) is
    the spec's, not the event's."""
    return Fault(
        rank=fault.rank,
        attempt=fault.attempt,
        after=fault.after,
        after_steps=fault.after_steps,
        exit_code=fault.exit_code,
        placed=fault.placed,
        reference_steps=fault.reference_steps,
        snapshot_step=fault.snapshot_step,
        snapshot_path=fault.snapshot_path,
    )


def install(tracer: Tracer) -> None:
    optimizers: dict[int, int] = {}
    counts: dict[int, int] = {}
    faults = [
        f for f in tracer.settings.faults if f.rank == tracer.rank and f.attempt == tracer.attempt
    ]

    def names_for(params: list[torch.Tensor]) -> tuple[list[str], float]:
        by_id: dict[int, str] = {}
        for ddp in tracer.state.get("ddp_models", []):
            for n, p in ddp.module.named_parameters():
                by_id[id(p)] = n
        names = [by_id.get(id(p), f"param{i}") for i, p in enumerate(params)]
        frac = sum(id(p) in by_id for p in params) / max(1, len(params))
        return names, frac

    closure_calls = {"n": 0}

    def recording_closure(optimizer: Any, closure: Any) -> Any:
        """A line search (LBFGS's strong Wolfe) decides with the losses the closure returns:
        record them, so that ranks deciding on different losses show."""
        search = getattr(optimizer, "defaults", {}).get("line_search_fn")
        if not search:
            return closure

        def recorded(*a: Any, **k: Any) -> Any:
            out = closure(*a, **k)
            if closure_calls["n"] < MAX_CLOSURE_EVENTS:
                closure_calls["n"] += 1
                with contextlib.suppress(Exception):
                    tracer.record(
                        ClosureLoss(
                            call=closure_calls["n"],
                            step=tracer.steps,
                            loss=float(out),
                            line_search=str(search),
                            line=tracer.where(),
                        )
                    )
            return out

        return recorded

    began: dict[int, float] = {}  # id(optimizer) -> wall time its current step began

    def pre_hook(optimizer: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        began[id(optimizer)] = time.time()
        # args[0] is the optimizer itself; a closure computes the gradient inside the step.
        closure = kwargs.get("closure", args[1] if len(args) > 1 else None)
        first = replay.pending(tracer)
        if callable(closure):
            wrapped = recording_closure(optimizer, closure)
            if first:
                wrapped = replay.saving_closure(tracer, optimizer, wrapped)
            if wrapped is closure:
                return None
            if "closure" in kwargs:
                return args, {**kwargs, "closure": wrapped}
            return (args[0], wrapped, *args[2:]), kwargs
        if first:
            replay.try_save_window(tracer, optimizer)
        return None

    def post_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        index = optimizers.setdefault(id(optimizer), len(optimizers))
        n = counts.get(index, 0) + 1
        counts[index] = n
        tracer.steps += 1
        current = tracer.state.get("current_iter")
        if current is not None:
            current["steps"] += 1
        params = [p for g in optimizer.param_groups for p in g["params"]]
        digest, sums, squares = _digest(params)
        event = Step(
            opt=index,
            n=n,
            digest=digest,
            sums=sums,
            squares=squares,
            began=began.pop(id(optimizer), None),
        )
        if n == 1:
            names, frac = names_for(params)
            event = dataclasses.replace(
                event,
                names=names[:MAX_SUMS],
                ddp_frac=frac,
                line=tracer.where(),
                optimizer=type(optimizer).__name__,
            )
        tracer.record(event)
        for fault in faults:
            if tracer.steps == fault.after_steps:
                tracer.record(fault_event(fault))
                os._exit(fault.exit_code)

    register_optimizer_step_pre_hook(pre_hook)
    register_optimizer_step_post_hook(post_hook)

    clip_grad = torch.nn.utils.clip_grad

    def make_clip_norm(original: Any) -> Any:
        def clip_grad_norm_(
            parameters: Any, max_norm: float, norm_type: float = 2.0, *a: Any, **k: Any
        ) -> Any:
            replay.record_clip(tracer, "norm", max_norm=float(max_norm), norm_type=float(norm_type))
            return original(parameters, max_norm, norm_type, *a, **k)

        return clip_grad_norm_

    def make_clip_value(original: Any) -> Any:
        def clip_grad_value_(parameters: Any, clip_value: float, *a: Any, **k: Any) -> Any:
            replay.record_clip(tracer, "value", clip_value=float(clip_value))
            return original(parameters, clip_value, *a, **k)

        return clip_grad_value_

    def make_clip_with_norm(original: Any) -> Any:
        def clip_grads_with_norm_(parameters: Any, max_norm: float, *a: Any, **k: Any) -> Any:
            replay.record_clip(tracer, "norm", max_norm=float(max_norm))
            return original(parameters, max_norm, *a, **k)

        return clip_grads_with_norm_

    for owner in (torch.nn.utils, clip_grad):
        wrap(owner, "clip_grad_norm_", make_clip_norm)
        wrap(owner, "clip_grad_value_", make_clip_value)
        wrap(owner, "clip_grads_with_norm_", make_clip_with_norm)

    def finish() -> None:
        replay.mark_done(tracer)
        if tracer.rank == 0:
            try:
                outcomes = replay_judge.run_replays(tracer)
            except Exception as exc:  # the grader's fault, never the learner's
                tracer.fail("replay", exc)
                outcomes = [Replay(status="unavailable", reason=f"the replay failed ({exc!r})")]
            for outcome in outcomes:
                tracer.record(outcome)

    tracer.finalizers.append(finish)
