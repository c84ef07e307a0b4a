"""Mixed precision: the loss scale a GradScaler applied in a replayed step (the replay undoes
it)."""

from __future__ import annotations

from typing import Any

from torch.amp.grad_scaler import GradScaler

from grader.harness import replay
from grader.harness.tracer import Tracer, wrap


def install(tracer: Tracer) -> None:
    def make_scale(original: Any) -> Any:
        def scale(self: Any, outputs: Any) -> Any:
            if replay.capturing(tracer):
                try:
                    if self.is_enabled():
                        replay.state(tracer)["amp_scale"] = float(self.get_scale())
                except Exception as exc:
                    tracer.fail("amp", exc)
            return original(self, outputs)

        return scale

    wrap(GradScaler, "scale", make_scale)
