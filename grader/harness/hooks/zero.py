"""ZeroRedundancyOptimizer: construction, consolidate_state_dict enter/exit, state_dict, and what
every saved optimizer state covers (and whether it loads into a fresh optimizer)."""

from __future__ import annotations

import os
from typing import Any

import torch

from grader.events import (
    ConsolidateEnter,
    ConsolidateExit,
    OptimizerState,
    StateComparison,
    ZeroInit,
    ZeroStateDict,
)
from grader.harness.tracer import Tracer, quiet, raw, wrap

# Its torch.save wrapper is outside the ckpt hook's (the save is recorded first).
AFTER = ("ckpt",)


def find_optimizer_states(obj: Any, where: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    """Optimizer state dicts ({"state": ..., "param_groups": [...]}) inside a saved object."""
    found: list[tuple[str, Any]] = []
    if depth > 3:
        return found
    if isinstance(obj, dict):
        if "state" in obj and isinstance(obj.get("param_groups"), list):
            return [(where or "(the saved object)", obj)]
        for k, v in list(obj.items())[:200]:
            found += find_optimizer_states(v, f"{where}[{k!r}]", depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj[:50]):
            found += find_optimizer_states(v, f"{where}[{i}]", depth + 1)
    return found


def _covered(sd: Any) -> tuple[int, int]:
    """(parameters listed in the param groups, parameters with a state entry)."""
    listed = sum(len(g.get("params", [])) for g in sd["param_groups"] if isinstance(g, dict))
    state = sd.get("state")
    return listed, len(state) if isinstance(state, dict) else 0


def try_load(sd: Any, zero: Any) -> str | None:
    """Load `sd` into a fresh, non-distributed optimizer over copies of all of ZeRO's parameters.

    None when it loads and every state tensor has its parameter's shape; else what went wrong.
    """
    groups = [
        {
            **{k: v for k, v in g.items() if k != "params"},
            "params": [p.detach().clone().requires_grad_(True) for p in g["params"]],
        }
        for g in zero.param_groups
    ]
    fresh = zero._optim_constructor(groups, **zero._optim_defaults)
    try:
        fresh.load_state_dict(sd)
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    by_index = {i: p for i, p in enumerate(p for g in fresh.param_groups for p in g["params"])}
    for index, st in sd.get("state", {}).items():
        p = by_index.get(index) if isinstance(index, int) else None
        if p is None:
            return f"the state names parameter {index!r}, which the optimizer does not have"
        for key, value in st.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != p.shape:
                return (
                    f"state {key!r} of parameter {index} has shape {list(value.shape)}, "
                    f"the parameter {list(p.shape)}"
                )
    return None


def install(tracer: Tracer) -> None:
    """Hooks ZeroRedundancyOptimizer once the program imports torch.distributed.optim.

    Importing that package compiles TorchScript (seconds per rank), so nothing here imports it:
    a program that never uses it pays nothing. torch.save is wrapped now (cheap): it records an
    optimizer state only once a ZeRO optimizer exists.
    """
    zeros: list[Any] = []
    tracer.state["zeros"] = zeros
    busy = {"consolidating": 0}

    def make_init(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            line = tracer.where()
            original(self, *args, **kwargs)
            zeros.append(self)
            try:
                tracer.record(
                    ZeroInit(
                        line=line,
                        optimizer=getattr(self._optim_constructor, "__name__", "?"),
                        n_params=len(self._all_params),
                        n_local=sum(len(g["params"]) for g in self.optim.param_groups),
                    )
                )
            except Exception as exc:
                tracer.fail("zero_init", exc)
                tracer.record(ZeroInit(line=line, error=repr(exc)[:200]))

        return __init__

    def make_consolidate(original: Any) -> Any:
        def consolidate_state_dict(self: Any, to: int = 0) -> Any:
            line = tracer.where()
            tracer.record(ConsolidateEnter(line=line, to=to))
            busy["consolidating"] += 1  # it pickles shards with torch.save into buffers
            try:
                out = original(self, to)
            finally:
                busy["consolidating"] -= 1
            tracer.record(ConsolidateExit(line=line, to=to))
            return out

        return consolidate_state_dict

    def make_state_dict(original: Any) -> Any:
        def state_dict(self: Any) -> Any:
            line = tracer.where()
            try:
                out = original(self)
            except Exception as exc:
                tracer.record(ZeroStateDict(line=line, ok=False, error=str(exc)[:300]))
                raise
            listed, stated = _covered(out)
            tracer.record(ZeroStateDict(line=line, ok=True, listed=listed, stated=stated))
            return out

        return state_dict

    def hook_zero(module: Any) -> None:
        try:
            zero_class = module.ZeroRedundancyOptimizer
            wrap(zero_class, "__init__", make_init)
            wrap(zero_class, "consolidate_state_dict", make_consolidate)
            wrap(zero_class, "state_dict", make_state_dict)
        except Exception as exc:
            tracer.fail("zero", exc)

    tracer.when_imported("torch.distributed.optim", hook_zero)

    def make_save(original: Any) -> Any:
        def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(obj, f, *args, **kwargs)
            if zeros and not busy["consolidating"]:
                try:
                    with quiet():
                        _record_optimizer_save(tracer, zeros, obj, f)
                except Exception as exc:
                    tracer.fail("optimizer_state", exc)
            return out

        return save

    wrap(torch, "save", make_save)
    wrap(torch.serialization, "save", make_save)


def _same(saved: Any, live: Any) -> bool:
    if isinstance(saved, torch.Tensor) or isinstance(live, torch.Tensor):
        if not (isinstance(saved, torch.Tensor) and isinstance(live, torch.Tensor)):
            return False
        return saved.shape == live.shape and torch.equal(saved.detach().cpu(), live.detach().cpu())
    return bool(saved == live)


def _step_of(state: dict[str, Any]) -> float | None:
    step = state.get("step")
    if isinstance(step, torch.Tensor) and step.numel() == 1:
        return float(step)
    return float(step) if isinstance(step, (int, float)) else None


def compare_live(sd: Any, zero: Any) -> StateComparison:
    """The saved optimizer state against the live one at the moment of saving, for the
    parameters whose state this rank holds (its shard): step counts and every moment tensor.
    A state consolidated before the last steps differs; one consolidated right before saving
    is equal."""
    state = sd.get("state") if isinstance(sd.get("state"), dict) else {}
    compared = stale = 0
    first = StateComparison()
    for group in zero.optim.param_groups:
        for p in group["params"]:
            live = zero.optim.state.get(p) or {}
            index = zero._param_to_index.get(p)
            saved = state.get(index) or {}
            if not isinstance(saved, dict) or not isinstance(live, dict):
                continue  # not an optimizer's per-parameter state: nothing to compare
            if not live and not saved:
                continue
            compared += 1
            keys = set(live) | set(saved)
            if all(k in live and k in saved and _same(saved[k], live[k]) for k in keys):
                continue
            stale += 1
            if not first:
                first = StateComparison(
                    param=index, saved_step=_step_of(saved), live_step=_step_of(live)
                )
    return StateComparison(compared=compared, stale=stale, **first)


def _record_optimizer_save(tracer: Tracer, zeros: list[Any], obj: Any, f: Any) -> None:
    states = find_optimizer_states(obj)
    if not states:
        return
    zero = zeros[-1]
    path = os.path.abspath(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else None
    reloaded: Any = None
    if path is not None:
        try:
            reloaded = raw(torch.load)(path, map_location="cpu", weights_only=False)
        except Exception as exc:
            reloaded = exc
    for where, sd in states:
        listed, stated = _covered(sd)
        error: str | None
        if isinstance(reloaded, Exception):
            error = f"it could not be read back: {type(reloaded).__name__}: {reloaded}"[:300]
        else:
            again = dict(find_optimizer_states(reloaded)) if reloaded is not None else {}
            error = try_load(again.get(where, sd), zero)
        live = compare_live(sd, zero)
        tracer.record(
            OptimizerState(
                line=tracer.where(),
                path=path,
                where=where,
                listed=listed,
                stated=stated,
                n_params=len(zero._all_params),
                load_error=error,
                live=live,
            )
        )
