"""The harness: loaded first in every rank, it records what the learner's program does.

`python -m grader.harness main.py ARGS...` (the supervisor's torchrun entrypoint) installs the
hooks of `grader.harness.hooks`, runs the learner's file as `__main__`, and writes one JSON line
per event to a per-rank trace file. Checks (`grader.checks`) are pure functions over those traces.

Environment (read once, then removed from `os.environ` so the learner's code does not see it):
- RDV_TRACE_DIR: the directory of the trace files (a private, randomly named dir).
- RDV_HARNESS: `grader.launch.wire.HarnessSettings` as JSON (pg_timeout_seconds, faults,
  max_indices, checks: the check ids the exercise runs, so that a costly hook observes only when
  a check needs it).
"""

TRACE_DIR_ENV = "RDV_TRACE_DIR"
SETTINGS_ENV = "RDV_HARNESS"


def trace_name(rank: int, attempt: int) -> str:
    return f"rank-{rank}-a{attempt}.jsonl"


def stack_name(rank: int, attempt: int) -> str:
    return f"stack-{rank}-a{attempt}.txt"


def stop_stack_name(rank: int, attempt: int) -> str:
    """The rank's Python stack when the launcher stopped it (SIGTERM: another rank had failed),
    apart from `stack_name`'s dumps (a stop is no fatal error, and is not the grader's timeout)."""
    return f"stop-{rank}-a{attempt}.txt"


def replay_name(rank: int, step: int = 1) -> str:
    """The replay data of `rank` for the window that ends with its optimizer step `step`."""
    return f"replay-{rank}-s{step}.pt"


def replay_done_name(rank: int, attempt: int) -> str:
    """Written by `rank` when its program has ended in `attempt` (torchelastic's restart count):
    every replay file it will save is there."""
    return f"replay-{rank}-a{attempt}-done"
