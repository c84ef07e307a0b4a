"""Harness hooks: every module in this package with an `install(tracer)` function is installed
in every rank before the learner's code runs (in name order).

An exercise that needs to observe something new adds a module here (e.g. `syncbn.py` wrapping
`SyncBatchNorm.convert_sync_batchnorm`); nothing else needs editing. A hook must never change what
the learner's code computes, and must survive its own failures (`install` errors are recorded as
`harness_error` events, never raised).
"""

from __future__ import annotations

import importlib
import pkgutil

from grader.harness.tracer import Tracer


def install_all(tracer: Tracer) -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{__name__}.{info.name}")
            install = getattr(module, "install", None)
            if install is not None:
                install(tracer)
        except Exception as exc:
            tracer.emit("harness_error", where=info.name, error=repr(exc))
