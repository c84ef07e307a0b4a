"""Exec wrapper run between the grader and the sandboxed command (stdlib only, run with -I -S).

    python -I -S _exec.py '<json>'

It applies, in this order and in its own process (so the grader never needs `preexec_fn`):
join the job's cgroups (while still privileged), set the rlimits, drop to the sandbox uid/gid
with no supplementary groups, then exec the command with exactly the given environment.
"""

import json
import os
import resource
import sys

_RLIMITS = {
    "as": resource.RLIMIT_AS,
    "fsize": resource.RLIMIT_FSIZE,
    "core": resource.RLIMIT_CORE,
    "nproc": resource.RLIMIT_NPROC,
    "nofile": resource.RLIMIT_NOFILE,
}


def main() -> None:
    spec = json.loads(sys.argv[1])
    pid = str(os.getpid()).encode()
    for procs in spec.get("cgroup_procs", []):
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, pid)
        finally:
            os.close(fd)
    for name, value in spec.get("rlimits", {}).items():
        _soft, hard = resource.getrlimit(_RLIMITS[name])
        value = int(value)
        if hard != resource.RLIM_INFINITY and value > hard:
            value = hard
        resource.setrlimit(_RLIMITS[name], (value, value))
    uid, gid = spec.get("uid"), spec.get("gid")
    if gid is not None:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
    if uid is not None:
        os.setresuid(uid, uid, uid)
        if os.geteuid() != uid or os.getuid() != uid:
            raise SystemExit("rdv-sandbox: could not drop privileges")
    os.execve(spec["argv"][0], spec["argv"], spec.get("env", {}))


if __name__ == "__main__":
    main()
