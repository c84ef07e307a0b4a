"""A per-job cgroup with memory (memory+swap) and process-count limits, v1 or v2.

Detected at run time from /proc/self/mounts: cgroup v2 where its `memory` and `pids` controllers
can be enabled for a child of ours, otherwise cgroup v1 `memory` and `pids` hierarchies. The job's
cgroup is created under the grader's own cgroup (so host limits on the grader still apply).
Without a writable cgroup, `JobCgroup.create` returns None and the caller relies on rlimits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)
GROUP_DIR = "rdv-sandbox"
MIB = 1024 * 1024


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, options) of every cgroup mount."""
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
                mount_point = parts[1].replace("\\040", " ")
                out.append((mount_point, parts[2], set(parts[3].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """Controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                out[name] = path
    return out


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read_int(path: Path, key: str | None = None) -> int:
    try:
        text = path.read_text()
    except OSError:
        return 0
    if key is None:
        return int(text.strip() or 0)
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def _sweep(parent: Path) -> None:
    """Remove the empty job cgroups that graders which died mid-job left behind."""
    for child in parent.glob("job-*"):
        try:
            pid = int(child.name.split("-")[1])
            os.kill(pid, 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                child.rmdir()
        except (ValueError, IndexError, PermissionError):
            continue


@dataclass
class JobCgroup:
    version: int
    # Every directory of the job: v1 one per controller (memory, pids, freezer), v2 one.
    dirs: dict[str, Path]
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, *, memory_mb: int, pids: int) -> JobCgroup | None:
        name = f"job-{os.getpid()}-{uuid.uuid4().hex[:12]}"  # unique across xdist workers
        errors: list[str] = []
        for maker in (cls._create_v2, cls._create_v1):
            try:
                made = maker(name, memory_mb, pids)
            except OSError as exc:
                errors.append(f"{maker.__name__}: {exc}")
                continue
            if made is not None:
                return made
        log.warning("no writable cgroup for memory and pids limits (%s)", "; ".join(errors))
        return None

    @classmethod
    def _create_v2(cls, name: str, memory_mb: int, pids: int) -> JobCgroup | None:
        mounts = [m for m in _mounts() if m[1] == "cgroup2"]
        if not mounts:
            return None
        root = Path(mounts[0][0])
        own = root / _own_paths().get("", "/").lstrip("/")
        for base in dict.fromkeys([own, root]):
            available = (base / "cgroup.controllers").read_text().split()
            if not {"memory", "pids"} <= set(available):
                continue
            parent = base / GROUP_DIR
            parent.mkdir(exist_ok=True)
            _sweep(parent)
            with contextlib.suppress(OSError):
                _write(base / "cgroup.subtree_control", "+memory +pids")
            with contextlib.suppress(OSError):
                _write(parent / "cgroup.subtree_control", "+memory +pids")
            job = parent / name
            job.mkdir()
            if not (job / "memory.max").exists() or not (job / "pids.max").exists():
                job.rmdir()
                continue
            _write(job / "memory.max", str(memory_mb * MIB))
            with contextlib.suppress(OSError):
                _write(job / "memory.swap.max", "0")
            _write(job / "pids.max", str(pids))
            with contextlib.suppress(OSError):
                _write(job / "memory.oom.group", "1")
            return cls(version=2, dirs={"unified": job})
        return None

    @classmethod
    def _create_v1(cls, name: str, memory_mb: int, pids: int) -> JobCgroup | None:
        own = _own_paths()
        hierarchies: dict[str, Path] = {}
        for mount_point, fstype, options in _mounts():
            for controller in ("memory", "pids", "freezer"):
                if fstype == "cgroup" and controller in options:
                    hierarchies[controller] = Path(mount_point)
        if "memory" not in hierarchies or "pids" not in hierarchies:
            return None
        made: dict[str, Path] = {}
        try:
            for controller, hierarchy in hierarchies.items():
                parent = hierarchy / own.get(controller, "/").lstrip("/") / GROUP_DIR
                try:
                    parent.mkdir(exist_ok=True)
                    _sweep(parent)
                    (parent / name).mkdir()
                except OSError:
                    if controller == "freezer":  # optional: only speeds up the final kill
                        continue
                    raise
                made[controller] = parent / name
            mem = made["memory"]
            _write(mem / "memory.limit_in_bytes", str(memory_mb * MIB))
            if (mem / "memory.memsw.limit_in_bytes").exists():
                _write(mem / "memory.memsw.limit_in_bytes", str(memory_mb * MIB))
            with contextlib.suppress(OSError):
                _write(mem / "memory.swappiness", "0")
            _write(made["pids"] / "pids.max", str(pids))
        except OSError:
            cls(version=1, dirs=made).remove()
            raise
        return cls(version=1, dirs=made)

    def procs_files(self) -> list[str]:
        """The cgroup.procs files a new process writes its pid to, to join the job."""
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def pids(self) -> list[int]:
        seen: set[int] = set()
        for d in self.dirs.values():
            with contextlib.suppress(OSError):
                seen.update(int(p) for p in (d / "cgroup.procs").read_text().split())
        return sorted(seen)

    def oom_killed(self) -> bool:
        if self.version == 2:
            events = self.dirs["unified"] / "memory.events"
            return _read_int(events, "oom_kill") > 0 or _read_int(events, "oom_group_kill") > 0
        mem = self.dirs["memory"]
        return _read_int(mem / "memory.oom_control", "oom_kill") > 0

    def memory_limit_hit(self) -> bool:
        if self.version == 2:
            return _read_int(self.dirs["unified"] / "memory.events", "max") > 0
        return _read_int(self.dirs["memory"] / "memory.failcnt") > 0

    def kill_all(self, deadline_s: float = 5.0) -> bool:
        """SIGKILL every process of the job until none is left; True when the cgroup is empty."""
        if self.version == 2 and (self.dirs["unified"] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.dirs["unified"] / "cgroup.kill", "1")
        freezer = self.dirs.get("freezer")
        if freezer is not None:  # stop a fork bomb from racing the kill: freeze, kill, thaw
            try:
                _write(freezer / "freezer.state", "FROZEN")
                self._signal_all()
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    _write(freezer / "freezer.state", "THAWED")
        end = time.monotonic() + deadline_s
        while True:
            if not self._signal_all():
                return True
            if time.monotonic() > end:
                return False
            time.sleep(0.02)

    def _signal_all(self) -> int:
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def remove(self) -> None:
        for d in self.dirs.values():
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                log.warning("could not remove cgroup %s", d)
