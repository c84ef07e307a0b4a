"""The bucket arithmetic of `data-vs-model-parallelism/overlap-buckets` (no checks here).

The grader's model of what a bucketed, overlapped all-reduce does with a cap: walk the
parameters in the order their gradients become ready and start a new bucket when the next
gradient would take the current one over the cap (a single gradient larger than the cap is a
bucket of its own). The order is either the one this rank observed (its first step in which
every parameter got a gradient) or the reverse of the optimizer's (= the model's registration)
order, the static order a learner fixes before training, as DDP does at construction.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.events import OverlapParams, OverlapStep

# The optimizer steps `grader.harness.hooks.overlap` follows (its MAX_STEPS).
FOLLOWED_STEPS = 4


@dataclass(frozen=True)
class Layout:
    """One way of filling buckets: the parameter indices of each bucket, and its bytes."""

    buckets: list[list[int]]
    sizes: list[int]

    def bucket_of(self, i: int) -> int:
        return next((b for b, members in enumerate(self.buckets) if i in members), 0)


def param_bytes(params: OverlapParams) -> list[int]:
    return [n * s for n, s in zip(params.numels, params.itemsizes, strict=False)]


def fill(order: list[int], sizes: list[int], cap: int) -> Layout:
    buckets: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i in order:
        if current and total + sizes[i] > cap:
            buckets.append(current)
            current, total = [], 0
        current.append(i)
        total += sizes[i]
    if current:
        buckets.append(current)
    return Layout(buckets, [sum(sizes[i] for i in b) for b in buckets])


def ready_order(step: OverlapStep) -> list[int]:
    """The parameters in the order their gradients first became ready in this step."""
    seen: dict[int, None] = {}
    for token in step.timeline:
        if token and token[0] == "r":
            seen.setdefault(int(token[1]), None)
    return list(seen)


def layouts(params: OverlapParams, steps: list[OverlapStep], cap: int) -> list[Layout]:
    """The layouts a correct program may use: the observed ready order first, then the reverse
    of the registration order (when it differs)."""
    n = len(params.numels)
    sizes = param_bytes(params)
    static = list(reversed(range(n)))
    found = [fill(static, sizes, cap)]
    for step in steps:
        order = ready_order(step)
        if len(order) == n:
            observed = fill(order, sizes, cap)
            if observed.sizes != found[0].sizes:
                found.insert(0, observed)
            break
    return found


def grad_calls(step: OverlapStep) -> list[int]:
    """The indices of the gradient all-reduces issued before the step, in issue order."""
    stop = next((i for i, t in enumerate(step.timeline) if t and t[0] == "s"), len(step.timeline))
    return [int(t[1]) for t in step.timeline[:stop] if t and t[0] == "a"]


@dataclass(frozen=True)
class Match:
    """Calls grouped per bucket, or where that failed: the bucket and the bytes found there."""

    groups: list[list[int]]
    bad_bucket: int | None = None
    got: int = 0


def match(step: OverlapStep, layout: Layout) -> Match:
    calls = grad_calls(step)
    sizes = [int(step.calls[k].get("bytes", 0)) for k in calls]
    groups: list[list[int]] = []
    j = 0
    for b, want in enumerate(layout.sizes):
        got, group = 0, []
        while got < want and j < len(calls):
            got += sizes[j]
            group.append(calls[j])
            j += 1
        if got != want:
            return Match(groups, b, got)
        groups.append(group)
    if j < len(calls):
        return Match(groups, len(layout.sizes), sum(sizes[j:]))
    return Match(groups)


def positions(step: OverlapStep) -> dict[str, dict[int, int]]:
    """Where in the timeline: each parameter's first ready, each call's issue and first wait."""
    ready: dict[int, int] = {}
    issued: dict[int, int] = {}
    waited: dict[int, int] = {}
    for pos, token in enumerate(step.timeline):
        kind = token[0] if token else ""
        if kind == "r":
            ready.setdefault(int(token[1]), pos)
        elif kind == "a":
            issued.setdefault(int(token[1]), pos)
        elif kind == "w":
            waited.setdefault(int(token[1]), pos)
    return {"ready": ready, "issued": issued, "waited": waited}


def wait_line(step: OverlapStep, k: int) -> int | None:
    for token in step.timeline:
        if token and token[0] == "w" and int(token[1]) == k and len(token) > 2:
            return token[2] if isinstance(token[2], int) else None
    return None


def backward_end(step: OverlapStep) -> int:
    """Where the step's first backward pass returned (the step itself when none was seen)."""
    return next((i for i, t in enumerate(step.timeline) if t and t[0] == "e"), step_pos(step))


def step_pos(step: OverlapStep) -> int:
    return next((i for i, t in enumerate(step.timeline) if t and t[0] == "s"), len(step.timeline))
