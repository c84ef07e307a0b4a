"""A learner program that prints what its rank can see of its own process, one JSON line.

tests/grader/test_warm_fidelity.py grades it in a cold and in a warm sandbox and compares.
"""

import ctypes
import gc
import json
import os
import random
import resource
import signal
import sys
import threading

import numpy
import torch

import __main__


def descriptors() -> dict[str, str]:
    found = {}
    for fd in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError as exc:
            target = type(exc).__name__
        found[fd] = target
    return found


def handlers() -> dict[int, str]:
    found = {}
    for sig in signal.valid_signals():
        try:
            handler = signal.getsignal(sig)
        except (ValueError, OSError):
            continue
        found[int(sig)] = str(getattr(handler, "__qualname__", handler))
    return found


with open("/proc/self/status") as f:
    status = dict(line.split(":", 1) for line in f if ":" in line)
limits = {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n[:7] == "RLIMIT_"}
probe = {
    "rank": os.environ.get("RANK"),
    "argv": sys.argv,
    "main_file": getattr(__main__, "__file__", None),
    "name": __name__,
    "cwd": os.getcwd(),
    "env": dict(os.environ),
    "fds": descriptors(),
    "handlers": handlers(),
    "limits": limits,
    "sigmask": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "sig_caught": status.get("SigCgt", "").strip(),
    "sig_ignored": status.get("SigIgn", "").strip(),
    "threads": sorted(t.name for t in threading.enumerate()),
    "torch_threads": [torch.get_num_threads(), torch.get_num_interop_threads()],
    "seed": torch.initial_seed(),
    "numpy": float(numpy.random.rand()),
    "random": random.random(),
    "hash": hash("rdv-probe"),
    "path0": sys.path[0],
    "umask": os.umask(0o022),
    "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),
    "flags": str(sys.flags),
    "excepthook": sys.excepthook.__qualname__,
    "recursion": sys.getrecursionlimit(),
    "gc": [gc.isenabled(), gc.get_threshold()],  # the imports ahead ran with it off
    "main_modules": sorted(m for m in sys.modules if m in ("main", "helpers", "model")),
}
# Everything imported before the program's first line (the modules it imported above, and
# before them what the rank ran: its hooks and entry code), less the grader's own.
started = sorted(m for m in sys.modules if not m.startswith("grader"))
print("PROBE " + json.dumps(probe, default=str), flush=True)


def print_modules(tag: str, names: list[str]) -> None:
    """In lines short enough for the grader's per-line cap."""
    for i in range(0, len(names), 100):
        print(f"MODULES {tag} " + json.dumps(names[i : i + 100]), flush=True)


print_modules("start", started)

# What a DDP program has imported once it wrapped its model: a spare may import it ahead, never
# more than that.
torch.distributed.init_process_group("gloo")
torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
print_modules("after", sorted(m for m in sys.modules if not m.startswith("grader")))
torch.distributed.destroy_process_group()
