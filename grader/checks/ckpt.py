"""Checkpoints: only rank 0 writes, it writes the bare model, and reads wait for the write."""

from __future__ import annotations

import os
from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, ranks_text, skipped
from grader.events import Load, Rename, Save, SavedStateDict
from grader.i18n import Message, msg


def _name(path: str | None) -> str:
    return os.path.basename(path) if path else msg("ckpt.file_object", "a file object")


def _written(save: Save, path: str | None) -> str:
    """Where a write went, for a message: the file's name, or the distributed checkpoint's
    directory (a DCP writer)."""
    if save.target == "dcp":
        return msg("ckpt.dcp_dir", "the distributed checkpoint {dir}", dir=_name(path))
    if save.target == "memory":
        return msg("ckpt.memory_upload", "an io.BytesIO whose bytes the program wrote out itself")
    return _name(path)


def _times(n: int) -> Message:
    return msg("ckpt.once", "once") if n == 1 else msg("ckpt.n_times", "{n} times", n=n)


def model_saves(run: RunView) -> list[tuple[int, Save]]:
    """Every write of the model to storage: torch.save to a path or to a file open on disk, and
    DCP writers. Serialising into memory (io.BytesIO, to broadcast the state) writes nothing;
    only when rank 0 wrote nothing else do its serialisations count, as an upload whose write
    the program made itself (bytes written out, an object store)."""
    saves = [(r, e) for r, e in run.typed(Save) if e.ok and e.model_state]
    stored = [(r, e) for r, e in saves if e.target != "memory"]
    if any(r == 0 for r, _ in stored):
        return stored
    return stored + [(r, e) for r, e in saves if r == 0 and e.target == "memory"]


def _in_memory(run: RunView) -> list[int]:
    """The ranks that serialised the model into memory (not counted as checkpoint writes)."""
    return sorted(
        {r for r, e in run.typed(Save) if e.ok and e.model_state and e.target == "memory"}
    )


def _final_place(run: RunView, rank: int, save: Save) -> tuple[str | None, int | None]:
    """Where a save ended up: its path, followed through this rank's later renames
    (`torch.save(sd, tmp); os.replace(tmp, "ckpt.pt")` writes ckpt.pt), and the last rename's
    line (None when the file was not moved)."""
    path, line = save.path, None
    if not path:
        return path, line
    view = run.rank(rank)
    seq = save.seq
    for e in view.typed(Rename) if view else []:
        if e.seq > seq and e.src == path and e.dst:
            path, line, seq = e.dst, e.line, e.seq
    return path, line


@check(
    "ckpt.rank0_only",
    title="Only rank 0 writes the checkpoint",
    hint="All ranks hold the same weights, so guard the save with `if dist.get_rank() == 0:`; "
    "otherwise every rank writes the same file at the same time.",
)
def ckpt_rank0_only(run: RunView, params: dict[str, Any]) -> Outcome:
    saves = model_saves(run)
    # A DCP save is a collective: every rank writes its own shard of the one checkpoint.
    others = [(r, e) for r, e in saves if r != 0 and e.target != "dcp"]
    if others:
        ranks = sorted({r for r, _ in others})
        rank, e = others[0]
        count = sum(1 for r, _ in others if r == rank)
        final, moved_at = _final_place(run, rank, e)
        how = msg("ckpt.first_at", "first {where}", where=run.at(e.line))
        if moved_at is not None or final != e.path:
            how = msg(
                "ckpt.saved_and_moved",
                "first saved as {name} {saved_at} and moved into place {moved_at}",
                name=_name(e.path),
                saved_at=run.at(e.line),
                moved_at=run.at(moved_at) or msg("ckpt.by_rename", "by a rename"),
            )
        values = {
            "ranks": ranks_text(ranks),
            "file": _written(e, final),
            "times": _times(count),
            "rank": rank,
            "how": how,
        }
        # One sentence per number: the verb agrees with the ranks in tr and pt-BR.
        text = (
            msg(
                "ckpt.others_wrote",
                "{ranks:capital} also wrote the model checkpoint {file} ({times} on rank {rank}, "
                "{how}).",
                **values,
            )
            if len(ranks) == 1
            else msg(
                "ckpt.others_wrote_many",
                "{ranks:capital} also wrote the model checkpoint {file} ({times} on rank {rank}, "
                "{how}).",
                **values,
            )
        )
        return failed(text, rank=rank, line=e.line)
    own = [e for r, e in saves if r == 0]
    need = int(params.get("min_saves", 1))
    if len(own) < need:
        if early := run.not_reached(msg("ckpt.reached_save", "rank 0 saved the model")):
            return early
        if not own:
            return failed(msg("ckpt.never_saved", "Rank 0 never saved the model."), rank=0)
        return failed(
            msg(
                "ckpt.too_few_saves",
                "Rank 0 saved the model {times}; the exercise asks for at least {need}.",
                times=_times(len(own)),
                need=need,
            ),
            rank=0,
        )
    files = sorted({_written(e, _final_place(run, 0, e)[0]) for e in own})
    saves_text = (
        msg("ckpt.one_save", "1 save")
        if len(own) == 1
        else msg("ckpt.n_saves", "{n} saves", n=len(own))
    )
    text = msg(
        "ckpt.only_rank0",
        "Only rank 0 wrote the model ({saves}: {files}).",
        saves=saves_text,
        files=", ".join(files[:3]),
    )
    if memory := [r for r in _in_memory(run) if r != 0]:
        text = msg(
            "ckpt.only_rank0_memory",
            "{only} Not counted as a write: the model serialised into memory (an io.BytesIO, "
            "no file) on {ranks}.",
            only=text,
            ranks=ranks_text(memory),
        )
    return passed(text)


@check(
    "ckpt.unwrapped",
    title="The checkpoint holds the bare model's state_dict",
    hint="Save ddp_model.module.state_dict(): the wrapper's own state_dict prefixes every key with "
    "'module.', and a plain model cannot load it.",
)
def ckpt_unwrapped(run: RunView, params: dict[str, Any]) -> Outcome:
    saves = model_saves(run)
    if not saves:
        return skipped(
            msg(
                "ckpt.nothing_saved",
                "No checkpoint of the model was written, so there was nothing to inspect.",
            )
        )
    for rank, e in saves:
        if e.holds == "ddp":
            return failed(
                msg(
                    "ckpt.pickled_ddp",
                    "Rank {rank} pickled the whole DistributedDataParallel wrapper {where}.",
                    rank=rank,
                    where=run.at(e.line),
                ),
                rank=rank,
                line=e.line,
            )
        for sd in e.state_dicts:
            if sd.model and (problem := _state_dict_problem(run, rank, e, sd)):
                return failed(problem, rank=rank, line=e.line)
    if broken := _prefixed_files(run):
        return failed(
            msg(
                "ckpt.file_prefixed",
                "The file {file} left at the end holds keys starting with 'module.' or "
                "'_orig_mod.', so a fresh bare model cannot load it.",
                file=_name(broken[0]),
            )
        )
    if len(saves) == 1:
        return passed(
            msg(
                "ckpt.bare_one",
                "The checkpoint write holds the bare model's state_dict: it loads into a fresh "
                "bare model (keys and shapes).",
            )
        )
    return passed(
        msg(
            "ckpt.bare_many",
            "The {n} checkpoint writes hold the bare model's state_dict: it loads into a fresh "
            "bare model (keys and shapes).",
            n=len(saves),
        )
    )


def _state_dict_problem(run: RunView, rank: int, save: Save, sd: SavedStateDict) -> str | None:
    """Why a model's state_dict that `rank` saved cannot load into a fresh bare model."""
    where = run.at(save.line)
    if sd.compiled_prefixed:
        return msg(
            "ckpt.compiled",
            "Rank {rank} saved the state_dict of a torch.compile'd model {where}: its keys start "
            "with '_orig_mod.' (e.g. '{key}'), so a fresh bare model cannot load it. Save the "
            "original module's state_dict (model._orig_mod.state_dict(), or keep a reference to "
            "the model you passed to torch.compile), or strip the '_orig_mod.' prefix from every "
            "key when you load it.",
            rank=rank,
            where=where,
            key=next((k for k in sd.sample if "_orig_mod." in k), "_orig_mod."),
        )
    if sd.prefixed:
        return msg(
            "ckpt.wrapper_keys",
            "Rank {rank} saved the wrapper's state_dict {where}: its keys start with 'module.' "
            "(e.g. '{key}'), so the bare model cannot load it.",
            rank=rank,
            where=where,
            key=next((k for k in sd.sample if k.startswith("module.")), "module."),
        )
    if sd.loadable is False:
        return msg(
            "ckpt.does_not_fit",
            "The state_dict rank {rank} saved {where} does not fit the model: {n_missing} keys "
            "missing (e.g. {missing}), {n_unexpected} unexpected (e.g. {unexpected}).",
            rank=rank,
            where=where,
            n_missing=sd.n_missing,
            missing=str(sd.missing[:3]),
            n_unexpected=sd.n_unexpected,
            unexpected=str(sd.unexpected[:3]),
        )
    return None


def _prefixed_files(run: RunView) -> list[str]:
    """Files left at the end (the sandbox's inspection) holding keys with a wrapper's prefix."""
    found = []
    for path, info in run.checkpoints.items():
        if not (isinstance(info, dict) and info.get("exists")):
            continue
        dicts = [SavedStateDict.parse(sd) for sd in info.get("state_dicts", [])]
        if any(sd.prefixed or sd.compiled_prefixed for sd in dicts):
            found.append(path)
    return found


def _writes(run: RunView) -> list[tuple[str, int, int | None]]:
    """(path, sync count, line) of every completed write by rank 0: saves and renames into place."""
    out = []
    for rank, save in run.typed(Save):
        if rank == 0 and save.ok and save.path:
            out.append((save.path, save.sync, save.line))
    for rank, rename in run.typed(Rename):
        if rank == 0 and rename.dst:
            out.append((rename.dst, rename.sync, rename.line))
    return out


def _reads_of(run: RunView, written: set[str]) -> list[tuple[int, Load]]:
    """Other ranks' loads of a file rank 0 wrote; a load that failed because the file did not
    exist yet (same name, another path: it was still missing) is a race too."""
    names = {os.path.basename(p) for p in written}
    loads = [(r, e) for r, e in run.typed(Load) if r != 0 and e.path in written]
    loads += [
        (r, e)
        for r, e in run.typed(Load)
        if r != 0
        and e.path not in written
        and not e.ok
        and e.path
        and os.path.basename(e.path) in names
    ]
    return loads


@check(
    "ckpt.barrier",
    title="Ranks read the checkpoint only after rank 0 wrote it",
    hint="Put dist.barrier() between rank 0's save and the other ranks' torch.load: without it "
    "they may read a missing or half-written file.",
)
def ckpt_barrier(run: RunView, params: dict[str, Any]) -> Outcome:
    writes = _writes(run)
    loads = _reads_of(run, {p for p, _, _ in writes})
    if not loads:
        if params.get("require_load"):
            return failed(msg("ckpt.never_read", "No rank other than 0 read the checkpoint back."))
        return skipped(
            msg(
                "ckpt.no_read",
                "No other rank read back a checkpoint written in this run; there was no read "
                "to order.",
            )
        )
    for rank, load in loads:
        for path, sync, line in writes:
            if path == load.path and sync == load.sync:
                return failed(_race(run, rank, load, line), rank=rank, line=load.line)
        if not load.ok:
            return failed(
                msg(
                    "ckpt.read_failed",
                    "Rank {rank} could not read {file} {where}: {error}.",
                    rank=rank,
                    file=_name(load.path),
                    where=run.at(load.line),
                    error=load.error,
                ),
                rank=rank,
                line=load.line,
            )
    if len(loads) == 1:
        return passed(
            msg(
                "ckpt.read_after_write",
                "The read of rank 0's checkpoint came after a barrier that followed the write.",
            )
        )
    return passed(
        msg(
            "ckpt.reads_after_write",
            "All {n} reads of rank 0's checkpoint came after a barrier that followed the write.",
            n=len(loads),
        )
    )


def _race(run: RunView, rank: int, load: Load, write_line: int | None) -> str:
    """A read no collective separated from rank 0's write of the same file."""
    values: dict[str, Any] = {
        "rank": rank,
        "file": _name(load.path),
        "read_at": run.at(load.line),
        "write_at": run.at(write_line) or msg("ckpt.its_save", "its save"),
    }
    if load.ok:
        return msg(
            "ckpt.race",
            "Rank {rank} read {file} {read_at} while rank 0 may still have been writing it "
            "({write_at}): no barrier or other collective separated the write from the read.",
            **values,
        )
    return msg(
        "ckpt.race_failed",
        "Rank {rank} read {file} {read_at} while rank 0 may still have been writing it "
        "({write_at}): no barrier or other collective separated the write from the read and "
        "the read failed: {error}.",
        error=load.error,
        **values,
    )
