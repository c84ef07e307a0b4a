"""Checks of `torchrun-launch/env-launch` (and the checkpoint rank of multi-node runs)."""

from __future__ import annotations

from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, plural, ranks_text, skipped

OVERRIDES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")


def _crash(run: RunView) -> str | None:
    """One sentence on how the run ended when not every rank finished, else None."""
    from grader.checks.run import run_completed

    outcome = run_completed(run, {})
    return None if outcome.status == "pass" else outcome.message


@check(
    "launch.env",
    title="Rank and world size come from torchrun's environment",
    hint="Let torchrun start the processes: read RANK, LOCAL_RANK and WORLD_SIZE from os.environ "
    "(or call dist.get_rank()/get_world_size() after init_process_group()), never hard-code "
    "them, do not call mp.spawn, and do not set MASTER_ADDR/MASTER_PORT yourself.",
)
def launch_env(run: RunView, params: dict[str, Any]) -> Outcome:
    size = f"at world size {run.world_size}" + (f" on {run.nnodes} nodes" if run.nnodes > 1 else "")
    spawns = run.events("spawn")
    if spawns:
        rank, e = spawns[0]
        return failed(
            f"Rank {rank} called mp.spawn {run.where(e.get('line'))} ({size}): torchrun had "
            "already started one process per rank, and mp.spawn would start more.",
            rank=rank,
            line=e.get("line"),
        )
    for rank, e in run.events("env_write"):
        launched = e.get("launched")
        if e.get("key") in OVERRIDES and launched is not None and e.get("value") != launched:
            return failed(
                f"Rank {rank} set {e['key']} to {e.get('value')!r} {run.where(e.get('line'))}, "
                f"replacing the {launched!r} torchrun chose ({size}). torchrun already sets "
                "it, and a fixed value breaks multi-node runs and concurrent jobs.",
                rank=rank,
                line=e.get("line"),
            )
    for rank, e in run.events("init_args"):
        method = e.get("init_method")
        if method and not str(method).startswith("env://"):
            return failed(
                f"Rank {rank} passed init_method={method!r} to init_process_group "
                f"{run.where(e.get('line'))}: that ignores the rendezvous torchrun set up. "
                "Leave init_method out (env://).",
                rank=rank,
                line=e.get("line"),
            )
    env = {rank: e for rank, e in run.events("launch_env")}
    inits = {rank: e for rank, e in run.events("init")}
    for r in run.ranks:
        got = inits.get(r.rank)
        if got is None:
            continue
        e = got
        if e.get("world_size") != run.world_size or e.get("rank") != r.rank:
            given = env.get(r.rank) or {}
            return failed(
                f"{size.capitalize()}, the process torchrun started as rank {r.rank} of "
                f"{run.world_size} (RANK={given.get('rank')}, LOCAL_RANK="
                f"{given.get('local_rank')}, WORLD_SIZE={given.get('world_size')}) joined as "
                f"rank {e.get('rank')} of {e.get('world_size')} {run.where(e.get('line'))}: "
                "the rank or the world size is not the one from the environment.",
                rank=r.rank,
                line=e.get("line"),
            )
    for rank, e in run.events("iteration"):
        replicas, srank = e.get("num_replicas"), e.get("sampler_rank")
        if e.get("distributed") and (replicas != run.world_size or srank != rank):
            return failed(
                f"{size.capitalize()}, rank {rank}'s DistributedSampler was built for "
                f"{replicas} replicas as rank {srank} {run.where(e.get('line'))}: the data is "
                "not split among the ranks that actually run.",
                rank=rank,
                line=e.get("line"),
            )
    errors = run.events("init_error")
    if errors:
        rank, e = errors[0]
        return failed(
            f"{size.capitalize()}, rank {rank} could not join the process group "
            f"{run.where(e.get('line'))}: {e.get('error')}",
            rank=rank,
            line=e.get("line"),
        )
    missing = [r.rank for r in run.ranks if r.rank not in inits]
    crash = _crash(run)
    if missing or crash:
        return failed(
            f"{size.capitalize()} the program did not run through: "
            + (crash or "a rank never joined the process group."),
            rank=missing[0] if missing else None,
        )
    return passed(
        f"{size.capitalize()}, every process joined as the rank and world size torchrun gave it, "
        "without mp.spawn or its own MASTER_ADDR/MASTER_PORT."
    )


def _every_process_saves(run: RunView) -> Outcome | None:
    """On one node already: several processes wrote the same model checkpoint (no guard at all,
    rather than LOCAL_RANK in place of RANK, which only the multi-node run can show)."""
    by_path: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for rank, e in run.events("save"):
        if e.get("ok", True) and e.get("model_state") and e.get("path"):
            by_path.setdefault(str(e["path"]), []).append((rank, e))
    for path, saves in by_path.items():
        writers = sorted({rank for rank, _ in saves})
        if len(writers) < 2:
            continue
        rank, e = next((r, e) for r, e in saves if r == writers[1])
        return failed(
            f"With {run.world_size} ranks on one node, {ranks_text(writers)} each saved "
            f"{path.rsplit('/', 1)[-1]} (rank {rank} {run.where(e.get('line'))}): every process "
            "writes the same file at the same time. Guard the save with the global rank: "
            "if int(os.environ['RANK']) == 0 (or dist.get_rank() == 0).",
            rank=rank,
            line=e.get("line"),
        )
    return None


@check(
    "launch.multinode",
    title="The script works across nodes",
    hint="On several nodes LOCAL_RANK restarts at 0 on every node: use it only to pick the GPU. "
    "Shard data and guard checkpoints with the global rank (RANK, or dist.get_rank() == 0).",
)
def launch_multinode(run: RunView, params: dict[str, Any]) -> Outcome:
    if run.nnodes < 2:
        return _every_process_saves(run) or skipped("Judged on the simulated multi-node run only.")
    env = {rank: e for rank, e in run.events("launch_env")}
    job = f"As a {run.nnodes}-node job ({run.world_size} ranks)"
    crash = _crash(run)
    if crash:
        return failed(f"{job}, the program did not run through: {crash}")
    saves = [(rank, e) for rank, e in run.events("save") if e.get("ok", True)]
    others = [(rank, e) for rank, e in saves if rank != 0]
    if others:
        rank, e = others[0]
        given = env.get(rank, {})
        name = str(e.get("path") or "a checkpoint").rsplit("/", 1)[-1]
        return failed(
            f"{job}, rank {rank} (node {given.get('group_rank')}, LOCAL_RANK "
            f"{given.get('local_rank')}) also saved {name} {run.where(e.get('line'))}: only "
            "global rank 0 should write it.",
            rank=rank,
            line=e.get("line"),
        )
    for rank, e in run.events("iteration"):
        if e.get("distributed") and e.get("sampler_rank") not in (None, rank):
            given = env.get(rank, {})
            return failed(
                f"{job}, rank {rank}'s DistributedSampler was built with rank "
                f"{e.get('sampler_rank')} (LOCAL_RANK is {given.get('local_rank')}) "
                f"{run.where(e.get('line'))}: two ranks read the same shard.",
                rank=rank,
                line=e.get("line"),
            )
    note = f"; only rank 0 saved ({plural(len(saves), 'save')})" if saves else ""
    return passed(f"{job}, every rank ran to the end{note}.")
