"""What bubblewrap is told (pure data and argv, so tests can inspect it), and the file
descriptors it reads: the synthesized /etc files, the seccomp program, its JSON status.
grader.sandbox.bwrap runs it."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grader
from grader.sandbox.base import HOME, HOSTNAME, WORKDIR_INSIDE
from grader.sandbox.users import SandboxUser, passwd_lines

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
def data_fds(files: dict[str, bytes]) -> Iterator[dict[str, int]]:
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


def read_status(fd: int) -> str:
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")
