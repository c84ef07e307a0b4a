"""The process group and the devices: every rank joins the group and leaves it, each on its
own GPU."""

from __future__ import annotations

from typing import Any

from grader.checks.base import (
    Outcome,
    RankView,
    RunView,
    check,
    failed,
    passed,
    ranks_text,
    skipped,
)
from grader.events import DdpInit, Destroy, Init, InitError, LaunchEnv, ProgramException
from grader.i18n import Message, msg


def _needed_a_group(run: RunView) -> bool:
    """Some rank failed because there was no process group."""
    return any(
        "process group has not been initialized" in e.message.lower()
        or "init_process_group" in e.message
        for _, e in run.typed(ProgramException)
    )


@check(
    "dist.init",
    title="Every rank joins the process group",
    hint="Call dist.init_process_group() once at the start of every rank: backend 'nccl' on "
    "GPUs, 'gloo' on CPU. torchrun already set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.",
)
def dist_init(run: RunView, params: dict[str, Any]) -> Outcome:
    errors = run.typed(InitError)
    if errors:
        rank, error = errors[0]
        return failed(
            msg(
                "dist.init_error",
                "Rank {rank} could not join the process group {where}: {error}",
                rank=rank,
                where=run.at(error.line),
                error=error.error,
            ),
            rank=rank,
            line=error.line,
        )
    inits = {rank: e for rank, e in run.typed(Init)}
    missing = [r.rank for r in run.ranks if r.rank not in inits]
    if missing:
        reached = msg("dist.reached_init", "every rank joined the process group")
        early = run.not_reached(reached)
        if early and not inits and not _needed_a_group(run):
            return early
        return failed(_no_init(run, missing), rank=missing[0])
    for rank, e in inits.items():
        if e.world_size != run.world_size:
            return failed(
                msg(
                    "dist.wrong_world_size",
                    "Rank {rank} joined a group of {size} processes, but {launched} were launched.",
                    rank=rank,
                    size=e.world_size,
                    launched=run.world_size,
                ),
                rank=rank,
                line=e.line,
            )
        if e.rank != rank:
            return failed(
                msg(
                    "dist.wrong_rank",
                    "The process torchrun launched as rank {rank} joined as rank {joined}: do not "
                    "hard-code the rank.",
                    rank=rank,
                    joined=e.rank,
                ),
                rank=rank,
                line=e.line,
            )
    backend = inits[0].backend or "undefined"
    requested = inits[0].requested
    if run.device == "cuda" and "nccl" not in str(requested or backend):
        return failed(
            msg(
                "dist.not_nccl",
                "On this GPU worker the group uses backend {backend}; GPUs need 'nccl'.",
                backend=repr(requested or backend),
            ),
            rank=0,
            line=inits[0].line,
        )
    how = (
        msg("dist.backend_named", "backend {backend}", backend=str(requested))
        if requested
        else msg("dist.backend_default", "the default backend")
    )
    return passed(
        msg(
            "dist.all_joined",
            "All {n} ranks joined the process group ({how}).",
            n=run.world_size,
            how=how,
        )
    )


def _no_init(run: RunView, missing: list[int]) -> Message:
    """Ranks that never called init_process_group (one sentence per number and outcome: the verb
    agrees with the ranks in tr and pt-BR)."""
    ranks = ranks_text(missing)
    if run.complete and len(missing) == 1:
        return msg(
            "dist.no_init_alone",
            "{ranks:capital} never called init_process_group(), so the processes never formed a "
            "group: each trained alone.",
            ranks=ranks,
        )
    if run.complete:
        return msg(
            "dist.no_init_alone_many",
            "{ranks:capital} never called init_process_group(), so the processes never formed a "
            "group: each trained alone.",
            ranks=ranks,
        )
    if len(missing) == 1:
        return msg(
            "dist.no_init",
            "{ranks:capital} never called init_process_group(), so the processes never formed a "
            "group.",
            ranks=ranks,
        )
    return msg(
        "dist.no_init_many",
        "{ranks:capital} never called init_process_group(), so the processes never formed a group.",
        ranks=ranks,
    )


@check(
    "dist.cleanup",
    title="Every rank leaves the process group",
    hint="Call dist.destroy_process_group() at the end of every rank, in a `finally:` so it "
    "also runs when training raises.",
)
def dist_cleanup(run: RunView, params: dict[str, Any]) -> Outcome:
    inits = {rank for rank, _ in run.typed(Init)}
    if not inits:
        return skipped(
            msg("dist.no_group", "No rank joined a process group, so there was none to leave.")
        )
    destroyed = {rank for rank, _ in run.typed(Destroy)}
    missing = sorted(inits - destroyed)
    if missing:
        reached = msg("dist.reached_cleanup", "the ranks left the process group")
        if early := run.not_reached(reached):
            return early
        if len(missing) == 1:
            text = msg(
                "dist.no_destroy",
                "{ranks:capital} ended without calling destroy_process_group().",
                ranks=ranks_text(missing),
            )
        else:
            text = msg(
                "dist.no_destroy_many",
                "{ranks:capital} ended without calling destroy_process_group().",
                ranks=ranks_text(missing),
            )
        return failed(text, rank=missing[0])
    return passed(
        msg("dist.all_left", "Every rank called destroy_process_group() before it ended.")
    )


@check(
    "device.pinned",
    title="Each rank uses its own GPU",
    hint="Use device = torch.device('cuda', int(os.environ['LOCAL_RANK'])), call "
    "torch.cuda.set_device(device), move the model there and pass device_ids=[device.index] "
    "to DDP.",
)
def device_pinned(run: RunView, params: dict[str, Any]) -> Outcome:
    if run.device != "cuda":
        return skipped(
            msg(
                "dist.cpu_workers",
                "This run used CPU workers; GPU pinning is checked on GPU workers only.",
            )
        )
    inits = {rank: e for rank, e in run.typed(DdpInit)}
    used: dict[tuple[str, str], int] = {}
    for r in run.ranks:
        e = inits.get(r.rank)
        if e is None:
            if early := run.not_reached(msg("dist.reached_ddp", "every rank built its DDP model")):
                return early
            return failed(
                msg("dist.no_ddp", "Rank {rank} never built a DDP model.", rank=r.rank),
                rank=r.rank,
            )
        devices = e.devices
        # Its own GPU is the one of its local rank: a node sees only its own GPUs (each node
        # agent of a multi-node launch takes its slice through CUDA_VISIBLE_DEVICES).
        want = f"cuda:{_local_rank(r, run)}"
        if devices != [want]:
            return failed(
                msg(
                    "dist.wrong_device",
                    "Rank {rank}'s model is on {devices}, not on its own GPU {want}.",
                    rank=r.rank,
                    devices=", ".join(devices) or msg("dist.no_device", "no device"),
                    want=want,
                ),
                rank=r.rank,
                line=e.line,
            )
        ids = e.device_ids
        if ids and ids != [want] and ids != [want.removeprefix("cuda:")]:
            return failed(
                msg(
                    "dist.wrong_device_ids",
                    "Rank {rank} passed device_ids={ids} to DDP; it should be its own GPU "
                    "({want}).",
                    rank=r.rank,
                    ids=str(ids),
                    want=want,
                ),
                rank=r.rank,
                line=e.line,
            )
        node = _node(r)
        if (node, want) in used:
            return failed(
                msg(
                    "dist.shared_gpu",
                    "Ranks {a} and {b} share {device}.",
                    a=used[(node, want)],
                    b=r.rank,
                    device=want,
                ),
                rank=r.rank,
            )
        used[(node, want)] = r.rank
    return passed(
        msg(
            "dist.own_gpus",
            "Each of the {n} ranks kept its model on its own GPU.",
            n=run.world_size,
        )
    )


def _local_rank(rank: RankView, run: RunView) -> int:
    """The rank's LOCAL_RANK as the launcher set it; else its place on an even split of nodes."""
    env = rank.first_typed(LaunchEnv)
    if env is not None and env.local_rank is not None and env.local_rank.isdigit():
        return int(env.local_rank)
    return rank.rank % max(1, run.world_size // max(1, run.nnodes))


def _node(rank: RankView) -> str:
    """The node the rank ran on (GROUP_RANK), "" where the launcher did not say."""
    env = rank.first_typed(LaunchEnv)
    return (env.group_rank or "") if env is not None else ""
