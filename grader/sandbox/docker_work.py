"""The Docker sandbox's work dir: a size-capped tmpfs volume, as bwrap's staged tmpfs is.

A bind-mounted job dir would let a program fill the worker host's disk (RLIMIT_FSIZE caps one
file, not how many). So the job's files go into a Docker volume of the local driver with
`type=tmpfs,size=<disk_mb>m`, mounted at /work in the sandbox. The engine unmounts (and so
empties) such a volume whenever no running container holds it, so a tiny holder container
(`sleep infinity`, locked down like the sandbox) keeps it mounted from before the files are
copied in until after they are copied out; the copies go through the engine's archive API. On
the way out only regular files and directories come back, never a link or a device node the
program made, and never a path outside the work dir. Holder and volume carry the sandbox labels,
so the reaper removes them with the sandbox when a worker dies mid-job.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Any

from grader.sandbox.base import WORKDIR_INSIDE
from grader.sandbox.workdir import MAX_DEPTH, MAX_INODES

log = logging.getLogger(__name__)


class WorkVolume:
    """Context manager: `.name` is the volume to mount at /work; `copy_out` brings results back."""

    def __init__(
        self, client: Any, *, image: str, user: str, disk_mb: int, labels: dict[str, str]
    ) -> None:
        self.client = client
        self.image = image
        self.user = user
        self.disk_mb = disk_mb
        self.labels = labels
        self.volume: Any = None
        self.holder: Any = None

    @property
    def name(self) -> str:
        return str(self.volume.name)

    def __enter__(self) -> WorkVolume:
        uid, _, gid = self.user.partition(":")
        options = f"size={self.disk_mb}m,nr_inodes={MAX_INODES},mode=0700"
        if uid.isdigit():
            options += f",uid={uid},gid={gid or uid}"
        try:
            self.volume = self.client.volumes.create(
                driver="local",
                driver_opts={"type": "tmpfs", "device": "tmpfs", "o": options},
                labels=self.labels,
            )
            self.holder = start_container(
                self.client,
                image=self.image,
                entrypoint=["sleep"],
                command=["infinity"],
                user=self.user,
                network_mode="none",
                read_only=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges:true"],
                mem_limit="32m",
                memswap_limit="32m",
                pids_limit=4,
                volumes={self.name: {"bind": WORKDIR_INSIDE, "mode": "rw"}},
                labels=self.labels,
            )
        except BaseException:
            self.__exit__()
            raise
        return self

    def copy_in(self, host_dir: Path, last: str | None = None) -> None:
        """The job's files (regular files and directories) into the volume, owned by the
        sandbox's user; `last` (a top-level file) is the archive's last member, so the engine,
        which extracts in order, writes it after every other file."""
        uid, _, gid = self.user.partition(":")
        owner = (int(uid), int(gid or uid)) if uid.isdigit() else (0, 0)
        tail = [host_dir / last] if last else []
        paths = [p for p in sorted(host_dir.rglob("*")) if p not in tail] + tail
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w") as tar:
            for path in paths:
                if path.is_symlink() or not (path.is_file() or path.is_dir()):
                    continue
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(host_dir)))
                info.uid, info.gid = owner
                info.uname = info.gname = ""
                if path.is_file():
                    with path.open("rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
        if not self.holder.put_archive(WORKDIR_INSIDE, data.getvalue()):
            raise OSError("the engine refused the work dir's files")

    def lost(self) -> str | None:
        """Why the volume's contents are gone, or None while its holder still runs (a stopped
        holder let the engine unmount the tmpfs: a copy would then see a new, empty one)."""
        try:
            self.holder.reload()
            state = self.holder.attrs["State"]
        except Exception as exc:
            return f"its holder could not be inspected: {exc}"
        if state.get("Running"):
            return None
        return (
            f"its holder stopped (status {state.get('Status')}, exit {state.get('ExitCode')}, "
            f"OOM-killed {state.get('OOMKilled')}, error {state.get('Error') or '-'})"
        )

    def has(self, name: str) -> bool:
        """Whether the file `name` (top level) is in the volume."""
        import docker.errors

        try:
            stream, _ = self.holder.get_archive(f"{WORKDIR_INSIDE}/{name}")
        except docker.errors.NotFound:
            return False
        for _chunk in stream:  # read to the end: the connection goes back to the pool
            pass
        return True

    def copy_out(self, host_dir: Path) -> list[str]:
        """Regular files and directories of the volume back into host_dir (overwriting); what
        was left out, named."""
        problems: list[str] = []
        with tempfile.TemporaryFile() as spool:
            stream, _ = self.holder.get_archive(WORKDIR_INSIDE)
            for chunk in stream:
                spool.write(chunk)
            spool.seek(0)
            with tarfile.open(fileobj=spool, mode="r|") as tar:
                for member in tar:
                    rel = _inside(member.name)
                    if rel is None:
                        if member.name.strip("/") != PurePosixPath(WORKDIR_INSIDE).name:
                            problems.append(f"{member.name}: outside the work dir")
                        continue
                    target = host_dir / rel
                    try:
                        if member.isdir():
                            if not target.is_symlink():
                                target.mkdir(parents=True, exist_ok=True)
                        elif member.isfile():
                            _write(tar, member, target)
                        else:
                            problems.append(f"{rel}: not a regular file, not copied")
                    except OSError as exc:
                        problems.append(f"{rel}: {exc.strerror}")
        return problems

    def __exit__(self, *exc: object) -> None:
        if self.holder is not None:
            with contextlib.suppress(Exception):
                self.holder.remove(force=True)
        if self.volume is not None:
            try:
                self.volume.remove(force=True)
            except Exception as error:  # the reaper removes it with the next pass
                log.info("could not remove the work volume %s: %s", self.volume.name, error)


# An engine under heavy load sometimes fails to start a container it has just created (runc:
# "cannot start a stopped process"); such a start is tried again before it counts as a failure.
START_ATTEMPTS = 3


def start_container(client: Any, **kwargs: Any) -> Any:
    """Create and start a container (the arguments of `containers.create`), trying a failed
    start again with a fresh container; the last error is raised."""
    import docker.errors

    for attempt in range(1, START_ATTEMPTS + 1):
        container = client.containers.create(**kwargs)
        try:
            container.start()
            return container
        except docker.errors.APIError as exc:
            with contextlib.suppress(Exception):
                container.remove(force=True)
            if attempt == START_ATTEMPTS or not exc.is_server_error():
                raise
            log.warning("the engine could not start a container (try %d): %s", attempt, exc)
            time.sleep(attempt)
    raise AssertionError("unreachable")


def _inside(name: str) -> PurePosixPath | None:
    """The path of an archive member relative to the work dir; None for the work dir itself or
    anything that would land outside it."""
    parts = PurePosixPath(name).parts
    top = PurePosixPath(WORKDIR_INSIDE).name
    if not parts or parts[0] != top or len(parts) == 1:
        return None
    rel = parts[1:]
    if any(part in ("..", "", "/") for part in rel) or len(rel) > MAX_DEPTH:
        return None
    return PurePosixPath(*rel)


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    source = tar.extractfile(member)
    if source is None:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.is_dir():
        return
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(1 << 20):
            out.write(chunk)
