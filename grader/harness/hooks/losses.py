"""Standard loss functions: the scale the learner applied to the loss before backward, and the
loss weight of the micro-step (positional and keyword arguments alike)."""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F

from grader.harness import replay
from grader.harness.tracer import Tracer, wrap

LOSSES = (
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "soft_margin_loss",
    "multi_margin_loss",
    "poisson_nll_loss",
    "gaussian_nll_loss",
)


def install(tracer: Tracer) -> None:
    def make_for(name: str) -> Any:
        def make(original: Any) -> Any:
            def loss(*args: Any, **kwargs: Any) -> Any:
                out = original(*args, **kwargs)
                if replay.capturing(tracer):
                    try:
                        replay.record_loss_scale(tracer, name, original, args, kwargs, out)
                    except Exception as exc:
                        tracer.fail("losses", exc)
                return out

            return loss

        return make

    for name in LOSSES:
        wrap(F, name, make_for(name))
