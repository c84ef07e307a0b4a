"""How much of "one mean loss" a micro-step back-propagated: its loss weight.

A standard loss function's elementwise losses l_i each count m_i toward its mean (1, or the class
weight of the target, 0 for an ignored target); `reduction="mean"` is sum(m_i l_i) / sum(m_i).
Whatever reduction and factors the program applies, the gradient that reaches the function's value
(a scalar c, or one c_i per element for `reduction="none"`) says which weight w_i each element's
loss got; the micro-step's loss weight is sum(w_i m_i): 1 for a mean, c for `mean * c`, N/M for
`reduction="sum"` over N elements divided by M. A correct step has loss weights that add up to 1
over its window (a mean over the window's samples, or the mean of the micro-batches' means) on
every rank on average (DDP averages the ranks). `accum.grad_mean` and `ddp.grad_average` judge that
(`grader/harness/micro_mean.py`), so `sum / count`, `mean / k`, token-weighted means and
`reduction="none"` with any correct normalisation are all the same step.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

# Losses whose elements count by their target: the class weight, 0 for an ignored target.
BY_TARGET = ("cross_entropy", "nll_loss")


def _bound(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return dict(inspect.signature(fn).bind(*args, **kwargs).arguments)
    except (TypeError, ValueError):
        return None


def _reduction(arguments: dict[str, Any]) -> str:
    legacy = (arguments.get("size_average"), arguments.get("reduce"))
    if legacy != (None, None):
        from torch.nn import _reduction

        return str(_reduction.legacy_get_string(*legacy, emit_warning=False))
    return str(arguments.get("reduction", "mean"))


def _element_counts(name: str, arguments: dict[str, Any], shape: torch.Size) -> torch.Tensor:
    """m_i: how much each element of the loss (its `reduction="none"` shape) counts toward the
    function's mean."""
    counts = torch.ones(shape, dtype=torch.float64)
    target = arguments.get("target")
    if name in BY_TARGET and isinstance(target, torch.Tensor) and not target.is_floating_point():
        t = target.detach().to("cpu")
        if t.shape == shape:
            keep = t != int(arguments.get("ignore_index", -100))
            weight = arguments.get("weight")
            if isinstance(weight, torch.Tensor):
                w = weight.detach().to("cpu", torch.float64)
                by_class = w[t.clamp(0, len(w) - 1)]
                counts = torch.where(keep, by_class, torch.zeros((), dtype=w.dtype))
            else:
                counts = keep.to(torch.float64)
    return counts


def call_weight(
    name: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
) -> Callable[[torch.Tensor], float] | None:
    """For a standard loss function's call: a function of the gradient that reached its value
    (`out`) giving the loss weight; None when it cannot be told."""
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        return None
    arguments = _bound(fn, args, kwargs)
    if arguments is None:
        return None
    reduction = _reduction(arguments)
    if reduction in ("mean", "batchmean"):
        return lambda grad: float(grad.detach().double().sum())
    if reduction == "none":
        counts = _element_counts(name, arguments, out.shape)
        return lambda grad: float((grad.detach().to("cpu", torch.float64) * counts).sum())
    if reduction == "sum":
        if (arguments.get("size_average"), arguments.get("reduce")) != (None, None):
            return None  # the legacy flags win over a reduction keyword
        with torch.no_grad():
            try:
                elements = fn(**{**arguments, "reduction": "none"})
            except Exception:
                return None
        total = float(_element_counts(name, arguments, elements.shape).sum())
        return lambda grad: float(grad.detach().double().sum()) * total
    return None


def root_weight(scale: float, node: Any) -> float:
    """The loss weight of a tensor given to backward that no single standard loss function made:
    the constant factor applied last (`scale`) times the number of elements when what it
    scaled is a plain sum (`errors.sum() / 64`), else the factor itself (a mean, or the
    program's own combination of losses, counts as one loss)."""
    if type(node).__name__ == "SumBackward0":
        sizes = getattr(node, "_saved_self_sym_sizes", None)
        if sizes is not None:
            numel = 1
            for size in sizes:
                numel *= int(size)
            return scale * numel
    return scale
