"""Checkpoints: only rank 0 writes, it writes the bare model, and reads wait for the write."""

from __future__ import annotations

import os
from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, ranks_text, skipped


def _name(path: str | None) -> str:
    return os.path.basename(path) if path else "a file object"


def model_saves(run: RunView) -> list[tuple[int, dict[str, Any]]]:
    """Every torch.save of the model, to a path, a file object or an in-memory buffer."""
    return [(r, e) for r, e in run.events("save") if e.get("ok") and e.get("model_state")]


def _final_place(run: RunView, rank: int, save: dict[str, Any]) -> tuple[str | None, int | None]:
    """Where a save ended up: its path, followed through this rank's later renames
    (`torch.save(sd, tmp); os.replace(tmp, "ckpt.pt")` writes ckpt.pt), and the last rename's
    line (None when the file was not moved)."""
    path, line = save.get("path"), None
    if not path:
        return path, line
    view = run.rank(rank)
    seq = save.get("seq", 0)
    for e in view.of("rename") if view else []:
        if e.get("seq", 0) > seq and e.get("src") == path and e.get("dst"):
            path, line, seq = e["dst"], e.get("line"), e.get("seq", 0)
    return path, line


@check(
    "ckpt.rank0_only",
    title="Only rank 0 writes the checkpoint",
    hint="All ranks hold the same weights, so guard the save with `if dist.get_rank() == 0:`; "
    "otherwise every rank writes the same file at the same time.",
)
def ckpt_rank0_only(run: RunView, params: dict[str, Any]) -> Outcome:
    saves = model_saves(run)
    others = [(r, e) for r, e in saves if r != 0]
    if others:
        ranks = sorted({r for r, _ in others})
        rank, e = others[0]
        count = sum(1 for r, _ in others if r == rank)
        final, moved_at = _final_place(run, rank, e)
        how = f"first {run.at(e.get('line'))}"
        if moved_at is not None or final != e.get("path"):
            how = (
                f"first saved as {_name(e.get('path'))} {run.at(e.get('line'))} and moved "
                f"into place {run.at(moved_at) or 'by a rename'}"
            )
        return failed(
            f"{ranks_text(ranks).capitalize()} also wrote the model checkpoint "
            f"{_name(final)} ({count} time{'s' if count != 1 else ''} on rank {rank}, {how}).",
            rank=rank,
            line=e.get("line"),
        )
    own = [e for r, e in saves if r == 0]
    need = int(params.get("min_saves", 1))
    if len(own) < need:
        if early := run.not_reached("rank 0 saved the model"):
            return early
        return failed(
            "Rank 0 never saved the model."
            if not own
            else f"Rank 0 saved the model {_times(len(own))}; the exercise asks for at least "
            f"{need}.",
            rank=0,
        )
    files = sorted({_name(_final_place(run, 0, e)[0]) for e in own})
    return passed(
        f"Only rank 0 wrote the model ({plural(len(own), 'save')}: {', '.join(files[:3])})."
    )


@check(
    "ckpt.unwrapped",
    title="The checkpoint holds the bare model's state_dict",
    hint="Save ddp_model.module.state_dict(): the wrapper's own state_dict prefixes every key with "
    "'module.', and a plain model cannot load it.",
)
def ckpt_unwrapped(run: RunView, params: dict[str, Any]) -> Outcome:
    saves = model_saves(run)
    if not saves:
        return skipped("No checkpoint of the model was written, so there was nothing to inspect.")
    for rank, e in saves:
        where = run.at(e.get("line"))
        if e.get("holds") == "ddp":
            return failed(
                f"Rank {rank} pickled the whole DistributedDataParallel wrapper {where}.",
                rank=rank,
                line=e.get("line"),
            )
        for sd in e.get("state_dicts", []):
            if not sd.get("model"):
                continue
            if sd.get("compiled_prefixed"):
                return failed(
                    _compiled_message(rank, where, sd.get("sample", [])),
                    rank=rank,
                    line=e.get("line"),
                )
            if sd.get("prefixed"):
                sample = next(
                    (k for k in sd.get("sample", []) if k.startswith("module.")), "module."
                )
                return failed(
                    f"Rank {rank} saved the wrapper's state_dict {where}: its keys start with "
                    f"'module.' (e.g. '{sample}'), so the bare model cannot load it.",
                    rank=rank,
                    line=e.get("line"),
                )
            if sd.get("loadable") is False:
                return failed(
                    f"The state_dict rank {rank} saved {where} does not fit the model: "
                    f"{sd.get('n_missing', 0)} keys missing (e.g. {sd.get('missing', [])[:3]}), "
                    f"{sd.get('n_unexpected', 0)} unexpected "
                    f"(e.g. {sd.get('unexpected', [])[:3]}).",
                    rank=rank,
                    line=e.get("line"),
                )
    broken = [
        (path, info)
        for path, info in run.checkpoints.items()
        if isinstance(info, dict)
        and info.get("exists")
        and any(
            sd.get("prefixed") or sd.get("compiled_prefixed") for sd in info.get("state_dicts", [])
        )
    ]
    if broken:
        path, _ = broken[0]
        return failed(
            f"The file {_name(path)} left at the end holds keys starting with 'module.' or "
            "'_orig_mod.', so a fresh bare model cannot load it."
        )
    return passed(
        f"The {plural(len(saves), 'checkpoint write')} hold the bare model's state_dict: it loads "
        "into a fresh bare model (keys and shapes)."
    )


def _compiled_message(rank: int, where: str, sample: list[str]) -> str:
    key = next((k for k in sample if "_orig_mod." in k), "_orig_mod.")
    return (
        f"Rank {rank} saved the state_dict of a torch.compile'd model {where}: its keys start "
        f"with '_orig_mod.' (e.g. '{key}'), so a fresh bare model cannot load it. Save the "
        "original module's state_dict (model._orig_mod.state_dict(), or keep a reference to "
        "the model you passed to torch.compile), or strip the '_orig_mod.' prefix from every "
        "key when you load it."
    )


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _writes(run: RunView) -> list[tuple[str, int, int | None]]:
    """(path, sync count, line) of every completed write by rank 0: saves and renames into place."""
    out = []
    for rank, e in run.events("save"):
        if rank == 0 and e.get("ok") and e.get("path"):
            out.append((e["path"], int(e.get("sync", 0)), e.get("line")))
    for rank, e in run.events("rename"):
        if rank == 0 and e.get("dst"):
            out.append((e["dst"], int(e.get("sync", 0)), e.get("line")))
    return out


@check(
    "ckpt.barrier",
    title="Ranks read the checkpoint only after rank 0 wrote it",
    hint="Put dist.barrier() between rank 0's save and the other ranks' torch.load: without it "
    "they may read a missing or half-written file.",
)
def ckpt_barrier(run: RunView, params: dict[str, Any]) -> Outcome:
    writes = _writes(run)
    written = {p for p, _, _ in writes}
    loads = [(r, e) for r, e in run.events("load") if r != 0 and e.get("path") in written]
    # A load that failed because the file did not exist yet is a race too.
    loads += [
        (r, e)
        for r, e in run.events("load")
        if r != 0
        and e.get("path") not in written
        and not e.get("ok")
        and e.get("path")
        and os.path.basename(e["path"]) in {os.path.basename(p) for p in written}
    ]
    if not loads:
        if params.get("require_load"):
            return failed("No rank other than 0 read the checkpoint back.")
        return skipped(
            "No other rank read back a checkpoint written in this run; there was no read to order."
        )
    for rank, load in loads:
        for path, sync, line in writes:
            if path == load.get("path") and sync == int(load.get("sync", 0)):
                return failed(
                    f"Rank {rank} read {_name(path)} {run.at(load.get('line'))} while rank 0 may "
                    f"still have been writing it ({run.at(line) or 'its save'}): no barrier or "
                    "other collective separated the write from the read"
                    + (f" and the read failed: {load.get('error')}" if not load.get("ok") else "")
                    + ".",
                    rank=rank,
                    line=load.get("line"),
                )
        if not load.get("ok"):
            return failed(
                f"Rank {rank} could not read {_name(load.get('path'))} {run.at(load.get('line'))}: "
                f"{load.get('error')}.",
                rank=rank,
                line=load.get("line"),
            )
    return passed(
        ("The read" if len(loads) == 1 else f"All {len(loads)} reads")
        + " of rank 0's checkpoint came after a barrier that followed the write."
    )
