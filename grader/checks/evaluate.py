"""Distributed evaluation: every rank evaluates its own shard, rank 0 alone reports one line
`<metric>=<value>`, and that value equals the one-process run's over the whole dataset exactly
(the run at world size 1 of the same program is the reference)."""

from __future__ import annotations

import re
from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, skipped
from grader.events import EvalRows
from grader.i18n import Message, msg


def _metric(params: dict[str, Any]) -> str:
    return str(params.get("metric", "accuracy"))


def reports(output: str, metric: str) -> list[str]:
    """The values of every `<metric>=<value>` line a rank printed."""
    pattern = re.compile(rf"^{re.escape(metric)}=(\S+)\s*$")
    return [m.group(1) for line in output.splitlines() if (m := pattern.match(line.strip()))]


def _rows(run: RunView) -> dict[int, list[str]]:
    return {rank: list(e.rows) for rank, e in run.typed(EvalRows)}


def _reported() -> Message:
    return msg("evaluate.reached_report", "rank 0 reported")


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
        ended = msg("evaluate.reached_end", "the evaluation ended")
        return run.not_reached(ended) or failed(
            msg("evaluate.no_report", "A rank reported no evaluation.")
        )
    empty = [r for r, hashes in sorted(rows.items()) if not hashes]
    if empty:
        if len(empty) == 1:
            text = msg(
                "evaluate.no_samples_one",
                "Rank {rank} evaluated no samples with gradients off (under torch.no_grad() or "
                "torch.inference_mode()).",
                rank=empty[0],
            )
        else:
            text = msg(
                "evaluate.no_samples_many",
                "Ranks {first} and {last} evaluated no samples with gradients off (under "
                "torch.no_grad() or torch.inference_mode()).",
                first=", ".join(map(str, empty[:-1])),
                last=empty[-1],
            )
        return failed(text, rank=empty[0])
    union = set().union(*(set(h) for h in rows.values()))
    extra = sum(len(set(h)) for h in rows.values()) - len(union)
    # A DistributedSampler pads with at most world_size - 1 repeated samples.
    if run.world_size > 1 and extra >= run.world_size:
        sizes = ", ".join(f"rank {r}: {len(set(h))}" for r, h in sorted(rows.items()))
        return failed(
            msg(
                "evaluate.whole_dataset",
                "The ranks evaluated {distinct} distinct samples but {extra} of them more than "
                "once ({sizes} samples): every rank went through (nearly) the whole dataset "
                "instead of its own shard.",
                distinct=len(union),
                extra=extra,
                sizes=sizes,
            ),
            rank=1,
        )
    reference = _reference(run)
    if reference is not None and reference is not run:
        whole = set().union(*(set(h) for h in _rows(reference).values()))
        missing = len(whole - union)
        if missing:
            return failed(
                msg(
                    "evaluate.not_covered",
                    "{missing} of the {whole} samples that one process evaluates were evaluated "
                    "by no rank: the shards must cover the whole dataset (no drop_last).",
                    missing=missing,
                    whole=len(whole),
                )
            )
    sizes = ", ".join(str(len(set(h))) for _, h in sorted(rows.items()))
    padding = msg("evaluate.padding", ", {extra} repeated as padding", extra=extra) if extra else ""
    return passed(
        msg(
            "evaluate.shards_ok",
            "The ranks evaluated {sizes} samples ({distinct} distinct{padding}).",
            sizes=sizes,
            distinct=len(union),
            padding=padding,
        )
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
        if len(others) == 1:
            text = msg(
                "evaluate.also_printed_one",
                "Rank {rank} also printed a `{metric}=` line; only rank 0 reports.",
                rank=others[0],
                metric=metric,
            )
        else:
            text = msg(
                "evaluate.also_printed_many",
                "Ranks {first} and {last} also printed a `{metric}=` line; only rank 0 reports.",
                first=", ".join(map(str, others[:-1])),
                last=others[-1],
                metric=metric,
            )
        return failed(text, rank=others[0])
    rank0 = run.rank(0)
    values = reports(rank0.output, metric) if rank0 else []
    if len(values) != 1:
        if not values and (early := run.not_reached(_reported())):
            return early
        return failed(
            msg(
                "evaluate.report_lines",
                "Rank 0 printed {n} lines `{metric}=<value>`; it must print exactly one.",
                n=len(values),
                metric=metric,
            ),
            rank=0,
        )
    return passed(
        msg(
            "evaluate.reported_alone",
            "Rank 0 alone reported `{metric}={value}`.",
            metric=metric,
            value=values[0],
        )
    )


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
        return run.not_reached(_reported()) or skipped(
            msg(
                "evaluate.no_single_report",
                "Not judged: rank 0 did not print exactly one `{metric}=` line, so there is no "
                "value to compare.",
                metric=metric,
            )
        )
    try:
        value = float(values[0])
    except ValueError:
        return failed(
            msg(
                "evaluate.not_a_number",
                "Rank 0 reported `{metric}={value}`, which is not a number.",
                metric=metric,
                value=values[0],
            ),
            rank=0,
        )
    if run.world_size == 1:
        return passed(
            msg(
                "evaluate.reference",
                "With one process, {metric}={value} is the reference.",
                metric=metric,
                value=values[0],
            )
        )
    reference = _reference(run)
    ref_rank = reference.rank(0) if reference else None
    ref_values = reports(ref_rank.output, metric) if ref_rank else []
    if len(ref_values) != 1:
        return skipped(
            msg(
                "evaluate.no_reference",
                "Not judged: there is no one-process run that reported the metric to compare with.",
            )
        )
    expected = float(ref_values[0])
    if value != expected:
        return failed(
            msg(
                "evaluate.metric_differs",
                "With {ranks} ranks, rank 0 reported {metric}={value}, but the same program in "
                "one process, over the whole dataset, reports {metric}={expected}.",
                ranks=run.world_size,
                metric=metric,
                value=values[0],
                expected=ref_values[0],
            ),
            rank=0,
        )
    return passed(
        msg(
            "evaluate.metric_ok",
            "Rank 0 reported {metric}={value}, exactly what one process reports over the whole "
            "dataset.",
            metric=metric,
            value=values[0],
        )
    )
