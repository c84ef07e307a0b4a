"""Harness hooks: every module in this package with an `install(tracer)` function is installed
in every rank before the learner's code runs.

An exercise that needs to observe something new adds a module here (e.g. `syncbn.py` wrapping
`SyncBatchNorm.convert_sync_batchnorm`); nothing else needs editing. A hook must never change what
the learner's code computes, and must survive its own failures: it records them with
`tracer.fail(where, exc)` (a `harness_error` event, never raised), and the grading then ends as a
platform `error` instead of judging a half-observed run.

Order: modules are installed in name order, except that a module listing others in its `AFTER`
tuple is installed after them. It matters where two modules wrap the same function (the later
one's wrapper runs outside the earlier one's) or register the same kind of torch hook (they run
in registration order); `AFTER` says so in the module that depends on it.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from grader.events import TorchInternals
from grader.harness.tracer import Tracer
from grader.torch_internals import hooks_left_out


def ordered(modules: dict[str, ModuleType]) -> list[str]:
    """Module names in install order: the first in name order whose `AFTER` modules are all
    installed, again and again."""
    after: dict[str, set[str]] = {}
    for name, module in modules.items():
        wanted = set(getattr(module, "AFTER", ()))
        missing = wanted - modules.keys()
        if missing:
            raise ValueError(f"hook module {name!r} is to follow {sorted(missing)}: no such module")
        after[name] = wanted
    order: list[str] = []
    while after:
        ready = sorted(name for name, wanted in after.items() if wanted <= set(order))
        if not ready:
            raise ValueError(f"hook modules wait for each other in a cycle: {sorted(after)}")
        order.append(ready[0])
        del after[ready[0]]
    return order


def _left_out(tracer: Tracer) -> set[str]:
    """Records the torch this rank runs and the internals it lacks; the hooks that read those."""
    try:
        import torch

        from grader.harness import compat

        missing = compat.missing()
        tracer.record(TorchInternals(version=str(torch.__version__), missing=missing))
        return hooks_left_out(missing)
    except Exception as exc:
        tracer.fail("compat", exc)
        return set()


def install_all(tracer: Tracer) -> None:
    left_out = _left_out(tracer)
    modules: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name in left_out:
            continue
        try:
            modules[info.name] = importlib.import_module(f"{__name__}.{info.name}")
        except Exception as exc:
            tracer.fail(info.name, exc)
    try:
        order = ordered(modules)
    except ValueError as exc:
        tracer.fail("hooks", exc)
        order = sorted(modules)
    for name in order:
        install = getattr(modules[name], "install", None)
        try:
            if install is not None:
                install(tracer)
        except Exception as exc:
            tracer.fail(name, exc)
