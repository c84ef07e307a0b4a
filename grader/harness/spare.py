"""The spare's side of grader.inside.spares: import ahead, wait for a rank, become it.

`python -m grader.harness main.py` started with RDV_SPARE_FD set is a spare. It imports what a
rank imports before the learner's code runs (torch, through the harness's hooks), says it is ready
and waits. The rank arrives as torch's agent would have started it: its argv, its environment (the
whole of it: the spare's own is cleared), its cwd and its stdout/stderr. From there the spare is
that rank, run by the same code as a spawned one (grader.harness.__main__.main).

What differs from a spawned rank: /proc/self/environ (the environment the process began with),
the process's start time, and the modules a DDP program imports anyway (AHEAD) are imported before
the program's first line: a program that sets a TORCHDYNAMO_/TORCHINDUCTOR_ variable in
os.environ before its first DistributedDataParallel(...) has it read by a spawned rank only.
"""

from __future__ import annotations

import importlib
import pkgutil

from grader.inside.spares import ready_and_receive

# Imported by every DDP program on its first DistributedDataParallel(...) (the constructor asks
# torch._dynamo about compiled DDP): ~800 modules, sympy among them, seconds on a small machine.
# A spare imports them ahead; the environment they read at import is the sandbox's own, which the
# program's rank inherits unchanged (tests/grader/test_warm_fidelity.py holds both to it).
AHEAD = ("torch._dynamo",)


def preload() -> None:
    """What `install_all` imports in every rank (torch among it), without installing anything,
    and what a DDP program imports anyway (AHEAD)."""
    import grader.harness.hooks as hooks

    for name in AHEAD:
        importlib.import_module(name)

    for info in pkgutil.iter_modules(hooks.__path__):
        if not info.name.startswith("_"):
            try:
                importlib.import_module(f"{hooks.__name__}.{info.name}")
            except Exception:  # the rank's own install_all records it
                continue


def become_rank() -> list[str] | None:
    """Wait for this spare's rank and take it over; the rank's harness argv (main.py and the
    program's arguments), or None when the supervisor let the spare go unused."""
    preload()
    argv = ready_and_receive()
    if argv is None:
        return None
    return argv[argv.index("grader.harness") + 1 :]
