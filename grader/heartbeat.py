"""A grader worker's liveness file, for container healthchecks.

The worker's event loop touches the file every few seconds, also while a job runs (grading runs
in a thread); `python -m grader.heartbeat` exits 0 while the file is fresh, 1 otherwise, so a
wedged worker shows as unhealthy. The queue has its own heartbeat (procrastinate's) for retrying
the jobs of a dead worker; this one is only for the orchestrator.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from grader.settings import load, settings

DEFAULT_MAX_AGE_S = 60.0


def heartbeat_path() -> Path:
    """$RDV_WORKER_HEARTBEAT_FILE (grader.settings)."""
    return settings().worker_heartbeat_file


def beat(path: Path) -> None:
    path.touch()


def is_fresh(path: Path, max_age_s: float, now: float | None = None) -> bool:
    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
    except OSError:
        return False
    return age <= max_age_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.heartbeat",
        description="Exit 0 while the worker's heartbeat is fresh.",
    )
    parser.add_argument("--max-age", type=float, default=DEFAULT_MAX_AGE_S, help="seconds")
    args = parser.parse_args(argv)
    path = load().worker_heartbeat_file  # this process starts: read the settings now
    if is_fresh(path, args.max_age):
        return 0
    print(f"no heartbeat in {path} for {args.max_age:.0f} s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
