"""Distributed evaluation: every rank evaluates its own shard, rank 0 alone reports one line
`<metric>=<value>`, and that value equals the one-process run's over the whole dataset exactly
(the run at world size 1 of the same program is the reference)."""

from __future__ import annotations

import re
from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, ranks_text, skipped


def _metric(params: dict[str, Any]) -> str:
    return str(params.get("metric", "accuracy"))


def reports(output: str, metric: str) -> list[str]:
    """The values of every `<metric>=<value>` line a rank printed."""
    pattern = re.compile(rf"^{re.escape(metric)}=(\S+)\s*$")
    return [m.group(1) for line in output.splitlines() if (m := pattern.match(line.strip()))]


def _rows(run: RunView) -> dict[int, list[str]]:
    return {rank: list(e.get("rows") or []) for rank, e in run.events("eval_rows")}


def _reference(run: RunView) -> RunView | None:
    """The program's own one-process run (world size 1), when it ran to its end."""
    return next((s for s in run.siblings if s.world_size == 1 and s.complete), None)


@check(
    "eval.shards",
    title="Every rank evaluates only its own shard",
    hint="Give the evaluation loader a DistributedSampler(dataset, shuffle=False) (or take every "
    "world_size-th sample from rank on): each rank evaluates about 1/world_size of the dataset, "
    "and together they cover all of it.",
)
def eval_shards(run: RunView, params: dict[str, Any]) -> Outcome:
    rows = _rows(run)
    if len(rows) < len(run.ranks):
        return run.not_reached("the evaluation ended") or failed("A rank reported no evaluation.")
    empty = [r for r, hashes in sorted(rows.items()) if not hashes]
    if empty:
        return failed(
            f"{ranks_text(empty).capitalize()} evaluated no samples with gradients off "
            "(under torch.no_grad() or torch.inference_mode()).",
            rank=empty[0],
        )
    union = set().union(*(set(h) for h in rows.values()))
    extra = sum(len(set(h)) for h in rows.values()) - len(union)
    # A DistributedSampler pads with at most world_size - 1 repeated samples.
    if run.world_size > 1 and extra >= run.world_size:
        sizes = ", ".join(f"rank {r}: {len(set(h))}" for r, h in sorted(rows.items()))
        return failed(
            f"The ranks evaluated {len(union)} distinct samples but {extra} of them more than once "
            f"({sizes} samples): every rank went through (nearly) the whole dataset instead of "
            "its own shard.",
            rank=1,
        )
    reference = _reference(run)
    if reference is not None and reference is not run:
        whole = set().union(*(set(h) for h in _rows(reference).values()))
        missing = len(whole - union)
        if missing:
            return failed(
                f"{missing} of the {len(whole)} samples that one process evaluates were evaluated "
                f"by no rank: the shards must cover the whole dataset (no drop_last).",
            )
    sizes = ", ".join(str(len(set(h))) for _, h in sorted(rows.items()))
    return passed(
        f"The ranks evaluated {sizes} samples ({len(union)} distinct"
        + (f", {extra} repeated as padding" if extra else "")
        + ")."
    )


@check(
    "eval.rank0_reports",
    title="Only rank 0 reports the metric, on one line",
    hint="Print the result once, from rank 0 only, as a single line `accuracy=<value>` "
    '(e.g. `print(f"accuracy={accuracy}")`), after combining every rank\'s counts.',
)
def eval_rank0_reports(run: RunView, params: dict[str, Any]) -> Outcome:
    metric = _metric(params)
    others = [r.rank for r in run.ranks if r.rank != 0 and reports(r.output, metric)]
    if others:
        return failed(
            f"{ranks_text(others).capitalize()} also printed a `{metric}=` line; only rank 0 "
            "reports.",
            rank=others[0],
        )
    rank0 = run.rank(0)
    values = reports(rank0.output, metric) if rank0 else []
    if len(values) != 1:
        if not values and (early := run.not_reached("rank 0 reported")):
            return early
        return failed(
            f"Rank 0 printed {len(values)} lines `{metric}=<value>`; it must print exactly one.",
            rank=0,
        )
    return passed(f"Rank 0 alone reported `{metric}={values[0]}`.")


@check(
    "eval.metric_exact",
    title="The reported metric equals the one-process metric over the whole dataset",
    hint="Add up each rank's number of correct predictions and of evaluated samples with "
    "all_reduce (or gather them), leaving out the samples the sampler repeated to pad the last "
    "shard, and divide only at the end: an average of the ranks' own accuracies is not the "
    "accuracy over the dataset when the shards differ in size.",
)
def eval_metric_exact(run: RunView, params: dict[str, Any]) -> Outcome:
    metric = _metric(params)
    rank0 = run.rank(0)
    values = reports(rank0.output, metric) if rank0 else []
    if len(values) != 1:
        return run.not_reached("rank 0 reported") or skipped(
            f"Not judged: rank 0 did not print exactly one `{metric}=` line (see "
            "eval.rank0_reports)."
        )
    try:
        value = float(values[0])
    except ValueError:
        return failed(f"Rank 0 reported `{metric}={values[0]}`, which is not a number.", rank=0)
    if run.world_size == 1:
        return passed(f"With one process, {metric}={values[0]} is the reference.")
    reference = _reference(run)
    ref_rank = reference.rank(0) if reference else None
    ref_values = reports(ref_rank.output, metric) if ref_rank else []
    if len(ref_values) != 1:
        return skipped(
            "Not judged: there is no one-process run that reported the metric to compare with."
        )
    expected = float(ref_values[0])
    if value != expected:
        return failed(
            f"With {run.world_size} ranks, rank 0 reported {metric}={values[0]}, but the same "
            f"program in one process, over the whole dataset, reports {metric}={ref_values[0]}.",
            rank=0,
        )
    return passed(
        f"Rank 0 reported {metric}={values[0]}, exactly what one process reports over the whole "
        "dataset."
    )
