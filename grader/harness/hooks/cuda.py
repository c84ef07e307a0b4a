"""CUDA device pinning: which device each rank selected."""

from __future__ import annotations

from typing import Any

import torch

from grader.events import SetDevice
from grader.harness.tracer import Tracer, wrap


def install(tracer: Tracer) -> None:
    def make_set_device(original: Any) -> Any:
        def set_device(device: Any) -> Any:
            out = original(device)
            try:
                index = torch.cuda.current_device()
            except Exception:
                index = None
            tracer.record(SetDevice(device=str(device), index=index, line=tracer.where()))
            return out

        return set_device

    wrap(torch.cuda, "set_device", make_set_device)
