"""Checks: pure functions over a run's traces, exit codes and output (see `base`).

Evaluate with `evaluate(run, spec)`; every module here registers its checks on import.
"""

from grader.checks.base import CheckDef, Outcome, RankView, RunView, all_checks, check, get_check

__all__ = ["CheckDef", "Outcome", "RankView", "RunView", "all_checks", "check", "get_check"]
