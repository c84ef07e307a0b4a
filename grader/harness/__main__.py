"""Rank entrypoint: `python -m grader.harness main.py ARGS...` (what the supervisor launches).

Installs the hooks, runs the learner's file as `__main__` and writes the end-of-program record.
It leaves with `os._exit` after flushing and running atexit handlers: torch 2.13 CPU sometimes
aborts in C++ static teardown after a finished DDP run (SIGABRT), which would fail a correct
learner and make the launcher kill the other ranks mid-way; the end record is the judge anyway.
"""

from __future__ import annotations

import atexit
import faulthandler
import os
import runpy
import signal
import sys
import traceback
from pathlib import Path

from grader.events import End, ProgramException, Start
from grader.harness import SETTINGS_ENV, TRACE_DIR_ENV, stack_name, stop_stack_name
from grader.harness.tracer import Tracer
from grader.launch.wire import HarnessSettings
from grader.stacks import learner_stack

REAL_EXIT = os._exit


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def learner_traceback(exc: BaseException, script: str) -> tuple[str, int | None]:
    """The traceback from the learner's first frame on, and the innermost line of their file."""
    te = traceback.TracebackException.from_exception(exc)
    frames = list(te.stack)
    first = next((i for i, f in enumerate(frames) if f.filename == script), None)
    harness = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    kept = [] if first is None else frames[first:]
    kept = [f for f in kept if not f.filename.startswith(harness + os.sep)]
    te.stack = traceback.StackSummary.from_list(kept)
    line = next((f.lineno for f in reversed(frames) if f.filename == script), None)
    if isinstance(exc, SyntaxError) and exc.filename == script:
        line = exc.lineno
    text = learner_stack("".join(te.format()), script) or ""
    return text + "\n", line


def run_learner(argv: list[str]) -> int:
    """Install the hooks, run the learner's file, write the end record; the exit code."""
    trace_dir = Path(os.environ.pop(TRACE_DIR_ENV, "."))
    settings = HarnessSettings.from_json(os.environ.pop(SETTINGS_ENV, "{}"))
    os.dup2(1, 2)  # one stream per rank, in the order it was written
    script = os.path.abspath(argv[0])
    rank = int(os.environ.get("RANK", "0"))
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    tracer = Tracer(
        trace_dir,
        rank=rank,
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
        attempt=attempt,
        learner_file=script,
        settings=settings,
    )
    stack_file = open(trace_dir / stack_name(rank, attempt), "w")  # noqa: SIM115 (lives until exit)
    faulthandler.enable(file=stack_file, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    # Stopped because another rank failed: where this one was (a rank that never reached the
    # collective the others waited in is the one to look at), then the stop goes on as before.
    stop_file = open(trace_dir / stop_stack_name(rank, attempt), "w")  # noqa: SIM115
    faulthandler.register(signal.SIGTERM, file=stop_file, all_threads=True, chain=True)
    tracer.record(Start(pid=os.getpid(), rank=rank, world_size=tracer.world_size, file=script))

    from grader.harness.hooks import install_all

    install_all(tracer)
    _watch_os_exit(tracer)
    sys.argv = [argv[0], *argv[1:]]
    sys.path[0] = os.path.dirname(script)
    status, code, line = "ok", 0, None
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code(exc)
        status = "ok" if code == 0 else "exit"
    except BaseException as exc:
        text, line = learner_traceback(exc, script)
        sys.stderr.write(text)
        tracer.record(
            ProgramException(
                type=type(exc).__name__,
                message=str(exc)[:2000],
                traceback=text[-8000:],
                line=line,
            )
        )
        status, code = "exception", 1
    # The program's atexit handlers run now, as at interpreter exit (some destroy the process
    # group there), and before the end record, which must come after everything the program did.
    atexit._run_exitfuncs()
    _end(tracer, status, code, line)
    return code


def _end(tracer: Tracer, status: str, code: int, line: int | None, via: str | None = None) -> None:
    """The end-of-program record, written once."""
    if tracer.state.get("ended"):
        return
    tracer.state["ended"] = True
    tracer.finish()
    tracer.record(End(status=status, exit_code=code, line=line, via=via))


def _watch_os_exit(tracer: Tracer) -> None:
    """A program that leaves with os._exit(n) (a known teardown workaround) still gets its end
    record and final data; the rank's own forked children (DataLoader workers) are left alone."""
    rank_pid = os.getpid()

    def _exit(code: int) -> None:
        if os.getpid() == rank_pid:
            try:
                status = "ok" if code == 0 else "exit"
                _end(tracer, status, int(code), tracer.where(), via="os._exit")
            finally:
                REAL_EXIT(code)
        REAL_EXIT(code)

    os._exit = _exit  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m grader.harness main.py [args...]", file=sys.stderr)
        return 2
    code = run_learner(argv)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        REAL_EXIT(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
