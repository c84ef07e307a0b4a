"""Gradients averaged by hand: the gradients around the first optimizer step.

For programs that average gradients by hand (no DDP), the gradient each rank's *unscaled* loss
gives (a second `autograd.grad` on the tensor the program back-propagates, however its loss was
written, with a loss divided by the world size read back from the graph) and the gradient the
optimizer actually used at the first step are recorded as small linear sketches (random
projections): the sketch of the mean is the mean of the sketches, so a check can compare "what
the learner's averaging produced" with "the mean of every rank's own gradient" (what DDP gives,
which equals the full-batch gradient for a mean loss over equal shards) without shipping tensors.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from grader.events import HandCarry, HandGrads, Weights
from grader.harness.replay import scaled_root
from grader.harness.tracer import Tracer, quiet, wrap

# Wraps torch.autograd.backward over the ddp hook's wrapper, and observes the first step after
# the optim hook's step hooks.
AFTER = ("ddp", "optim")

MAX_PARAM_EVENTS = 2000
MAX_TRACKED_NUMEL = 2_000_000
PROJECTIONS = 4
MAX_LEAVES = 64
MAX_GRAPH_NODES = 20_000


def _leaves(loss: torch.Tensor) -> list[torch.Tensor]:
    """The leaf tensors (parameters) that `loss` depends on, in graph order."""
    found: list[torch.Tensor] = []
    seen: set[int] = set()
    stack = [loss.grad_fn]
    visited = 0
    while stack and visited < MAX_GRAPH_NODES:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        visited += 1
        var = getattr(node, "variable", None)
        if isinstance(var, torch.Tensor):
            found.append(var)
            continue
        stack.extend(fn for fn, _ in reversed(node.next_functions))
    return found


def sketch(tensors: list[torch.Tensor | None]) -> list[list[float]]:
    """Per tensor: its sum and PROJECTIONS random projections (fixed seeds, same on every rank)."""
    out: list[list[float]] = []
    for i, t in enumerate(tensors):
        if t is None:
            out.append([])
            continue
        flat = t.detach().reshape(-1).to("cpu", torch.float64)
        gen = torch.Generator().manual_seed(7919 + i)
        rand = torch.randn(PROJECTIONS, flat.numel(), generator=gen, dtype=torch.float64)
        out.append([float(flat.sum()), *(float(v) for v in rand @ flat)])
    return out


def install(tracer: Tracer) -> None:
    checks = tracer.settings.checks
    if checks is not None and "allreduce.grad_average" not in checks:
        return
    grads: dict[str, Any] = {
        "leaves": None,
        "local": None,
        "n_losses": 0,
        "done": False,
        "updated": False,
        "first_digest": None,
        "world_scaled": False,
        "micro": [],
    }
    tracer.state["hand_grads"] = grads
    _install_grads(tracer, grads)


def world_scale(loss: torch.Tensor, gradient: Any, world: int) -> float:
    """The factor 1/world_size the learner put on the loss before backward, else 1 (one
    micro-step per optimizer step: see `loss_factor` and `mean_scale`)."""
    factor, summed = loss_factor(loss, gradient)
    return mean_scale(factor, summed, world, 1)


def loss_factor(loss: torch.Tensor, gradient: Any) -> tuple[float, int | None]:
    """(the constant factor applied last to the loss, how many elements the `.sum()` under it
    added up, None if it is no sum). Read from the backward graph as the core's replay does
    (`scaled_root`)."""
    r, base = scaled_root(loss) or (1.0, None)
    if isinstance(gradient, torch.Tensor) and gradient.numel() == 1:
        r *= float(gradient)
    return r, _summed_numel(base)


def mean_scale(factor: float, summed: int | None, world: int, micro_steps: int) -> float:
    """The part of a loss factor that turns the rank's own loss into its share of the mean over
    the global batch, which the check divides out again: 1/k over k accumulation micro-steps,
    1/world_size (before a plain SUM all-reduce), or both; else 1.

    `errors.sum() / n` over n summed elements is the loss's own mean, not a scaling; so is
    `errors.sum() / (n * world_size)` a division by the world size. Which one a factor is comes
    from this run's own micro-steps and world size, never from its value alone.
    """
    if factor <= 0 or (summed and math.isclose(factor * summed, 1.0, rel_tol=1e-6)):
        return 1.0
    for denominator in dict.fromkeys((micro_steps, world, micro_steps * world)):
        if denominator <= 1:
            continue
        if math.isclose(factor * denominator, 1.0, rel_tol=1e-6):
            return factor
        if summed and math.isclose(factor * summed * denominator, 1.0, rel_tol=1e-6):
            return 1.0 / denominator
    return 1.0


def _summed_numel(node: Any) -> int | None:
    """How many elements a `.sum()` node added up (None for any other node)."""
    if node is None or not type(node).__name__.startswith("SumBackward"):
        return None
    sizes = getattr(node, "_saved_self_sym_sizes", None)
    return math.prod(int(v) for v in sizes) if sizes is not None else None


def _install_grads(tracer: Tracer, grads: dict[str, Any]) -> None:
    """The gradient each rank's own loss gives and the one its first update used.

    Observed at backward: the tensor the program back-propagates is its loss, however it was
    written (nn.MSELoss, F.cross_entropy, `((out - y) ** 2).mean()`, a sum divided by the batch
    size, ...), so no loss function needs to be recognised.
    """

    def training_loss(tensor: Any) -> bool:
        return (
            isinstance(tensor, torch.Tensor)
            and tensor.numel() == 1
            and tensor.grad_fn is not None
            and not tracer.state.get("ddp_models")
        )

    def ensure_leaves(loss: torch.Tensor) -> list[torch.Tensor] | None:
        if grads["leaves"] is None:
            leaves = [t for t in _leaves(loss) if t.requires_grad][:MAX_LEAVES]
            if sum(t.numel() for t in leaves) > MAX_TRACKED_NUMEL:
                grads["done"] = grads["updated"] = True  # too big to digest at every loss
                grads["leaves"] = []
            else:
                grads["leaves"] = leaves or None
        return grads["leaves"]

    def on_loss(loss: torch.Tensor, gradient: Any, leaves: list[torch.Tensor]) -> None:
        if grads["done"] or grads["updated"] or tracer.steps:
            return
        outputs = gradient if isinstance(gradient, torch.Tensor) else None
        got = torch.autograd.grad(
            loss, leaves, grad_outputs=outputs, retain_graph=True, allow_unused=True
        )
        # Gradient accumulation gives several losses before the first step: each is kept with
        # its factor until the step says how many micro-steps there were (`local_gradient`).
        grads["micro"].append((sketch(list(got)), *loss_factor(loss, gradient)))
        grads["local"] = True
        grads["n_losses"] += 1

    seen = {"params": 0}

    def track_params(leaves: list[torch.Tensor]) -> None:
        """Before each backward: a digest of the weights (= after the previous update).

        It sees updates however they are made (optimizer.step, or by hand: p -= lr * p.grad);
        an update by hand before any optimizer step is where the averaged gradient is read.
        """
        h = hashlib.blake2b(digest_size=12)
        total = 0.0
        with torch.no_grad():
            for t in leaves:
                data = t.detach().to("cpu").contiguous()
                h.update(data.view(torch.uint8).numpy().tobytes())
                total += float(data.double().sum())
        digest = h.hexdigest()
        if grads["first_digest"] is None:
            grads["first_digest"] = digest
        elif not tracer.steps and not grads["updated"] and digest != grads["first_digest"]:
            grads["updated"] = True
            emit_used(None, "the next backward pass")
        if seen["params"] < MAX_PARAM_EVENTS:
            seen["params"] += 1
            tracer.record(Weights(i=seen["params"], digest=digest, sum=total))

    def check_carried(leaves: list[torch.Tensor]) -> None:
        """At the first backward after the first update: were its gradients cleared?"""
        grads["carry_checked"] = True
        carried = any(t.grad is not None and bool(t.grad.any()) for t in leaves)
        tracer.record(HandCarry(carried=carried, line=tracer.where()))

    def make_backward(original: Any) -> Any:
        def backward(*args: Any, **kwargs: Any) -> Any:
            loss: Any = args[0] if args else kwargs.get("tensors")
            gradient = args[1] if len(args) > 1 else kwargs.get("grad_tensors")
            try:
                if not grads["done"] and training_loss(loss):
                    with quiet():
                        leaves = ensure_leaves(loss)
                        if leaves:
                            track_params(leaves)
                            on_loss(loss, gradient, leaves)
                elif grads["leaves"] and not grads.get("carry_checked") and training_loss(loss):
                    with quiet():
                        check_carried(grads["leaves"])
            except Exception as exc:
                grads["done"] = True
                tracer.fail("hand_grads", exc)
            return original(*args, **kwargs)

        return backward

    wrap(torch.autograd, "backward", make_backward)

    def emit_used(optimizer: Any, how: str) -> None:
        """The gradient the update used, read at the first step (or zero_grad) after the loss."""
        if grads["done"] or grads["local"] is None:
            return
        leaves = grads["leaves"]
        if how != "step" and all(t.grad is None or not bool(t.grad.any()) for t in leaves):
            return
        grads["done"] = True
        try:
            with quiet():
                groups = optimizer.param_groups if optimizer is not None else [{"params": leaves}]
                in_opt = {id(p) for g in groups for p in g["params"]}
                names = _names(tracer, leaves)
                used = sketch([t.grad for t in leaves])
                local, world_scaled = local_gradient(grads["micro"], tracer.world_size)
            tracer.record(
                HandGrads(
                    line=tracer.where(),
                    names=names,
                    shapes=[list(t.shape) for t in leaves],
                    in_optimizer=[id(t) in in_opt for t in leaves],
                    local=local,
                    used=used,
                    n_losses=grads["n_losses"],
                    world_scaled=world_scaled,
                    read_at=how,
                )
            )
        except Exception as exc:
            tracer.fail("hand_grads", exc)

    def pre_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        emit_used(optimizer, "step")

    register_optimizer_step_pre_hook(pre_step)

    def make_zero_grad(original: Any) -> Any:
        def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not grads["done"] and grads["local"] is not None:
                emit_used(None, "zero_grad")
            return original(self, *args, **kwargs)

        return zero_grad

    wrap(torch.nn.Module, "zero_grad", make_zero_grad)


def local_gradient(
    micro: list[tuple[list[list[float]], float, int | None]], world: int
) -> tuple[list[list[float]], bool]:
    """This rank's share of the mean over the global batch, unscaled: the mean over its k
    micro-steps of each loss's own gradient (what DDP averages over the ranks), and whether a
    factor divided out was one over the world size."""
    k = len(micro)
    total: list[list[float]] = []
    world_scaled = False
    for rows, factor, summed in micro:
        scale = mean_scale(factor, summed, world, k)
        world_scaled |= scale != 1.0 and not math.isclose(scale * k, 1.0, rel_tol=1e-6)
        rows = [[v / scale / k for v in row] for row in rows]
        total = (
            [
                [a + b for a, b in zip(x, y, strict=False)] if x and y else x or y
                for x, y in zip(total, rows, strict=False)
            ]
            if total
            else rows
        )
    return total, world_scaled


def _names(tracer: Tracer, leaves: list[torch.Tensor]) -> list[str]:
    """Parameter names, from the modules the learner's program created (found via gc)."""
    import gc

    wanted = {id(t): i for i, t in enumerate(leaves)}
    names: list[str | None] = [None] * len(leaves)
    best = 0
    for obj in gc.get_objects():
        if not isinstance(obj, torch.nn.Module):
            continue
        params = dict(obj.named_parameters())
        hits = sum(id(p) in wanted for p in params.values())
        if hits > best:
            best = hits
            for n, p in params.items():
                if id(p) in wanted:
                    names[wanted[id(p)]] = n
            if hits == len(leaves):
                break
    return [n or f"tensor {i}" for i, n in enumerate(names)]
