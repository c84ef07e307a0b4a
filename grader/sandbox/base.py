"""The sandbox interface (contract between the grader and its isolation backends).

A backend runs one command (`SandboxRequest.argv`) with the job's work dir as its working
directory, under the job's `Limits`, and reports what happened (`SandboxOutcome`). It never raises
for anything the program inside does (crash, hang, flood, memory bomb): those are outcomes. It
raises `SandboxUnavailable` when the platform cannot run the sandbox at all (a platform fault).

Backends:
- "bwrap" (default, local): bubblewrap, every namespace unshared, read-only system and venv, the
  work dir read-write at /work, private tmpfs HOME and /tmp, a per-job cgroup, a dedicated
  unprivileged host uid.
- "docker" (production): the same request as a container (docker SDK).
- "none": a plain subprocess with the same limits it can apply without privileges (rlimits,
  wall clock, output cap) and NO isolation. For tests and development only. The work dir is the
  cwd, but it is not at /work: programs should use paths relative to the cwd.

Time limits: the program inside (the grader's supervisor) owns the soft limit,
`limits.wall_seconds` (dump stacks, then stop). The sandbox is the backstop: it kills the whole
job at `SandboxRequest.kill_after_s`, by default `limits.wall_seconds + HARD_KILL_GRACE_S`.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from grader.contract import Limits

# Seconds between the supervisor's soft limit (limits.wall_seconds) and the sandbox's hard kill.
HARD_KILL_GRACE_S = 10.0
# The sandbox's own cap on the combined output of the command, as a multiple of the per-rank cap
# (the supervisor caps each rank to limits.output_bytes_per_rank; this bounds the sum).
COMBINED_OUTPUT_FACTOR = 8
# How often a wait for the command looks at its request's `cancel`.
CANCEL_POLL_S = 0.2
# Where the work dir appears inside the isolating backends.
WORKDIR_INSIDE = "/work"
# What the command sees of its host in the isolating backends (bwrap, docker).
HOSTNAME = "rdv-sandbox"
HOME = "/home/sandbox"
DEFAULT_ENV = {"HOME": HOME, "TMPDIR": "/tmp", "PATH": "/usr/local/bin:/usr/bin:/bin"}


class SandboxUnavailable(RuntimeError):
    """The platform cannot run this sandbox (missing binary, no permission): a platform fault."""


@dataclass
class SandboxRequest:
    # Mounted read-write at /work (the cwd) by the isolating backends; the cwd itself for "none".
    workdir: Path
    argv: list[str]
    # The complete environment of the command: nothing of the host's is added.
    env: dict[str, str]
    limits: Limits
    # GPU indices the job may use (their /dev/nvidia* devices are made visible).
    gpus: list[int] = field(default_factory=list)
    # The hard wall clock; None means limits.wall_seconds + HARD_KILL_GRACE_S.
    kill_after_s: float | None = None
    # Set by the grading when it no longer needs this launch (an earlier launch ran at the same
    # time and ended the grading): the backend stops the command as at its hard wall clock.
    cancel: threading.Event | None = None

    @property
    def hard_timeout_s(self) -> float:
        if self.kill_after_s is not None:
            return self.kill_after_s
        return self.limits.wall_seconds + HARD_KILL_GRACE_S

    @property
    def output_cap_bytes(self) -> int:
        return self.limits.output_bytes_per_rank * COMBINED_OUTPUT_FACTOR


def wait_for_end(
    ended: Callable[[float], bool], timeout_s: float, cancel: threading.Event | None
) -> bool:
    """Wait for a command: `ended(seconds)` waits up to that long and says whether it ended.
    True when it ended within `timeout_s` and before `cancel` was set."""
    if cancel is None:
        return ended(timeout_s)
    deadline = time.monotonic() + timeout_s
    while not cancel.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if ended(min(left, CANCEL_POLL_S)):
            return True
    return False


def wait_for_process(
    proc: subprocess.Popen[bytes], timeout_s: float, cancel: threading.Event | None
) -> bool:
    """`wait_for_end` of a process: True when it exited within `timeout_s`, before `cancel`."""

    def ended(seconds: float) -> bool:
        try:
            proc.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    return wait_for_end(ended, timeout_s, cancel)


@dataclass
class SandboxOutcome:
    # The command's exit status; killed by signal N: 128+N (as shells show it); None: unknown.
    exit_code: int | None
    timed_out: bool
    oom_killed: bool
    duration_s: float
    # Combined stdout+stderr, capped at request.output_cap_bytes (with a note when cut).
    output: str
    sandbox: str
    output_truncated: bool = False
    # Platform notes (e.g. "cgroup memory limit unavailable"), never learner-facing.
    warnings: list[str] = field(default_factory=list)
    warm: bool = False  # a pre-started sandbox of the warm pool ran it


OutputCallback = Callable[[str], None]


@dataclass(frozen=True)
class Preparation:
    """What a prepared sandbox is started with, before any job is known: the limits, devices and
    environment a launch fixes when its sandbox starts, and the supervisor it waits in (its zygote
    forks any number of ranks, and the node agents of a simulated multi-node job,
    grader.inside.multinode)."""

    limits: Limits
    gpus: tuple[int, ...]
    env: tuple[tuple[str, str], ...]
    idle_s: float  # the supervisor gives up (and the sandbox ends) after this long unassigned


class Prepared(Protocol):
    """A sandbox started ahead of its launch (`Sandbox.prepare`), single use: it serves one
    launch (`run`) and is destroyed. grader.sandbox.prepared has the readiness and output parts
    every backend shares."""

    def alive(self) -> bool: ...
    def ready(self) -> bool: ...
    def wait_ready(self, timeout_s: float) -> bool: ...
    def expires_in(self) -> float: ...
    @property
    def ident(self) -> str: ...
    def before_output(self) -> list[bytes]: ...
    def run(
        self, req: SandboxRequest, config_name: str, on_output: OutputCallback | None = None
    ) -> SandboxOutcome | None:
        """Serve `req` (its work dir holds main.py and the supervisor's config `config_name`);
        None: the sandbox never took it (nothing of the learner's ran): run it cold instead."""
        ...

    def destroy(self) -> None:
        """Never used, or done: nothing of it survives (processes, cgroup, work dir, volume)."""
        ...


class Sandbox(Protocol):
    """A backend. One life cycle: `prepare` starts a sandbox and its supervisor waiting for a
    launch (the warm pool holds these, grader.sandbox.pool); `run` is a cold launch, the same
    sandbox started with the launch's own command and work dir."""

    name: str

    def run(self, req: SandboxRequest, on_output: OutputCallback | None = None) -> SandboxOutcome:
        """Run req.argv to completion (or the hard wall clock); nothing is left running after."""
        ...

    def prepare(self, prep: Preparation) -> Prepared:
        """Start a sandbox for a launch not known yet (returns at once; it says when it is
        ready). SandboxUnavailable when it cannot start; "none" cannot prepare (ValueError)."""
        ...
