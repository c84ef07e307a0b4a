"""What gradient accumulation should step with: the mean, over every micro-step of every rank,
of the gradient of that micro-step's *unscaled* loss (the first-step replay computes the
per-micro-step gradients; `accum.grad_mean` judges these numbers)."""

from __future__ import annotations

import math
from typing import Any

import torch


def micro_loss_scale(micro: dict[str, Any]) -> float | None:
    """The factor the program put on its loss in this micro-step (as `ddp.grad_average` reads
    it): the gradient that reached the one standard loss function called, else the constant
    factor applied last to the tensor given to backward."""
    scales = micro.get("scales") or []
    if len(scales) == 1:
        return float(scales[0])
    root = micro.get("root_scale")
    return float(root) if root else None


def mean_step_numbers(
    unit: dict[str, torch.Tensor] | None,
    micro_total: int,
    stepped: torch.Tensor,
    names: list[str],
) -> dict[str, Any]:
    """The gradient rank 0's optimizer used (`stepped`, flat, in `names` order) against the mean
    of `unit`, the sum of the unscaled micro-step gradients by parameter name."""
    if unit is None or not micro_total or not unit:
        return {"mean_status": "unavailable"}
    mean = torch.cat([(unit[n] / micro_total).flatten().double().cpu() for n in names])
    norm = float(mean.norm())
    if norm == 0.0 or math.isnan(norm):
        return {"mean_status": "unavailable"}
    return {
        "mean_status": "ok",
        "micro_total": micro_total,
        "mean_rel_error": float((stepped - mean).norm()) / norm,
        "mean_ratio": float(stepped.dot(mean)) / float(mean.dot(mean)),
        "mean_cosine": float(stepped.dot(mean)) / max(norm * float(stepped.norm()), 1e-30),
        "norm_mean": norm,
        "norm_stepped": float(stepped.norm()),
    }
