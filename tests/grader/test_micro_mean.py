"""The numbers behind `accum.grad_mean`: the mean of unscaled micro-step gradients vs the step."""

from __future__ import annotations

import torch

from grader.harness.micro_mean import mean_step_numbers, micro_loss_scale


def test_the_loss_scale_is_the_one_standard_loss_else_the_last_constant() -> None:
    assert micro_loss_scale({"scales": [0.25], "root_scale": 0.5}) == 0.25
    assert micro_loss_scale({"scales": [1.0, 1.0], "root_scale": 0.5}) == 0.5
    assert micro_loss_scale({"scales": [], "root_scale": None}) is None


def test_a_summed_step_is_k_times_the_mean() -> None:
    unit = {"w": torch.tensor([2.0, 4.0]), "b": torch.tensor([6.0])}  # the sum of 2 micro-steps
    mean = mean_step_numbers(
        unit, 2, torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), ["w", "b"]
    )
    assert mean["mean_status"] == "ok" and mean["mean_rel_error"] < 1e-12
    summed = mean_step_numbers(
        unit, 2, torch.tensor([2.0, 4.0, 6.0], dtype=torch.float64), ["w", "b"]
    )
    assert abs(summed["mean_ratio"] - 2.0) < 1e-12 and abs(summed["mean_cosine"] - 1.0) < 1e-12
    assert mean_step_numbers(None, 2, torch.zeros(3), ["w", "b"])["mean_status"] == "unavailable"
