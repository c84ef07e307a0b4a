"""The per-rank trace writer shared by every hook."""

from __future__ import annotations

import contextlib
import importlib.abc
import json
import os
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from grader.events import Event, HarnessError, Terminated
from grader.launch.wire import HarnessSettings


class Tracer:
    """Writes one JSON line per event; knows the learner's file to point at its lines.

    `sync` counts the collectives this rank has completed (Python-level collectives and DDP
    backward passes that all-reduced). Collectives run in the same order on every rank, so "rank
    r finished collective n" means "rank 0 entered collective n": checks use it to order events
    across ranks (e.g. a load after a save) without trusting wall clocks.
    """

    def __init__(
        self,
        trace_dir: Path,
        *,
        rank: int,
        local_rank: int,
        world_size: int,
        attempt: int,
        learner_file: str,
        settings: HarnessSettings,
    ) -> None:
        from grader.harness import trace_name

        self.trace_dir = trace_dir
        self.rank = rank
        self.local_rank = local_rank
        self.world_size = world_size
        self.attempt = attempt
        self.learner_file = learner_file
        self.settings = settings
        self.sync = 0
        self.steps = 0
        self.state: dict[str, Any] = {}
        self.finalizers: list[Callable[[], None]] = []
        self._seq = 0
        self._lock = threading.Lock()
        self._fd = os.open(
            trace_dir / trace_name(rank, attempt), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
        )
        self.t0 = time.time()

    def emit(self, kind: str, /, **data: Any) -> None:
        with self._lock:
            self._seq += 1
            record = {"kind": kind, "seq": self._seq, "t": time.time(), "sync": self.sync}
            record.update(data)
            line = json.dumps(record, default=_jsonable, separators=(",", ":")) + "\n"
            # A full disk must not crash the learner's run from inside the harness.
            with contextlib.suppress(OSError):
                os.write(self._fd, line.encode("utf-8", "replace"))

    def record(self, event: Event) -> None:
        """Write one typed event (`grader.events`); the tracer adds seq, t and sync."""
        self.emit(event.KIND, **event.data())

    def where(self, depth: int = 2) -> int | None:
        """The line of the innermost frame of the learner's file on the current stack."""
        frame = sys._getframe(depth)
        while frame is not None:
            if frame.f_code.co_filename == self.learner_file:
                return frame.f_lineno
            frame = frame.f_back  # type: ignore[assignment]
        return None

    def when_imported(self, module: str, fn: Callable[[Any], None]) -> None:
        """Call fn(module) once `module` is imported: now if it already is, else right after the
        learner's code imports it. Hooks for rarely used, costly modules (e.g.
        torch.distributed.optim, which compiles TorchScript on import) must use this."""

        def guarded(loaded: Any) -> None:
            try:
                fn(loaded)
            except Exception as exc:  # never breaks the learner's import
                self.fail(getattr(fn, "__qualname__", "?"), exc)

        if module in sys.modules:
            guarded(sys.modules[module])
            return
        _PostImport.install().pending.setdefault(module, []).append(guarded)

    def fail(self, where: str, exc: BaseException) -> None:
        """Record a failure of the harness itself (never raised into the learner's code: what the
        program computes must not change). The host turns it into a platform `error` Result and
        logs the stack: a half-observed run must never give a verdict.

        The one exception is the launcher stopping this rank (torchrun turns SIGTERM into an
        exception raised wherever the rank happens to be): that is no failure of the harness, and
        it goes on up through the learner's code as if the signal had landed there."""
        if is_termination(exc):
            raise exc
        stack = "".join(traceback.format_exception(exc))
        self.record(HarnessError(where=where, error=repr(exc)[:500], traceback=stack[-8000:]))

    def finish(self) -> None:
        """Run the hooks' end-of-program work. The program has ended by now: if the launcher
        stops the rank meanwhile (another rank failed), what is left is skipped and said."""
        for fn in self.finalizers:
            try:
                fn()
            except Exception as exc:
                if is_termination(exc):
                    where = getattr(fn, "__qualname__", "?")
                    self.record(Terminated(where=where, error=repr(exc)))
                    return
                self.fail(getattr(fn, "__qualname__", "?"), exc)


def is_termination(exc: BaseException) -> bool:
    """torch's launcher raises SignalException in a rank it stops (SIGTERM, SIGINT, ...)."""
    kind = type(exc)
    return kind.__name__ == "SignalException" and kind.__module__.startswith("torch.distributed")


class _PostImport(importlib.abc.MetaPathFinder):
    """Runs callbacks right after a watched module finishes executing."""

    _instance: _PostImport | None = None

    def __init__(self) -> None:
        self.pending: dict[str, list[Callable[[Any], None]]] = {}

    @classmethod
    def install(cls) -> _PostImport:
        if cls._instance is None:
            cls._instance = cls()
            sys.meta_path.insert(0, cls._instance)
        return cls._instance

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                loader, callbacks = spec.loader, self.pending.pop(name)
                original = loader.exec_module

                def exec_module(
                    module: Any, original: Any = original, callbacks: Any = callbacks
                ) -> None:
                    original(module)
                    for fn in callbacks:  # each guarded by Tracer.when_imported
                        fn(module)

                loader.exec_module = exec_module  # type: ignore[method-assign]
                return spec
        return None


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)


def raw(fn: Any) -> Any:
    """The original behind any number of hook wrappers (torch's own decorators stay on)."""
    while getattr(fn, "__rdv_hooks__", None) and hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


def wrap(owner: Any, name: str, make: Callable[[Any], Any]) -> bool:
    """Replace `owner.name` by `make(current)`, on top of any other hook's wrapper already there.

    Each hook module wraps a function at most once (installing twice changes nothing). When two
    hook modules wrap the same function, the one installed later is the outer wrapper: a module
    declares the modules it must follow in its `AFTER` tuple (see `grader.harness.hooks`).
    `__wrapped__` is always the unwrapped original (the replay saves through it).
    """
    current = getattr(owner, name, None)
    hook = getattr(make, "__module__", None) or "?"
    if current is None or hook in getattr(current, "__rdv_hooks__", ()):
        return False
    wrapper = make(current)
    try:
        wrapper.__rdv_hooks__ = (*getattr(current, "__rdv_hooks__", ()), hook)
        wrapper.__wrapped__ = raw(current)
        wrapper.__name__ = getattr(current, "__name__", name)
        wrapper.__qualname__ = getattr(current, "__qualname__", name)
        wrapper.__doc__ = getattr(current, "__doc__", None)
    except (AttributeError, TypeError):
        pass
    setattr(owner, name, wrapper)
    return True


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Around the harness's own work inside a rank: its warnings (e.g. a deprecated torch object
    touched while scanning memory) must never appear in the learner's output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
