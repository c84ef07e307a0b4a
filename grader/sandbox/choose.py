"""`get_sandbox(name)`: a backend by name. Apart from base.py so that the interface never imports
its backends (each backend imports base)."""

from __future__ import annotations

from grader.sandbox.base import Sandbox
from grader.settings import settings

DEFAULT_SANDBOX_ENV = "RDV_SANDBOX"


def get_sandbox(name: str | None = None) -> Sandbox:
    """The backend called `name` ("bwrap", "docker", "none"); default: $RDV_SANDBOX or "bwrap"."""
    name = name or settings().sandbox
    if name == "none":
        from grader.sandbox.nosandbox import NoSandbox

        return NoSandbox()
    if name == "bwrap":
        from grader.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox()
    if name == "docker":
        from grader.sandbox.docker import DockerSandbox

        return DockerSandbox()
    raise ValueError(f"unknown sandbox {name!r}; choose bwrap, docker or none")
