"""One pre-started, single-use bwrap sandbox: the warm half of the "bwrap" backend.

`WarmBwrap.start()` builds exactly the sandbox `BwrapSandbox.run` would (its own uid, cgroup,
size-capped work dir, rlimits, seccomp, every namespace) around an EMPTY work dir, and runs the
supervisor in it as `python -m grader.supervisor --wait=S`: it imports torch and the harness,
says READY, and waits for a config file to appear in /work. No learner data is in it until
`run()` copies the job's work dir in (the config last, renamed into place, so the supervisor never
sees a half-written one). It serves that one launch and is destroyed. `run()` returns None when
the sandbox never took the job (it died, or ended before reading the config): the caller then
starts a cold one, so a dead warm sandbox is never the learner's error.
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
from grader.sandbox.base import OutputCallback, SandboxOutcome, SandboxRequest, SandboxUnavailable
from grader.sandbox.bwrap import (
    DEFAULT_ENV,
    MIB,
    SECCOMP_KEY,
    BwrapPlan,
    _data_fds,
    _read_status,
    bwrap_argv,
    etc_files,
    mount_stubs,
    runtime_paths,
)
from grader.sandbox.cgroups import JobCgroup
from grader.sandbox.limits import rlimits_for
from grader.sandbox.process import DRAIN_AFTER_EXIT_S, OutputCap, wrapper_argv
from grader.sandbox.seccomp import filter_program
from grader.sandbox.users import SandboxUser, acquire_user
from grader.sandbox.warm_output import WarmReadiness, WarmSink, supervisor_wait_argv
from grader.sandbox.workdir import StagedWorkdir, copy_tree

log = logging.getLogger(__name__)

PENDING = ".rdv-pending"


class WarmBwrap(WarmReadiness):
    """A sandbox started ahead of its job. Start it from a thread that outlives it: bwrap runs
    with --die-with-parent, which the kernel ties to the thread that started it."""

    def __init__(
        self,
        limits: Limits,
        gpus: list[int],
        env: dict[str, str],
        idle_s: float,
        bwrap: str,
        *,
        spares: int = 0,
        nodes: int = 1,
    ) -> None:
        self.limits, self.gpus, self.env = limits, list(gpus), dict(env)
        self.idle_s, self.bwrap, self.spares, self.nodes = idle_s, bwrap, spares, nodes
        self.started = 0.0
        self.user: SandboxUser | None = None
        self.cgroup: JobCgroup | None = None
        self.stage: StagedWorkdir | None = None
        self.placeholder: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.sink = WarmSink()
        self.reader: threading.Thread | None = None
        self.status_r = self.status_w = -1
        self.stubs: list[str] = []
        self.warnings: list[str] = []
        self.closed = False

    # -- start ----------------------------------------------------------------------------
    def start(self) -> None:
        limits = self.limits
        self.started = time.monotonic()
        self.user = acquire_user()
        try:
            self._start(limits, self.user)
        except BaseException:
            self.destroy()
            raise

    def _start(self, limits: Limits, user: SandboxUser) -> None:
        ro_paths = runtime_paths()
        self.stubs = mount_stubs(ro_paths)
        self.cgroup = JobCgroup.create(memory_mb=limits.memory_mb, pids=limits.pids)
        if self.cgroup is None:
            self.warnings.append("no writable cgroup: memory and process limits rely on rlimits")
        self.placeholder = Path(tempfile.mkdtemp(prefix="rdv-warm-"))
        self.placeholder.chmod(0o755)
        if not user.switch:  # bound directly: the sandbox's uid is ours
            self.placeholder.chmod(0o700)
        self.stage = StagedWorkdir(self.placeholder, user, limits.disk_mb, self.stubs)
        self.stage.__enter__()  # an empty, size-capped work dir owned by the sandbox's uid
        self.warnings += self.stage.warnings
        self.status_r, self.status_w = os.pipe()
        os.set_blocking(self.status_r, False)
        data = {path: text.encode() for path, text in etc_files(user).items()}
        program = filter_program()
        if program is None:
            self.warnings.append("no seccomp filter on this architecture")
        else:
            data[SECCOMP_KEY] = program
        argv = supervisor_wait_argv(self.idle_s, self.spares, self.nodes)
        with _data_fds(data) as fds:
            plan = BwrapPlan(
                workdir_host=str(self.stage.path),
                env={**DEFAULT_ENV, **self.env},
                argv=argv,
                ro_paths=ro_paths,
                data_fds={k: fd for k, fd in fds.items() if k != SECCOMP_KEY},
                tmpfs_bytes=limits.disk_mb * MIB,
                gpus=self.gpus,
                bwrap=self.bwrap,
                status_fd=self.status_w,
                seccomp_fd=fds.get(SECCOMP_KEY),
            )
            spec = {
                "argv": bwrap_argv(plan),
                "env": {},
                "rlimits": rlimits_for(limits, nproc=user.switch),
                "cgroup_procs": self.cgroup.procs_files() if self.cgroup else [],
                "uid": user.uid if user.switch else None,
                "gid": user.gid if user.switch else None,
                "reveal": ro_paths if user.switch else [],
                "status_fd": self.status_w,
            }
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
            target=_drain, args=(read_fd, self.sink), name="warm-sandbox-output", daemon=True
        )
        self.reader.start()

    # -- state ----------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and not self.closed

    @property
    def ident(self) -> str:
        """Which sandbox this is, for the log."""
        return f"bwrap pid {self.proc.pid if self.proc else '-'}"

    # -- one launch -----------------------------------------------------------------------
    def run(
        self, req: SandboxRequest, config_name: str, on_output: OutputCallback | None = None
    ) -> SandboxOutcome | None:
        """Serve `req` (its work dir holds main.py and the config `config_name`); None: the
        sandbox never took it (nothing of the learner's ran), start a cold one instead."""
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
        self.sink.attach(OutputCap(req.output_cap_bytes, on_output))
        os.rename(pending, work / config_name)  # the supervisor takes it from here
        start = time.monotonic()
        timed_out = False
        try:
            self.proc.wait(timeout=req.hard_timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            duration = time.monotonic() - start
        taken = not (work / config_name).exists()
        status, oom = self._stop()
        try:
            if taken:
                copy_tree(work, req.workdir, owner=None, skip=set(self.stubs))
        finally:
            self._release()
        if not taken:
            log.warning("a warm sandbox ended before taking its job; starting a cold one")
            return None
        for w in self.warnings:
            log.warning("sandbox: %s", w)
        cap = self.sink.cap
        assert cap is not None
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
            warm=True,
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
        self.sink.flush()
        status = ""
        if self.status_w >= 0:
            os.close(self.status_w)
            self.status_w = -1
        if self.status_r >= 0:
            status = _read_status(self.status_r)
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
            if self.stage.path != self.placeholder:
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


def _drain(fd: int, sink: WarmSink) -> None:
    try:
        while chunk := os.read(fd, 65536):
            sink.feed(chunk)
    except OSError:
        pass
    finally:
        os.close(fd)
        sink.flush()
