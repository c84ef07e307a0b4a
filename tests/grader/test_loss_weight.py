"""Loss weights (issue 29): how much of one mean loss a micro-step back-propagated, read from
what the program computed, not from how it spelled the loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from grader.harness.loss_weight import call_weight, root_weight
from grader.harness.replay import scaled_root


def weight_of(fn, *args, cotangent_of=None, **kwargs) -> float:  # type: ignore[no-untyped-def]
    """Call `fn`, back-propagate `loss * factor` as a program would, return the weight read."""
    out = fn(*args, **kwargs)
    weigh = call_weight(fn.__name__, fn, args, kwargs, out)
    assert weigh is not None
    grad = cotangent_of(out) if cotangent_of else torch.ones_like(out)
    return weigh(grad)


def logits_targets() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, generator=g, requires_grad=True)
    return x, torch.tensor([0, 1, 2, -100, 1, 0])  # one ignored target


def test_a_mean_weighs_what_reached_it() -> None:
    x, t = logits_targets()
    assert weight_of(F.cross_entropy, x, t) == 1.0
    quarter = weight_of(F.cross_entropy, x, t, cotangent_of=lambda o: torch.tensor(0.25))
    assert quarter == 0.25


def test_a_sum_weighs_its_counted_elements_ignored_targets_left_out() -> None:
    x, t = logits_targets()
    # sum / 5 real targets is a mean: weight 1; an unnormalised sum weighs 5.
    fifth = weight_of(
        F.cross_entropy, x, t, reduction="sum", cotangent_of=lambda o: torch.tensor(0.2)
    )
    assert abs(fifth - 1.0) < 1e-6
    assert weight_of(F.cross_entropy, x, t, reduction="sum") == 5.0


def test_class_weights_count_as_the_weighted_mean_counts_them() -> None:
    x, t = logits_targets()
    w = torch.tensor([1.0, 2.0, 3.0])
    assert weight_of(F.cross_entropy, x, t, weight=w, reduction="sum") == 9.0  # 1+2+3+2+1


def test_reduction_none_weighs_each_element_by_its_cotangent() -> None:
    x, t = logits_targets()
    real = (t != -100).float()

    def masked_mean(out: torch.Tensor) -> torch.Tensor:  # (l * mask).sum() / mask.sum()
        return real / real.sum()

    assert (
        abs(weight_of(F.cross_entropy, x, t, reduction="none", cotangent_of=masked_mean) - 1) < 1e-6
    )
    y = torch.randn(6, 3)
    half = weight_of(
        F.mse_loss, x, y, reduction="none", cotangent_of=lambda o: torch.full_like(o, 1 / 36)
    )
    assert abs(half - 0.5) < 1e-6  # a mean over 18 elements, halved


def test_positional_reduction_and_legacy_flags() -> None:
    x = torch.randn(4, 2, requires_grad=True)
    y = torch.randn(4, 2)
    assert weight_of(F.mse_loss, x, y, None, None, "sum") == 8.0  # reduction given positionally
    out = F.l1_loss(x, y, size_average=False)
    assert call_weight("l1_loss", F.l1_loss, (x, y), {"size_average": False}, out) is None


def test_a_hand_written_sum_weighs_its_elements_times_its_factor() -> None:
    x = torch.randn(8, 2, requires_grad=True)
    loss = (x**2).sum() / 16 / 2
    scale, node = scaled_root(loss)  # type: ignore[misc]
    assert abs(root_weight(scale, node) - 0.5) < 1e-12
    mean = (x**2).mean() / 4
    assert abs(root_weight(*scaled_root(mean)) - 0.25) < 1e-12  # type: ignore[misc]
