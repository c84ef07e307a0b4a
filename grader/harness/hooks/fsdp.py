"""FSDP2 (`fully_shard`) and distributed checkpoints: the sharded parameters and their optimizer
state before the first optimizer step and at every DCP save, and rank 0's last DCP save read
back in one process at the end of the program.

Costs nothing in a program that never calls `fully_shard`."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from grader.events import DcpReplay, FsdpState
from grader.harness.tracer import Tracer, quiet, raw, wrap

# Its DCP save wrapper is outside the ckpt hook's (the Save is recorded first).
AFTER = ("ckpt",)
MAX_PARAMS = 256
MAX_VALUES = 400
# A checkpoint larger than this is not read back (the files' list comes from its metadata).
MAX_REPLAY_BYTES = 256 * 1024 * 1024
FULLY_SHARD_HOMES = ("torch.distributed.fsdp", "torch.distributed._composable.fsdp")


# torch.distributed.checkpoint.state_dict's set_optimizer_state_dict runs one optimizer step
# (learning rate 0, zero gradients) to create the state it then fills: no training step.
STATE_INIT = "_init_optim_state"


def _inside_state_init() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == STATE_INIT:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


@contextlib.contextmanager
def _untraced() -> Iterator[None]:
    """torch.save/torch.load as torch has them, while the harness reads a checkpoint itself
    (the ckpt hook must not record the grader's own files)."""
    owners = (torch, torch.serialization)
    saved = [(o, n, getattr(o, n)) for o in owners for n in ("save", "load")]
    for owner, name, fn in saved:
        setattr(owner, name, raw(fn))
    try:
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def _local(p: torch.Tensor) -> torch.Tensor:
    to_local = getattr(p, "to_local", None)
    return to_local() if callable(to_local) else p


def _is_dtensor(p: torch.Tensor) -> bool:
    return callable(getattr(p, "to_local", None))


def _names(roots: list[Any]) -> dict[int, str]:
    """id(parameter) -> its name in the outermost sharded module holding it."""
    names: dict[int, str] = {}
    for root in roots:
        for name, p in root.named_parameters():
            names.setdefault(id(p), name)
    return names


def _outermost(modules: list[Any]) -> list[Any]:
    inner = {id(m) for outer in modules for m in outer.modules() if m is not outer}
    return [m for m in modules if id(m) not in inner]


def snapshot(when: str, tracer: Tracer, optimizer: Any, line: int | None, steps: int) -> FsdpState:
    roots = _outermost(tracer.state.get("fsdp_modules", []))
    if optimizer is not None:
        params = [p for g in optimizer.param_groups for p in g["params"]][:MAX_PARAMS]
    else:
        params = [p for root in roots for p in root.parameters()][:MAX_PARAMS]
    names = _names(roots)
    sums: list[float] = []
    squares: list[float] = []
    opt_sums: list[float | None] = []
    opt_step: float | None = None
    state = getattr(optimizer, "state", {}) if optimizer is not None else {}
    with torch.no_grad(), quiet():
        for p in params:
            values = _local(p.detach()).double()
            sums.append(float(values.sum()))
            squares.append(float(values.square().sum()))
            entry = state.get(p) if isinstance(state, Mapping) else None
            if not entry:
                opt_sums.append(None)
                continue
            total = 0.0
            for key, value in entry.items():
                if not isinstance(value, torch.Tensor):
                    continue
                if key == "step" or value.dim() == 0:
                    step = float(_local(value.detach()).double().max())
                    opt_step = step if opt_step is None else max(opt_step, step)
                    continue
                total += float(_local(value.detach()).double().sum())
            opt_sums.append(total)
    return FsdpState(
        when=when,
        line=line,
        steps=steps,
        names=[names.get(id(p), f"param{i}") for i, p in enumerate(params)],
        dtensor=[_is_dtensor(p) for p in params],
        local=[_local(p).numel() for p in params],
        full=[p.numel() for p in params],
        sums=sums,
        squares=squares,
        opt_sums=opt_sums,
        opt_step=opt_step,
        optimizer=type(optimizer).__name__ if optimizer is not None else None,
    )


def _flatten(obj: Any, prefix: str, out: dict[str, Any], depth: int = 0) -> None:
    if depth > 8 or len(out) >= MAX_VALUES:
        return
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}.{i}" if prefix else str(i), out, depth + 1)
    else:
        out[prefix] = obj


def replay(path: str, line: int | None) -> DcpReplay:
    """The checkpoint at `path` read back in this one process, as a single-file export would."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    files: dict[str, int] = {}
    metadata = FileSystemReader(path).read_metadata()
    for info in getattr(metadata, "storage_data", {}).values():
        name = getattr(info, "relative_path", None)
        if isinstance(name, str):
            files[name] = files.get(name, 0) + 1
    size = sum(
        os.path.getsize(os.path.join(path, f))
        for f in files
        if os.path.isfile(os.path.join(path, f))
    )
    if size > MAX_REPLAY_BYTES:
        return DcpReplay(path=path, line=line, files=files, too_large=True)
    with tempfile.TemporaryDirectory(prefix="rdv-dcp-") as tmp, _untraced():
        single = os.path.join(tmp, "export.pt")
        dcp_to_torch_save(path, single)
        loaded = torch.load(single, map_location="cpu", weights_only=False)
    flat: dict[str, Any] = {}
    _flatten(loaded, "", flat)
    tensors: dict[str, list[float]] = {}
    counters: dict[str, int] = {}
    for key, value in flat.items():
        if isinstance(value, torch.Tensor):
            values = value.detach().double()
            if value.dim() == 0 and not value.is_floating_point():
                counters[key] = int(value)
            tensors[key] = [
                float(value.numel()),
                float(values.sum()),
                float(values.square().sum()),
            ]
        elif isinstance(value, int) and not isinstance(value, bool):
            counters[key] = value
    return DcpReplay(path=path, line=line, files=files, tensors=tensors, counters=counters)


def _dcp_dir(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    from grader.harness.hooks.ckpt import _dcp_dir as where

    return where(args, kwargs)


def install(tracer: Tracer) -> None:
    modules: list[Any] = tracer.state.setdefault("fsdp_modules", [])
    optimizers: list[Any] = []
    last_save: dict[str, Any] = {}
    inside = {"dcp": False}
    taken = {"steps": 0}

    def make_fully_shard(original: Any) -> Any:
        def fully_shard(module: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(module, *args, **kwargs)
            try:
                for m in module if isinstance(module, (list, tuple)) else [module]:
                    if all(m is not known for known in modules):
                        modules.append(m)
            except Exception as exc:
                tracer.fail("fully_shard", exc)
            return out

        return fully_shard

    def hook_fsdp(fsdp: Any) -> None:
        wrap(fsdp, "fully_shard", make_fully_shard)

    for home in FULLY_SHARD_HOMES:
        tracer.when_imported(home, hook_fsdp)

    def pre_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        if not modules or any(optimizer is o for o in optimizers) or _inside_state_init():
            return None
        optimizers.append(optimizer)
        try:
            event = snapshot("first_step", tracer, optimizer, tracer.where(3), taken["steps"])
            tracer.record(event)
        except Exception as exc:
            tracer.fail("fsdp first step", exc)
        return None

    def post_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        if modules and optimizers and optimizer is optimizers[0] and not _inside_state_init():
            taken["steps"] += 1

    register_optimizer_step_pre_hook(pre_step)
    register_optimizer_step_post_hook(post_step)

    def make_dcp_save(original: Any) -> Any:
        def save(state_dict: Any, *args: Any, **kwargs: Any) -> Any:
            if inside["dcp"] or not modules:  # async_save calls save: one write
                return original(state_dict, *args, **kwargs)
            line = tracer.where()
            try:
                optimizer = optimizers[0] if optimizers else None
                tracer.record(snapshot("save", tracer, optimizer, line, taken["steps"]))
            except Exception as exc:
                tracer.fail("fsdp save", exc)
            inside["dcp"] = True
            try:
                out = original(state_dict, *args, **kwargs)
            finally:
                inside["dcp"] = False
            path = _dcp_dir(args, kwargs)
            if path is not None:
                last_save.update(path=path, line=line)
            return out

        return save

    def hook_dcp(dcp: Any) -> None:
        saver = getattr(dcp, "state_dict_saver", None)
        for owner in (dcp, saver):
            for name in ("save", "async_save"):
                if owner is not None and callable(getattr(owner, name, None)):
                    wrap(owner, name, make_dcp_save)

    tracer.when_imported("torch.distributed.checkpoint", hook_dcp)

    def finish() -> None:
        if modules:
            optimizer = optimizers[0] if optimizers else None
            tracer.record(snapshot("end", tracer, optimizer, None, taken["steps"]))
        if tracer.rank != 0 or "path" not in last_save:
            return
        path, line = last_save["path"], last_save["line"]
        try:
            with quiet():
                event = replay(path, line)
        except Exception as exc:  # the learner's checkpoint, not the harness: said, not failed
            event = DcpReplay(path=path, line=line, error=f"{type(exc).__name__}: {exc}"[:500])
        tracer.record(event)

    tracer.finalizers.append(finish)
