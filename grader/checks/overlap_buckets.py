"""Checks of `data-vs-model-parallelism/overlap-buckets` on the buckets themselves: how many,
how large, each sent as one all-reduce, in which order on every rank, and every gradient reduced
exactly once (see
`grader.checks.overlap` for the module's other checks and `overlap_model` for the arithmetic).
"""

from __future__ import annotations

from typing import Any

from grader.checks import overlap_model as om
from grader.checks.base import Outcome, RunView, check, failed, passed
from grader.checks.overlap import _cap, _layout, _line, _names, _observed
from grader.events import CollectiveCall, OverlapParams, OverlapStep
from grader.i18n import msg


def _sizes(sizes: list[int]) -> str:
    return ", ".join(f"{s:,}" for s in sizes)


def _across_ranks(run: RunView) -> Outcome | None:
    """The gradient all-reduces of each followed step, compared with rank 0's, call by call (read
    from the collective calls, recorded before each runs: a rank left waiting still shows)."""
    # Every step the hook follows, reached by the optimizer or not (a rank stopped in it).
    followed = om.FOLLOWED_STEPS
    per: dict[int, dict[int, list[CollectiveCall]]] = {}
    for rank, e in run.typed(CollectiveCall):
        if e.op == "all_reduce" and e.step < followed and (e.numel or 0) > 1:
            per.setdefault(rank, {}).setdefault(e.step, []).append(e)
    ref = per.get(0, {})
    for rank in sorted(per):
        for step, calls in sorted(per[rank].items()):
            mine = ref.get(step, [])
            for b, (a, c) in enumerate(zip(mine, calls, strict=False)):
                if a.numel != c.numel:
                    return failed(
                        msg(
                            "overlap.ranks_differ",
                            "At step {n}, bucket {bucket} differs between the ranks: rank 0 "
                            "all-reduced {ref} values {ref_where}, rank {rank} {got} values "
                            "{where}. Every rank must fill the same buckets, in the same order, "
                            "with a slot (zeros if need be) for every parameter.",
                            n=step + 1,
                            bucket=b + 1,
                            ref=a.numel,
                            ref_where=run.where(a.line),
                            rank=rank,
                            got=c.numel,
                            where=run.where(c.line),
                        ),
                        rank=rank,
                        line=c.line,
                    )
            if len(mine) != len(calls):
                return failed(
                    msg(
                        "overlap.ranks_count",
                        "At step {n}, rank 0 made {ref} gradient all-reduces and rank {rank} "
                        "{got}: bucket {bucket} had no partner on one of them.",
                        n=step + 1,
                        ref=len(mine),
                        rank=rank,
                        got=len(calls),
                        bucket=min(len(mine), len(calls)) + 1,
                    ),
                    rank=rank,
                    line=(calls or mine)[-1].line,
                )
    return None


def _judge_step(
    run: RunView,
    plist: OverlapParams,
    layouts: list[om.Layout],
    rank: int,
    e: OverlapStep,
    cap: int,
) -> Outcome | None:
    matches = [(layout, om.match(e, layout)) for layout in layouts]
    good = [(layout, m) for layout, m in matches if m.bad_bucket is None]
    calls = om.grad_calls(e)
    if not good:
        layout, m = matches[0]
        b = m.bad_bucket or 0
        consumed = sum(len(g) for g in m.groups)
        line = _line(e, calls[min(consumed, len(calls) - 1)]) if calls else e.line
        want = layout.sizes[b] if b < len(layout.sizes) else 0
        got_sizes = [int(e.calls[k]["bytes"]) for k in calls]
        return failed(
            msg(
                "overlap.wrong_buckets",
                "At step {n}, rank {rank}'s bucket {bucket} {where} all-reduced {got:,} bytes "
                "where {want:,} were due: filling buckets of at most {cap:,} bytes in the order "
                "the gradients become ready gives {count} buckets of {sizes} bytes (bucket "
                "{bucket}: {names}); yours were {yours} bytes.",
                n=e.n,
                rank=rank,
                bucket=b + 1,
                where=run.where(line),
                got=m.got,
                want=want,
                cap=cap,
                count=len(layout.sizes),
                sizes=_sizes(layout.sizes),
                names=_names(plist, layout.buckets[b]) if b < len(layout.buckets) else "-",
                yours=_sizes(got_sizes),
            ),
            rank=rank,
            line=line,
        )
    layout, m = good[0]
    where = om.positions(e)
    for b, group in enumerate(m.groups):
        first, last = where["issued"][group[0]], where["issued"][group[-1]]
        between = [i for i, p in where["ready"].items() if first < p < last]
        # What both messages about a bucket sent in pieces say of it.
        said = {
            "n": e.n,
            "rank": rank,
            "bucket": b + 1,
            "names": _names(plist, layout.buckets[b]),
            "bytes": layout.sizes[b],
            "pieces": len(group),
            "where": run.where(_line(e, group[0])),
        }
        if len(group) > 1 and not between:
            return failed(
                msg(
                    "overlap.per_tensor",
                    "At step {n}, rank {rank} sent bucket {bucket} ({names}, {bytes:,} bytes) as "
                    "{pieces} all-reduces, the first {where}, one per tensor: a bucket exists to "
                    "pay an all-reduce's start-up latency once for all its gradients, as DDP "
                    "does. Flatten the bucket's gradients into one tensor (`torch.cat` of each "
                    "`reshape(-1)`) and all-reduce that tensor once.",
                    **said,
                ),
                rank=rank,
                line=_line(e, group[0]),
            )
        if between:
            return failed(
                msg(
                    "overlap.piecemeal",
                    "At step {n}, rank {rank} sent bucket {bucket} ({names}, {bytes:,} bytes) "
                    "as {pieces} all-reduces issued at different moments of the backward pass, "
                    "the first {where}: one all-reduce per parameter pays the latency {pieces} "
                    "times. Gather the bucket's gradients and all-reduce them together once the "
                    "last one is ready.",
                    **said,
                ),
                rank=rank,
                line=_line(e, group[0]),
            )
        early = [i for i in layout.buckets[b] if where["ready"].get(i, -1) > first]
        if early:
            return failed(
                msg(
                    "overlap.too_early",
                    "At step {n}, rank {rank} all-reduced bucket {bucket} {where} before the "
                    "gradient of {param} was ready: the bucket sent a gradient that backward had "
                    "not computed yet. Is a hook registered twice, or a bucket counted wrong?",
                    n=e.n,
                    rank=rank,
                    bucket=b + 1,
                    where=run.where(_line(e, group[0])),
                    param=plist.names[early[0]],
                ),
                rank=rank,
                line=_line(e, group[0]),
            )
    return None


@check(
    "overlap.buckets",
    title="Gradients go out in buckets capped in bytes, in the same order on every rank",
    hint="Walk the parameters in the order their gradients become ready (the reverse of the "
    "forward), start a new bucket when the next gradient would take it over the cap, and send "
    "each bucket as one all-reduce of its flattened gradients once all of them are ready.",
)
def buckets(run: RunView, params: dict[str, Any]) -> Outcome:
    seen = _observed(run)
    if isinstance(seen, Outcome):
        return seen
    plist, steps = seen
    cap = _cap(params)
    differ = _across_ranks(run)
    if differ is not None:
        return differ
    for rank in sorted(steps):
        _, layouts = _layout(plist, steps[rank], cap)
        for e in steps[rank]:
            found = _judge_step(run, plist, layouts, rank, e, cap)
            if found is not None:
                return found
    layout, _ = _layout(plist, steps[min(steps)], cap)
    return passed(
        msg(
            "overlap.buckets_ok",
            "Every rank sent its gradients in {count} buckets of {sizes} bytes (cap {cap:,} "
            "bytes), in the same order, in each step followed.",
            count=len(layout.sizes),
            sizes=_sizes(layout.sizes),
            cap=cap,
        )
    )


@check(
    "overlap.once",
    title="Every gradient is all-reduced exactly once per step",
    hint="Each parameter has exactly one slot in one bucket; a parameter without a gradient in "
    "this step still sends zeros in its slot, so that every rank sends the same bytes.",
)
def once(run: RunView, params: dict[str, Any]) -> Outcome:
    seen = _observed(run)
    if isinstance(seen, Outcome):
        return seen
    plist, steps = seen
    cap = _cap(params)
    want = sum(om.param_bytes(plist))
    for rank in sorted(steps):
        layout, _ = _layout(plist, steps[rank], cap)
        for e in steps[rank]:
            calls = om.grad_calls(e)
            total = sum(int(e.calls[k]["bytes"]) for k in calls)
            if total == want:
                continue
            m = om.match(e, layout)
            b = min(m.bad_bucket if m.bad_bucket is not None else 0, len(layout.sizes) - 1)
            line = _line(e, calls[-1]) if calls else e.line
            facts = {
                "n": e.n,
                "rank": rank,
                "total": total,
                "want": want,
                "bucket": b + 1,
                "names": _names(plist, layout.buckets[b]),
                "where": run.where(line),
            }
            if total > want:
                text = msg(
                    "overlap.twice",
                    "At step {n}, rank {rank}'s gradient all-reduces sent {total:,} bytes, but "
                    "the gradients hold {want:,}: {extra:,} bytes went out twice, from bucket "
                    "{bucket} ({names}) on, last {where}.",
                    extra=total - want,
                    **facts,
                )
            else:
                text = msg(
                    "overlap.missed",
                    "At step {n}, rank {rank}'s gradient all-reduces sent {total:,} bytes, but "
                    "the gradients hold {want:,}: {missing:,} bytes were never all-reduced, in "
                    "bucket {bucket} ({names}). A parameter without a gradient this step must "
                    "still send zeros.",
                    missing=want - total,
                    **facts,
                )
            return failed(text, rank=rank, line=line)
    return passed(
        msg(
            "overlap.once_ok",
            "In each step followed, every rank all-reduced each of the {bytes:,} bytes of "
            "gradients exactly once.",
            bytes=want,
        )
    )
