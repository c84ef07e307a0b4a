"""The "none" backend: a plain subprocess, NO isolation. For tests and development only.

It applies what needs no privileges: rlimits (address space, file size, no core dumps), the hard
wall clock (the process group is killed), the output cap. The work dir is the cwd (not /work).
"""

from __future__ import annotations

import logging

from grader.sandbox._exec import ExecSpec
from grader.sandbox.base import (
    OutputCallback,
    Preparation,
    Prepared,
    SandboxOutcome,
    SandboxRequest,
)
from grader.sandbox.limits import rlimits_for
from grader.sandbox.process import kill_process_group, run_supervised, wrapper_argv

log = logging.getLogger(__name__)


class NoSandbox:
    name = "none"

    def prepare(self, prep: Preparation) -> Prepared:
        """Nothing to prepare: without isolation there is no start-up a pool could save
        beyond the interpreter's, and no warm pool serves this backend."""
        raise ValueError("the none sandbox is not prepared ahead; its launches start cold")

    def run(self, req: SandboxRequest, on_output: OutputCallback | None = None) -> SandboxOutcome:
        spec = ExecSpec(
            argv=list(req.argv),
            env=dict(req.env),
            rlimits=rlimits_for(req.limits, nproc=False, gpus=bool(req.gpus)),
        )
        result = run_supervised(
            wrapper_argv(spec),
            cwd=req.workdir,
            timeout_s=req.hard_timeout_s,
            output_cap=req.output_cap_bytes,
            on_output=on_output,
            kill_tree=kill_process_group,
            cancel=req.cancel,
        )
        return SandboxOutcome(
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            # Without a cgroup, a death by SIGKILL is the best sign of the kernel's OOM killer.
            oom_killed=False,
            duration_s=result.duration_s,
            output=result.output,
            sandbox=self.name,
            output_truncated=result.truncated,
        )
