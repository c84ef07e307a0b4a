"""SyncBatchNorm: conversion, the DDP wrap, running statistics.

Torch refuses it on CPU (DDP raises "SyncBatchNorm layers only work with GPU
modules" and its forward raises on CPU input). So that correct programs run on CPU workers, the
harness lets DDP wrap it on CPU and runs its forward as a plain, per-rank BatchNorm there; the
checks judge the conversion structurally on CPU and the statistics numerically on GPU only.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
import torch.nn as nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.parallel import DistributedDataParallel as DDP

from grader.events import BnStats, DdpBatchnorm, SyncbnConvert, SyncbnCpu
from grader.harness.tracer import Tracer, raw, wrap

MAX_NAMES = 20
MAX_STAT_EVENTS = 200


def bn_layers(module: nn.Module) -> tuple[list[str], list[str]]:
    """(plain BatchNorm layer names with their class, SyncBatchNorm layer names)."""
    plain, synced = [], []
    for name, layer in module.named_modules():
        if isinstance(layer, nn.SyncBatchNorm):
            synced.append(name or "(the model)")
        elif isinstance(layer, _BatchNorm):
            plain.append(f"{name or '(the model)'} ({type(layer).__name__})")
    return plain, synced


def _digest(t: torch.Tensor) -> str:
    data = t.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes()
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def install(tracer: Tracer) -> None:
    depth = {"convert": 0}
    stat_events = {"n": 0}
    names: dict[int, str] = {}

    def make_handle(original: Any) -> Any:
        def _passing_sync_batchnorm_handle(self: Any, module: Any) -> Any:
            plain, synced = bn_layers(module)
            tracer.record(
                DdpBatchnorm(
                    line=tracer.where(),
                    plain=plain[:MAX_NAMES],
                    n_plain=len(plain),
                    synced=synced[:MAX_NAMES],
                    n_synced=len(synced),
                    device=str(getattr(self, "device_type", "?")),
                )
            )
            for name, layer in module.named_modules():
                if isinstance(layer, nn.SyncBatchNorm):
                    names[id(layer)] = name
            if getattr(self, "device_type", "cpu") == "cpu":
                return None  # torch refuses SyncBatchNorm on CPU; see the module docstring
            return original(self, module)

        return _passing_sync_batchnorm_handle

    wrap(DDP, "_passing_sync_batchnorm_handle", make_handle)

    original_forward = nn.SyncBatchNorm.forward

    def forward(self: Any, input: torch.Tensor) -> torch.Tensor:
        if input.device.type == "cpu":
            if not tracer.state.get("syncbn_cpu"):
                tracer.state["syncbn_cpu"] = True
                tracer.record(SyncbnCpu(line=tracer.where()))
            out = _BatchNorm.forward(self, input)
        else:
            out = original_forward(self, input)
        if self.training and self.running_mean is not None and stat_events["n"] < MAX_STAT_EVENTS:
            stat_events["n"] += 1
            tracer.record(
                BnStats(
                    layer=names.get(id(self), "?"),
                    step=tracer.steps,
                    device=input.device.type,
                    batches=int(self.num_batches_tracked or 0),
                    mean=_digest(self.running_mean),
                    var=_digest(self.running_var),
                    mean_sum=float(self.running_mean.double().sum()),
                    var_sum=float(self.running_var.double().sum()),
                )
            )
        return out

    forward.__wrapped__ = original_forward  # type: ignore[attr-defined]
    nn.SyncBatchNorm.forward = forward  # type: ignore[method-assign]

    bound: Any = nn.SyncBatchNorm.convert_sync_batchnorm
    original_convert = raw(bound.__func__)
    current_convert = bound.__func__

    def convert_sync_batchnorm(cls: Any, module: Any, process_group: Any = None) -> Any:
        depth["convert"] += 1
        top = depth["convert"] == 1
        try:
            if top:
                plain, _ = bn_layers(module) if isinstance(module, nn.Module) else ([], [])
                wrapped = [
                    m
                    for m in tracer.state.get("ddp_models", [])
                    if m is module or any(sub is module for sub in m.module.modules())
                ]
                tracer.record(
                    SyncbnConvert(
                        line=tracer.where(),
                        arg=type(module).__name__,
                        is_ddp=isinstance(module, DDP),
                        inside_ddp=bool(wrapped),
                        n_plain=len(plain),
                    )
                )
            return current_convert(cls, module, process_group)
        finally:
            depth["convert"] -= 1

    convert_sync_batchnorm.__wrapped__ = original_convert  # type: ignore[attr-defined]
    nn.SyncBatchNorm.convert_sync_batchnorm = classmethod(convert_sync_batchnorm)  # type: ignore[assignment]
