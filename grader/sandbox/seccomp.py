"""A small seccomp filter for the bwrap sandbox (defence in depth, x86_64 only).

Denied with EPERM: ways to reach into other processes of the job (ptrace, process_vm_readv/
writev, tkill, pidfd_send_signal) and kernel interfaces a training run never needs but that widen
the attack surface (bpf, perf_event_open, userfaultfd, io_uring, the key rings, module and kexec
loading). Foreign ABIs (i386 `int 0x80`, x32) are refused outright, so numbers cannot be
smuggled past the list. bwrap loads the program (`--seccomp FD`) just before the command starts.
"""

from __future__ import annotations

import errno
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_RET_K = 0x06
OFFSET_NR, OFFSET_ARCH = 0, 4

DENIED_X86_64 = {
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "tkill": 200,
    "pidfd_send_signal": 424,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "kexec_load": 246,
    "kexec_file_load": 320,
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program() -> bytes | None:
    """The BPF program as bwrap wants it (struct sock_filter[]), or None off x86_64."""
    if platform.machine() != "x86_64":
        return None
    deny = SECCOMP_RET_ERRNO | errno.EPERM
    numbers = sorted(DENIED_X86_64.values())
    # Layout: [arch load, arch check, nr load, x32 check, one jeq per number, allow, deny]
    n = len(numbers)
    allow_at = 4 + n
    deny_at = allow_at + 1
    prog = [
        _insn(BPF_LD_W_ABS, 0, 0, OFFSET_ARCH),
        _insn(BPF_JEQ_K, 0, deny_at - 2, AUDIT_ARCH_X86_64),
        _insn(BPF_LD_W_ABS, 0, 0, OFFSET_NR),
        _insn(BPF_JGE_K, deny_at - 4, 0, X32_SYSCALL_BIT),
    ]
    for i, nr in enumerate(numbers):
        here = 4 + i
        prog.append(_insn(BPF_JEQ_K, deny_at - here - 1, 0, nr))
    prog.append(_insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    prog.append(_insn(BPF_RET_K, 0, 0, deny))
    return b"".join(prog)
