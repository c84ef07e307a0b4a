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
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grader
from grader.sandbox.base import (
    WORKDIR_INSIDE,
    OutputCallback,
    SandboxOutcome,
    SandboxRequest,
    SandboxUnavailable,
)
from grader.sandbox.cgroups import JobCgroup
from grader.sandbox.limits import rlimits_for
from grader.sandbox.process import kill_process_group, run_supervised, wrapper_argv
from grader.sandbox.seccomp import filter_program
from grader.sandbox.users import SandboxUser, acquire_user, passwd_lines
from grader.sandbox.workdir import StagedWorkdir

log = logging.getLogger(__name__)

HOSTNAME = "rdv-sandbox"
HOME = "/home/sandbox"
MIB = 1024 * 1024
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
)
NVIDIA_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
SECCOMP_KEY = "<seccomp>"
DEFAULT_ENV = {"HOME": HOME, "TMPDIR": "/tmp", "PATH": "/usr/local/bin:/usr/bin:/bin"}


def runtime_paths() -> list[str]:
    """Host paths bound read-only at the same place: the Python install, venv, grader package."""
    paths = [sys.base_prefix, sys.prefix, str(Path(grader.__file__).resolve().parent)]
    out: list[str] = []
    for p in dict.fromkeys(os.path.realpath(p) for p in paths):
        if p.startswith("/usr/") or any(p.startswith(q + "/") for q in out):
            continue
        out.append(p)
    return out


def etc_files(user: SandboxUser) -> dict[str, str]:
    passwd, group = passwd_lines(user, HOME)
    return {
        "/etc/passwd": passwd,
        "/etc/group": group,
        "/etc/hostname": f"{HOSTNAME}\n",
        "/etc/hosts": f"127.0.0.1\tlocalhost {HOSTNAME}\n::1\tlocalhost ip6-localhost\n",
        "/etc/nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
    }


@dataclass
class BwrapPlan:
    """Everything bwrap_argv needs; built by the backend, pure data so tests can inspect it."""

    workdir_host: str
    env: dict[str, str]
    argv: list[str]
    ro_paths: list[str]
    data_fds: dict[str, int] = field(default_factory=dict)  # inside path -> fd with its content
    tmpfs_bytes: int = 256 * MIB
    gpus: list[int] = field(default_factory=list)
    bwrap: str = "/usr/bin/bwrap"
    # The command runs as pid 1 of the sandbox's pid namespace: the kernel then drops every
    # signal sent to it from inside the namespace unless it installed a handler, so the learner's
    # code (same uid) cannot SIGKILL the grader's supervisor. When it exits, the kernel kills
    # everything else in the namespace.
    as_pid_1: bool = True
    # bwrap writes JSON here: {"child-pid": ...}, then {"exit-code": ...} once the command ran.
    status_fd: int | None = None
    # A BPF program (grader.sandbox.seccomp) bwrap applies before starting the command.
    seccomp_fd: int | None = None


def bwrap_argv(plan: BwrapPlan) -> list[str]:
    a = [plan.bwrap, "--unshare-all", "--unshare-user", "--unshare-cgroup", "--disable-userns"]
    a += ["--die-with-parent", "--new-session", "--hostname", HOSTNAME, "--clearenv"]
    if plan.status_fd is not None:
        a += ["--json-status-fd", str(plan.status_fd)]
    if plan.seccomp_fd is not None:
        a += ["--seccomp", str(plan.seccomp_fd)]
    if plan.as_pid_1:
        a += ["--as-pid-1"]
    for key, value in sorted(plan.env.items()):
        a += ["--setenv", key, value]
    a += ["--ro-bind", "/usr", "/usr"]
    for link in SYSTEM_LINKS:
        if os.path.islink(link):
            a += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            a += ["--ro-bind", link, link]
    for path in ETC_FILES:
        a += ["--ro-bind-try", path, path]
    for path, fd in sorted(plan.data_fds.items()):
        a += ["--ro-bind-data", str(fd), path]
    a += ["--proc", "/proc", "--dev", "/dev"]
    size = str(plan.tmpfs_bytes)
    for path in ("/dev/shm", "/tmp", HOME):
        a += ["--size", size, "--perms", "0700" if path == HOME else "1777", "--tmpfs", path]
    a += ["--bind", plan.workdir_host, WORKDIR_INSIDE]
    for path in plan.ro_paths:
        a += ["--ro-bind", path, path]
    if plan.gpus:
        for name in NVIDIA_DEVICES:
            a += ["--dev-bind-try", f"/dev/{name}", f"/dev/{name}"]
        for index in plan.gpus:
            a += ["--dev-bind", f"/dev/nvidia{index}", f"/dev/nvidia{index}"]
    a += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", WORKDIR_INSIDE, "--", *plan.argv]
    return a


def mount_stubs(ro_paths: list[str]) -> list[str]:
    """Paths (relative to the work dir) bwrap creates in /work as mount points."""
    prefix = WORKDIR_INSIDE + "/"
    return [p[len(prefix) :] for p in ro_paths if p.startswith(prefix)]


@contextlib.contextmanager
def _data_fds(files: dict[str, bytes]) -> Iterator[dict[str, int]]:
    fds: dict[str, int] = {}
    try:
        for path, content in files.items():
            fd = os.memfd_create("rdv-data", os.MFD_CLOEXEC)  # Popen(pass_fds) hands it on
            fds[path] = fd
            os.write(fd, content)
            os.lseek(fd, 0, os.SEEK_SET)
        yield fds
    finally:
        for fd in fds.values():
            os.close(fd)


def _read_status(fd: int) -> str:
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


class BwrapSandbox:
    name = "bwrap"

    def __init__(self, bwrap: str | None = None) -> None:
        found = bwrap or shutil.which("bwrap") or "/usr/bin/bwrap"
        self.bwrap = found

    def run(self, req: SandboxRequest, on_output: OutputCallback | None = None) -> SandboxOutcome:
        if not os.access(self.bwrap, os.X_OK):
            raise SandboxUnavailable(
                "bubblewrap is not installed: run scripts/install-system-deps.sh "
                "(apt-get install bubblewrap)"
            )
        user = acquire_user()
        warnings: list[str] = []
        try:
            return self._run(req, user, on_output, warnings)
        finally:
            user.release()

    def _run(
        self,
        req: SandboxRequest,
        user: SandboxUser,
        on_output: OutputCallback | None,
        warnings: list[str],
    ) -> SandboxOutcome:
        limits = req.limits
        ro_paths = runtime_paths()
        cgroup = JobCgroup.create(memory_mb=limits.memory_mb, pids=limits.pids)
        if cgroup is None:
            warnings.append("no writable cgroup: memory and process limits rely on rlimits only")
        oom = False
        status_r, status_w = os.pipe()
        os.set_blocking(status_r, False)
        try:
            with StagedWorkdir(req.workdir, user, limits.disk_mb, mount_stubs(ro_paths)) as stage:
                warnings += stage.warnings
                data = {path: text.encode() for path, text in etc_files(user).items()}
                program = filter_program()
                if program is None:
                    warnings.append("no seccomp filter on this architecture")
                else:
                    data[SECCOMP_KEY] = program
                with _data_fds(data) as fds:
                    seccomp_fd = fds.get(SECCOMP_KEY)
                    plan = BwrapPlan(
                        workdir_host=str(stage.path),
                        env={**DEFAULT_ENV, **req.env},
                        argv=list(req.argv),
                        ro_paths=ro_paths,
                        data_fds={k: fd for k, fd in fds.items() if k != SECCOMP_KEY},
                        tmpfs_bytes=limits.disk_mb * MIB,
                        gpus=list(req.gpus),
                        bwrap=self.bwrap,
                        status_fd=status_w,
                        seccomp_fd=seccomp_fd,
                    )
                    spec = {
                        "argv": bwrap_argv(plan),
                        "env": {},
                        "rlimits": rlimits_for(limits, nproc=user.switch),
                        "cgroup_procs": cgroup.procs_files() if cgroup else [],
                        "uid": user.uid if user.switch else None,
                        "gid": user.gid if user.switch else None,
                        "reveal": ro_paths if user.switch else [],
                        "status_fd": status_w,
                    }

                    def kill_tree(proc: subprocess.Popen[bytes]) -> None:
                        if cgroup is not None:
                            cgroup.kill_all()
                        kill_process_group(proc)

                    result = run_supervised(
                        wrapper_argv(spec),
                        cwd=Path("/"),
                        timeout_s=req.hard_timeout_s,
                        output_cap=req.output_cap_bytes,
                        on_output=on_output,
                        kill_tree=kill_tree,
                        pass_fds=(*fds.values(), status_w),
                    )
        finally:
            os.close(status_w)
            status = _read_status(status_r)
            if cgroup is not None:
                if not cgroup.kill_all():
                    warnings.append("processes of the job survived the final kill")
                oom = cgroup.oom_killed()
                cgroup.remove()
        for w in warnings:
            log.warning("sandbox: %s", w)
        if '"exit-code"' not in status and not (result.timed_out or oom):
            detail = status if "rdv-sandbox:" in status else result.output[-2000:]
            raise SandboxUnavailable(f"the sandbox failed to start: {detail.strip()}")
        return SandboxOutcome(
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            oom_killed=oom,
            duration_s=result.duration_s,
            output=result.output,
            sandbox=self.name,
            output_truncated=result.truncated,
            warnings=warnings,
        )
