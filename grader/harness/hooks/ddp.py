"""DistributedDataParallel: construction, forward (replay capture), no_sync, backward."""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils import _pytree as pytree

from grader.events import Consumed, DdpForward, DdpInit, DdpSummary, NoSync
from grader.harness import replay
from grader.harness.leaves import tensor_leaves
from grader.harness.tracer import Tracer, wrap


def bare_module(ddp: Any) -> Any:
    """The plain model inside a DDP wrapper: torch.compile'd models hold it as `_orig_mod`."""
    module = ddp.module
    while isinstance(getattr(module, "_orig_mod", None), torch.nn.Module):
        module = module._orig_mod
    return module


def _describe(ddp: Any, *, index: int, line: int | None) -> DdpInit:
    module = bare_module(ddp)
    params = list(module.parameters())
    sd = module.state_dict()
    return DdpInit(
        index=index,
        line=line,
        compiled=module is not ddp.module,
        module=type(module).__name__,
        params=sum(p.numel() for p in params),
        devices=sorted({str(p.device) for p in params}),
        device_ids=[str(d) for d in (ddp.device_ids or [])],
        find_unused=bool(getattr(ddp, "find_unused_parameters", False)),
        keys=list(sd.keys())[:2000],
        shapes={k: list(v.shape) for k, v in list(sd.items())[:2000] if hasattr(v, "shape")},
    )


MAX_CONSUMED_ROWS = 8192  # per rank
ROW_PREFIX = 256  # elements of a sample hashed


def _row_hashes(inputs: Any, kwargs: Any) -> list[str]:
    """One short hash per sample of the forward's first batched tensor (positional or keyword,
    in any container): the same sample gives the same hash on every rank (hand-made batches cut
    from the same tensors)."""
    for leaf in tensor_leaves((inputs, kwargs)):
        if leaf.dim() >= 1 and leaf.shape[0] > 0:
            rows = leaf.detach().reshape(leaf.shape[0], -1)[:, :ROW_PREFIX].to("cpu").contiguous()
            return [
                hashlib.blake2b(row.view(torch.uint8).numpy().tobytes(), digest_size=6).hexdigest()
                for row in rows
            ]
    return []


def _on_backward(out: Any, fire: Any) -> None:
    """Call fire() once, when a backward first reaches any of the forward's outputs."""
    done = {"fired": False}

    def hook(grad: Any) -> None:
        if not done["fired"]:
            done["fired"] = True
            fire()

    for leaf in pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor) and leaf.requires_grad:
            leaf.register_hook(hook)


def install(tracer: Tracer) -> None:
    models: list[Any] = []
    tracer.state["ddp_models"] = models
    forwards: dict[str, Any] = {"total": 0, "synced": 0, "first_line": None}
    # The samples each training forward fed the model, batch by batch, for judging sharding
    # when no DataLoader or DistributedSampler handed them out (hand-made batches).
    consumed: dict[str, Any] = {"rows": 0, "batches": []}

    def _consume(rows: list[str]) -> None:
        room = MAX_CONSUMED_ROWS - consumed["rows"]
        if room > 0:
            consumed["batches"].append(rows[:room])
            consumed["rows"] += min(room, len(rows))

    def make_init(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            line = tracer.where()
            original(self, *args, **kwargs)
            models.append(self)
            index = len(models) - 1
            try:
                record = _describe(self, index=index, line=line)
            except Exception as exc:
                tracer.fail("ddp_init", exc)
                record = DdpInit(index=index, line=line, error=repr(exc))
            tracer.record(record)

        return __init__

    def make_forward(original: Any) -> Any:
        def forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
            forwards["total"] += 1
            grad = torch.is_grad_enabled()
            if forwards["total"] == 1:
                forwards["first_line"] = tracer.where()
                tracer.record(DdpForward(line=forwards["first_line"], steps=tracer.steps))
            if grad and self.require_backward_grad_sync:
                tracer.state["pending_sync"] = True
                forwards["synced"] += 1
            micro = None
            if grad:
                try:
                    micro = replay.capture_forward(tracer, self, inputs, kwargs)
                except Exception as exc:
                    replay.give_up(tracer, f"capture failed ({type(exc).__name__})")
                    tracer.fail("replay capture", exc)
            out = original(self, *inputs, **kwargs)
            if micro is not None:
                try:
                    out = replay.attach_output(micro, out)
                except Exception as exc:
                    replay.give_up(tracer, f"capture failed ({type(exc).__name__})")
                    tracer.fail("replay capture", exc)
            if grad and consumed["rows"] < MAX_CONSUMED_ROWS:
                try:
                    rows = _row_hashes(inputs, kwargs)
                    if rows:
                        # Counted once a backward runs through this forward: the samples it
                        # trained on (an evaluation forward never gets one).
                        _on_backward(out, lambda: _consume(rows))
                except Exception as exc:
                    tracer.fail("consumed rows", exc)
            return out

        return forward

    def make_no_sync(original: Any) -> Any:
        def no_sync(self: Any) -> Any:
            n = tracer.state.get("no_sync", 0)
            tracer.state["no_sync"] = n + 1
            if n == 0:
                tracer.record(NoSync(line=tracer.where()))
            return original(self)

        return no_sync

    def make_backward(original: Any) -> Any:
        def backward(*args: Any, **kwargs: Any) -> Any:
            if replay.capturing(tracer):
                try:
                    replay.record_backward_root(tracer, args[0] if args else kwargs.get("tensors"))
                except Exception as exc:
                    tracer.fail("replay backward", exc)
            out = original(*args, **kwargs)
            if replay.capturing(tracer):
                try:
                    replay.snapshot_after_backward(tracer)
                except Exception as exc:
                    tracer.fail("replay backward", exc)
            if tracer.state.pop("pending_sync", False):
                tracer.sync += 1
            return out

        return backward

    wrap(DDP, "__init__", make_init)
    wrap(DDP, "forward", make_forward)
    wrap(DDP, "no_sync", make_no_sync)
    wrap(torch.autograd, "backward", make_backward)
    tracer.finalizers.append(lambda: tracer.record(Consumed(batches=consumed["batches"])))
    tracer.finalizers.append(
        lambda: tracer.record(
            DdpSummary(
                forwards=forwards["total"],
                synced_forwards=forwards["synced"],
                no_sync=tracer.state.get("no_sync", 0),
            )
        )
    )
