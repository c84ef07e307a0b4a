"""The "bwrap" backend: bubblewrap with every namespace unshared, as an unprivileged host uid.

What the command sees: a read-only /usr (and the /bin, /lib... links), a few synthesized /etc
files (its own passwd, group, hosts with the sandbox's hostname, nsswitch), the Python install,
the venv and the grader package read-only at their host paths, private size-capped tmpfs for
/tmp, /dev/shm and HOME, the job's work dir read-write at /work (its cwd), a fresh /proc of its
own pid namespace, a minimal /dev, and a network namespace with only a loopback (bwrap brings
`lo` up). bwrap starts with an empty environment (the command's variables are passed with
--clearenv/--setenv: no host variable exists anywhere inside, /proc/1/environ included), in a
per-job cgroup, under rlimits, as a per-job uid.
The command is pid 1 of its pid namespace: processes inside cannot SIGKILL it, and when it ends
the kernel kills whatever is left in the namespace; the grader also kills everything still in the
job's cgroup.

One life cycle for both kinds of launch (`BwrapBox`): a cold launch (`BwrapSandbox.run`) starts
the box with its command and work dir staged in; a prepared one (`BwrapSandbox.prepare`, held by
the warm pool, grader.sandbox.pool) starts it around an EMPTY work dir with the supervisor
waiting (`python -m grader.inside.supervisor --wait=S`: torch and the harness imported, READY said).
No learner data is in it until `run()` copies the job's work dir in (the config last, renamed into
place, so the supervisor never sees a half-written one). Either serves one launch and is torn
down: its processes, cgroup, uid slot and work dir.

Its lifetime is tied to the process that owns it: bwrap runs with --die-with-parent (the kernel
ties it to the thread that started it: start prepared ones from a thread that outlives them, as
the pool's refill thread does), the exec wrapper sets the same parent-death signal before bwrap
runs (no window where the owner's death goes unnoticed), and a pool's keeper
(grader.sandbox.keeper) removes the work dirs and cgroups of an owner that was SIGKILLed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from grader.contract import Limits
from grader.sandbox._exec import ExecSpec
from grader.sandbox._keeper import Leftovers
from grader.sandbox.base import (
    DEFAULT_ENV,
    OutputCallback,
    Preparation,
    SandboxOutcome,
    SandboxRequest,
    SandboxUnavailable,
    wait_for_process,
)
from grader.sandbox.bwrap_plan import (
    MIB,
    SECCOMP_KEY,
    BwrapPlan,
    bwrap_argv,
    data_fds,
    etc_files,
    mount_stubs,
    read_status,
    runtime_paths,
)
from grader.sandbox.cgroups import JobCgroup
from grader.sandbox.limits import rlimits_for
from grader.sandbox.prepared import (
    PreparedOutput,
    Readiness,
    drain,
    log_untaken,
    supervisor_wait_argv,
)
from grader.sandbox.process import DRAIN_AFTER_EXIT_S, OutputCap, wrapper_argv
from grader.sandbox.seccomp import filter_program
from grader.sandbox.users import SandboxUser, acquire_user
from grader.sandbox.workdir import StagedWorkdir, copy_tree

log = logging.getLogger(__name__)

PENDING = ".rdv-pending"

__all__ = ["BwrapBox", "BwrapPlan", "BwrapSandbox", "bwrap_argv", "runtime_paths"]


class BwrapSandbox:
    name = "bwrap"

    def __init__(self, bwrap: str | None = None) -> None:
        found = bwrap or shutil.which("bwrap") or "/usr/bin/bwrap"
        self.bwrap = found

    def _check(self) -> None:
        if not os.access(self.bwrap, os.X_OK):
            raise SandboxUnavailable(
                "bubblewrap is not installed: run scripts/install-system-deps.sh "
                "(apt-get install bubblewrap)"
            )

    def run(self, req: SandboxRequest, on_output: OutputCallback | None = None) -> SandboxOutcome:
        """A cold launch: the box started with the request's command and work dir, waited for."""
        self._check()
        box = BwrapBox(self.bwrap, req.limits, req.gpus, req.env, list(req.argv), idle_s=0)
        box.start(req.workdir, OutputCap(req.output_cap_bytes, on_output))
        return box.finish(req.hard_timeout_s, req.cancel)

    def prepare(self, prep: Preparation) -> BwrapBox:
        """A box started around an empty work dir, its supervisor waiting for a launch."""
        self._check()
        box = BwrapBox(
            self.bwrap,
            prep.limits,
            list(prep.gpus),
            dict(prep.env),
            supervisor_wait_argv(prep),
            idle_s=prep.idle_s,
        )
        box.start(None, None)
        return box


class BwrapBox(Readiness):
    """One bwrap sandbox from start to teardown, cold or prepared (see the module docstring)."""

    def __init__(
        self,
        bwrap: str,
        limits: Limits,
        gpus: list[int],
        env: dict[str, str],
        argv: list[str],
        *,
        idle_s: float,
    ) -> None:
        self.bwrap, self.limits, self.gpus, self.env = bwrap, limits, list(gpus), dict(env)
        self.argv, self.idle_s = argv, idle_s
        self.started = 0.0
        self.prepared = False  # started before its launch was known
        self.user: SandboxUser | None = None
        self.cgroup: JobCgroup | None = None
        self.stage: StagedWorkdir | None = None
        self.placeholder: Path | None = None  # the empty host dir a prepared box's stage mirrors
        self.proc: subprocess.Popen[bytes] | None = None
        self.output = PreparedOutput()
        self.reader: threading.Thread | None = None
        self.status_r = self.status_w = -1
        self.stubs: list[str] = []
        self.warnings: list[str] = []
        self.closed = False

    # -- start ----------------------------------------------------------------------------
    def start(self, workdir: Path | None, cap: OutputCap | None) -> None:
        """Start the command: with `workdir` (a cold launch) staged in and `cap` taking the
        output from the first byte; with None (prepared) around an empty work dir."""
        self.started = time.monotonic()
        self.prepared = workdir is None
        if cap is not None:
            self.output.attach(cap)
        self.user = acquire_user()
        try:
            self._start(workdir, self.user)
        except BaseException:
            self.destroy()
            raise

    def _start(self, workdir: Path | None, user: SandboxUser) -> None:
        limits = self.limits
        ro_paths = runtime_paths()
        self.stubs = mount_stubs(ro_paths)
        self.cgroup = JobCgroup.create(memory_mb=limits.memory_mb, pids=limits.pids)
        if self.cgroup is None:
            self.warnings.append(
                "no writable cgroup: memory and process limits rely on rlimits only"
            )
        if workdir is None:
            self.placeholder = Path(tempfile.mkdtemp(prefix="rdv-warm-"))
            self.placeholder.chmod(0o755)
            if not user.switch:  # bound directly: the sandbox's uid is ours
                self.placeholder.chmod(0o700)
            workdir = self.placeholder
        self.stage = StagedWorkdir(workdir, user, limits.disk_mb, self.stubs)
        self.stage.__enter__()  # a size-capped work dir owned by the sandbox's uid
        self.warnings += self.stage.warnings
        self.status_r, self.status_w = os.pipe()
        os.set_blocking(self.status_r, False)
        data = {path: text.encode() for path, text in etc_files(user).items()}
        program = filter_program()
        if program is None:
            self.warnings.append("no seccomp filter on this architecture")
        else:
            data[SECCOMP_KEY] = program
        with data_fds(data) as fds:
            plan = BwrapPlan(
                workdir_host=str(self.stage.path),
                env={**DEFAULT_ENV, **self.env},
                argv=self.argv,
                ro_paths=ro_paths,
                data_fds={k: fd for k, fd in fds.items() if k != SECCOMP_KEY},
                tmpfs_bytes=limits.disk_mb * MIB,
                gpus=self.gpus,
                bwrap=self.bwrap,
                status_fd=self.status_w,
                seccomp_fd=fds.get(SECCOMP_KEY),
            )
            spec = ExecSpec(
                argv=bwrap_argv(plan),
                rlimits=rlimits_for(limits, nproc=user.switch, gpus=bool(self.gpus)),
                cgroup_procs=self.cgroup.procs_files() if self.cgroup else [],
                uid=user.uid if user.switch else None,
                gid=user.gid if user.switch else None,
                reveal=ro_paths if user.switch else [],
                status_fd=self.status_w,
                # The wrapper dies with this process (the thread starting it), as bwrap does.
                parent=os.getpid(),
            )
            read_fd, write_fd = os.pipe()
            try:
                self.proc = subprocess.Popen(
                    wrapper_argv(spec),
                    stdin=subprocess.DEVNULL,
                    stdout=write_fd,
                    stderr=write_fd,
                    cwd="/",
                    env={},
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(*fds.values(), self.status_w),
                )
            except BaseException:
                os.close(read_fd)
                raise
            finally:
                os.close(write_fd)
        self.reader = threading.Thread(
            target=drain, args=(read_fd, self.output), name="sandbox-output", daemon=True
        )
        self.reader.start()

    # -- state ----------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and not self.closed

    @property
    def ident(self) -> str:
        """Which sandbox this is, for the log."""
        return f"bwrap pid {self.proc.pid if self.proc else '-'}"

    def leftovers(self) -> Leftovers:
        """What would outlive this process if it died now (grader.sandbox.keeper removes it)."""
        dirs = [str(p) for p in (self.stage.path if self.stage else None, self.placeholder) if p]
        return Leftovers(
            pgid=self.proc.pid if self.proc else 0,
            cgroups=tuple(str(d) for d in self.cgroup.dirs.values()) if self.cgroup else (),
            mounts=(dirs[0],) if self.stage and self.stage.mounted else (),
            dirs=tuple(dirs),
        )

    # -- one launch -----------------------------------------------------------------------
    def run(
        self, req: SandboxRequest, config_name: str, on_output: OutputCallback | None = None
    ) -> SandboxOutcome | None:
        """A prepared box serves `req` (its work dir holds main.py and the config
        `config_name`); None: it never took it (nothing of the learner's ran): run it cold."""
        assert self.stage is not None and self.proc is not None and self.user is not None
        if not self.ready():
            self.destroy()
            return None
        owner = (self.user.uid, self.user.gid) if self.user.switch else None
        work = self.stage.path
        problems = copy_tree(req.workdir, work, owner=owner, skip={config_name})
        if problems:
            self.destroy()
            raise OSError(f"could not copy the work dir in: {'; '.join(problems[:5])}")
        pending = work / PENDING
        shutil.copyfile(req.workdir / config_name, pending)
        if owner is not None:
            os.chown(pending, *owner)
        self.output.attach(OutputCap(req.output_cap_bytes, on_output))
        os.rename(pending, work / config_name)  # the supervisor takes it from here
        timed_out, duration = self._wait(req.hard_timeout_s, req.cancel)
        taken = not (work / config_name).exists()
        status, oom = self._stop()
        try:
            if taken:
                copy_tree(work, req.workdir, owner=None, skip=set(self.stubs))
        finally:
            self._release()
        if not taken:
            log_untaken("sandbox", req)
            return None
        return self._outcome(status, oom, timed_out, duration)

    def finish(self, timeout_s: float, cancel: threading.Event | None = None) -> SandboxOutcome:
        """A cold box: wait for its command, tear it down, its work dir copied back."""
        try:
            timed_out, duration = self._wait(timeout_s, cancel)
            status, oom = self._stop()
            if self.stage is not None:
                stage, self.stage = self.stage, None
                stage.__exit__(None, None, None)  # back into the job dir, then cleared
        finally:
            self.destroy()
        return self._outcome(status, oom, timed_out, duration)

    def _wait(self, timeout_s: float, cancel: threading.Event | None) -> tuple[bool, float]:
        """(stopped at `timeout_s` or by `cancel`, seconds waited)."""
        assert self.proc is not None
        start = time.monotonic()
        try:
            ended_in_time = wait_for_process(self.proc, timeout_s, cancel)
        except BaseException:
            self.destroy()
            raise
        return not ended_in_time, time.monotonic() - start

    def _outcome(self, status: str, oom: bool, timed_out: bool, duration: float) -> SandboxOutcome:
        for w in self.warnings:
            log.warning("sandbox: %s", w)
        cap = self.output.cap
        assert cap is not None and self.proc is not None
        if '"exit-code"' not in status and not (timed_out or oom):
            detail = status if "rdv-sandbox:" in status else cap.text()[-2000:]
            raise SandboxUnavailable(f"the sandbox failed to start: {detail.strip()}")
        code = self.proc.returncode
        return SandboxOutcome(
            exit_code=128 - code if code < 0 else code,
            timed_out=timed_out,
            oom_killed=oom,
            duration_s=duration,
            output=cap.text(),
            sandbox="bwrap",
            output_truncated=cap.truncated,
            warnings=list(self.warnings),
            warm=self.prepared,
        )

    # -- teardown -------------------------------------------------------------------------
    def _kill(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill_all()
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, 9)
            self.proc.wait()

    def _stop(self) -> tuple[str, bool]:
        """Kill what is left, drain the output, read bwrap's status; (status, oom-killed)."""
        self._kill()
        if self.reader is not None:
            self.reader.join(DRAIN_AFTER_EXIT_S)
        self.output.flush()
        status = ""
        if self.status_w >= 0:
            os.close(self.status_w)
            self.status_w = -1
        if self.status_r >= 0:
            status = read_status(self.status_r)
            self.status_r = -1
        oom = False
        if self.cgroup is not None:
            if not self.cgroup.kill_all():
                self.warnings.append("processes of the job survived the final kill")
            oom = self.cgroup.oom_killed()
            self.cgroup.remove()
            self.cgroup = None
        return status, oom

    def _release(self) -> None:
        self.closed = True
        if self.stage is not None:
            if self.stage.path != self.stage.host_dir:
                with contextlib.suppress(OSError):
                    StagedWorkdir._clear(self.stage.path)
            self.stage = None
        if self.placeholder is not None:
            shutil.rmtree(self.placeholder, ignore_errors=True)
            self.placeholder = None
        if self.user is not None:
            self.user.release()
            self.user = None

    def destroy(self) -> None:
        """Never used, or done: nothing of it survives."""
        if self.closed:
            return
        try:
            self._stop()
        finally:
            self._release()
