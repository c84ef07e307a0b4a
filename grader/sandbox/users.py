"""The host uid a job runs under: never root.

Started as root, every job gets its own unprivileged uid/gid from a fixed numeric range
(RDV_SANDBOX_UID_BASE, default 3900000, RDV_SANDBOX_SLOTS of them): no /etc/passwd entry is
needed, so it works the same on a fresh CI machine, and RLIMIT_NPROC (which counts per uid)
becomes a per-job limit. A slot is held with flock(2) on a lock file, which works across threads
and processes (pytest-xdist) and is released by the kernel if the grader dies. Started as any
other user, jobs run as that user (bwrap then relies on unprivileged user namespaces).
"""

from __future__ import annotations

import fcntl
import os
import random
import stat
from dataclasses import dataclass
from pathlib import Path

from grader.sandbox.base import SandboxUnavailable
from grader.settings import settings


def state_dir() -> Path:
    """Where the uid slots' locks and the stage mounts live (RDV_SANDBOX_STATE_DIR)."""
    return settings().sandbox_state_dir


@dataclass
class SandboxUser:
    uid: int
    gid: int
    # True when the launcher switches to this uid (it runs as root).
    switch: bool
    slot: int | None = None
    _lock_fd: int | None = None

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # drops the flock
            self._lock_fd = None


def secure_dir(path: Path, mode: int) -> Path:
    """Create `path` (owned by us, not writable by others) or refuse one that is not."""
    path.mkdir(parents=True, exist_ok=True, mode=mode)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxUnavailable(
            f"{path} must be a directory owned by uid {os.geteuid()}, 0{mode:o}"
        )
    os.chmod(path, mode)
    return path


def acquire_user() -> SandboxUser:
    if os.geteuid() != 0:
        return SandboxUser(uid=os.getuid(), gid=os.getgid(), switch=False)
    count = settings().sandbox_slots
    slots = secure_dir(secure_dir(state_dir(), 0o711) / "slots", 0o700)
    first = random.randrange(count)
    for i in range(count):
        slot = (first + i) % count
        fd = os.open(
            slots / f"{slot}.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        uid = settings().sandbox_uid_base + slot
        return SandboxUser(uid=uid, gid=uid, switch=True, slot=slot, _lock_fd=fd)
    raise SandboxUnavailable(f"all {count} sandbox uids are busy; raise RDV_SANDBOX_SLOTS")


def try_acquire_slot(slot: int) -> SandboxUser | None:
    """Hold uid slot `slot` (root only), or None when another job holds it."""
    slots = secure_dir(secure_dir(state_dir(), 0o711) / "slots", 0o700)
    flags = os.O_CREAT | os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(slots / f"{slot}.lock", flags, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    uid = settings().sandbox_uid_base + slot
    return SandboxUser(uid=uid, gid=uid, switch=True, slot=slot, _lock_fd=fd)


def passwd_lines(user: SandboxUser, home: str) -> tuple[str, str]:
    """/etc/passwd and /etc/group for inside the sandbox: only its own user."""
    passwd = f"sandbox:x:{user.uid}:{user.gid}:Rendezvous sandbox:{home}:/usr/sbin/nologin\n"
    passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    group = f"sandbox:x:{user.gid}:\nnogroup:x:65534:\n"
    return passwd, group
