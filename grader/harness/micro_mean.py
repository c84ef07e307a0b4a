"""What a step should use: the mean gradient over every sample of its window on every rank. The
replay sums the gradients of every micro-step of every rank as the program scaled them, and the
micro-steps' loss weights (`grader/harness/loss_weight.py`); their quotient is that mean, whatever
reduction and factors the program used (`accum.grad_mean` judges these numbers)."""

from __future__ import annotations

import math
from typing import Any

import torch


def micro_loss_weight(micro: dict[str, Any]) -> float | None:
    """How much of one mean loss this micro-step back-propagated: the loss weight of the one
    standard loss function called, else that of the tensor given to backward (its constant factor,
    times its number of elements when it is a plain sum)."""
    weights = micro.get("weights") or []
    if len(weights) == 1:
        return float(weights[0]) if weights[0] is not None else None
    root = micro.get("root_weight")
    return float(root) if root else None


def mean_step_numbers(
    totals: dict[str, torch.Tensor],
    weight: float | None,
    micro_total: int,
    stepped: torch.Tensor,
    names: list[str],
) -> dict[str, Any]:
    """The gradient rank 0's optimizer used (`stepped`, flat, in `names` order) against the mean
    gradient over the window's samples: `totals` (the sum of every micro-step's gradient as the
    program scaled it, by parameter name) divided by `weight` (the sum of their loss weights)."""
    if not weight or not micro_total or not totals or math.isnan(weight):
        return {"mean_status": "unavailable"}
    mean = torch.cat([(totals[n] / weight).flatten().double().cpu() for n in names])
    norm = float(mean.norm())
    if norm == 0.0 or math.isnan(norm):
        return {"mean_status": "unavailable"}
    return {
        "mean_status": "ok",
        "micro_total": micro_total,
        "loss_weight": weight,
        "mean_rel_error": float((stepped - mean).norm()) / norm,
        "mean_ratio": float(stepped.dot(mean)) / float(mean.dot(mean)),
        "mean_cosine": float(stepped.dot(mean)) / max(norm * float(stepped.norm()), 1e-30),
        "norm_mean": norm,
        "norm_stepped": float(stepped.norm()),
    }
