"""Resource limits shared by the local backends: rlimits derived from the contract's Limits."""

from __future__ import annotations

from grader.contract import Limits

MIB = 1024 * 1024
# Open files per process (torch with gloo opens a few hundred at most).
NOFILE = 4096


def rlimits_for(limits: Limits, *, nproc: bool, gpus: bool = False) -> dict[str, int]:
    """The second line of defence behind the cgroup: per-process limits.

    RLIMIT_NPROC counts every task of the real uid, so it is only set where the uid is the job's
    own (the bwrap backend runs each job under its own uid). A job with GPUs gets no RLIMIT_AS:
    CUDA reserves virtual address space for the device's memory and unified addressing (tens of
    GiB on an 80 GiB card) as it initialises, and fails under an address-space limit that a CPU
    rank never reaches; its memory is held by the cgroup (memory+swap) instead.
    """
    out = {
        "fsize": limits.disk_mb * MIB,
        "core": 0,
        "nofile": NOFILE,
    }
    if not gpus:
        out["as"] = limits.address_space_mb * MIB
    if nproc:
        out["nproc"] = limits.pids
    return out
