"""The tensors of a call's arguments, however the program packs them (positional or keyword,
tuples, dicts, dataclasses, plain objects): every hook that reads a model's or a loss's inputs or
a batch goes through `tensor_leaves`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

MAX_LEAF_DEPTH = 6


def tensor_leaves(tree: Any, depth: int = 0) -> list[torch.Tensor]:
    """The tensors of a call's arguments, in order, whatever holds them: tuples and lists, dicts
    and other mappings (`model(**batch)`, a tokenizer's BatchEncoding), dataclasses and objects
    with attributes (a dataclass batch), nested."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    if depth > MAX_LEAF_DEPTH or isinstance(tree, (str, bytes, int, float, bool, type(None))):
        return []
    if isinstance(tree, Mapping):
        children: Any = list(tree.values())
    elif isinstance(tree, (list, tuple)):
        children = tree
    elif dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        children = [getattr(tree, f.name, None) for f in dataclasses.fields(tree)]
    elif isinstance(getattr(tree, "__dict__", None), dict) and not isinstance(
        tree, (torch.nn.Module, type)
    ):
        children = list(vars(tree).values())
    else:
        return []
    return [t for child in children for t in tensor_leaves(child, depth + 1)]
