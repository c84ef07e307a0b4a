"""A sharded optimizer written by hand (zero-by-hand, issue 37): every training step judged
against an unsharded optimizer, and the optimizer state each rank keeps.

A training step starts at the first `optimizer.step()` after a forward through the DDP model.
There the hook copies the model's parameters and gradients (a gradient the program already set to
None is taken from the end of the last backward pass). When the next forward through the DDP
model starts, or the program ends, the step is over: an unsharded optimizer of the class and
hyperparameters of the first optimizer that stepped, over copies of the model's parameters, takes
the same step from the copied parameters with the copied gradients, and the model's parameters
must equal its result, whatever the program did in between (a broadcast per parameter, an
all-gather of flat shards, ...). The same unsharded optimizer keeps its state from step to step,
so its state is what one rank would hold without sharding: the bytes of tensors in the states of
the optimizers this rank stepped are compared with it (`grader/checks/zero_hand.py`).

Nothing here changes what the program computes: the copies live apart from the model.
"""

from __future__ import annotations

import hashlib
import weakref
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from grader.events import ShardedStep
from grader.harness.tracer import Tracer, quiet, wrap

# Its DDP.forward and backward wrappers outside those of the other hooks; its optimizer hooks
# after optim's (registration order), so the step digest is recorded first.
AFTER = ("ddp", "hang", "optim")
CHECKS = ("zero.matches_unsharded", "zero.state_sharded", "zero.replicas_in_sync")
MAX_STEPS = 200
MAX_PARAMS = 2_000_000  # elements: above this the unsharded copy is not kept
# Optimizers that wrap another one (whose own steps the hooks see too): not counted twice.
WRAPPERS = frozenset({"ZeroRedundancyOptimizer"})


def wanted(tracer: Tracer) -> bool:
    checks = tracer.settings.checks
    return checks is None or any(c in CHECKS for c in checks)


def state_bytes(optimizer: Any) -> int:
    """Bytes of the tensors in an optimizer's per-parameter state (each storage once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for st in list(getattr(optimizer, "state", {}).values()):
        if not isinstance(st, dict):
            continue
        for value in st.values():
            if isinstance(value, torch.Tensor):
                key = (value.untyped_storage().data_ptr(), int(value.storage_offset()))
                if key in seen and value.numel():
                    continue
                seen.add(key)
                total += value.numel() * value.element_size()
    return total


def _hyper(optimizer: Any) -> dict[str, Any]:
    group = optimizer.param_groups[0] if optimizer.param_groups else {}
    known = set(getattr(optimizer, "defaults", {}))
    return {k: v for k, v in group.items() if k != "params" and (not known or k in known)}


def _lr(hyper: dict[str, Any]) -> float | None:
    lr = hyper.get("lr")
    if isinstance(lr, torch.Tensor) and lr.numel() == 1:
        return float(lr)
    return float(lr) if isinstance(lr, (int, float)) else None


def _digest(params: list[torch.Tensor]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in params:
        h.update(p.detach().reshape(-1).to("cpu").contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _raw_step(optimizer: Any) -> None:
    """optimizer.step() without the global step hooks (this hook's, and optim's, which would
    count the reference's steps as the program's)."""
    fn = type(optimizer).step
    if getattr(fn, "hooked", False) and hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    fn(optimizer)


class _Judge:
    """The state of one rank: the step under way and the unsharded optimizer."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        # id -> optimizer, in the order they stepped, and in the order their steps returned;
        # only those the program still holds (one rebuilt every step keeps no state).
        self.optimizers: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self.finished: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self.pending: dict[str, Any] | None = None
        self.last_grads: dict[int, torch.Tensor] = {}
        self.shadow: list[torch.Tensor] | None = None
        self.shadow_opt: Any = None
        self.n = 0
        self.broken: str | None = None

    def model(self) -> Any:
        models = self.tracer.state.get("ddp_models") or []
        return models[-1].module if models else None

    def after_backward(self) -> None:
        model = self.model()
        if model is None:
            return
        self.last_grads = {
            id(p): p.grad.detach().clone()
            for p in model.parameters()
            if p.grad is not None and p.requires_grad
        }

    def before_step(self, optimizer: Any) -> None:
        if type(optimizer).__name__ not in WRAPPERS:
            self.optimizers.setdefault(id(optimizer), optimizer)
        if self.pending is not None:
            # Each optimizer's hyperparameters as it steps (a schedule may change them after).
            self.pending["hypers"].setdefault(id(optimizer), _hyper(optimizer))
            return
        if self.n >= MAX_STEPS:
            return
        model = self.model()
        if model is None:
            return
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if sum(p.numel() for _, p in named) > MAX_PARAMS:
            return
        grads: list[torch.Tensor | None] = []
        for _, p in named:
            g = p.grad if p.grad is not None else self.last_grads.get(id(p))
            grads.append(None if g is None else g.detach().clone())
        self.pending = {
            "names": [n for n, _ in named],
            "params": [p for _, p in named],
            "before": [p.detach().clone() for _, p in named],
            "grads": grads,
            "line": self.tracer.where(),
            "optimizer": optimizer,
            "hypers": {id(optimizer): _hyper(optimizer)},
        }

    def reference(self, pending: dict[str, Any]) -> Any:
        """The optimizer whose class and hyperparameters an unsharded one takes: the first whose
        step returned (the innermost one when a class of the program wraps torch's), preferring
        torch's own optimizers."""
        stepped = list(self.finished.values()) or [pending["optimizer"]]
        own = [o for o in stepped if type(o).__module__.startswith("torch.optim")]
        return (own or stepped)[0]

    def _unsharded(self, pending: dict[str, Any]) -> list[torch.Tensor]:
        """The unsharded optimizer's step from the copied parameters with the copied gradients."""
        reference = self.reference(pending)
        if self.shadow is None:
            self.shadow = [b.clone().requires_grad_(True) for b in pending["before"]]
            self.shadow_opt = type(reference)(self.shadow, **_hyper(reference))
        # The hyperparameters of this step (a learning-rate schedule changes them).
        hyper = pending["hypers"].get(id(reference)) or _hyper(reference)
        group = self.shadow_opt.param_groups[0]
        group.update({k: v for k, v in hyper.items() if k in group})
        with torch.no_grad():
            for s, b, g in zip(self.shadow, pending["before"], pending["grads"], strict=True):
                s.copy_(b)
                s.grad = None if g is None else g.clone()
        _raw_step(self.shadow_opt)
        return [s.detach() for s in self.shadow]

    def judge(self) -> None:
        pending, self.pending = self.pending, None
        if pending is None:
            return
        self.n += 1
        params: list[torch.Tensor] = pending["params"]
        reference = self.reference(pending)
        common: dict[str, Any] = {
            "n": self.n,
            "line": pending["line"],
            "optimizer": type(reference).__name__,
            "lr": _lr(pending["hypers"].get(id(reference)) or _hyper(reference)),
            "n_optimizers": len(self.optimizers),
            "n_params": len(params),
            "digest": _digest(params),
            "state_bytes": sum(state_bytes(o) for o in self.optimizers.values()),
        }
        if self.broken is None:
            try:
                expected = self._unsharded(pending)
            except Exception as exc:
                self.broken = f"{type(exc).__name__}: {str(exc)[:200]}"
        if self.broken is not None:
            self.tracer.record(ShardedStep(**common, error=self.broken))
            return
        worst, where, update, unchanged = 0.0, None, 0.0, 0
        with torch.no_grad():
            for name, p, b, e in zip(
                pending["names"], params, pending["before"], expected, strict=True
            ):
                now = p.detach().to(e.device, e.dtype)
                diff = float((now - e).abs().max()) if e.numel() else 0.0
                moved = float((e - b).abs().max()) if e.numel() else 0.0
                update = max(update, moved)
                if moved > 0 and torch.equal(now, b):
                    unchanged += 1
                if diff > worst:
                    worst, where = diff, name
        full = state_bytes(self.shadow_opt)
        elements = sum(p.numel() for p in params)
        largest = max((p.numel() for p in params), default=0)
        self.tracer.record(
            ShardedStep(
                **common,
                max_diff=worst,
                update=update,
                param=where,
                unchanged=unchanged,
                full_bytes=full,
                largest_bytes=(full * largest) // max(1, elements),
            )
        )


def install(tracer: Tracer) -> None:
    if not wanted(tracer):
        return
    judge = _Judge(tracer)

    def guarded(where: str, fn: Any, *args: Any) -> None:
        try:
            with quiet():
                fn(*args)
        except Exception as exc:
            tracer.fail(where, exc)

    def pre_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        guarded("zero_hand.before_step", judge.before_step, optimizer)

    def post_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        if type(optimizer).__name__ not in WRAPPERS:
            judge.optimizers.setdefault(id(optimizer), optimizer)
            judge.finished.setdefault(id(optimizer), optimizer)

    register_optimizer_step_pre_hook(pre_hook)
    register_optimizer_step_post_hook(post_hook)

    def make_forward(original: Any) -> Any:
        def forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
            if judge.pending is not None:
                guarded("zero_hand.judge", judge.judge)
            return original(self, *inputs, **kwargs)

        return forward

    def make_backward(original: Any) -> Any:
        def backward(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            guarded("zero_hand.after_backward", judge.after_backward)
            return out

        return backward

    wrap(DDP, "forward", make_forward)
    wrap(torch.autograd, "backward", make_backward)
    tracer.finalizers.append(lambda: guarded("zero_hand.judge", judge.judge))
