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

PICTURE_MAX_INDICES = 4096


def training_epochs(run: RunView) -> dict[int, list[dict[str, Any]]]:
    """Per rank, the iterations during which optimizer steps were taken, in order (= epochs)."""
    return {
        r.rank: [
            e
            for e in r.of("iteration")
            if e.get("steps", 0) > 0 and e.get("attempt", 0) == _last_attempt(r)
        ]
        for r in run.ranks
    }


def _last_attempt(rank: Any) -> int:
    return max((e.get("attempt", 0) for e in rank.events), default=0)


def sampler_artifact(run: RunView) -> dict[str, Any]:
    """Indices per rank per epoch, for a picture of who saw what."""
    epochs = training_epochs(run)
    n = max((len(v) for v in epochs.values()), default=0)
    dataset_len = next((e.get("dataset_len") for v in epochs.values() for e in v), None)
    out = []
    for i in range(n):
        ranks = {}
        for rank, its in sorted(epochs.items()):
            if i < len(its):
                ranks[str(rank)] = {
                    "indices": its[i]["indices"][:PICTURE_MAX_INDICES],
                    "count": its[i]["count"],
                    "sampler": its[i].get("sampler"),
                    "epoch": its[i].get("epoch"),
                }
        out.append({"epoch": i, "ranks": ranks})
    return {"world_size": run.world_size, "dataset_len": dataset_len, "epochs": out}


@check(
    "sampler.shards",
    title="Each rank trains on its own shard of the data",
    hint="Give the training DataLoader sampler=DistributedSampler(dataset) (and no shuffle=True: "
    "the sampler shuffles). It hands each rank a different slice of every epoch.",
)
def sampler_shards(run: RunView, params: dict[str, Any]) -> Outcome:
    epochs = training_epochs(run)
    if not any(epochs.values()):
        if early := run.not_reached("the ranks reported the data they trained on"):
            return early
        if not run.events("step"):
            return failed("No optimizer step was taken, so no data drove training.")
        return failed(
            "No DataLoader or DistributedSampler handed out the data of the training steps, so "
            "the grader could not see that each rank trained on its own shard."
        )
    n_epochs = min(len(v) for v in epochs.values())
    for i in range(n_epochs):
        its = {rank: v[i] for rank, v in epochs.items()}
        sets = {rank: set(it["indices"]) for rank, it in its.items()}
        dataset_len = its[0].get("dataset_len")
        # What the loader could hand out: a Subset (e.g. random_split) is smaller than the
        # dataset its indices point into.
        loader_len = its[0].get("loader_len") or dataset_len
        pad = 0
        if loader_len and its[0].get("distributed") and not its[0].get("drop_last"):
            pad = math.ceil(loader_len / run.world_size) * run.world_size - loader_len
        ranks = sorted(sets)
        for a_i, a in enumerate(ranks):
            for b in ranks[a_i + 1 :]:
                if its[a].get("dataset") != its[b].get("dataset"):
                    # Each rank built its own dataset: equal indices may be other samples, so
                    # compare the samples themselves (copies of the same data still overlap).
                    shared = shared_samples(its[a].get("samples", []), its[b].get("samples", []))
                    smaller = min(len(its[a].get("samples", [])), len(its[b].get("samples", [])))
                    if shared > max(pad, 0.05 * smaller, 1):
                        return failed(
                            f"Rank {a} and rank {b} both trained on {shared} of the same samples "
                            f"in epoch {i + 1} (of the {smaller} compared): each rank built its "
                            "own dataset, but they hold the same samples.",
                            rank=b,
                            line=its[b].get("line"),
                        )
                    continue
                common = sets[a] & sets[b]
                if len(common) > pad and _different_samples(its[a], its[b], pad):
                    continue  # equal indices, other samples: each rank's own (custom) dataset
                if len(common) > pad:
                    everything = dataset_len is not None and len(common) >= dataset_len
                    what = (
                        f"all {dataset_len} samples"
                        if everything
                        else f"{len(common)} of the same samples "
                        f"(indices {index_ranges(list(common))})"
                    )
                    why = (
                        " Without a DistributedSampler every rank reads the whole dataset."
                        if not its[b].get("distributed")
                        else " Their samplers were not set up for their own rank and world size."
                    )
                    return failed(
                        f"Rank {a} and rank {b} both saw {what} in epoch {i + 1}.{why}",
                        rank=b,
                        line=its[b].get("line"),
                    )
        same_data = len({it.get("dataset") for it in its.values()}) == 1
        if loader_len and same_data:
            union = set().union(*sets.values())
            batch = int(its[0].get("batch_size") or 1)
            allowed = run.world_size * batch + run.world_size
            unseen = loader_len - len(union)
            complete = all(
                it["count"] == len(it["indices"]) and it.get("exhausted", False)
                for it in its.values()
            )  # a pass left early (a step cap) or indices beyond the cap: coverage unknown
            if unseen > allowed and complete:
                unseen_indices = sorted(set(range(loader_len)) - union)
                missing = (
                    ""
                    if its[0].get("mapped")
                    else f"; no rank saw indices {index_ranges(unseen_indices)}"
                )
                return failed(
                    f"In epoch {i + 1} {'the ranks together' if len(its) > 1 else 'rank 0'} "
                    f"saw only {len(union)} of the {loader_len} samples{missing}.",
                    rank=0,
                    line=its[0].get("line"),
                )
    sizes = ", ".join(f"rank {r}: {v[0]['count']}" for r, v in sorted(epochs.items()) if v)
    return passed(
        f"In each of the {n_epochs} training epochs the ranks saw disjoint shards "
        f"({sizes} samples)."
    )


@check(
    "sampler.set_epoch",
    title="The shuffle changes every epoch",
    hint="Call sampler.set_epoch(epoch) at the start of every epoch, before iterating the "
    "DataLoader: DistributedSampler seeds its shuffle with the epoch number.",
)
def sampler_set_epoch(run: RunView, params: dict[str, Any]) -> Outcome:
    epochs = training_epochs(run)
    dist_its = {r: [it for it in v if it.get("distributed")] for r, v in epochs.items()}
    if not any(dist_its.values()):
        return skipped("No DistributedSampler drove training, so there was no shuffle to renew.")
    if not any(it.get("shuffle") for v in dist_its.values() for it in v):
        return skipped(
            "The DistributedSampler does not shuffle, so set_epoch has nothing to change."
        )
    if max(len(v) for v in dist_its.values()) < 2:
        return skipped("Training ran for a single epoch, so there was no next shuffle to check.")
    for rank, its in sorted(dist_its.items()):
        # Passes over the same data, in order (a fresh sampler every epoch is the same stream).
        by_sampler: dict[Any, list[dict[str, Any]]] = {}
        for it in its:
            by_sampler.setdefault((it.get("dataset"), it.get("dataset_len")), []).append(it)
        for same_sampler in by_sampler.values():
            repeat = _repeated_epoch(same_sampler)
            if repeat is None:
                continue
            n, cur, same = repeat
            start = f" (starting {', '.join(map(str, cur['indices'][:5]))}, ...)" if same else ""
            return failed(
                f"Rank {rank} trained on the same shuffle in epochs {n - 1} and {n}{start}: "
                f"its sampler was at epoch {cur.get('epoch')} both times.",
                rank=rank,
                line=cur.get("line"),
            )
    n = max(len(v) for v in dist_its.values())
    return passed(f"Each of the {n} training epochs used a new shuffle on every rank.")


def _repeated_epoch(its: list[dict[str, Any]]) -> tuple[int, dict[str, Any], bool] | None:
    """(1-based epoch, iteration, same order) of the first pass that repeated the one before it:
    the same order, or the same sampler still at the same epoch number."""
    for n, (prev, cur) in enumerate(itertools.pairwise(its), start=2):
        if not cur.get("shuffle"):
            continue
        same_order = prev["indices"] == cur["indices"] and prev["count"] == cur["count"]
        same_sampler = prev.get("sampler_id") == cur.get("sampler_id")
        if same_order or (same_sampler and prev.get("epoch") == cur.get("epoch")):
            return n, cur, same_order
    return None


def _different_samples(a: dict[str, Any], b: dict[str, Any], pad: int) -> bool:
    """Both ranks' batches were seen and hardly any sample of one is among the other's."""
    if str(a.get("dataset", "")).startswith("t:"):
        return False  # the same tensors on both ranks: equal indices are equal samples
    sa, sb = a.get("samples") or [], b.get("samples") or []
    if len(sa) < 8 or len(sb) < 8:
        return False
    # Two passes over the same data share about len(sa) * len(sb) / n samples even when only
    # a part of each was recorded; each rank's own shard shares none.
    n = a.get("dataset_len") or max(len(sa), len(sb))
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
