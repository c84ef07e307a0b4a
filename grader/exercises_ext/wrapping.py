"""Wrapping a function that the core's harness may already have wrapped."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any


def raw(fn: Any) -> Any:
    """The innermost original behind any number of wrappers."""
    seen = 0
    while hasattr(fn, "__wrapped__") and seen < 10:
        fn = fn.__wrapped__
        seen += 1
    return fn


def stack_wrap(owner: Any, name: str, make: Callable[[Any], Any]) -> bool:
    """Replace `owner.name` by `make(current)`, on top of any wrapper already there (once)."""
    current = getattr(owner, name, None)
    if current is None or getattr(current, "__rdv_ext__", False):
        return False
    wrapper = make(current)
    try:
        wrapper.__rdv_ext__ = True
        wrapper.__rdv_wrapped__ = True
        # The core reaches the unwrapped function through __wrapped__ (e.g. the replay's save).
        wrapper.__wrapped__ = raw(current)
        wrapper.__name__ = getattr(current, "__name__", name)
        wrapper.__qualname__ = getattr(current, "__qualname__", name)
        wrapper.__doc__ = getattr(current, "__doc__", None)
    except (AttributeError, TypeError):
        pass
    setattr(owner, name, wrapper)
    return True


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Around the harness's own work inside a rank: its warnings (e.g. a deprecated torch object
    touched while scanning memory) must never appear in the learner's output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
