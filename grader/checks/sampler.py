"""Data sharding: judged on the loader iterations that actually drove training steps."""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from typing import Any

from grader.checks.base import (
    Outcome,
    RunView,
    check,
    failed,
    index_ranges,
    passed,
    skipped,
)
from grader.events import Consumed, DdpForward, Iteration, Step
from grader.i18n import Message, msg

PICTURE_MAX_INDICES = 4096


def training_epochs(run: RunView) -> dict[int, list[Iteration]]:
    """Per rank, the iterations during which optimizer steps were taken, in order (= epochs)."""
    return {
        r.rank: [e for e in r.typed(Iteration) if e.steps > 0 and e.attempt == r.last_attempt]
        for r in run.ranks
    }


def sampler_artifact(run: RunView) -> dict[str, Any]:
    """Indices per rank per epoch, for a picture of who saw what."""
    epochs = training_epochs(run)
    n = max((len(v) for v in epochs.values()), default=0)
    dataset_len = next((e.dataset_len for v in epochs.values() for e in v), None)
    out = []
    for i in range(n):
        ranks = {}
        for rank, its in sorted(epochs.items()):
            if i < len(its):
                ranks[str(rank)] = {
                    "indices": its[i].indices[:PICTURE_MAX_INDICES],
                    "count": its[i].count,
                    "sampler": its[i].sampler,
                    "epoch": its[i].epoch,
                }
        out.append({"epoch": i, "ranks": ranks})
    return {"world_size": run.world_size, "dataset_len": dataset_len, "epochs": out}


@check(
    "sampler.shards",
    title="Each rank trains on its own shard of the data",
    hint="Give the training DataLoader sampler=DistributedSampler(dataset) (and no shuffle=True: "
    "the sampler shuffles). It hands each rank a different slice of every epoch, of the same "
    "data on every rank: seed the generator of any random split the same way on every rank.",
)
def sampler_shards(run: RunView, params: dict[str, Any]) -> Outcome:
    epochs = training_epochs(run)
    if not any(epochs.values()):
        reported = msg("sampler.reached_report", "the ranks reported the data they trained on")
        if early := run.not_reached(reported):
            return early
        if not run.typed(Step):
            return failed(
                msg("sampler.no_step", "No optimizer step was taken, so no data drove training.")
            )
        if judged := _hand_made_shards(run):
            return judged
        return failed(
            msg(
                "sampler.no_loader",
                "No DataLoader or DistributedSampler handed out the data of the training steps, "
                "so the grader could not see that each rank trained on its own shard.",
            )
        )
    n_epochs = min(len(v) for v in epochs.values())
    every = msg("sampler.reached_every", "every rank reported the data it trained on")
    if n_epochs == 0 and (early := run.not_reached(every)):
        return early
    for i in range(n_epochs):
        its = {rank: v[i] for rank, v in epochs.items()}
        sets = {rank: set(it.indices) for rank, it in its.items()}
        dataset_len = its[0].dataset_len
        # What the loader could hand out: a Subset (e.g. random_split) is smaller than the
        # dataset its indices point into.
        loader_len = its[0].loader_len or dataset_len
        pad = 0
        if loader_len and its[0].distributed and not its[0].drop_last:
            pad = math.ceil(loader_len / run.world_size) * run.world_size - loader_len
        ranks = sorted(sets)
        for a_i, a in enumerate(ranks):
            for b in ranks[a_i + 1 :]:
                if its[a].dataset != its[b].dataset:
                    # Each rank built its own dataset: equal indices may be other samples, so
                    # compare the samples themselves (copies of the same data still overlap).
                    shared = shared_samples(its[a].samples, its[b].samples)
                    smaller = min(len(its[a].samples), len(its[b].samples))
                    if shared > max(pad, 0.05 * smaller, 1):
                        return failed(
                            msg(
                                "sampler.same_samples",
                                "Rank {a} and rank {b} both trained on {shared} of the same "
                                "samples in their {n:ordinal} pass over the data (of the "
                                "{smaller} compared): each rank built its own dataset, but they "
                                "hold the same samples.",
                                a=a,
                                b=b,
                                shared=shared,
                                n=i + 1,
                                smaller=smaller,
                            ),
                            rank=b,
                            line=its[b].line,
                        )
                    continue
                common = sets[a] & sets[b]
                if len(common) > pad and _different_samples(its[a], its[b], pad):
                    continue  # equal indices, other samples: each rank's own (custom) dataset
                if len(common) > pad:
                    everything = dataset_len is not None and len(common) >= dataset_len
                    what = (
                        msg("sampler.all_samples", "all {n} samples", n=dataset_len)
                        if everything
                        else msg(
                            "sampler.some_samples",
                            "{n} of the same samples (indices {indices})",
                            n=len(common),
                            indices=index_ranges(list(common)),
                        )
                    )
                    why = _why_overlap(run, its[a], its[b], a, b)
                    return failed(
                        msg(
                            "sampler.overlap",
                            "Rank {a} and rank {b} both saw {what} in their {n:ordinal} pass "
                            "over the data. {why}",
                            a=a,
                            b=b,
                            what=what,
                            n=i + 1,
                            why=why,
                        ),
                        rank=b,
                        line=its[b].line,
                    )
        same_data = len({it.dataset for it in its.values()}) == 1
        if loader_len and same_data:
            union = set().union(*sets.values())
            batch = int(its[0].batch_size or 1)
            allowed = run.world_size * batch + run.world_size
            unseen = loader_len - len(union)
            complete = all(
                it.count == len(it.indices) and it.exhausted for it in its.values()
            )  # a pass left early (a step cap) or indices beyond the cap: coverage unknown
            if unseen > allowed and complete:
                unseen_indices = sorted(set(range(loader_len)) - union)
                missing = (
                    ""
                    if its[0].mapped
                    else msg(
                        "sampler.unseen_indices",
                        "; no rank saw indices {indices}",
                        indices=index_ranges(unseen_indices),
                    )
                )
                counts = {"n": i + 1, "seen": len(union), "total": loader_len}
                partial = (
                    msg(
                        "sampler.partial",
                        "In their {n:ordinal} pass over the data the ranks together saw only "
                        "{seen} of the {total} samples{missing}.",
                        missing=missing,
                        **counts,
                    )
                    if len(its) > 1
                    else msg(
                        "sampler.partial_one",
                        "In its {n:ordinal} pass over the data rank 0 saw only {seen} of the "
                        "{total} samples{missing}.",
                        missing=missing,
                        **counts,
                    )
                )
                return failed(
                    partial,
                    rank=0,
                    line=its[0].line,
                )
    sizes = ", ".join(f"rank {r}: {v[0].count}" for r, v in sorted(epochs.items()) if v)
    return passed(
        msg(
            "sampler.disjoint",
            "In each of the {epochs} training epochs the ranks saw disjoint shards "
            "({sizes} samples).",
            epochs=n_epochs,
            sizes=sizes,
        )
    )


def first_pass(batches: list[list[str]]) -> list[str]:
    """The samples of a rank's batches up to the first batch that repeats one it already trained
    on: its first pass over its data (its shard, when the data was split)."""
    seen: set[str] = set()
    out: list[str] = []
    for batch in batches:
        if seen.intersection(batch):
            break
        seen.update(batch)
        out.extend(batch)
    return out


def _hand_made_shards(run: RunView) -> Outcome | None:
    """No loader handed out the data (batches cut from tensors by hand): judge from the samples
    each rank's training forwards consumed, over each rank's first pass through its data."""
    views = {r.rank: r for r in run.ranks}
    consumed = {rank: _consumed_batches(r.first_typed(Consumed)) for rank, r in views.items()}
    if not all(consumed.values()):
        return None
    passes = {rank: first_pass(batches) for rank, batches in consumed.items()}
    sizes = ", ".join(f"rank {r}: {len(v)}" for r, v in sorted(passes.items()))
    ranks = sorted(passes)
    for i, a in enumerate(ranks):
        for b in ranks[i + 1 :]:
            shared = len(set(passes[a]) & set(passes[b]))
            smaller = min(len(set(passes[a])), len(set(passes[b])))
            if shared > max(1.0, 0.05 * smaller):
                forward = views[b].first_typed(DdpForward)
                return failed(
                    msg(
                        "sampler.hand_made_overlap",
                        "Rank {a} and rank {b} both trained on {shared} of the same samples in "
                        "their first pass over the data (of the {smaller} samples the smaller "
                        "pass held; judged from the batches fed to the DDP model, as no "
                        "DataLoader handed them out): nothing split the data between the ranks.",
                        a=a,
                        b=b,
                        shared=shared,
                        smaller=smaller,
                    ),
                    rank=b,
                    line=forward.line if forward else None,
                )
    if run.world_size == 1:
        return passed(msg("sampler.one_rank", "Only one rank ran; its data needed no split."))
    return passed(
        msg(
            "sampler.hand_made_disjoint",
            "No DataLoader handed out the data; judged from the batches each rank fed its DDP "
            "model, the ranks trained on disjoint samples in their first pass ({sizes} samples).",
            sizes=sizes,
        )
    )


def _consumed_batches(record: Consumed | None) -> list[list[str]]:
    return record.batches if record else []


def _why_overlap(run: RunView, it_a: Iteration, it_b: Iteration, a: int, b: int) -> Message:
    """Why two ranks' passes over the same data overlapped, from how their samplers were set up."""
    for rank, it in ((b, it_b), (a, it_a)):
        if not it.distributed:
            return msg(
                "sampler.why_no_sampler",
                "Rank {rank} used no DistributedSampler, and without one every rank reads the "
                "whole dataset.",
                rank=rank,
            )
    for rank, it in ((a, it_a), (b, it_b)):
        replicas, own = it.num_replicas, it.sampler_rank
        if replicas is not None and (replicas != run.world_size or own != rank):
            return msg(
                "sampler.why_wrong_replica",
                "Rank {rank}'s DistributedSampler was built for rank {own} of {replicas}, not "
                "for its own rank {rank} of {world_size}.",
                rank=rank,
                own=own,
                replicas=replicas,
                world_size=run.world_size,
            )
    if it_a.seed != it_b.seed:
        return msg(
            "sampler.why_seeds",
            "Their DistributedSamplers shuffled with different seeds ({seed_a} on rank {a}, "
            "{seed_b} on rank {b}), so each drew its own permutation and their slices of it "
            "overlap.",
            seed_a=it_a.seed,
            seed_b=it_b.seed,
            a=a,
            b=b,
        )
    if it_a.epoch != it_b.epoch:
        return msg(
            "sampler.why_epochs",
            "Their DistributedSamplers were at different epochs (set_epoch gave them {epoch_a} "
            "on rank {a} and {epoch_b} on rank {b}), so each sliced a different permutation.",
            epoch_a=it_a.epoch,
            epoch_b=it_b.epoch,
            a=a,
            b=b,
        )
    if it_a.subset != it_b.subset:
        return msg(
            "sampler.why_subset",
            "Their DistributedSamplers were set up correctly, but the Subset they index (e.g. "
            "from random_split) selects different samples on each rank, so different positions "
            "lead to the same samples (and other samples are never used). Seed the generator "
            "of the split so that every rank draws the same one: random_split(dataset, "
            "lengths, generator=torch.Generator().manual_seed(0)).",
        )
    return msg("sampler.why_overlap", "Their samplers handed out overlapping indices.")


@check(
    "sampler.set_epoch",
    title="The shuffle changes every epoch",
    hint="Call sampler.set_epoch(epoch) at the start of every epoch, before iterating the "
    "DataLoader: DistributedSampler seeds its shuffle with the epoch number.",
)
def sampler_set_epoch(run: RunView, params: dict[str, Any]) -> Outcome:
    epochs = training_epochs(run)
    dist_its = {r: [it for it in v if it.distributed] for r, v in epochs.items()}
    if not any(dist_its.values()):
        drove = msg("sampler.reached_sampler", "a DistributedSampler drove a training epoch")
        return run.not_reached(drove) or skipped(
            msg(
                "sampler.no_distributed_sampler",
                "No DistributedSampler drove training, so there was no shuffle to renew.",
            )
        )
    if not any(it.shuffle for v in dist_its.values() for it in v):
        return skipped(
            msg(
                "sampler.no_shuffle",
                "The DistributedSampler does not shuffle, so set_epoch has nothing to change.",
            )
        )
    if max(len(v) for v in dist_its.values()) < 2:
        second = msg("sampler.reached_second_epoch", "a second training epoch")
        return run.not_reached(second) or skipped(
            msg(
                "sampler.one_epoch",
                "Training ran for a single epoch, so there was no next shuffle to check.",
            )
        )
    for rank, its in sorted(dist_its.items()):
        # Passes over the same data, in order (a fresh sampler every epoch is the same stream).
        by_sampler: dict[tuple[str | None, int | None], list[Iteration]] = {}
        for it in its:
            by_sampler.setdefault((it.dataset, it.dataset_len), []).append(it)
        for same_sampler in by_sampler.values():
            repeat = _repeated_epoch(same_sampler)
            if repeat is None:
                continue
            n, prev, cur = repeat
            start = ", ".join(map(str, cur.indices[:5]))
            if _same_seed_and_epoch(prev, cur):
                why = msg(
                    "sampler.why_same_seed",
                    "both times its DistributedSampler shuffled with seed {seed} and epoch "
                    "{epoch} (the value set_epoch last gave it), and the same seed and epoch "
                    "give the same order",
                    seed=cur.seed,
                    epoch=cur.epoch,
                )
            else:
                why = msg("sampler.why_same_order", "the sampler handed out the same order again")
            return failed(
                msg(
                    "sampler.same_shuffle",
                    "Rank {rank} trained on the same shuffle in its {before:ordinal} and "
                    "{n:ordinal} passes over the data (starting {start}, ...): {why}.",
                    rank=rank,
                    before=n - 1,
                    n=n,
                    start=start,
                    why=why,
                ),
                rank=rank,
                line=cur.line,
            )
    n = max(len(v) for v in dist_its.values())
    return passed(
        msg(
            "sampler.new_shuffle",
            "Each of the {epochs} training epochs used a new shuffle on every rank.",
            epochs=n,
        )
    )


def _repeated_epoch(its: list[Iteration]) -> tuple[int, Iteration, Iteration] | None:
    """(1-based pass number, pass before, pass) of the first pass that repeated the one before
    it: the same order, or a shuffle drawn from the same seed and epoch (which gives the same
    order over the same data, whichever sampler object drew it)."""
    for n, (prev, cur) in enumerate(itertools.pairwise(its), start=2):
        if not cur.shuffle:
            continue
        same_order = prev.indices == cur.indices and prev.count == cur.count
        if same_order or _same_seed_and_epoch(prev, cur):
            return n, prev, cur
    return None


def _same_seed_and_epoch(a: Iteration, b: Iteration) -> bool:
    ours = (a.seed, a.epoch, a.num_replicas, a.sampler_rank)
    theirs = (b.seed, b.epoch, b.num_replicas, b.sampler_rank)
    return all(x is not None and x == y for x, y in zip(ours, theirs, strict=True))


def _different_samples(a: Iteration, b: Iteration, pad: int) -> bool:
    """Both ranks' batches were seen and hardly any sample of one is among the other's."""
    if (a.dataset or "").startswith("t:"):
        return False  # the same tensors on both ranks: equal indices are equal samples
    sa, sb = a.samples, b.samples
    if len(sa) < 8 or len(sb) < 8:
        return False
    # Two passes over the same data share about len(sa) * len(sb) / n samples even when only
    # a part of each was recorded; each rank's own shard shares none.
    n = a.dataset_len or max(len(sa), len(sb))
    return shared_samples(sa, sb) <= max(pad, 0.5 * len(sa) * len(sb) / max(n, 1))


def shared_samples(a_rows: list[list[float]], b_rows: list[list[float]]) -> int:
    """How many samples of `a_rows` have a near-identical sample in `b_rows` (per-sample
    signatures: the first few numbers of each sample as the training loop received it)."""
    if not a_rows or not b_rows:
        return 0
    width = min(len(a_rows[0]), len(b_rows[0]))
    if width == 0:
        return 0
    columns = list(zip(*(row[:width] for row in a_rows + b_rows), strict=False))
    # A small share of each column's spread and of its typical size (a constant column's
    # spread is only the jitter itself).
    tolerance = [
        0.02 * statistics.pstdev(col) + 0.002 * statistics.fmean(abs(v) for v in col) + 1e-9
        for col in columns
    ]
    ordered = sorted(row[:width] for row in b_rows)
    firsts = [row[0] for row in ordered]
    shared = 0
    for row in a_rows:
        lo = bisect.bisect_left(firsts, row[0] - tolerance[0])
        hi = bisect.bisect_right(firsts, row[0] + tolerance[0])
        if any(
            all(abs(x - y) <= t for x, y, t in zip(row, other, tolerance, strict=False))
            for other in ordered[lo:hi]
        ):
            shared += 1
    return shared
