"""The tensors of a call's arguments, however the program packs them (positional or keyword,
tuples, dicts, dataclasses, plain objects): every hook that reads a model's or a loss's inputs or
a batch goes through `tensor_leaves`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

MAX_LEAF_DEPTH = 6
MAX_NODES = 4096  # containers and objects looked into, per call


def _children(node: Any) -> list[Any] | None:
    """What a container or object holds, in order; None for anything else (a leaf)."""
    if isinstance(node, Mapping):
        return list(node.values())
    if isinstance(node, (list, tuple)):
        return list(node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return [getattr(node, f.name, None) for f in dataclasses.fields(node)]
    if isinstance(getattr(node, "__dict__", None), dict) and not isinstance(
        node, (torch.nn.Module, type)
    ):
        return list(vars(node).values())
    return None


def tensor_leaves(tree: Any) -> list[torch.Tensor]:
    """The tensors of a call's arguments, in order, whatever holds them: tuples and lists, dicts
    and other mappings (`model(**batch)`, a tokenizer's BatchEncoding), dataclasses and objects
    with attributes (a dataclass batch), nested; each object once, within a depth and a budget."""
    found: list[torch.Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(tree, 0)]
    while stack and len(seen) < MAX_NODES:
        node, depth = stack.pop()
        if isinstance(node, torch.Tensor):
            found.append(node)
            continue
        if depth > MAX_LEAF_DEPTH or id(node) in seen:
            continue
        if isinstance(node, (str, bytes, int, float, bool, type(None))):
            continue
        seen.add(id(node))
        children = _children(node)
        if children:
            stack.extend((child, depth + 1) for child in reversed(children))
    return found
