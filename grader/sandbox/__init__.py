"""Isolation backends that run the grader's supervisor (and the learner's code) for one job."""

from grader.sandbox.base import (
    Sandbox,
    SandboxOutcome,
    SandboxRequest,
    SandboxUnavailable,
    get_sandbox,
)

__all__ = ["Sandbox", "SandboxOutcome", "SandboxRequest", "SandboxUnavailable", "get_sandbox"]
