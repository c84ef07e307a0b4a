"""Judging the replayed optimizer steps (one `Replay` event per sampled window): what
`ddp.grad_average` says about a later step, about steps whose gradient was zero, and about all
of them together."""

from __future__ import annotations

from grader.checks.base import Outcome, RunView, failed, passed
from grader.events import Replay
from grader.i18n import Message, msg

GRAD_TOLERANCE = 0.02  # relative; the bugs this catches are off by 50% or more


def zero_gradient(steps: list[int]) -> Message:
    return msg(
        "ddp.zero_gradient_not_judged",
        "Warning: in every replayed step ({steps}) the gradient of your loss was exactly zero for "
        "every parameter on every rank, so whether DDP averaged it cannot be seen: not judged. "
        "Such a loss cannot train the model: whatever the weights, it does not change. Is it "
        "computed from the model's output in a way that depends on it? For example, "
        "cross_entropy over a single output column is always 0 (use "
        "binary_cross_entropy_with_logits for one logit, or give the model one output per "
        "class).",
        steps=", ".join(map(str, steps)),
    )


def with_zero_warning(outcome: Outcome, zero: list[int]) -> Outcome:
    """The outcome of the steps that had a gradient, after a warning about those that had none."""
    if not zero:
        return outcome
    text = msg(
        "ddp.zero_gradient_warning",
        "Warning: in step {steps} the gradient of your loss was exactly zero everywhere, which "
        "shows nothing; judged on the later steps. {outcome}",
        steps=", ".join(map(str, zero)),
        outcome=outcome.message,
    )
    return Outcome(outcome.status, text, rank=outcome.rank, line=outcome.line)


def first_step_only(judged: list[Replay]) -> bool:
    """Only the first step was judged (a program of one step): its messages say "the first"."""
    return len(judged) == 1 and judged[0].step == 1


def step_list(judged: list[Replay]) -> str:
    return ", ".join(str(r.step) for r in judged)


def averaged(run: RunView, judged: list[Replay]) -> Outcome:
    world = judged[0].world_size if judged[0].world_size is not None else run.world_size
    rel = max(float(r.rel_error) for r in judged)
    if first_step_only(judged):
        return passed(
            msg(
                "ddp.averaged",
                "In the first step, every rank applied the average of the {world} ranks' "
                "gradients (replayed in one process; difference {rel:.1e}).",
                world=world,
                rel=rel,
            )
        )
    return passed(
        msg(
            "ddp.averaged_steps",
            "In each of the {n} optimizer steps replayed (steps {steps}), every rank applied the "
            "average of the {world} ranks' gradients of that step (replayed in one process; "
            "largest difference {rel:.1e}).",
            n=len(judged),
            steps=step_list(judged),
            world=world,
            rel=rel,
        )
    )


def judge_later_step(run: RunView, replay: Replay, line: int | None) -> Outcome | None:
    """A later step: its gradient after backward must be the average of the ranks' gradients of
    this step's own micro-batches, from the weights it started with."""
    rel = float(replay.rel_error)
    if rel <= GRAD_TOLERANCE:
        return None
    world = replay.world_size if replay.world_size is not None else run.world_size
    why = (
        msg(
            "ddp.why_carried",
            "the gradients of the earlier steps were still there when this step's backward began "
            "(nothing cleared them after the previous optimizer step: call "
            "optimizer.zero_grad() every step), so backward added this step's gradient to theirs",
        )
        if replay.carried
        else why_not_averaged(world, float(replay.ratio), rel, replay.worst_param)
    )
    return failed(
        msg(
            "ddp.later_step_off",
            "At optimizer step {step} rank 0's gradient after backward has norm "
            "{actual:.4g}, while the average of the ranks' gradients of that step's own "
            "micro-batches (replayed in one process from the weights it started with) has norm "
            "{expected:.4g}: {why}.",
            step=replay.step,
            actual=replay.norm_actual,
            expected=replay.norm_expected,
            why=why,
        ),
        rank=0,
        line=line,
    )


def why_not_averaged(world: int, ratio: float, rel: float, worst: str | None) -> Message:
    """Why rank 0's first-step gradient is not the ranks' average, from how far off it is."""
    if world > 1 and abs(ratio - world) < 0.05 * world:
        return msg(
            "ddp.why_summed",
            "{ratio:.2f}× too large: the gradients were summed, not averaged",
            ratio=ratio,
        )
    if world > 1 and abs(ratio * world - 1) < 0.05:
        return msg(
            "ddp.why_divided_again",
            "{ratio:.2f}× too small: they were divided by the world size ({world}) again",
            ratio=ratio,
            world=world,
        )
    return msg(
        "ddp.why_not_averaged",
        "off by {percent:.0f}% (largest difference in '{param}'): the ranks' gradients were not "
        "averaged by DDP",
        percent=rel * 100,
        param=worst,
    )
