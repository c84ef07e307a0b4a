"""The checks of the lesson 1, 3 and 4 exercises (grader/exercises_ext), registered on import."""

from grader.exercises_ext import (
    checks_allreduce,
    checks_elastic,
    checks_launch,
    checks_syncbn,
    checks_zero,
)

__all__ = ["checks_allreduce", "checks_elastic", "checks_launch", "checks_syncbn", "checks_zero"]
