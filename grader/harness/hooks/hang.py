"""What a hang is made of (issue 25): the timeout the program gave its process group, the `Join`
contexts it entered, each DDP forward whose backward pass will all-reduce the gradients (DDP's own
collectives, which the dist hook cannot see: they run in C++), and DataLoaders that drop their
last short batch."""

from __future__ import annotations

import datetime
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils import _pytree as pytree
from torch.utils.data import DataLoader

from grader.events import JoinEnter, JoinExit, LoaderDropLast, PgTimeout, SyncedForward
from grader.harness.tracer import Tracer, wrap

# Its init_process_group wrapper is outside the dist hook's: it sees the learner's own timeout,
# before the dist hook caps it; its DDP.forward wrapper is outside the ddp hook's.
AFTER = ("dist", "ddp")
MAX_SYNCED = 4000


def _trainable_numel(model: Any) -> int:
    return sum(int(p.numel()) for p in model.parameters() if p.requires_grad)


def _on_backward(out: Any, fire: Any) -> None:
    """Call fire() once, when a backward pass first reaches any of the forward's outputs (before
    DDP's all-reduce of that backward runs): a forward that no backward follows (an evaluation
    with gradients on) all-reduces nothing."""
    done = {"fired": False}

    def hook(grad: Any) -> None:
        if not done["fired"]:
            done["fired"] = True
            fire()

    for leaf in pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor) and leaf.requires_grad:
            leaf.register_hook(hook)


def wanted(tracer: Tracer) -> bool:
    """Only an exercise with a `hang.*` check pays for these wrappers (DDP's forward, every
    DataLoader, Join) and their events; None: every hook observes (HarnessSettings)."""
    checks = tracer.settings.checks
    return checks is None or any(str(c).startswith("hang.") for c in checks)


def install(tracer: Tracer) -> None:
    if not wanted(tracer):
        return
    joined: list[set[int]] = []  # per open Join (innermost last): ids of its joinables
    numels: dict[int, int] = {}
    synced = {"n": 0}

    def make_init(original: Any) -> Any:
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            timeout = kwargs.get("timeout", args[2] if len(args) > 2 else None)
            seconds = given = None
            if isinstance(timeout, datetime.timedelta):
                seconds = timeout.total_seconds()
            elif timeout is not None:
                given = type(timeout).__name__
            tracer.record(PgTimeout(line=tracer.where(), seconds=seconds, given=given))
            return original(*args, **kwargs)

        return init_process_group

    def make_enter(original: Any) -> Any:
        def __enter__(self: Any) -> Any:
            joinables = list(getattr(self, "_joinables", []) or [])
            joined.append({id(j) for j in joinables})
            tracer.record(
                JoinEnter(line=tracer.where(), joinables=[type(j).__name__ for j in joinables])
            )
            return original(self)

        return __enter__

    def make_exit(original: Any) -> Any:
        def __exit__(self: Any, *exc: Any) -> Any:
            try:
                return original(self, *exc)
            finally:
                if joined:
                    joined.pop()
                tracer.record(JoinExit(line=tracer.where()))

        return __exit__

    def make_forward(original: Any) -> Any:
        def forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
            if not (torch.is_grad_enabled() and getattr(self, "require_backward_grad_sync", False)):
                return original(self, *inputs, **kwargs)
            key, line = id(self), tracer.where()
            in_join = any(key in ids for ids in joined)
            if key not in numels:
                try:
                    numels[key] = _trainable_numel(self.module)
                except Exception as exc:
                    tracer.fail("hang.numel", exc)
                    numels[key] = 0

            def backward_reached() -> None:
                if synced["n"] < MAX_SYNCED:
                    synced["n"] += 1
                    tracer.record(
                        SyncedForward(n=synced["n"], line=line, numel=numels[key], in_join=in_join)
                    )

            out = original(self, *inputs, **kwargs)
            try:
                _on_backward(out, backward_reached)
            except Exception as exc:
                tracer.fail("hang.synced_forward", exc)
            return out

        return forward

    def make_loader_init(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            batch_sampler = getattr(self, "batch_sampler", None)
            if getattr(self, "drop_last", False) or getattr(batch_sampler, "drop_last", False):
                tracer.record(LoaderDropLast(line=tracer.where()))

        return __init__

    for owner in (dist, c10d):
        wrap(owner, "init_process_group", make_init)
    wrap(Join, "__enter__", make_enter)
    wrap(Join, "__exit__", make_exit)
    wrap(DDP, "forward", make_forward)
    wrap(DataLoader, "__init__", make_loader_init)
