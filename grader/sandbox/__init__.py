"""Isolation backends that run the grader's supervisor (and the learner's code) for one job.

The interface is grader.sandbox.base, a backend by name grader.sandbox.choose.get_sandbox, the
warm pool of prepared sandboxes grader.sandbox.pool."""

from grader.sandbox.base import Sandbox, SandboxOutcome, SandboxRequest, SandboxUnavailable
from grader.sandbox.choose import get_sandbox

__all__ = ["Sandbox", "SandboxOutcome", "SandboxRequest", "SandboxUnavailable", "get_sandbox"]
