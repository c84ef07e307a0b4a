"""After the program, on rank 0: replay each sampled window and compare (see
`grader/harness/replay.py` for what is captured, and docs/replay.md for how a correct step is
decided). One `Replay` event per window, in step order."""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree

from grader.events import Replay
from grader.harness import replay_done_name, replay_name
from grader.harness.micro_mean import mean_step_numbers, micro_loss_weight
from grader.harness.replay import shared, state
from grader.harness.tracer import Tracer

WAIT_FOR_RANKS_S = 10.0


def _raw_load() -> Any:
    return getattr(torch.load, "__wrapped__", torch.load)


def _to_device(tree: Any, device: torch.device) -> Any:
    return pytree.tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, tree)


@contextlib.contextmanager
def _programs_main(module: Any) -> Iterator[None]:
    """Unpickle with the program's own __main__ in place (classes the program defined, such as a
    dataclass batch, live there; the harness restored its own __main__ when the program ended)."""
    saved = sys.modules.get("__main__")
    if module is not None:
        sys.modules["__main__"] = module
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _flat(grads: dict[str, Any], named: list[tuple[str, torch.Tensor]]) -> torch.Tensor:
    return torch.cat(
        [
            (grads[n] if grads.get(n) is not None else torch.zeros_like(p)).flatten().double().cpu()
            for n, p in named
        ]
    )


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


def _unavailable(reason: str, step: int = 1) -> Replay:
    return Replay(status="unavailable", reason=reason, step=step)


def run_replays(tracer: Tracer) -> list[Replay]:
    """On rank 0 after the program: for every sampled window, the expected gradient of its step
    against the one that was used."""
    everything = shared(tracer)
    windows = everything["windows"]
    if not windows:
        reason = everything["off"] or state(tracer)["off"]
        return [_unavailable(reason or "no optimizer step updated the DDP model")]
    deadline = time.monotonic() + WAIT_FOR_RANKS_S
    saved_rng = torch.get_rng_state()
    try:
        return [_replay_window(tracer, step, windows[step], deadline) for step in sorted(windows)]
    finally:
        torch.set_rng_state(saved_rng)


def _load_ranks(tracer: Tracer, step: int, deadline: float) -> dict[int, dict[str, Any]]:
    """Every rank's saved data for `step`, waiting for ranks still running until `deadline`; a
    rank that has ended without saving it (`replay_done_name`) is not waited for."""
    world = tracer.world_size
    data: dict[int, dict[str, Any]] = {}
    never: set[int] = set()
    with _programs_main(shared(tracer)["main"]):
        while True:
            for r in set(range(world)) - set(data) - never:
                # The marker first: a rank saves its files before it writes the marker.
                ended = (tracer.trace_dir / replay_done_name(r, tracer.attempt)).exists()
                path = tracer.trace_dir / replay_name(r, step)
                if path.exists():
                    with contextlib.suppress(Exception):
                        data[r] = _raw_load()(path, weights_only=False)
                elif ended:
                    never.add(r)
            if len(data) + len(never) == world or time.monotonic() >= deadline:
                return data
            time.sleep(0.05)


def _replay_window(tracer: Tracer, step: int, window: dict[str, Any], deadline: float) -> Replay:
    """One window: rank 0's record of it (`window`) and every rank's saved micro-steps."""
    if window["off"]:
        return _unavailable(window["off"], step)
    world = tracer.world_size
    data = _load_ranks(tracer, step, deadline)
    missing = sorted(set(range(world)) - set(data))
    if missing:
        return _unavailable(f"no data from ranks {missing} for this step", step)
    for r, d in data.items():
        if d.get("off"):
            return _unavailable(f"rank {r}: {d['off']}", step)
    if len({d.get("start_digest") for d in data.values()}) > 1:
        # DDP broadcast rank 0's weights, yet the ranks entered the step with different
        # ones: ddp.in_sync reports it; a replay from rank 0's weights would mislead.
        return _unavailable("the ranks began the step with different weights", step)
    model = shared(tracer)["model"]
    model.load_state_dict(window["start_state"])
    device = next(model.parameters()).device
    totals: dict[str, torch.Tensor] = {}
    named = [(n, p) for n, p in model.named_parameters() if n in window["grads"]]
    # A GradScaler multiplied every rank's loss; the optimizer saw the unscaled gradient.
    amp = {r: float(d.get("amp_scale") or 1.0) for r, d in data.items()}
    # The sum of the loss weights of every micro-step of every rank (each carries the GradScaler
    # factor, as the replayed gradients do): with `totals`, the mean gradient over the window's
    # samples and ranks, whatever factors and reductions the program spelled it with.
    weight: float | None = 0.0
    micro_total = 0
    for r in range(world):
        for micro in data[r]["micro"]:
            model.zero_grad(set_to_none=True)
            _replay_rank(model, [micro], device)
            micro_total += 1
            for n, p in named:
                g = p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
                totals[n] = totals[n] + g if n in totals else g
            w = micro_loss_weight(micro)
            weight = weight + w if weight is not None and w is not None else None
    stepped = _flat(window["grads"], named)
    accumulation = mean_step_numbers(totals, weight, micro_total, stepped, [n for n, _ in named])
    for n, p in named:
        p.grad = totals[n] / world
    # B: rank 0's gradients right after its last backward (DDP's average); A: what its optimizer
    # got (after any clipping, unscaling or extra reduction the program did in between).
    after_backward = window.get("after_backward") or window["grads"]
    expected = torch.cat([p.grad.detach().flatten().double().cpu() for _, p in named])
    actual = _flat(after_backward, named)
    norm_e = float(expected.norm())
    if math.isnan(norm_e):
        return _unavailable("the expected gradient is NaN", step)
    if norm_e == 0.0:
        # Every rank's loss has a zero gradient everywhere: nothing can train (e.g. cross-entropy
        # over a single output column, which is constant).
        return Replay(
            status="zero_gradient",
            step=step,
            world_size=world,
            norm_actual=float(actual.norm()),
            carried=window["carried"],
            reason="the expected gradient is zero",
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
        step=step,
        carried=window["carried"],
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
        loss_weights={
            str(r): [_per_amp(micro_loss_weight(m), amp[r]) for m in d["micro"]]
            for r, d in data.items()
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
        clipped=bool(window["clip"]),
        **accumulation,
    )


def _per_amp(value: float | None, amp: float) -> float | None:
    return value / amp if value is not None else None
