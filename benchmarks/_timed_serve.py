"""`python benchmarks/_timed_serve.py serve ...` (run in a checkout): `python -m app serve ...`
with a profile of where a request's database time goes, written as JSON to $RDV_BENCH_PROFILE
when the server stops (SIGTERM):

- statements: per normalised SQL statement (its first 110 characters, values folded), how
  many ran and their total and worst wall time, lock waits included (a statement blocked on a
  row another transaction holds counts its wait);
- phases: the wall time of named functions of the sync path (the store, the merge, the lock,
  the analytics upkeep when the code has it, the commit), whichever of them the served code has.

Imported only by the benchmark (sync_load) as the server's entry point; the app knows nothing of
it. Works on any revision of the app (names it lacks are skipped).
"""

from __future__ import annotations

import atexit
import functools
import importlib
import json
import os
import re
import runpy
import signal
import sys
import threading
import time
from collections import defaultdict
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

PHASES = (
    ("app.learning.repository", "insert_new_events"),
    ("app.learning.repository", "lock_cursor"),
    ("app.learning.service", "_merge_into_lessons"),
    ("app.learning.service", "changes_since"),
    ("app.analytics.rollups", "refresh_events"),
    ("app.analytics.counts", "apply"),
    ("app.events", "record"),
    ("app.learning.service", "sync"),
)

_lock = threading.Lock()
_statements: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
_phases: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
_VALUES = re.compile(r"\(%\(.*|\s+")


def _key(statement: str) -> str:
    return _VALUES.sub(" ", statement).strip()[:110]


def _add(table: dict[str, list[float]], key: str, seconds: float) -> None:
    with _lock:
        entry = table[key]
        entry[0] += 1
        entry[1] += seconds
        entry[2] = max(entry[2], seconds)


@event.listens_for(Engine, "before_cursor_execute")
def _before(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
    conn.info.setdefault("rdv_started", []).append(time.perf_counter())


@event.listens_for(Engine, "after_cursor_execute")
def _after(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
    started = conn.info["rdv_started"].pop()
    _add(_statements, _key(statement), time.perf_counter() - started)


@event.listens_for(Engine, "commit")
def _commit(conn: Any) -> None:
    conn.info["rdv_commit"] = time.perf_counter()


def _timed(name: str, function: Any) -> Any:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            _add(_phases, name, time.perf_counter() - started)

    return timed


def _wrap_phases() -> None:
    for module_name, name in PHASES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, name):
            setattr(module, name, _timed(f"{module_name}.{name}", getattr(module, name)))
    from sqlalchemy.orm import Session

    Session.commit = _timed("Session.commit", Session.commit)  # type: ignore[method-assign]


def _dump() -> None:
    path = os.environ.get("RDV_BENCH_PROFILE")
    if not path:
        return
    with _lock, open(path, "w") as out:
        json.dump({"statements": dict(_statements), "phases": dict(_phases)}, out)


if __name__ == "__main__":
    sys.path[0] = os.getcwd()  # the served checkout's app, not this directory's neighbours
    _wrap_phases()
    atexit.register(_dump)
    # uvicorn re-raises the SIGTERM it caught once it has shut down, under the handler found
    # before it started: this one, so the profile is written (atexit would not run).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.argv = ["app", *sys.argv[1:]]
    runpy.run_module("app", run_name="__main__")
