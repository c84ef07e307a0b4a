"""Helpers for the sandbox tests: run a Python snippet in a backend, look for leftover processes."""

from __future__ import annotations

import os
import sys
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.contract import Limits
from grader.sandbox import SandboxOutcome, SandboxRequest, get_sandbox


def run_python(
    workdir: Path,
    code: str,
    *,
    backend: str = "bwrap",
    env: dict[str, str] | None = None,
    on_output: Callable[[str], None] | None = None,
    kill_after_s: float | None = None,
    **limits: Any,
) -> SandboxOutcome:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "main.py").write_text(textwrap.dedent(code))
    req = SandboxRequest(
        workdir=workdir,
        argv=[sys.executable, "main.py"],
        env=env or {},
        limits=Limits(**{"wall_seconds": 60, **limits}),
        kill_after_s=kill_after_s,
    )
    return get_sandbox(backend).run(req, on_output=on_output)


def token() -> str:
    return f"rdvtoken{uuid.uuid4().hex}"


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path("/proc", entry, "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def host_uid(pid: int) -> int:
    for line in Path("/proc", str(pid), "status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise LookupError(pid)
