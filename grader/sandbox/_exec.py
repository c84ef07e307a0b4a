"""Exec wrapper run between the grader and the sandboxed command (stdlib only, run with -I -S).

    python -I -S _exec.py '<ExecSpec as JSON>'

In its own process (so the grader never needs `preexec_fn`), in this order: join the job's
cgroups (while still privileged); with "reveal", enter a private mount namespace and expose the
given paths where the sandbox uid can reach them (see below); set the rlimits; drop to the
sandbox uid/gid with no supplementary groups; with "parent", die with that process (the
parent-death signal is set after the uid change, which clears it, and the parent checked after,
so an owner that died before this point is noticed too: bwrap's own --die-with-parent comes only
once it runs); exec the command with exactly the given environment and a fresh signal state:
no signal blocked, none ignored. Both survive exec, so without this the sandbox would start with
whatever its starter held at that moment (a thread in `system()`, for one, ignores SIGINT and
SIGQUIT for its whole process while its child runs). One full test run saw a cold sandbox hand
SIGQUIT ignored to its zygote and every rank it forked, where a sandbox started a moment apart
had it at default; which code of that test process ignored it was not found.

Any failure before the exec is written to "status_fd" (where bwrap later writes its JSON status)
and ends the wrapper with status 125.

"reveal": bwrap runs as the unprivileged uid and resolves every bind source itself, so it cannot
bind a path below a directory that uid cannot traverse (the Python install under /root, 0700).
Rather than loosening host permissions, the wrapper (still root) covers each such top directory
with an empty tmpfs in a mount namespace of its own and binds back only the paths the sandbox
needs. The host never sees these mounts; they vanish with the job.
"""

import ctypes
import json
import os
import resource
import signal
import sys
from dataclasses import asdict, dataclass, field, fields

_RLIMITS = {
    "as": resource.RLIMIT_AS,
    "fsize": resource.RLIMIT_FSIZE,
    "core": resource.RLIMIT_CORE,
    "nproc": resource.RLIMIT_NPROC,
    "nofile": resource.RLIMIT_NOFILE,
}
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
SIGKILL = 9
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class ExecSpec:
    """What the wrapper is told (the host builds it: grader.sandbox.process.wrapper_argv)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    rlimits: dict[str, int] = field(default_factory=dict)  # keys of _RLIMITS
    cgroup_procs: list[str] = field(default_factory=list)  # cgroup.procs files to join
    uid: int | None = None
    gid: int | None = None
    reveal: list[str] = field(default_factory=list)  # paths the sandbox uid must reach
    status_fd: int | None = None  # where a failure before the exec is written
    parent: int | None = None  # die with this process

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "ExecSpec":
        """The spec in `text`; ValueError for anything else (unknown or mistyped fields)."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("the spec is not an object")
        known = {f.name for f in fields(cls)}
        if unknown := sorted(set(data) - known):
            raise ValueError(f"unknown fields {unknown}")
        spec = cls(**data)
        ints = {
            "uid": spec.uid,
            "gid": spec.gid,
            "status_fd": spec.status_fd,
            "parent": spec.parent,
        }
        if not (
            isinstance(spec.argv, list)
            and spec.argv
            and all(isinstance(a, str) for a in spec.argv)
            and isinstance(spec.env, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in spec.env.items())
            and isinstance(spec.rlimits, dict)
            and all(k in _RLIMITS and isinstance(v, int) for k, v in spec.rlimits.items())
            and all(isinstance(p, str) for p in [*spec.cgroup_procs, *spec.reveal])
            and all(v is None or isinstance(v, int) for v in ints.values())
        ):
            raise ValueError("a field has the wrong type")
        return spec


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _enc(s: str | None) -> bytes | None:
    return None if s is None else s.encode()


def _mount(
    src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    enc = _enc
    _check(_libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _hidden_top(path: str) -> str | None:
    """The topmost ancestor of `path` that others cannot traverse, or None."""
    current = "/"
    for part in path.strip("/").split("/")[:-1]:
        current = os.path.join(current, part)
        if not os.stat(current).st_mode & 0o001:
            return current
    return None


def reveal(paths: list[str]) -> None:
    _check(_libc.unshare(CLONE_NEWNS), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    tops: dict[str, list[str]] = {}
    for path in paths:
        top = _hidden_top(path)
        if top is not None:
            tops.setdefault(top, []).append(path)
    for top, below in sorted(tops.items()):
        fds = [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in below]
        _mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        for path, fd in fds:
            os.makedirs(path, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC)
            os.close(fd)


def main() -> None:
    try:
        spec = ExecSpec.from_json(sys.argv[1])
    except (IndexError, ValueError, TypeError) as exc:
        os.write(2, f"rdv-sandbox: a bad spec: {exc}\n".encode())
        os._exit(125)
    try:
        enter(spec)
    except BaseException as exc:
        message = f"rdv-sandbox: {type(exc).__name__}: {exc}\n".encode()
        if spec.status_fd is not None:
            os.write(spec.status_fd, message)
        os.write(2, message)
        os._exit(125)


def enter(spec: ExecSpec) -> None:
    pid = str(os.getpid()).encode()
    for procs in spec.cgroup_procs:
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, pid)
        finally:
            os.close(fd)
    if spec.reveal:
        reveal(spec.reveal)
    for name, value in spec.rlimits.items():
        _soft, hard = resource.getrlimit(_RLIMITS[name])
        value = int(value)
        if hard != resource.RLIM_INFINITY and value > hard:
            value = hard
        resource.setrlimit(_RLIMITS[name], (value, value))
    uid, gid = spec.uid, spec.gid
    if gid is not None:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
    if uid is not None:
        os.setresuid(uid, uid, uid)
        if os.geteuid() != uid or os.getuid() != uid or os.getegid() != gid:
            raise SystemExit("rdv-sandbox: could not drop privileges")
    parent = spec.parent
    if parent is not None:
        _check(_libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl")
        if os.getppid() != parent:
            raise SystemExit("rdv-sandbox: its owner is gone")
    _fresh_signals()
    os.execve(spec.argv[0], spec.argv, spec.env)


def _fresh_signals() -> None:
    """Every signal at its default action and none blocked, as a process started on its own has
    them (a Python program then ignores SIGPIPE and SIGXFSZ again itself)."""
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:
                signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):  # one the kernel will not let us change
            continue
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


if __name__ == "__main__":
    main()
