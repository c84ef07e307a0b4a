"""The numbers behind `accum.grad_mean`: the mean gradient over a window's samples (the sum of
the micro-step gradients as the program scaled them, over the sum of their loss weights) vs the
step."""

from __future__ import annotations

import torch

from grader.harness.micro_mean import mean_step_numbers, micro_loss_weight


def test_the_loss_weight_is_the_one_standard_loss_else_the_backward_root() -> None:
    assert micro_loss_weight({"weights": [0.25], "root_weight": 0.5}) == 0.25
    assert micro_loss_weight({"weights": [1.0, 1.0], "root_weight": 0.5}) == 0.5
    assert micro_loss_weight({"weights": [None], "root_weight": 0.5}) is None
    assert micro_loss_weight({"weights": [], "root_weight": None}) is None


def test_the_mean_divides_by_the_total_loss_weight_not_the_micro_step_count() -> None:
    # Two micro-steps of 3 and 1 samples, a summed loss divided by the window's 4 samples: their
    # gradients as scaled add up to the window's mean, and so do their weights (3/4 + 1/4).
    totals = {"w": torch.tensor([2.0, 4.0]), "b": torch.tensor([6.0])}
    step = torch.tensor([2.0, 4.0, 6.0], dtype=torch.float64)
    mean = mean_step_numbers(totals, 1.0, 2, step, ["w", "b"])
    assert mean["mean_status"] == "ok" and mean["mean_rel_error"] < 1e-12
    # The same gradients from losses not divided by k (weights 2 in all): the step is 2x the mean.
    summed = mean_step_numbers(totals, 2.0, 2, step, ["w", "b"])
    assert abs(summed["mean_ratio"] - 2.0) < 1e-12 and abs(summed["mean_cosine"] - 1.0) < 1e-12
    assert summed["loss_weight"] == 2.0


def test_an_unknown_loss_weight_leaves_the_mean_unavailable() -> None:
    totals = {"w": torch.tensor([1.0])}
    step = torch.tensor([1.0], dtype=torch.float64)
    assert mean_step_numbers(totals, None, 2, step, ["w"])["mean_status"] == "unavailable"
    assert mean_step_numbers(totals, 0.0, 2, step, ["w"])["mean_status"] == "unavailable"
