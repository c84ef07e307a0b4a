"""Replay of optimizer steps: what the gradient of each sampled step should have been.

Each rank records, for every forward through DDP in a sampled window (the forwards and backwards
that lead to one optimizer step), the inputs, its RNG state and the gradient that its backward sent
into the forward's outputs (the cotangent, i.e. the learner's own loss as they back-propagated it).
Rank 0 also keeps the weights the window started from. After the program, rank 0 replays every
rank's micro-steps of each window one after the other on a copy of the model
(`grader/harness/replay_judge.py`), averages the per-rank gradients and compares that with the
gradient rank 0's optimizer actually used. A summed or twice-averaged gradient, a step that never
synchronised, or gradients of earlier steps carried into a later one (no zero_grad) show as a
ratio or an error; everything is reported as numbers in one event per window.

The windows sampled: the first two steps, every power of two, and a later step of each new pass
over a data loader (an epoch), at most MAX_WINDOWS (`sampled`).

Separately, the gradient that reached the value returned by a standard loss function (the scale
the learner applied to it before backward) and the micro-step's loss weight
(`grader/harness/loss_weight.py`) are recorded per micro-step: a loss divided by the world size
shows there even though the replay, using the learner's own cotangents, agrees with it.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import sys
from typing import Any

import torch
from torch.utils import _pytree as pytree

from grader.harness import replay_done_name, replay_name
from grader.harness.loss_weight import call_weight, root_weight
from grader.harness.tracer import Tracer

MAX_REPLAY_PARAMS = 20_000_000
# Above this, only the first window is replayed (rank 0 keeps each window's starting weights).
MAX_LATER_WINDOW_PARAMS = 5_000_000
MAX_MICRO_STEPS = 64
MAX_WINDOWS = 6
# Later windows only while this rank's saved replay data stays under this (it shares the disk).
MAX_REPLAY_BYTES = 64 * 2**20


def _raw_save() -> Any:
    return getattr(torch.save, "__wrapped__", torch.save)


def _to_cpu(tree: Any) -> Any:
    return pytree.tree_map(
        lambda v: v.detach().to("cpu", copy=True) if isinstance(v, torch.Tensor) else v, tree
    )


def shared(tracer: Tracer) -> dict[str, Any]:
    """What the windows share: rank 0's copy of the model, its record of every saved window (by
    step), the loader passes already sampled, and a reason that turns every window off."""
    return tracer.state.setdefault(
        "replay_all",
        {"model": None, "windows": {}, "passes": set(), "sampled": 0, "off": None, "main": None},
    )


def give_up(tracer: Tracer, reason: str) -> None:
    """The harness failed while capturing: no window of this run is replayed."""
    shared(tracer)["off"] = state(tracer)["off"] = reason


def _new_window(step: int, sampled: bool) -> dict[str, Any]:
    return {"step": step, "sampled": sampled, "ddp": None, "micro": [], "clip": [], "off": None}


def state(tracer: Tracer) -> dict[str, Any]:
    """The window that ends with the next optimizer step (created by its first DDP forward)."""
    st = tracer.state.get("replay")
    if st is None:
        st = tracer.state["replay"] = _new_window(tracer.steps + 1, True)
    return st


def sampled(tracer: Tracer, step: int) -> bool:
    """Whether the window ending with optimizer step `step` is replayed: the first two, powers of
    two, and a later step (not the first) of every new pass over a data loader."""
    everything = shared(tracer)
    if everything["sampled"] >= MAX_WINDOWS or everything.get("bytes", 0) > MAX_REPLAY_BYTES:
        return False
    current = tracer.state.get("current_iter")
    later_in_new_pass = (
        current is not None and current["steps"] >= 1 and current["id"] not in everything["passes"]
    )
    if step <= 2 or step & (step - 1) == 0 or later_in_new_pass:
        if current is not None and current["steps"] >= 1:
            everything["passes"].add(current["id"])
        everything["sampled"] += 1
        return True
    return False


def _window(tracer: Tracer) -> dict[str, Any]:
    """The current window, a new one when the last optimizer step ended the previous one."""
    st = tracer.state.get("replay")
    step = tracer.steps + 1
    if st is None or st["step"] != step:
        st = tracer.state["replay"] = _new_window(step, sampled(tracer, step))
    return st


def capturing(tracer: Tracer) -> bool:
    """A sampled window is being recorded (its first DDP forward ran, its step not yet taken)."""
    st = tracer.state.get("replay")
    return bool(
        st is not None
        and st["step"] == tracer.steps + 1
        and st["sampled"]
        and not st["off"]
        and not st.get("saved")
        and st["micro"]
    )


def _params_digest(module: Any) -> str:
    h = hashlib.blake2b(digest_size=16)
    with torch.no_grad():
        for p in module.parameters():
            h.update(p.detach().reshape(-1).to("cpu").contiguous().view(torch.uint8).numpy())
    return h.hexdigest()


def _settled(st: dict[str, Any]) -> bool:
    """Nothing more to capture in this window: not sampled, given up, or its data is saved."""
    return bool(not st["sampled"] or st["off"] or st.get("saved"))


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
    """Before a DDP forward of a sampled window: remember what is needed to replay it."""
    st = _window(tracer)
    if _settled(st) or not torch.is_grad_enabled():
        return None
    everything = shared(tracer)
    drop_cleared(tracer)
    if st["ddp"] is not None and not st["micro"]:
        st["ddp"] = None  # everything before was cleared: replay from the weights as they are now
    if st["ddp"] is None:
        if everything["off"]:
            st["off"] = everything["off"]
            return None
        numel = sum(p.numel() for p in ddp.module.parameters())
        if numel > MAX_REPLAY_PARAMS or (st["step"] > 1 and numel > MAX_LATER_WINDOW_PARAMS):
            st["off"] = f"the model has {numel} parameters; too many to replay"
            if everything["windows"] or numel > MAX_REPLAY_PARAMS:
                everything["off"] = st["off"]
            return None
        if tracer.rank == 0:
            try:
                if everything["model"] is None:
                    everything["model"] = copy.deepcopy(ddp.module)
                st["start_state"] = {
                    k: v.detach().to("cpu", copy=True) for k, v in ddp.module.state_dict().items()
                }
            except Exception as exc:
                everything["off"] = st["off"] = (
                    f"the model could not be copied ({type(exc).__name__})"
                )
                return None
        # The learner's classes (a dataclass batch) unpickle against the program's __main__.
        everything["main"] = sys.modules.get("__main__")
        st["ddp"] = ddp
        st["start_digest"] = _params_digest(ddp.module)
    elif st["ddp"] is not ddp:
        st["off"] = "more than one DDP model ran before the optimizer step"
        return None
    if len(st["micro"]) >= MAX_MICRO_STEPS:
        st["off"] = f"more than {MAX_MICRO_STEPS} forward passes ran before one optimizer step"
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
        "weights": [],
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


def record_loss_scale(
    tracer: Tracer, name: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], loss: Any
) -> None:
    """A standard loss function `fn` returned `loss`: record the factor applied to it before
    backward and the micro-step's loss weight (`grader.harness.loss_weight`)."""
    if not capturing(tracer):
        return
    if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
        return
    micro = state(tracer)["micro"][-1]
    weight = call_weight(name, fn, args, kwargs, loss)
    scalar = loss.dim() == 0

    def hook(grad: torch.Tensor) -> None:
        if scalar:
            micro["scales"].append(float(grad.detach().float().cpu()))
        micro["weights"].append(weight(grad) if weight is not None else None)

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
    """Before a backward of a sampled window: the scale put on the loss after it was computed,
    and whether gradients of an earlier step were still there when the window's first backward
    began (no zero_grad between steps)."""
    if not capturing(tracer):
        return
    st = state(tracer)
    drop_cleared(tracer)
    if not st["micro"]:
        return
    if "carried" not in st:
        st["carried"] = st["step"] > 1 and not _gradients_cleared(st["ddp"].module)
    micro = st["micro"][-1]
    if micro.get("root_scale") is None:
        scaled = scaled_root(tensors)
        if scaled is not None:
            micro["root_scale"] = scaled[0]
            micro["root_weight"] = root_weight(*scaled)
        micro["backward_line"] = tracer.where()


def record_clip(tracer: Tracer, kind: str, **args: Any) -> None:
    if capturing(tracer):
        state(tracer)["clip"].append({"kind": kind, **args})


def save_window(tracer: Tracer, optimizer: Any) -> None:
    """At the optimizer step that ends a sampled window and updates the DDP model: save this
    rank's replay data (rank 0 keeps its own part in memory too)."""
    st = tracer.state.get("replay")
    if st is None or st["step"] != tracer.steps + 1 or not st["sampled"]:
        return
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
    data = {
        "step": st["step"],
        "amp_scale": st.get("amp_scale"),
        "start_digest": st.get("start_digest"),
        "rank": tracer.rank,
        "micro": [m for m in st["micro"] if m["cotangents"] is not None],
        "off": st["off"],
    }
    if tracer.rank == 0:
        shared(tracer)["windows"][st["step"]] = {
            "grads": grads,
            "after_backward": st.get("after_backward"),
            "start_state": st.get("start_state"),
            "clip": st["clip"],
            "carried": bool(st.get("carried")),
            "off": st["off"],
        }
    path = tracer.trace_dir / replay_name(tracer.rank, st["step"])
    try:
        _raw_save()(data, path)
        shared(tracer)["bytes"] = shared(tracer).get("bytes", 0) + path.stat().st_size
    except Exception as exc:
        st["off"] = f"the inputs could not be stored ({type(exc).__name__})"
        if tracer.rank == 0:
            shared(tracer)["windows"][st["step"]]["off"] = st["off"]


def mark_done(tracer: Tracer) -> None:
    """After the program: this rank saves no more replay data. Rank 0's replay stops waiting for
    a window this rank never reached (a rank that ran out of batches inside `Join` takes fewer
    steps) as soon as it sees this, not at its deadline."""
    with contextlib.suppress(OSError):
        (tracer.trace_dir / replay_done_name(tracer.rank, tracer.attempt)).touch()


def saving_closure(tracer: Tracer, optimizer: Any, closure: Any) -> Any:
    """`optimizer.step(closure)`: the closure computes the gradient inside the step (LBFGS calls
    it several times, moving the weights in between). The first call's gradient, taken at the
    starting weights, is the step's: save it as soon as that call returns."""

    def first_call_closure(*args: Any, **kwargs: Any) -> Any:
        out = closure(*args, **kwargs)
        try_save_window(tracer, optimizer)
        return out

    return first_call_closure


def try_save_window(tracer: Tracer, optimizer: Any) -> None:
    """save_window while the window's step is being taken; a failure turns the replay off and
    is recorded as the harness's (the learner's run never notices)."""
    st = tracer.state.get("replay")
    if st is None or st["step"] != tracer.steps + 1 or st.get("saved"):
        return
    try:
        save_window(tracer, optimizer)
    except Exception as exc:
        give_up(tracer, f"capture failed ({type(exc).__name__})")
        tracer.fail("replay capture", exc)


def pending(tracer: Tracer) -> bool:
    """The coming step's window is not saved yet: a closure (which runs the window's forwards
    inside the step, LBFGS) must save it after its first call."""
    st = tracer.state.get("replay")
    return not (st is not None and st["step"] == tracer.steps + 1 and st.get("saved"))


def snapshot_after_backward(tracer: Tracer) -> None:
    """After every backward of a sampled window: rank 0 keeps its DDP model's gradients."""
    if tracer.rank != 0 or not capturing(tracer):
        return
    st = state(tracer)
    st["after_backward"] = {
        n: (p.grad.detach().to("cpu", copy=True) if p.grad is not None else None)
        for n, p in st["ddp"].module.named_parameters()
    }
