"""The hook plumbing: install order (`AFTER`) and stacked wrappers (`wrap`), without launching."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch.distributed as dist

from grader.harness import hooks
from grader.harness.tracer import raw, wrap


def module(after: tuple[str, ...] = ()) -> ModuleType:
    m = ModuleType("hook")
    if after:
        m.AFTER = after  # type: ignore[attr-defined]
    return m


def test_name_order_unless_a_module_must_follow_another() -> None:
    mods = {"a": module(("d",)), "b": module(), "c": module(), "d": module()}
    assert hooks.ordered(mods) == ["b", "c", "d", "a"]


def test_a_cycle_or_an_unknown_module_is_refused() -> None:
    with pytest.raises(ValueError, match="cycle"):
        hooks.ordered({"a": module(("b",)), "b": module(("a",))})
    with pytest.raises(ValueError, match="no such module"):
        hooks.ordered({"a": module(("nope",))})


def test_the_shipped_hooks_wrap_outside_the_ones_they_follow() -> None:
    found = {
        info.name: importlib.import_module(f"{hooks.__name__}.{info.name}")
        for info in pkgutil.iter_modules(hooks.__path__)
        if not info.name.startswith("_")
    }
    order = hooks.ordered(found)
    assert order.index("zero") > order.index("ckpt")  # both wrap torch.save
    assert order.index("launch") > order.index("dist")  # both wrap init_process_group
    assert order.index("allreduce") > max(order.index("ddp"), order.index("optim"))


def _maker(tag: str, calls: list[str]) -> Any:
    def make(original: Any) -> Any:
        def wrapper(*args: Any) -> Any:
            calls.append(tag)
            return original(*args)

        return wrapper

    make.__module__ = tag  # a hook module's identity is its module name
    return make


def test_wrappers_of_two_hook_modules_stack_and_each_wraps_once() -> None:
    calls: list[str] = []

    def original(x: int) -> int:
        calls.append("original")
        return x + 1

    owner = SimpleNamespace(fn=original)
    assert wrap(owner, "fn", _maker("first", calls))
    assert wrap(owner, "fn", _maker("second", calls))
    assert not wrap(owner, "fn", _maker("first", calls))
    assert owner.fn(1) == 2
    assert calls == ["second", "first", "original"]
    assert owner.fn.__wrapped__ is original
    assert raw(owner.fn) is original


def test_raw_keeps_torchs_own_decorators() -> None:
    decorated = dist.all_reduce
    assert hasattr(decorated, "__wrapped__")  # torch's logging decorators
    owner = SimpleNamespace(all_reduce=decorated)
    wrap(owner, "all_reduce", _maker("hook", []))
    assert raw(owner.all_reduce) is decorated
