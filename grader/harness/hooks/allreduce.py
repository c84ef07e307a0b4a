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
    checks = tracer.settings.get("checks")
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
    }
    tracer.state["hand_grads"] = grads
    _install_grads(tracer, grads)


def world_scale(loss: torch.Tensor, gradient: Any, world: int) -> float:
    """The factor 1/world_size the learner put on the loss before backward, else 1.

    Read from the backward graph as the core's replay does (`scaled_root`): the constant factors
    applied last. `loss / world_size` (then a plain SUM all-reduce) is the world-size scaling;
    so is `errors.sum() / (n * world_size)` over n summed elements. `errors.sum() / n` is the
    loss's own mean, not a scaling.
    """
    r, base = scaled_root(loss) or (1.0, None)
    if isinstance(gradient, torch.Tensor) and gradient.numel() == 1:
        r *= float(gradient)
    if world <= 1 or r <= 0:
        return 1.0
    n = _summed_numel(base)
    if n and math.isclose(r * n, 1.0, rel_tol=1e-6):
        return 1.0  # the mean of n summed terms (if n == world size, the loss's own mean)
    if math.isclose(r * world, 1.0, rel_tol=1e-6):
        return r
    if n and math.isclose(r * n * world, 1.0, rel_tol=1e-6):
        return 1.0 / world
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
        scale = world_scale(loss, gradient, tracer.world_size)
        # The gradient of the rank's unscaled loss: what DDP would average.
        local = [[v / scale for v in row] for row in sketch(list(got))]
        if grads["local"] is None:
            grads["local"] = local
        else:  # gradient accumulation: several losses before the first step
            grads["local"] = [
                [a + b for a, b in zip(x, y, strict=False)] if x and y else x or y
                for x, y in zip(grads["local"], local, strict=False)
            ]
        grads["n_losses"] += 1
        if scale != 1.0:
            grads["world_scaled"] = True

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
            tracer.emit("weights", i=seen["params"], digest=digest, sum=total)

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
            except Exception as exc:
                grads["done"] = True
                tracer.emit("harness_error", where="allreduce", error=repr(exc)[:300])
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
            tracer.emit(
                "hand_grads",
                line=tracer.where(),
                names=names,
                shapes=[list(t.shape) for t in leaves],
                in_optimizer=[id(t) in in_opt for t in leaves],
                local=grads["local"],
                used=used,
                n_losses=grads["n_losses"],
                world_scaled=bool(grads.get("world_scaled")),
                read_at=how,
            )
        except Exception as exc:
            tracer.emit("harness_error", where="allreduce", error=repr(exc)[:300])

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
