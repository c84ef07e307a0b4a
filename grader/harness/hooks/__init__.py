"""Harness hooks: every module in this package with an `install(tracer)` function is installed
in every rank before the learner's code runs.

An exercise that needs to observe something new adds a module here (e.g. `syncbn.py` wrapping
`SyncBatchNorm.convert_sync_batchnorm`); nothing else needs editing. A hook must never change what
the learner's code computes, and must survive its own failures (`install` errors are recorded as
`harness_error` events, never raised).

Order: modules are installed in name order, except that a module listing others in its `AFTER`
tuple is installed after them. It matters where two modules wrap the same function (the later
one's wrapper runs outside the earlier one's) or register the same kind of torch hook (they run
in registration order); `AFTER` says so in the module that depends on it.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from grader.harness.tracer import Tracer


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


def install_all(tracer: Tracer) -> None:
    modules: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        try:
            modules[info.name] = importlib.import_module(f"{__name__}.{info.name}")
        except Exception as exc:
            tracer.emit("harness_error", where=info.name, error=repr(exc))
    try:
        order = ordered(modules)
    except ValueError as exc:
        tracer.emit("harness_error", where="hooks", error=str(exc))
        order = sorted(modules)
    for name in order:
        install = getattr(modules[name], "install", None)
        try:
            if install is not None:
                install(tracer)
        except Exception as exc:
            tracer.emit("harness_error", where=name, error=repr(exc))
