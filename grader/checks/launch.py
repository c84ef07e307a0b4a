"""Checks of `torchrun-launch/env-launch` (and the checkpoint rank of multi-node runs)."""

from __future__ import annotations

from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, ranks_text, skipped
from grader.events import EnvWrite, Init, InitArgs, InitError, Iteration, LaunchEnv, Save, Spawn
from grader.i18n import Message, msg

OVERRIDES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")


def _crash(run: RunView) -> str | None:
    """One sentence on how the run ended when not every rank finished, else None."""
    from grader.checks.run import run_completed

    outcome = run_completed(run, {})
    return None if outcome.status == "pass" else outcome.message


def _size(run: RunView) -> Message:
    """ "at world size 2" (" on 2 nodes"), inside a sentence."""
    if run.nnodes > 1:
        return msg(
            "launch.size_nodes",
            "at world size {world} on {nodes} nodes",
            world=run.world_size,
            nodes=run.nnodes,
        )
    return msg("launch.size", "at world size {world}", world=run.world_size)


def _size_first(run: RunView) -> Message:
    """ "At world size 2" (" on 2 nodes"), opening a sentence."""
    if run.nnodes > 1:
        return msg(
            "launch.size_nodes_first",
            "At world size {world} on {nodes} nodes",
            world=run.world_size,
            nodes=run.nnodes,
        )
    return msg("launch.size_first", "At world size {world}", world=run.world_size)


@check(
    "launch.env",
    title="Rank and world size come from torchrun's environment",
    hint="Let torchrun start the processes: read RANK, LOCAL_RANK and WORLD_SIZE from os.environ "
    "(or call dist.get_rank()/get_world_size() after init_process_group()), never hard-code "
    "them, do not call mp.spawn, and do not set MASTER_ADDR/MASTER_PORT yourself.",
)
def launch_env(run: RunView, params: dict[str, Any]) -> Outcome:
    spawns = run.typed(Spawn)
    if spawns:
        rank, spawn = spawns[0]
        return failed(
            msg(
                "launch.spawn",
                "Rank {rank} called mp.spawn {where} ({size}): torchrun had already started one "
                "process per rank, and mp.spawn would start more.",
                rank=rank,
                where=run.where(spawn.line),
                size=_size(run),
            ),
            rank=rank,
            line=spawn.line,
        )
    for rank, write in run.typed(EnvWrite):
        launched = write.launched
        if write.key in OVERRIDES and launched is not None and write.value != launched:
            return failed(
                msg(
                    "launch.env_write",
                    "Rank {rank} set {key} to {value} {where}, replacing the {launched} torchrun "
                    "chose ({size}). torchrun already sets it, and a fixed value breaks "
                    "multi-node runs and concurrent jobs.",
                    rank=rank,
                    key=write.key,
                    value=repr(write.value),
                    where=run.where(write.line),
                    launched=repr(launched),
                    size=_size(run),
                ),
                rank=rank,
                line=write.line,
            )
    for rank, args in run.typed(InitArgs):
        method = args.init_method
        if method and not str(method).startswith("env://"):
            return failed(
                msg(
                    "launch.init_method",
                    "Rank {rank} passed init_method={method} to init_process_group {where}: "
                    "that ignores the rendezvous torchrun set up. Leave init_method out "
                    "(env://).",
                    rank=rank,
                    method=repr(method),
                    where=run.where(args.line),
                ),
                rank=rank,
                line=args.line,
            )
    env = dict(run.typed(LaunchEnv))
    inits = dict(run.typed(Init))
    for r in run.ranks:
        init = inits.get(r.rank)
        if init is None:
            continue
        if init.world_size != run.world_size or init.rank != r.rank:
            given = env.get(r.rank) or LaunchEnv()
            return failed(
                msg(
                    "launch.joined_as",
                    "{size}, the process torchrun started as rank {rank} of {world} "
                    "(RANK={env_rank}, LOCAL_RANK={env_local_rank}, WORLD_SIZE={env_world}) "
                    "joined as rank {joined_rank} of {joined_world} {where}: the rank or the "
                    "world size is not the one from the environment.",
                    size=_size_first(run),
                    rank=r.rank,
                    world=run.world_size,
                    env_rank=given.rank,
                    env_local_rank=given.local_rank,
                    env_world=given.world_size,
                    joined_rank=init.rank,
                    joined_world=init.world_size,
                    where=run.where(init.line),
                ),
                rank=r.rank,
                line=init.line,
            )
    for rank, e in run.typed(Iteration):
        replicas, srank = e.num_replicas, e.sampler_rank
        if e.distributed and (replicas != run.world_size or srank != rank):
            return failed(
                msg(
                    "launch.sampler_world",
                    "{size}, rank {rank}'s DistributedSampler was built for {replicas} replicas "
                    "as rank {sampler_rank} {where}: the data is not split among the ranks that "
                    "actually run.",
                    size=_size_first(run),
                    rank=rank,
                    replicas=replicas,
                    sampler_rank=srank,
                    where=run.where(e.line),
                ),
                rank=rank,
                line=e.line,
            )
    errors = run.typed(InitError)
    if errors:
        rank, error = errors[0]
        return failed(
            msg(
                "launch.init_error",
                "{size}, rank {rank} could not join the process group {where}: {error}",
                size=_size_first(run),
                rank=rank,
                where=run.where(error.line),
                error=error.error,
            ),
            rank=rank,
            line=error.line,
        )
    missing = [r.rank for r in run.ranks if r.rank not in inits]
    crash = _crash(run)
    if missing or crash:
        return failed(
            msg(
                "launch.not_through",
                "{size} the program did not run through: {why}",
                size=_size_first(run),
                why=crash or msg("launch.never_joined", "a rank never joined the process group."),
            ),
            rank=missing[0] if missing else None,
        )
    return passed(
        msg(
            "launch.env_ok",
            "{size}, every process joined as the rank and world size torchrun gave it, without "
            "mp.spawn or its own MASTER_ADDR/MASTER_PORT.",
            size=_size_first(run),
        )
    )


def _model_saves(run: RunView) -> list[tuple[int, Save]]:
    """(rank, save) of every save that worked."""
    return [(rank, save) for rank, save in run.typed(Save) if save.ok is not False]


def _every_process_saves(run: RunView) -> Outcome | None:
    """On one node already: several processes wrote the same model checkpoint (no guard at all,
    rather than LOCAL_RANK in place of RANK, which only the multi-node run can show)."""
    by_path: dict[str, list[tuple[int, Save]]] = {}
    for rank, save in _model_saves(run):
        if save.model_state and save.path:
            by_path.setdefault(str(save.path), []).append((rank, save))
    for path, saves in by_path.items():
        writers = sorted({rank for rank, _ in saves})
        if len(writers) < 2:
            continue
        rank, save = next((r, s) for r, s in saves if r == writers[1])
        return failed(
            msg(
                "launch.every_process_saves",
                "Already on one node, {ranks} each saved {name} (rank {rank} {where}): every "
                "process writes the same file at the same time. Guard the save with the global "
                "rank: if int(os.environ['RANK']) == 0 (or dist.get_rank() == 0).",
                ranks=ranks_text(writers),
                name=path.rsplit("/", 1)[-1],
                rank=rank,
                where=run.where(save.line),
            ),
            rank=rank,
            line=save.line,
        )
    return None


def _saves(n: int) -> Message:
    if n == 1:
        return msg("launch.one_save", "1 save")
    return msg("launch.saves", "{n} saves", n=n)


@check(
    "launch.multinode",
    title="The script works across nodes",
    hint="On several nodes LOCAL_RANK restarts at 0 on every node: use it only to pick the GPU. "
    "Shard data and guard checkpoints with the global rank (RANK, or dist.get_rank() == 0).",
)
def launch_multinode(run: RunView, params: dict[str, Any]) -> Outcome:
    if run.nnodes < 2:
        return _every_process_saves(run) or skipped(
            msg("launch.multinode_only", "Judged on the simulated multi-node run only.")
        )
    env = dict(run.typed(LaunchEnv))
    job = {"nodes": run.nnodes, "world": run.world_size}
    crash = _crash(run)
    if crash:
        return failed(
            msg(
                "launch.job_crash",
                "As a {nodes}-node job ({world} ranks), the program did not run through: {why}",
                why=crash,
                **job,
            )
        )
    saves = [(rank, save) for rank, save in run.typed(Save) if save.ok is not False]
    others = [(rank, save) for rank, save in saves if rank != 0]
    if others:
        rank, save = others[0]
        given = env.get(rank) or LaunchEnv()
        name = (
            str(save.path).rsplit("/", 1)[-1]
            if save.path
            else msg("launch.a_checkpoint", "a checkpoint")
        )
        return failed(
            msg(
                "launch.other_rank_saves",
                "As a {nodes}-node job ({world} ranks), rank {rank} (node {node}, LOCAL_RANK "
                "{local_rank}) also saved {name} {where}: only global rank 0 should write it.",
                rank=rank,
                node=given.group_rank,
                local_rank=given.local_rank,
                name=name,
                where=run.where(save.line),
                **job,
            ),
            rank=rank,
            line=save.line,
        )
    for rank, e in run.typed(Iteration):
        if e.distributed and e.sampler_rank not in (None, rank):
            given = env.get(rank) or LaunchEnv()
            return failed(
                msg(
                    "launch.sampler_local_rank",
                    "As a {nodes}-node job ({world} ranks), rank {rank}'s DistributedSampler was "
                    "built with rank {sampler_rank} (LOCAL_RANK is {local_rank}) {where}: two "
                    "ranks read the same shard.",
                    rank=rank,
                    sampler_rank=e.sampler_rank,
                    local_rank=given.local_rank,
                    where=run.where(e.line),
                    **job,
                ),
                rank=rank,
                line=e.line,
            )
    if saves:
        return passed(
            msg(
                "launch.multinode_ok_saved",
                "As a {nodes}-node job ({world} ranks), every rank ran to the end; only rank 0 "
                "saved ({saves}).",
                saves=_saves(len(saves)),
                **job,
            )
        )
    return passed(
        msg(
            "launch.multinode_ok",
            "As a {nodes}-node job ({world} ranks), every rank ran to the end.",
            **job,
        )
    )
