"""The in-sandbox supervisor: `python -m grader.inside.supervisor CONFIG.json` (cwd = the job dir).

It launches the learner's `main.py` under torch's elastic launcher (what `torchrun --standalone`
runs) with the harness as every rank's entrypoint, streams each rank's output as framed lines on
stdout, enforces the soft wall clock (dump every rank's Python stack, then kill), inspects the
checkpoints the run wrote (inside the sandbox: a checkpoint is a pickle), and writes a plain-JSON
report for the host. The config file is deleted as soon as it is read: the learner's code, which
runs as the same user, never learns the nonce that names the report and marks the frames.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from grader.events import End, Fatal, Start, parse_all
from grader.harness import SETTINGS_ENV, TRACE_DIR_ENV
from grader.inside.config_wait import wait_for_config
from grader.inside.ranklogs import OutputTailer, read_traces
from grader.inside.spares import rank_command, serve
from grader.inside.zygote import Zygote, fork_zygote, without_gc
from grader.inside.zygote import preload as preload_ranks
from grader.launch.wire import READY, Frame, RankReport, Report, SupervisorConfig

STACK_WAIT_S = 1.5


class Frames:
    """Framed JSON lines on stdout (`grader.launch.wire.Frame`; anything else is noise)."""

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce
        self.lock = threading.Lock()
        self.out = os.fdopen(os.dup(1), "w", encoding="utf-8", errors="replace")

    def send(self, frame: Frame) -> None:
        line = frame.encode(self.nonce)
        with self.lock:
            self.out.write(line)
            self.out.flush()


class Supervisor:
    def __init__(
        self,
        cfg: SupervisorConfig,
        zygote: Zygote | None = None,
    ) -> None:
        self.cfg = cfg
        self.zygote = zygote
        self.node_spare_ranks = 0
        self.frames = Frames(cfg.nonce)
        self.trace_dir = Path(tempfile.mkdtemp(prefix=".rdv-"))
        self.log_dir = self.trace_dir / "logs"
        self.tailer = OutputTailer(self.log_dir, cfg.output_cap, self._on_line)
        self.timed_out = False
        self.finished = threading.Event()
        self.report_lock = threading.Lock()
        self.reported = False
        self.failures: dict[int, int | None] = {}
        self.launch_error: str | None = None
        self.started = time.monotonic()

    def _on_line(self, rank: int, line: str) -> None:
        self.frames.send(Frame(kind="output", rank=rank, line=line))

    # -- launch ---------------------------------------------------------------------------
    def run(self) -> None:
        cfg = self.cfg
        os.environ[TRACE_DIR_ENV] = str(self.trace_dir)
        os.environ[SETTINGS_ENV] = cfg.harness.to_json()
        self.frames.send(Frame(kind="status", status="running"))
        self.tailer.start()
        timer = threading.Timer(cfg.wall_seconds, self.on_timeout)
        timer.daemon = True
        timer.start()
        try:
            self._launch()
        finally:
            timer.cancel()
            self.finished.set()
        self.finish()

    def _launch(self) -> None:
        logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
        from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
        from torch.distributed.elastic.multiprocessing.api import SignalException
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.launcher.api import LaunchConfig, elastic_launch

        cfg = self.cfg
        args = [*rank_command(sys.executable)[1:], *cfg.script_args]
        server = serve(self.zygote)
        if cfg.nnodes > 1:  # a simulated multi-node job: the zygote forks each node's agent
            from grader.inside.multinode import launch_nodes

            nnodes = cfg.nnodes
            try:
                self.failures, error, self.node_spare_ranks = launch_nodes(
                    nnodes=nnodes,
                    nproc_per_node=cfg.world_size // nnodes,
                    max_restarts=cfg.max_restarts,
                    log_dir=self.log_dir,
                    entry_args=args,
                    server=server,
                )
            finally:
                if server is not None:
                    server.close()
            if error and not self.timed_out:
                self.launch_error = error
            return
        config = LaunchConfig(
            min_nodes=1,
            max_nodes=1,
            nproc_per_node=cfg.world_size,
            run_id=str(uuid.uuid4()),
            rdzv_backend="c10d",
            rdzv_endpoint="localhost:0",
            max_restarts=cfg.max_restarts,
            monitor_interval=0.1,
            start_method="spawn",
            logs_specs=DefaultLogsSpecs(log_dir=str(self.log_dir), redirects=Std.ALL, tee=Std.NONE),
        )
        if server is not None:  # each rank forked by the zygote, through grader.inside.rank_shim
            args = server.entry_args(args)
        try:
            elastic_launch(config, sys.executable)(*args)
        except ChildFailedError as exc:
            self.failures = {int(r): f.exitcode for r, f in exc.failures.items()}
        except SignalException as exc:
            # Only code inside the sandbox can signal us, so this is the learner's program: the
            # launcher stopped every rank, and each counts as killed by that signal.
            code = 128 + int(exc.sigval)
            self.failures = {rank: code for rank in range(cfg.world_size)}
        except Exception as exc:  # the launcher itself failed: a platform fault unless we killed it
            if not self.timed_out:
                self.launch_error = f"{type(exc).__name__}: {exc}"
        finally:
            if server is not None:
                server.close()

    # -- stopping -------------------------------------------------------------------------
    def rank_pids(self) -> dict[int, int]:
        pids: dict[int, int] = {}
        for rank, events in read_traces(self.trace_dir).items():
            for start in parse_all(Start, events):
                if start.pid:
                    pids[rank] = start.pid
        return pids

    def on_timeout(self) -> None:
        self.timed_out = True
        pids = self.rank_pids()
        for pid in pids.values():
            _signal(pid, signal.SIGUSR1)
        time.sleep(STACK_WAIT_S)
        self.kill_ranks()
        if not self.finished.wait(10):
            self.finish()
            os._exit(0)

    def kill_ranks(self) -> None:
        for pid in self.rank_pids().values():
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                _signal(pid, signal.SIGKILL)
        if self.cfg.sandboxed:
            _kill_everything_else()

    # -- report ---------------------------------------------------------------------------
    def finish(self) -> None:
        with self.report_lock:
            if self.reported:
                return
            self.reported = True
        self.kill_ranks()
        self.tailer.stop()
        report = self.build_report()
        path = Path(f".rdv-report-{self.cfg.nonce}.json")
        text = report.to_json()
        try:
            _write(path, text)
        except OSError:
            # The program filled the job dir: its files are no longer needed (the checkpoints
            # were inspected), the report is.
            _free_job_dir(keep={"main.py"})
            _write(path, text)
        self.frames.send(Frame(kind="done"))

    def build_report(self) -> Report:
        from grader.inside.inspect_ckpt import inspect_checkpoints

        traces = read_traces(self.trace_dir)
        world = self.cfg.world_size
        ranks = []
        for rank in range(world):
            stack, fatal = _read_dumps(self.trace_dir, rank)
            events = traces.get(rank, []) + fatal
            output, truncated, total = self.tailer.result(rank)
            ends = parse_all(End, events)
            if rank in self.failures:
                exit_code = self.failures[rank]
            elif ends:
                exit_code = ends[-1].exit_code
            else:
                exit_code = None if (self.timed_out or self.failures) else 0
            ranks.append(
                RankReport(
                    rank=rank,
                    exit_code=exit_code,
                    output=output,
                    truncated=truncated,
                    output_bytes=total,
                    stack=stack,
                    events=tuple(events),
                )
            )
        inspect_error = None
        try:
            checkpoints = inspect_checkpoints(traces)
        except Exception:  # the grader's own failure: the host reports it as an `error` Result
            checkpoints, inspect_error = {}, traceback.format_exc()[-8000:]
        return Report(
            world_size=world,
            timed_out=self.timed_out,
            launch_error=self.launch_error,
            inspect_error=inspect_error,
            ranks=tuple(ranks),
            checkpoints=checkpoints,
            duration_s=time.monotonic() - self.started,
            spare_ranks=(self.zygote.served if self.zygote else 0) + self.node_spare_ranks,
        )


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _free_job_dir(keep: set[str]) -> None:
    for root, _dirs, files in os.walk(".", topdown=False, followlinks=False):
        for name in files:
            if root == "." and name in keep:
                continue
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(root, name))


def _read_dumps(trace_dir: Path, rank: int) -> tuple[str | None, list[dict[str, Any]]]:
    """A rank's faulthandler dumps, one file per attempt: their text (the stacks), and a "fatal"
    event per attempt whose dump says the rank died of a fatal error (an abort in C++ code, a
    segfault). Such a rank raised no Python exception, so its trace is silent; the dump file was
    last written when it died, which orders it against the other ranks' failures."""
    texts: list[str] = []
    fatal: list[dict[str, Any]] = []
    for path in sorted(trace_dir.glob(f"stack-{rank}-a*.txt")):
        try:
            text = path.read_text(errors="replace").strip()
            died_at = path.stat().st_mtime
            attempt = int(path.stem.rsplit("-a", 1)[1])
        except (OSError, ValueError, IndexError):
            continue
        if text:
            texts.append(text[-20000:])
        found = re.search(r"Fatal Python error: ([^\n]*)", text)
        if found:
            error = found.group(1).strip()[:200]
            fatal.append(Fatal(t=died_at, attempt=attempt, error=error).record())
    if not texts:  # stopped by the launcher (another rank failed): where it was then
        stops = sorted(trace_dir.glob(f"stop-{rank}-a*.txt"), key=_attempt_of)
        for path in stops[-1:]:
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").strip()
                if text:
                    texts.append(text[-20000:])
    return ("\n".join(texts) if texts else None), fatal


def _attempt_of(path: Path) -> int:
    try:
        return int(path.stem.rsplit("-a", 1)[1])
    except (ValueError, IndexError):
        return -1


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 0:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def _kill_everything_else() -> None:
    """Inside the sandbox's own PID namespace: nothing but us and our parents may survive."""
    keep = _ancestors()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in keep:
            _signal(int(entry.name), signal.SIGKILL)


def preload() -> None:
    """What a supervisor imports before it forks its zygote and before a job arrives (no torch op
    runs): its own needs, the launcher and the checkpoint inspection, and what every rank imports
    (grader.inside.zygote.preload)."""
    with without_gc():
        import torch.distributed.launcher.api  # noqa: F401

        import grader.inside.inspect_ckpt
        import grader.inside.multinode  # noqa: F401 (the zygote then forks node agents too)

        preload_ranks()


def _make_undumpable() -> None:
    """Keep our memory (the report nonce among it) out of the learner's reach.

    The learner's ranks run as our uid, so without this they could read /proc/1/mem, maps and
    environ. Ranks started by exec are dumpable again (execve resets the flag), which is harmless.
    """
    import ctypes

    pr_set_dumpable = 4
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0, 0, 0, 0)


def parse_args(argv: list[str]) -> tuple[Path | None, float | None, bool]:
    """(config path, or None with --wait), --wait seconds, and whether ranks fork from a zygote
    (--spawn-ranks: each an interpreter torch starts, as torchrun does; for comparisons)."""
    config, wait, fork = None, None, True
    for arg in argv:
        if arg == "--spawn-ranks":
            fork = False
        elif arg.startswith("--wait="):
            wait = float(arg.split("=", 1)[1])
        elif not arg.startswith("-") and config is None:
            config = Path(arg)
        else:
            raise ValueError(arg)
    if (config is None) == (wait is None):
        raise ValueError("give a config file or --wait")
    return config, wait, fork


def main(argv: list[str]) -> int:
    _make_undumpable()
    try:
        path, wait, fork = parse_args(argv)
    except ValueError:
        print(
            "usage: python -m grader.inside.supervisor [--spawn-ranks] CONFIG.json"
            " | --wait=SECONDS",
            file=sys.stderr,
        )
        return 2
    zygote: Zygote | None = None
    if not fork:  # no zygote of ours: the launcher alone
        import torch.distributed.launcher.api  # noqa: F401
    else:
        preload()
        # Before a thread of ours starts or the job's config is read: what the zygote holds,
        # every rank (and every node agent of a multi-node job) holds.
        zygote = fork_zygote()
    if wait is not None:
        print(READY, flush=True)
        path = wait_for_config(wait)
        if path is None:
            if zygote is not None:
                zygote.close()
            return 0
    assert path is not None
    cfg = SupervisorConfig.from_json(path.read_text())
    path.unlink()
    # A warm supervisor started before its job: the job's own variables come with the config
    # (everything else in the environment is what the job's sandbox would have had).
    os.environ.update(cfg.env)
    for name in cfg.env_unset:
        os.environ.pop(name, None)
    try:
        Supervisor(cfg, zygote).run()
    finally:
        if zygote is not None:
            zygote.close()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is reported: skip the interpreter's teardown, which with torch loaded took 1-2 s
    # of every launch (module clean-up, C++ static destructors).
    os._exit(code)
