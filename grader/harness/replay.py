"""First-step replay: what the gradient of the first optimizer step should have been.

Each rank records, for every forward through DDP before its first optimizer step, the inputs, its
RNG state and the gradient that its backward sent into the forward's outputs (the cotangent, i.e.
the learner's own loss as they back-propagated it). Rank 0, after the program, replays every
rank's micro-steps one after the other on a copy of the model taken before the first step, averages
the per-rank gradients, applies the learner's own clipping, and compares that with the gradient
rank 0's optimizer actually used. A summed or twice-averaged gradient, or a step that never
synchronised, shows as a ratio or an error; everything is reported as numbers in one event.

Separately, the gradient that reached the value returned by a standard loss function (the scale
the learner applied to it before backward) is recorded per micro-step: a loss divided by the world
size shows there even though the replay, using the learner's own cotangents, agrees with it.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import math
import time
from typing import Any

import torch
from torch.utils import _pytree as pytree

from grader.events import Replay
from grader.harness import replay_name
from grader.harness.micro_mean import mean_step_numbers, micro_loss_scale
from grader.harness.tracer import Tracer

MAX_REPLAY_PARAMS = 20_000_000
WAIT_FOR_RANKS_S = 10.0
MAX_MICRO_STEPS = 64


def _raw_save() -> Any:
    return getattr(torch.save, "__wrapped__", torch.save)


def _raw_load() -> Any:
    return getattr(torch.load, "__wrapped__", torch.load)


def _to_cpu(tree: Any) -> Any:
    return pytree.tree_map(
        lambda v: v.detach().to("cpu", copy=True) if isinstance(v, torch.Tensor) else v, tree
    )


def _to_device(tree: Any, device: torch.device) -> Any:
    return pytree.tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, tree)


def state(tracer: Tracer) -> dict[str, Any]:
    return tracer.state.setdefault(
        "replay", {"model": None, "ddp": None, "micro": [], "clip": [], "off": None}
    )


def _params_digest(module: Any) -> str:
    h = hashlib.blake2b(digest_size=16)
    with torch.no_grad():
        for p in module.parameters():
            h.update(p.detach().reshape(-1).to("cpu").contiguous().view(torch.uint8).numpy())
    return h.hexdigest()


def _settled(st: dict[str, Any]) -> bool:
    """Nothing more to capture: the replay was given up, or the first step's data is saved."""
    return bool(st["off"] or st.get("saved"))


def _backward_ran(micro: dict[str, Any]) -> bool:
    return any(c is not None for c in micro.get("cotangents") or [])


def _gradients_cleared(module: Any) -> bool:
    """Every parameter's gradient is None or zero (zero_grad, set_to_none, or by hand)."""
    with torch.no_grad():
        return all(p.grad is None or not bool(p.grad.any()) for p in module.parameters())


def drop_cleared(tracer: Tracer) -> None:
    """The DDP model's gradients were all cleared: forward passes whose backward already ran
    (a probe before training, an earlier LBFGS evaluation) no longer count towards the first
    step. Micro-steps of gradient accumulation keep their gradients and so are kept."""
    st = state(tracer)
    if _settled(st) or st["ddp"] is None:
        return
    if any(_backward_ran(m) for m in st["micro"]) and _gradients_cleared(st["ddp"].module):
        st["micro"] = [m for m in st["micro"] if not _backward_ran(m)]


def capture_forward(tracer: Tracer, ddp: Any, inputs: Any, kwargs: Any) -> dict[str, Any] | None:
    """Before a DDP forward of the first step: remember what is needed to replay it."""
    st = state(tracer)
    if _settled(st) or not torch.is_grad_enabled():
        return None
    drop_cleared(tracer)
    if st["ddp"] is not None and not st["micro"]:
        st["ddp"] = None  # everything before was cleared: replay from the weights as they are now
    if st["ddp"] is None:
        numel = sum(p.numel() for p in ddp.module.parameters())
        if numel > MAX_REPLAY_PARAMS:
            st["off"] = f"the model has {numel} parameters; too many to replay"
            return None
        try:
            st["model"] = copy.deepcopy(ddp.module)
        except Exception as exc:
            st["off"] = f"the model could not be copied ({type(exc).__name__})"
            return None
        st["ddp"] = ddp
        st["start_digest"] = _params_digest(ddp.module)
    elif st["ddp"] is not ddp:
        st["off"] = "more than one DDP model ran before the first optimizer step"
        return None
    if len(st["micro"]) >= MAX_MICRO_STEPS:
        st["off"] = f"more than {MAX_MICRO_STEPS} forward passes ran before the first step"
        st["micro"].clear()
        return None
    micro: dict[str, Any] = {
        "inputs": _to_cpu(inputs),
        "kwargs": _to_cpu(kwargs),
        "rng": torch.get_rng_state(),
        "cuda_rng": None,
        "sync": bool(ddp.require_backward_grad_sync),
        # Per-module train/eval flags now (the model may end the program in eval mode).
        "training": [m.training for m in ddp.module.modules()],
        "root_scale": None,
        "autocast": _autocast_state(next(ddp.module.parameters()).device.type),
        "cotangents": None,
        "scales": [],
    }
    device = next(ddp.module.parameters()).device
    if device.type == "cuda":
        micro["cuda_rng"] = torch.cuda.get_rng_state(device)
    st["micro"].append(micro)
    return micro


class _Boundary(torch.autograd.Function):
    """Identity on a forward output; its backward records the gradient that came from outside
    the forward (a loss computed inside the model from another output does not count twice)."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, micro: dict[str, Any], index: int) -> torch.Tensor:
        ctx.micro, ctx.index = micro, index
        return tensor.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        seen = ctx.micro["cotangents"][ctx.index]
        g = grad.detach().to("cpu", copy=True)
        ctx.micro["cotangents"][ctx.index] = g if seen is None else seen + g
        return grad, None, None


def attach_output(micro: dict[str, Any], output: Any) -> Any:
    """The forward's output, each tensor behind a boundary that records its cotangent."""
    leaves, spec = pytree.tree_flatten(output)
    tensors = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
    micro["cotangents"] = [None] * len(tensors)
    for k, i in enumerate(tensors):
        if leaves[i].requires_grad:
            leaves[i] = _Boundary.apply(leaves[i], micro, k)
    return pytree.tree_unflatten(leaves, spec)


def _autocast_state(device_type: str) -> tuple[str, str] | None:
    for kind in dict.fromkeys((device_type, "cpu")):
        try:
            if torch.is_autocast_enabled(kind):
                return kind, str(torch.get_autocast_dtype(kind)).removeprefix("torch.")
        except (TypeError, RuntimeError, AttributeError):
            continue
    return None


def record_loss_scale(tracer: Tracer, loss: Any) -> None:
    """A standard loss function returned `loss`: record the factor applied to it before backward."""
    st = state(tracer)
    if _settled(st) or not st["micro"] or tracer.steps:
        return
    if not isinstance(loss, torch.Tensor) or not loss.requires_grad or loss.dim() != 0:
        return
    micro = st["micro"][-1]

    def hook(grad: torch.Tensor) -> None:
        micro["scales"].append(float(grad.detach().float().cpu()))

    loss.register_hook(hook)


def _constant(node: Any, index: int) -> float | None:
    """The constant operand `index` (0 self, 1 other) of a Mul/Div node, if it is one."""
    nexts = node.next_functions
    if len(nexts) < 2 or nexts[index][0] is not None:
        return None
    value = getattr(node, "_saved_other" if index == 1 else "_saved_self", None)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def root_scale(loss: Any) -> float | None:
    """The constant factor applied last to the tensor given to backward (`loss / 2` -> 0.5)."""
    scaled = scaled_root(loss)
    return scaled[0] if scaled is not None else None


def scaled_root(loss: Any) -> tuple[float, Any] | None:
    """(the constant factor applied last to a scalar loss, the graph node it was applied to):
    `errors.sum() / 8 / 2` -> (1/16, the SumBackward node)."""
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or loss.grad_fn is None:
        return None
    scale, node = 1.0, loss.grad_fn
    for _ in range(8):
        name = type(node).__name__
        d = _constant(node, 1) if name.startswith("DivBackward") else None
        if d:
            scale /= d
            below = node.next_functions[0][0]
        elif name.startswith("MulBackward") and (c := _constant(node, 1)) is not None:
            scale *= c
            below = node.next_functions[0][0]
        elif name.startswith("MulBackward") and (c := _constant(node, 0)) is not None:
            scale *= c
            below = node.next_functions[1][0]
        else:
            break
        if below is None:
            break
        node = below
    return scale, node


def record_backward_root(tracer: Tracer, tensors: Any) -> None:
    """Before a backward of the first step: the scale put on the loss after it was computed."""
    st = state(tracer)
    if _settled(st) or not st["micro"] or tracer.steps:
        return
    drop_cleared(tracer)
    if not st["micro"]:
        return
    micro = st["micro"][-1]
    if micro.get("root_scale") is None:
        micro["root_scale"] = root_scale(tensors)
        micro["backward_line"] = tracer.where()


def record_clip(tracer: Tracer, kind: str, **args: Any) -> None:
    if tracer.steps == 0:
        state(tracer)["clip"].append({"kind": kind, **args})


def save_first_step(tracer: Tracer, optimizer: Any) -> None:
    """At the first optimizer step that updates the DDP model: save this rank's replay data."""
    st = state(tracer)
    if st.get("saved") or st["ddp"] is None:
        return
    module = st["ddp"].module
    ids = {id(p) for g in optimizer.param_groups for p in g["params"]}
    named = [(n, p) for n, p in module.named_parameters() if id(p) in ids]
    if not named:
        return
    st["saved"] = True
    grads = {
        n: (p.grad.detach().to("cpu", copy=True) if p.grad is not None else None) for n, p in named
    }
    st["grads"] = grads
    data = {
        "amp_scale": st.get("amp_scale"),
        "start_digest": st.get("start_digest"),
        "rank": tracer.rank,
        "micro": [m for m in st["micro"] if m["cotangents"] is not None],
        "off": st["off"],
    }
    try:
        _raw_save()(data, tracer.trace_dir / replay_name(tracer.rank))
    except Exception as exc:
        st["off"] = f"the inputs could not be stored ({type(exc).__name__})"


def saving_closure(tracer: Tracer, optimizer: Any, closure: Any) -> Any:
    """`optimizer.step(closure)`: the closure computes the gradient inside the step (LBFGS calls
    it several times, moving the weights in between). The first call's gradient, taken at the
    starting weights, is the first step's: save it as soon as that call returns."""

    def first_step_closure(*args: Any, **kwargs: Any) -> Any:
        out = closure(*args, **kwargs)
        try_save_first_step(tracer, optimizer)
        return out

    return first_step_closure


def try_save_first_step(tracer: Tracer, optimizer: Any) -> None:
    """save_first_step while the first step is being taken; a failure turns the replay off and
    is recorded as the harness's (the learner's run never notices)."""
    if tracer.steps or state(tracer).get("saved"):
        return
    try:
        save_first_step(tracer, optimizer)
    except Exception as exc:
        state(tracer)["off"] = f"capture failed ({type(exc).__name__})"
        tracer.fail("replay capture", exc)


def _flat(grads: dict[str, Any], named: list[tuple[str, torch.Tensor]]) -> torch.Tensor:
    return torch.cat(
        [
            (grads[n] if grads.get(n) is not None else torch.zeros_like(p)).flatten().double().cpu()
            for n, p in named
        ]
    )


def snapshot_after_backward(tracer: Tracer) -> None:
    """After every backward before the first step: rank 0 keeps its DDP model's gradients."""
    st = state(tracer)
    if tracer.rank != 0 or _settled(st) or st["ddp"] is None or tracer.steps:
        return
    st["after_backward"] = {
        n: (p.grad.detach().to("cpu", copy=True) if p.grad is not None else None)
        for n, p in st["ddp"].module.named_parameters()
    }


def _replay_rank(model: Any, micros: list[dict[str, Any]], device: torch.device) -> None:
    modules = list(model.modules())
    for micro in micros:
        for module, training in zip(modules, micro.get("training", []), strict=False):
            module.training = training
        torch.set_rng_state(micro["rng"])
        if micro["cuda_rng"] is not None:
            torch.cuda.set_rng_state(micro["cuda_rng"], device)
        autocast = micro.get("autocast")
        context = (
            torch.autocast(autocast[0], dtype=getattr(torch, autocast[1]))
            if autocast
            else contextlib.nullcontext()
        )
        with context:
            out = model(*_to_device(micro["inputs"], device), **_to_device(micro["kwargs"], device))
        leaves = [v for v in pytree.tree_leaves(out) if isinstance(v, torch.Tensor)]
        pairs = [
            (leaf, cot.to(device))
            for leaf, cot in zip(leaves, micro["cotangents"], strict=False)
            if cot is not None and leaf.requires_grad
        ]
        if pairs:
            torch.autograd.backward([p[0] for p in pairs], [p[1] for p in pairs])


def _unavailable(reason: str) -> Replay:
    return Replay(status="unavailable", reason=reason)


def run_replay(tracer: Tracer) -> Replay:
    """On rank 0 after the program: the expected first-step gradient vs the one that was used."""
    st = state(tracer)
    if st["off"]:
        return _unavailable(st["off"])
    if "grads" not in st:
        return _unavailable("no optimizer step updated the DDP model")
    world = tracer.world_size
    data: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + WAIT_FOR_RANKS_S
    while len(data) < world and time.monotonic() < deadline:
        for r in range(world):
            path = tracer.trace_dir / replay_name(r)
            if r not in data and path.exists():
                with contextlib.suppress(Exception):
                    data[r] = _raw_load()(path, weights_only=False)
        if len(data) < world:
            time.sleep(0.2)
    missing = sorted(set(range(world)) - set(data))
    if missing:
        return _unavailable(f"no first-step data from ranks {missing}")
    for r, d in data.items():
        if d.get("off"):
            return _unavailable(f"rank {r}: {d['off']}")
    if len({d.get("start_digest") for d in data.values()}) > 1:
        # DDP broadcast rank 0's weights, yet the ranks entered the first step with different
        # ones: ddp.in_sync reports it; a replay from rank 0's weights would mislead.
        return _unavailable("the ranks began training with different weights")
    model = st["model"]
    device = next(model.parameters()).device
    saved_rng = torch.get_rng_state()
    totals: dict[str, torch.Tensor] = {}
    named = [(n, p) for n, p in model.named_parameters() if n in st["grads"]]
    # A GradScaler multiplied every rank's loss; the optimizer saw the unscaled gradient.
    amp = {r: float(d.get("amp_scale") or 1.0) for r, d in data.items()}
    # The mean over every micro-step of every rank of the gradient of its unscaled loss: what
    # gradient accumulation should step with, whatever factors the program applied on the way.
    unit: dict[str, torch.Tensor] | None = {}
    micro_total = 0
    for r in range(world):
        for micro in data[r]["micro"]:
            model.zero_grad(set_to_none=True)
            _replay_rank(model, [micro], device)
            scale = micro_loss_scale(micro)
            micro_total += 1
            for n, p in named:
                g = p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
                totals[n] = totals[n] + g if n in totals else g
                if unit is not None and scale:
                    # The replayed gradient and the loss scale both carry any GradScaler factor.
                    unscaled = g / scale
                    unit[n] = unit[n] + unscaled if n in unit else unscaled
            if not scale:
                unit = None
    torch.set_rng_state(saved_rng)
    stepped = _flat(st["grads"], named)
    accumulation = mean_step_numbers(unit, micro_total, stepped, [n for n, _ in named])
    for n, p in named:
        p.grad = totals[n] / world
    # B: rank 0's gradients right after its last backward (DDP's average); A: what its optimizer
    # got (after any clipping, unscaling or extra reduction the program did in between).
    after_backward = st.get("after_backward") or st["grads"]
    expected = torch.cat([p.grad.detach().flatten().double().cpu() for _, p in named])
    actual = _flat(after_backward, named)
    norm_e = float(expected.norm())
    if math.isnan(norm_e):
        return _unavailable("the expected first-step gradient is NaN")
    if norm_e == 0.0:
        # Every rank's loss has a zero gradient everywhere: nothing can train (e.g. cross-entropy
        # over a single output column, which is constant).
        return Replay(
            status="zero_gradient",
            world_size=world,
            norm_actual=float(actual.norm()),
            reason="the expected first-step gradient is zero",
        )
    rel = float((actual - expected).norm()) / norm_e
    ratio = float(actual.dot(expected)) / float(expected.dot(expected))
    bb = float(actual.dot(actual))
    step_ratio = float(stepped.dot(actual)) / bb if bb else 1.0
    off_line = float((stepped - step_ratio * actual).norm()) / max(float(stepped.norm()), 1e-30)
    worst_name, worst = None, -1.0
    for n, p in named:
        a = after_backward[n]
        e = p.grad.detach().double().cpu()
        a = a.double() if a is not None else torch.zeros_like(e)
        diff = float((a - e).norm()) / max(float(e.norm()), 1e-12)
        if diff > worst:
            worst_name, worst = n, diff
    return Replay(
        status="ok",
        world_size=world,
        rel_error=rel,
        ratio=ratio,
        norm_expected=norm_e,
        norm_actual=float(actual.norm()),
        worst_param=worst_name,
        micro_steps={str(r): len(d["micro"]) for r, d in data.items()},
        synced_micro_steps={str(r): sum(m["sync"] for m in d["micro"]) for r, d in data.items()},
        loss_scales={
            str(r): [[s / amp[r] for s in m["scales"]] for m in d["micro"]] for r, d in data.items()
        },
        root_scales={
            str(r): [m["root_scale"] / amp[r] if m.get("root_scale") else None for m in d["micro"]]
            for r, d in data.items()
        },
        # The learner's line of each micro-step's backward (where a loss factor is applied).
        backward_lines={
            str(r): [m.get("backward_line") for m in d["micro"]] for r, d in data.items()
        },
        amp_scale=amp[0] if amp[0] != 1.0 else None,
        # The optimizer's gradient as a multiple of the after-backward one (clipping, unscaling
        # and a divided gradient shrink it, an extra sum grows it) and how far off that line.
        step_ratio=step_ratio,
        step_parallel=off_line < 1e-3,
        clipped=bool(st["clip"]),
        **accumulation,
    )
