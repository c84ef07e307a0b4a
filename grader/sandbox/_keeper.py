"""The keeper process of a warm pool (grader.sandbox.keeper): stdlib only, run by path.

    python -I -B _keeper.py

It reads JSON lines on stdin from the process that owns the pool (`Order`, each a line): keep
`Leftovers` under an id when a sandbox starts, drop that id when its owner tore it down itself. At
end of input (the owner closed the pipe, exited or was killed, SIGKILL included) it removes what is
still kept, then exits: each sandbox's process group and cgroup processes are killed, its work dir
unmounted and removed, its cgroup dirs removed; containers and volumes of the Docker backend are
removed through the engine (the docker SDK, imported only then). It runs in a session of its own,
so a signal to the owner's process group does not reach it.
"""

import contextlib
import ctypes
import json
import os
import shutil
import signal
import sys
import time
from dataclasses import asdict, dataclass, fields
from typing import Any

MNT_DETACH = 2


@dataclass(frozen=True)
class Leftovers:
    """What a sandbox leaves on the host if its owner dies (grader.sandbox.bwrap and .docker)."""

    pgid: int = 0  # its process group (bwrap)
    cgroups: tuple[str, ...] = ()  # its cgroup dirs
    mounts: tuple[str, ...] = ()  # those of `dirs` that are mount points
    dirs: tuple[str, ...] = ()  # its work dirs
    containers: tuple[str, ...] = ()  # Docker container ids
    volumes: tuple[str, ...] = ()  # Docker volume names


@dataclass(frozen=True)
class Order:
    """One line of the keeper's input: keep `leftovers` under `ident`, or (None) drop it."""

    ident: str
    leftovers: Leftovers | None = None

    def to_line(self) -> bytes:
        return json.dumps(asdict(self)).encode() + b"\n"

    @classmethod
    def from_line(cls, line: str) -> "Order | None":
        """The order on `line`; None for anything else."""
        try:
            data = json.loads(line)
            ident, kept = data["ident"], data["leftovers"]
            if not isinstance(ident, str):
                return None
            if kept is None:
                return cls(ident)
            known = {f.name for f in fields(Leftovers)}
            values: dict[str, Any] = {
                k: v if k == "pgid" else tuple(v) for k, v in kept.items() if k in known
            }
            leftovers = Leftovers(**values)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        if not isinstance(leftovers.pgid, int) or not all(
            isinstance(item, str) for name in known - {"pgid"} for item in getattr(leftovers, name)
        ):
            return None
        return cls(ident, leftovers)


def _kill_cgroup(path: str) -> None:
    with contextlib.suppress(OSError), open(os.path.join(path, "cgroup.kill"), "w") as f:
        f.write("1")
    for _ in range(100):
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def _remove_dir(path: str, mounted: bool) -> None:
    if mounted:
        ctypes.CDLL(None, use_errno=True).umount2(path.encode(), MNT_DETACH)
    shutil.rmtree(path, ignore_errors=True)


def _rmdir(path: str) -> None:
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


def _remove_docker(containers: list, volumes: list) -> None:
    try:
        import docker

        client = docker.from_env()
    except Exception as exc:  # no SDK or engine: the reaper removes them at a worker's start
        sys.stderr.write(f"rdv-keeper: cannot reach the Docker engine: {exc}\n")
        return
    for ident in containers:
        with contextlib.suppress(Exception):
            client.containers.get(ident).remove(force=True)
    for name in volumes:
        with contextlib.suppress(Exception):
            client.volumes.get(name).remove(force=True)


def clean(left: Leftovers) -> None:
    if left.pgid > 0:
        with contextlib.suppress(OSError):
            os.killpg(left.pgid, signal.SIGKILL)
    for path in left.cgroups:
        _kill_cgroup(path)
    for path in left.dirs:
        _remove_dir(path, path in left.mounts)
    for path in left.cgroups:
        _rmdir(path)
    if left.containers or left.volumes:
        _remove_docker(list(left.containers), list(left.volumes))


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C reaches the owner, not us
    kept: dict[str, Leftovers] = {}
    for line in sys.stdin:
        order = Order.from_line(line)
        if order is None:
            continue
        if order.leftovers is not None:
            kept[order.ident] = order.leftovers
        else:
            kept.pop(order.ident, None)
    for entry in kept.values():
        try:
            clean(entry)
        except Exception as exc:
            sys.stderr.write(f"rdv-keeper: {type(exc).__name__}: {exc}\n")


if __name__ == "__main__":
    main()
