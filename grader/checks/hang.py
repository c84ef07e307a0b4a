"""The find-the-hang exercise (issue 25): every rank makes the same collectives in the same order
(DDP's gradient all-reduces included), every sample is trained on once per epoch, and the process
group has a timeout of the program's own.

The sequences compared are the collectives the learner's file calls itself (`CollectiveCall` with
`direct`: the all-reduces that `Join` and DDP make inside torch are not the learner's calls) and
one DDP gradient all-reduce per forward through a DDP model whose backward will synchronise
(`SyncedForward`), except inside a `Join` that lists the model: there a rank that ran out of
batches shadows the others' all-reduces, so their counts may differ.

Every sample once per epoch: over all ranks, each epoch's training passes must hand out every
index of the dataset, and every sample must go through a backward pass of the DDP model once per
epoch (`Consumed`: a loop that breaks early has fetched the batch it never trained on). Missing
samples pass only when the program asked for the drop itself (`DistributedSampler(drop_last=True)`,
or a DataLoader or BatchSampler with `drop_last=True`); repeats pass up to world size - 1 per
epoch, what `DistributedSampler`'s default padding adds to make the shards equal.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from grader.checks.base import (
    Outcome,
    RankView,
    RunView,
    check,
    failed,
    index_ranges,
    passed,
    skipped,
    stack_line,
)
from grader.checks.sampler import shared_samples
from grader.events import (
    CollectiveCall,
    Consumed,
    Event,
    Iteration,
    LoaderDropLast,
    PgTimeout,
    ProgramException,
    SyncedForward,
)
from grader.i18n import Message, msg

DEFAULT_MAX_TIMEOUT_S = 600.0
MAX_CONSUMED_ROWS = 8192  # per rank, as grader.harness.hooks.ddp records them

_Entry = tuple[tuple[Any, ...], Event]


def _entries(r: RankView) -> list[_Entry]:
    """The rank's collectives in order, each with what every rank must agree on."""
    out: list[_Entry] = []
    for e in r.typed_sequence(CollectiveCall, SyncedForward):
        if isinstance(e, CollectiveCall) and e.direct:
            out.append(((e.op, e.numel, e.dtype, e.redop, e.src), e))
        elif isinstance(e, SyncedForward) and not e.in_join:
            out.append((("ddp", e.numel), e))
    return out


def _describe(e: Event) -> Message:
    if isinstance(e, SyncedForward):
        return msg(
            "hang.call_ddp",
            "DDP's gradient all-reduce ({numel} values) in the backward pass after the forward",
            numel=e.numel,
        )
    assert isinstance(e, CollectiveCall)
    if e.op in ("barrier", "monitored_barrier"):
        return msg("hang.call_barrier", "{op}", op=e.op)
    numel: int | str = "?" if e.numel is None else e.numel
    return msg(
        "hang.call", "{op} of {numel} {dtype} values", op=e.op, numel=numel, dtype=e.dtype or ""
    )


def _line(e: Event) -> int | None:
    return e.line if isinstance(e, (CollectiveCall, SyncedForward)) else None


def _stuck_at(run: RunView, r: RankView) -> Message:
    """Where a rank was when the run ended: its own line first (the error it raised, else the
    innermost frame of the learner's file in its stack)."""
    crash = r.first_typed(ProgramException)
    line = crash.line if crash is not None and crash.line else None
    if line is None:
        line = stack_line(r.stack, r.learner_file)
    if r.end is not None and crash is None:
        return msg("hang.rank_finished", "rank {rank} had finished", rank=r.rank)
    if line is None:
        return msg("hang.rank_elsewhere", "rank {rank} was outside your code", rank=r.rank)
    return msg("hang.rank_at", "rank {rank} was {where}", rank=r.rank, where=run.at(line))


def _where_ranks(run: RunView) -> Message:
    parts = [_stuck_at(run, r) for r in run.ranks]
    joined = parts[-1]
    for part in reversed(parts[:-1]):
        joined = msg("hang.list", "{first}; {rest}", first=part, rest=joined)
    return joined


def _with_stacks(run: RunView, text: Message) -> Message:
    if run.complete:
        return text
    return msg(
        "hang.stopped_at",
        "{text} When the run stopped: {ranks}.",
        text=text,
        ranks=_where_ranks(run),
    )


@check(
    "hang.same_collectives",
    title="Every rank makes the same collectives in the same order",
    hint="Every rank must reach every collective, in the same order and with tensors of the same "
    "shape: compute a metric on every rank and all-reduce it outside any `if rank == 0:`, and give "
    "the ranks equal numbers of batches, or train inside `with Join([model]):` so that a rank that "
    "runs out of batches first shadows DDP's all-reduces of the others.",
)
def same_collectives(run: RunView, params: dict[str, Any]) -> Outcome:
    if len(run.ranks) < 2:
        return skipped(msg("hang.single_rank", "A single rank: there was no other rank to match."))
    seqs = {r.rank: _entries(r) for r in run.ranks}
    if not any(seqs.values()):
        return skipped(
            msg("hang.no_collective", "Not judged: no rank made a collective or a DDP step.")
        )
    for rank, seq in sorted(seqs.items()):
        for other, oseq in sorted(seqs.items()):
            if other <= rank:
                continue
            for i, (a, b) in enumerate(zip(seq, oseq, strict=False)):
                if a[0] != b[0]:
                    return failed(
                        _with_stacks(
                            run,
                            msg(
                                "hang.differs",
                                "The ranks' collective #{n} differs: rank {rank} called {call} "
                                "{where}, rank {other} called {other_call} {other_where}. They "
                                "never meet in the same collective, so they wait for each other "
                                "(or, on gloo, abort with a collective mismatch).",
                                n=i + 1,
                                rank=rank,
                                call=_describe(a[1]),
                                where=run.where(_line(a[1])),
                                other=other,
                                other_call=_describe(b[1]),
                                other_where=run.where(_line(b[1])),
                            ),
                        ),
                        rank=rank,
                        line=_line(a[1]),
                    )
    longest = max(seqs, key=lambda r: (len(seqs[r]), -r))
    for rank, seq in sorted(seqs.items()):
        if len(seq) < len(seqs[longest]):
            extra = seqs[longest][len(seq)][1]
            return failed(
                _with_stacks(
                    run,
                    msg(
                        "hang.no_partner",
                        "Rank {longest} made {more} collectives and rank {rank} only {fewer}: "
                        "rank {longest}'s collective #{next}, {call} {where}, had no partner on "
                        "rank {rank}.",
                        longest=longest,
                        more=len(seqs[longest]),
                        rank=rank,
                        fewer=len(seq),
                        next=len(seq) + 1,
                        call=_describe(extra),
                        where=run.where(_line(extra)),
                    ),
                ),
                rank=longest,
                line=_line(extra),
            )
    n = len(seqs[longest])
    return passed(
        msg(
            "hang.same_ok",
            "All {world} ranks made the same {n} collectives in the same order (DDP's gradient "
            "all-reduces included; inside Join, a rank that ran out of batches shadowed them).",
            world=len(run.ranks),
            n=n,
        )
    )


def _training_passes(r: RankView) -> list[Iteration]:
    return sorted((e for e in r.typed(Iteration) if e.steps > 0), key=lambda e: e.id)


def _untrained(run: RunView, epochs: int, size: int) -> int:
    """How many times, over all epochs, a sample went through no backward pass of a DDP model on
    any rank (0 when the samples the DDP models trained on were not recorded in full)."""
    rows = [r.first_typed(Consumed) for r in run.ranks]
    trained = [h for c in rows if c is not None for batch in c.batches for h in batch]
    if not trained or any(
        c is not None and sum(map(len, c.batches)) >= MAX_CONSUMED_ROWS for c in rows
    ):
        return 0
    counts = Counter(trained)
    never = max(0, size - len(counts)) * epochs
    return never + sum(max(0, epochs - n) for n in counts.values())


def _size(e: Iteration) -> int:
    return (e.dataset_len if e.mapped else e.loader_len) or 0


def _one_dataset(its: list[Iteration]) -> tuple[int, list[int], int, list[int]]:
    """(size, indices no rank trained on, repeats, indices trained on more than once) of one
    epoch's passes over the same dataset: an index names the same sample on every rank."""
    seen: Counter[int] = Counter()
    for e in its:
        seen.update(e.indices)
    size = max((_size(e) for e in its), default=0)
    missing = [i for i in range(size) if i not in seen]
    repeated = sum(c - 1 for c in seen.values() if c > 1)
    return size, missing, repeated, sorted(i for i, c in seen.items() if c > 1)


def _own_datasets(its: list[Iteration]) -> bool:
    """Each rank iterated a dataset of its own (e.g. its slice of the data, built on that rank):
    the same index names other samples on other ranks."""
    prints = [e.dataset for e in its]
    return None not in prints and len(set(prints)) == len(prints) > 1


def _per_rank_data(its: list[Iteration]) -> tuple[int, list[int], int, list[int]]:
    """The same for passes over each rank's own dataset: indices are judged within each rank
    (its own samples left out or repeated), and the samples themselves across ranks (by their
    content: equal rows on two ranks are one sample trained twice)."""
    size, missing, repeated, twice = 0, [], 0, []
    for e in its:
        own = _size(e)
        size += own
        seen = Counter(e.indices)
        missing += [i for i in range(own) if i not in seen]
        repeated += sum(c - 1 for c in seen.values() if c > 1)
        twice += sorted(i for i, c in seen.items() if c > 1)
    for i, a in enumerate(its):
        for b in its[i + 1 :]:
            repeated += shared_samples(a.samples, b.samples)
    return size, missing, repeated, twice


@check(
    "hang.every_sample",
    title="Every sample is trained on once per epoch",
    hint="Do not make the shards equal by silently leaving samples out: keep every sample (train "
    "inside `with Join([model]):` so that uneven shards do not hang), or say that you drop the "
    "short end with drop_last=True (on the DistributedSampler or the DataLoader).",
)
def every_sample(run: RunView, params: dict[str, Any]) -> Outcome:
    missing_run = run.not_reached(msg("hang.every_epoch", "every epoch had run"))
    if missing_run is not None:
        return missing_run
    passes = {r.rank: _training_passes(r) for r in run.ranks}
    epochs = min((len(p) for p in passes.values()), default=0)
    if epochs == 0:
        return skipped(
            msg(
                "hang.no_loader",
                "Not judged: no DataLoader or DistributedSampler handed out the training data on "
                "every rank.",
            )
        )
    explicit = any(e.drop_last for p in passes.values() for e in p) or any(
        r.typed(LoaderDropLast) for r in run.ranks
    )
    dropped_total = 0
    size = 0
    for epoch in range(epochs):
        its = [p[epoch] for p in passes.values()]
        if any(e.count > len(e.indices) for e in its):
            return skipped(msg("hang.too_many", "Not judged: the epochs are too long to follow."))
        if _own_datasets(its):
            size, missing, repeated, twice = _per_rank_data(its)
        else:
            size, missing, repeated, twice = _one_dataset(its)
        if not size:
            return skipped(msg("hang.no_size", "Not judged: the dataset's length is unknown."))
        if missing and not explicit:
            return failed(
                msg(
                    "hang.samples_missing",
                    "In epoch {epoch}, no rank trained on {count} of the {size} samples "
                    "(indices {which}), and nothing asked for a drop_last: the shards were made "
                    "equal by leaving data out. Keep every sample and handle the uneven end with "
                    "Join, or say drop_last=True.",
                    epoch=epoch,
                    count=len(missing),
                    size=size,
                    which=index_ranges(missing),
                )
            )
        if repeated > len(run.ranks) - 1:
            return failed(
                msg(
                    "hang.samples_repeated",
                    "In epoch {epoch}, the ranks trained {repeated} times on samples another "
                    "rank or batch had already used (indices {which}): more than the {pad} "
                    "repeats a DistributedSampler pads with. Give each rank its own samples.",
                    epoch=epoch,
                    repeated=repeated,
                    which=index_ranges(twice),
                    pad=len(run.ranks) - 1,
                )
            )
        dropped_total += len(missing)
    skipped_rows = _untrained(run, epochs, size)
    if skipped_rows and not explicit:
        return failed(
            msg(
                "hang.samples_skipped",
                "The loaders handed out the samples, but over the {epochs} epochs the training "
                "steps left out {count} of them (counted once per epoch), with no drop_last: a "
                "loop that stops before the end of its loader drops data silently. Keep every "
                "batch and handle the uneven end with Join, or say drop_last=True.",
                epochs=epochs,
                count=skipped_rows,
            )
        )
    if dropped_total:
        return passed(
            msg(
                "hang.every_sample_dropped",
                "In each of the {epochs} epochs the ranks together trained on the {size} samples "
                "but the few that drop_last=True asked to drop ({dropped} over all epochs).",
                epochs=epochs,
                size=size,
                dropped=dropped_total,
            )
        )
    return passed(
        msg(
            "hang.every_sample_ok",
            "In each of the {epochs} epochs the ranks together trained on every one of the {size} "
            "samples.",
            epochs=epochs,
            size=size,
        )
    )


@check(
    "hang.pg_timeout",
    title="The process group has a timeout of its own",
    hint="Pass `timeout=timedelta(minutes=2)` (from datetime) to `dist.init_process_group`: a "
    "collective that one rank never reaches then fails with an error and a traceback on every "
    "rank, instead of hanging for torch's default 30 minutes.",
)
def pg_timeout(run: RunView, params: dict[str, Any]) -> Outcome:
    limit = float(params.get("max_seconds", DEFAULT_MAX_TIMEOUT_S))
    found = [(r.rank, r.first_typed(PgTimeout)) for r in run.ranks]
    asked = [(rank, e) for rank, e in found if e is not None]
    if not asked:
        return skipped(msg("hang.no_init", "Not judged: no rank called init_process_group."))
    for rank, e in asked:
        if e.given is not None:
            return failed(
                msg(
                    "hang.timeout_type",
                    "Rank {rank} passed a {given} as init_process_group's timeout {where}: it "
                    "takes a datetime.timedelta.",
                    rank=rank,
                    given=e.given,
                    where=run.where(e.line),
                ),
                rank=rank,
                line=e.line,
            )
        if e.seconds is None:
            return failed(
                msg(
                    "hang.no_timeout",
                    "Rank {rank} joined the process group {where} without a timeout: a collective "
                    "that one rank never reaches would keep the others waiting for torch's "
                    "default (30 minutes on gloo, 10 on NCCL) before anything says where.",
                    rank=rank,
                    where=run.where(e.line),
                ),
                rank=rank,
                line=e.line,
            )
        if e.seconds > limit:
            return failed(
                msg(
                    "hang.timeout_long",
                    "Rank {rank} joined the process group {where} with a timeout of {seconds:g} s: "
                    "a hang would last that long. Keep it at {limit:g} s or less.",
                    rank=rank,
                    where=run.where(e.line),
                    seconds=e.seconds,
                    limit=limit,
                ),
                rank=rank,
                line=e.line,
            )
    rank, first = asked[0]
    return passed(
        msg(
            "hang.timeout_ok",
            "Every rank joined the process group with a timeout of {seconds:g} s {where}: a "
            "collective that one rank never reaches fails after that, with a traceback, instead of "
            "hanging.",
            seconds=max(e.seconds or 0.0 for _, e in asked),
            where=run.where(first.line),
        )
    )
