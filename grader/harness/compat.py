"""Probes, in the rank, for the torch internals of `grader.torch_internals` (each a cheap look:
an object built without a process group, or the class's own source). `missing()` is called once,
before the hooks are installed."""

from __future__ import annotations

import inspect
from collections.abc import Callable


def _dataloader_iterator() -> bool:
    from torch.utils.data import DataLoader

    it = iter(DataLoader(range(4), batch_size=2))  # type: ignore[arg-type]
    return hasattr(it, "_sampler_iter") and hasattr(it, "_index_sampler")


def _zero_optimizer() -> bool:
    from torch.distributed.optim import ZeroRedundancyOptimizer

    source = inspect.getsource(ZeroRedundancyOptimizer)
    wanted = ("_optim_constructor", "_optim_defaults", "_param_to_index", "_all_params")
    return all(f"self.{name}" in source for name in wanted)


# Internal.key -> its probe (a test holds the keys equal to grader.torch_internals.INTERNALS').
PROBES: dict[str, Callable[[], bool]] = {
    "dataloader_iterator": _dataloader_iterator,
    "zero_optimizer": _zero_optimizer,
}


def missing() -> list[str]:
    """The keys of the internals this torch lacks (a probe that raises counts as lacking)."""
    out = []
    for key, present in PROBES.items():
        try:
            ok = present()
        except Exception:
            ok = False
        if not ok:
            out.append(key)
    return out
