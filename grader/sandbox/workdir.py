"""The job's work dir as the sandbox sees it at /work: a size-capped copy on its own tmpfs.

As root, the grader mounts a tmpfs of `limits.disk_mb` (owned by the job's uid) per uid slot,
copies the work dir in, and after the run copies back regular files and directories only:
symlinks, fifos, sockets and device nodes the program made never reach the host, so the grader
(root) can read the work dir without following a link the learner planted. Elsewhere the work dir
is bound directly (no disk cap beyond RLIMIT_FSIZE per file) and cleaned of the same entries.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import stat
from pathlib import Path

from grader.sandbox.users import SandboxUser, secure_dir, state_dir, try_acquire_slot

log = logging.getLogger(__name__)
MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH = 2
MAX_INODES = 65536
MAX_DEPTH = 32
_libc = ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(target: Path, options: str) -> None:
    flags = MS_NOSUID | MS_NODEV
    if _libc.mount(b"tmpfs", bytes(target), b"tmpfs", flags, options.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(target))


def _umount(target: Path) -> None:
    if _libc.umount2(bytes(target), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(target))


def _is_mount(path: Path) -> bool:
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == str(path) for line in f)


def _copy_file(src_dir_fd: int, name: str, dst: Path, owner: tuple[int, int] | None) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src_dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        with contextlib.suppress(FileNotFoundError):
            if dst.is_symlink() or dst.is_dir():
                return
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            while chunk := os.read(fd, 1 << 20):
                os.write(out, chunk)
            if owner is not None:
                os.fchown(out, *owner)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def copy_tree(src: Path, dst: Path, *, owner: tuple[int, int] | None, skip: set[str]) -> list[str]:
    """Copy regular files and directories from src into dst, never following a symlink.

    Whatever cannot be copied (too deep, a name too long, a vanished entry) is left out and
    named in the returned list: the work dir is the learner's, so its shape is never trusted.
    """
    problems: list[str] = []

    def walk(rel: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            problems.append(f"{rel}: deeper than {MAX_DEPTH} levels, not copied")
            return
        try:
            dir_fd = os.open(
                src / rel if rel else src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
            )
        except OSError as exc:
            problems.append(f"{rel}: {exc.strerror}")
            return
        try:
            for entry in os.scandir(dir_fd):
                child = f"{rel}/{entry.name}" if rel else entry.name
                if child in skip:
                    continue
                target = dst / child
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if target.is_symlink():
                            continue
                        target.mkdir(exist_ok=True)
                        if owner is not None:
                            os.chown(target, *owner)
                        walk(child, depth + 1)
                    elif entry.is_file(follow_symlinks=False):
                        _copy_file(dir_fd, entry.name, target, owner)
                except OSError as exc:
                    problems.append(f"{child}: {exc.strerror}")
        finally:
            os.close(dir_fd)

    walk("", 0)
    return problems


def remove_special(root: Path, skip: set[str]) -> None:
    """Delete every entry under root that is not a regular file or a directory."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            if str(path.relative_to(root)) in skip:
                continue
            with contextlib.suppress(OSError):
                mode = os.lstat(path).st_mode
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    path.unlink()


def prune_stubs(root: Path, stubs: list[str]) -> None:
    """Remove the empty directories bwrap created in the work dir as mount points."""
    for stub in stubs:
        path = root / stub
        while path != root:
            with contextlib.suppress(OSError):
                path.rmdir()
            path = path.parent


def sweep_stale_stages(stages: Path, own_slot: int) -> None:
    """Unmount the work dirs of slots nobody holds (their grader died mid-job): they pin memory."""
    for stage in stages.glob("slot-*"):
        try:
            slot = int(stage.name.removeprefix("slot-"))
        except ValueError:
            continue
        if slot == own_slot:
            continue
        user = try_acquire_slot(slot)
        if user is None:
            continue
        try:
            StagedWorkdir._clear(stage)
        except OSError as exc:
            log.warning("could not clear the stale sandbox work dir %s: %s", stage, exc)
        finally:
            user.release()


class StagedWorkdir:
    """Context manager: `.path` is what gets bound at /work; the host dir is updated on exit."""

    def __init__(self, host_dir: Path, user: SandboxUser, disk_mb: int, stubs: list[str]) -> None:
        self.host_dir = host_dir.resolve()
        self.user = user
        self.disk_mb = disk_mb
        self.stubs = stubs
        self.path = self.host_dir
        self.mounted = False
        self.warnings: list[str] = []

    def __enter__(self) -> StagedWorkdir:
        if not self.user.switch or self.user.slot is None:
            self.warnings.append(
                "disk limit not enforced: mounting a sized tmpfs needs root; "
                "RLIMIT_FSIZE caps each file"
            )
            return self
        stages = secure_dir(state_dir() / "work", 0o711)
        sweep_stale_stages(stages, self.user.slot)
        stage = stages / f"slot-{self.user.slot}"
        self._clear(stage)  # left over by a grader that died mid-job
        stage.mkdir(mode=0o700)
        options = (
            f"size={self.disk_mb}m,nr_inodes={MAX_INODES},mode=0700,"
            f"uid={self.user.uid},gid={self.user.gid}"
        )
        try:
            _mount_tmpfs(stage, options)
            self.mounted = True
        except OSError as exc:
            self.warnings.append(f"disk limit not enforced: cannot mount a tmpfs ({exc})")
            os.chown(stage, self.user.uid, self.user.gid)
        self.path = stage
        problems = copy_tree(self.host_dir, stage, owner=(self.user.uid, self.user.gid), skip=set())
        if problems:
            raise OSError(f"could not copy the work dir in: {'; '.join(problems[:5])}")
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.path != self.host_dir:
                problems = copy_tree(self.path, self.host_dir, owner=None, skip=set(self.stubs))
                if problems:
                    log.info("work dir entries not copied back: %s", "; ".join(problems[:10]))
            else:
                remove_special(self.host_dir, set(self.stubs))
            prune_stubs(self.host_dir, self.stubs)
        finally:
            if self.path != self.host_dir:
                self._clear(self.path)

    @staticmethod
    def _clear(stage: Path) -> None:
        if _is_mount(stage):
            _umount(stage)
        if stage.exists() or stage.is_symlink():
            shutil.rmtree(stage, ignore_errors=True)
