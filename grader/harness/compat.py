"""Probes, in the rank, for the torch internals of `grader.torch_internals` (each a cheap look:
an object built without a process group, or the module's own text, never importing what the
hooks wait for the program to import). `missing()` is called once,
before the hooks are installed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def _dataloader_iterator() -> bool:
    from torch.utils.data import DataLoader

    it = iter(DataLoader(range(4), batch_size=2))  # type: ignore[arg-type]
    return hasattr(it, "_sampler_iter") and hasattr(it, "_index_sampler")


def _zero_optimizer() -> bool:
    # Its module's text, read without importing it: importing torch.distributed.optim compiles
    # TorchScript (seconds per rank; the zero hook waits for the program to import it).
    import torch.distributed

    module = Path(torch.distributed.__file__).parent / "optim" / "zero_redundancy_optimizer.py"
    source = module.read_text(encoding="utf-8")
    wanted = ("_optim_constructor", "_optim_defaults", "_param_to_index", "_all_params")
    return "class ZeroRedundancyOptimizer" in source and all(
        f"self.{name}" in source for name in wanted
    )


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
