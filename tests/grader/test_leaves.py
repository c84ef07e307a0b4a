"""Hooks find a call's tensors however they are passed (issue 29): positional or keyword, in
dicts, dataclasses and plain objects, in order, each once."""

from __future__ import annotations

import dataclasses

import torch

from grader.harness.hooks.ddp import _row_hashes
from grader.harness.leaves import tensor_leaves


@dataclasses.dataclass
class Batch:
    inputs: torch.Tensor
    labels: torch.Tensor


def test_dicts_dataclasses_and_objects_in_call_order() -> None:
    a, b, c = torch.ones(1), torch.zeros(2), torch.ones(3)

    class Holder:
        def __init__(self) -> None:
            self.tensor = c
            self.me = self  # a cycle is looked into once

    found = tensor_leaves(((Batch(a, b),), {"extra": Holder(), "name": "x"}))
    assert [t.shape[0] for t in found] == [1, 2, 3]


def test_a_keyword_batch_hashes_like_the_same_batch_passed_positionally() -> None:
    x = torch.arange(12.0).reshape(4, 3)
    positional = _row_hashes((x,), {})
    assert len(positional) == 4
    assert _row_hashes((), {"input_ids": x}) == positional
    assert _row_hashes((Batch(x, torch.zeros(4)),), {}) == positional
    assert _row_hashes((), {}) == []
