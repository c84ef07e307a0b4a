"""A simulated multi-node job inside one sandbox: one torch elastic agent per "node", all on the
sandbox's own loopback, meeting through the c10d rendezvous (what `torchrun --nnodes=2
--rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:PORT` does on two machines).

Learned here (torch 2.13, CPU, gloo): two agents on 127.0.0.1 form one job reliably when each is
given `local_addr=127.0.0.1` (otherwise workers get MASTER_ADDR = the hostname, which does not
resolve inside bwrap, and the job hangs) and node 0 is told it hosts the rendezvous store
(`is_host`; otherwise both try to bind the port and one falls back after an error).

The supervisor runs `launch_nodes(...)`; each node is `python -m grader.inside.multinode
SPEC.json` (one elastic agent per process), which the supervisor's zygote forks through the rank
shim, as it forks a rank (grader.inside.spares): the node's environment is taken over before the
agent forks the zygote of its own ranks, so a warm sandbox prepared for any single-node launch
serves a multi-node one too. Without a zygote, each node is a new interpreter.

Rank logs are written as `<log_dir>/node<N>/<run>/attempt_<A>/<global rank>/stdout.log`, so the
supervisor's tailer, which reads `attempt_<A>/<rank>/`, sees global ranks.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from grader.inside import zygote as zygote_mod
from grader.inside.spares import SpareServer, node_command, serve
from grader.inside.zygote import Zygote, fork_zygote, without_gc
from grader.inside.zygote import preload as preload_ranks
from grader.launch.wire import NodeResult, NodeSpec

JOIN_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch_nodes(
    *,
    nnodes: int,
    nproc_per_node: int,
    max_restarts: int,
    log_dir: Path,
    entry_args: list[str],
    server: SpareServer | None = None,
) -> tuple[dict[int, int | None], str | None, int]:
    """Run the job on `nnodes` agents; (exit code per failed global rank, launcher error, ranks
    the agents' zygotes forked). With the supervisor's rank `server`, its zygote forks each agent
    (through the rank shim, as a rank); without one, or where it cannot, each is an interpreter."""
    port, run_id = free_port(), uuid.uuid4().hex
    children: list[subprocess.Popen[bytes]] = []
    for node in range(nnodes):
        spec = NodeSpec(
            node=node,
            nnodes=nnodes,
            nproc_per_node=nproc_per_node,
            max_restarts=max_restarts,
            port=port,
            run_id=run_id,
            log_dir=str(log_dir / f"node{node}"),
            args=tuple(entry_args),
            result=str(log_dir / f"node{node}.json"),
        )
        path = log_dir.parent / f".node{node}-{run_id}.json"
        log_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(spec.to_json())
        args = [*node_command(sys.executable)[1:], str(path)]
        if server is not None:
            args = server.entry_args(args)
        command = [sys.executable, *args]
        env = node_env(node, nproc_per_node)
        children.append(subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env))
    for proc in children:
        proc.wait()
    served = 0
    failures: dict[int, int | None] = {}
    errors = []
    for node in range(nnodes):
        try:
            got = NodeResult.from_json((log_dir / f"node{node}.json").read_text())
        except (OSError, ValueError):  # WireError is a ValueError
            got = NodeResult(error=f"node {node}'s agent left no result")
        failures.update(got.failures)
        served += got.spare_ranks
        if got.error:
            errors.append(f"node {node}: {got.error}")
    # An agent whose peer failed first reports its own error; only all-error is a platform fault.
    error = "; ".join(errors) if errors and not failures and len(errors) == nnodes else None
    return failures, error, served


def node_env(node: int, nproc_per_node: int) -> dict[str, str]:
    """This node's environment: on GPU workers, its own slice of the job's GPUs (every node
    numbers its GPUs from 0, as separate machines do, so LOCAL_RANK picks the right one)."""
    env = dict(os.environ)
    gpus = [g for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    if len(gpus) >= (node + 1) * nproc_per_node:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(
            gpus[node * nproc_per_node : (node + 1) * nproc_per_node]
        )
    return env


def _logs_specs(log_dir: str) -> Any:
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std

    class GlobalRankLogs(DefaultLogsSpecs):
        """Per-rank log dirs named by global rank instead of local rank."""

        def reify(self, envs: dict[int, dict[str, str]]) -> Any:
            dest = super().reify(envs)
            for local, env in envs.items():
                rank = env.get("RANK", str(local))
                for table in (
                    dest.stdouts,
                    dest.stderrs,
                    dest.tee_stdouts,
                    dest.tee_stderrs,
                    dest.error_files,
                ):
                    path = table.get(local)
                    if not path or path == os.devnull:
                        continue
                    parent = os.path.dirname(os.path.dirname(path))
                    new_dir = os.path.join(parent, rank)
                    os.makedirs(new_dir, exist_ok=True)
                    table[local] = os.path.join(new_dir, os.path.basename(path))
                if env.get("TORCHELASTIC_ERROR_FILE"):
                    env["TORCHELASTIC_ERROR_FILE"] = dest.error_files.get(local, "")
            return dest

    return GlobalRankLogs(log_dir=log_dir, redirects=Std.ALL, tee=Std.NONE)


def run_node(spec: NodeSpec, server: SpareServer | None = None) -> NodeResult:
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    n = spec.nnodes
    config = LaunchConfig(
        min_nodes=n,
        max_nodes=n,
        nproc_per_node=spec.nproc_per_node,
        run_id=spec.run_id,
        rdzv_backend="c10d",
        rdzv_endpoint=f"127.0.0.1:{spec.port}",
        rdzv_configs={"is_host": spec.node == 0, "join_timeout": JOIN_TIMEOUT_S},
        max_restarts=spec.max_restarts,
        monitor_interval=0.1,
        start_method="spawn",
        local_addr="127.0.0.1",
        logs_specs=_logs_specs(spec.log_dir),
    )
    args = list(spec.args)
    if server is not None:  # each rank a spare of this node, through grader.inside.rank_shim
        args = server.entry_args(args)
    try:
        elastic_launch(config, sys.executable)(*args)
    except ChildFailedError as exc:
        return NodeResult(failures={int(r): f.exitcode for r, f in exc.failures.items()})
    except Exception as exc:
        return NodeResult(error=f"{type(exc).__name__}: {exc}"[:500])
    return NodeResult()


def _preload_and_fork() -> Zygote | None:
    """A node agent's imports (the launcher, and what its ranks import: already there in an agent
    the supervisor's zygote forked), then its zygote, forked in its node's environment."""
    with without_gc():
        import torch.distributed.launcher.api  # noqa: F401

        preload_ranks()
    return fork_zygote()


def main(argv: list[str]) -> int:
    zygote = _preload_and_fork()
    path = Path(argv[0])
    spec = NodeSpec.from_json(path.read_text())
    path.unlink()
    server = serve(zygote)
    try:
        result = run_node(spec, server)
    finally:
        if server is not None:
            server.close()
        if zygote is not None:
            zygote.close()
    if zygote is not None:
        result = dataclasses.replace(result, spare_ranks=zygote.served)
    Path(spec.result).write_text(result.to_json())
    return 0


def run_forked(argv: list[str]) -> int:
    """A node agent's command run in a process the supervisor's zygote forked (argv in full):
    it forks a zygote of its own in its node's environment (everything is imported already),
    and runs the node."""
    return main(argv[argv.index(zygote_mod.NODE_MODULE) + 1 :])


zygote_mod.RUN_NODE = run_forked


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # The node's result is written: skip the interpreter's teardown with torch loaded (1-2 s
    # that the supervisor, waiting for every node, would add to the launch).
    os._exit(code)
