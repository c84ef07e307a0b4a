"""Every replayed step is judged (issue 29): ddp.grad_average and accum.grad_mean over several
Replay events (one per sampled window), a zero gradient as a warning, and the new messages in
Turkish and Portuguese with no English left."""

from __future__ import annotations

from typing import Any

import pytest

from grader.checks.base import Outcome, RunView
from grader.i18n import TRANSLATED_LOCALES
from tests.grader.test_checks import _replay, end, ev, judge, run_of
from tests.grader.test_checks_ddp import _ids
from tests.grader.translated import english_left, rendered


def window(step: int, **kw: Any) -> dict[str, Any]:
    """A replayed window at 2 ranks, right unless `kw` says otherwise."""
    right = {
        "step": step,
        "loss_weights": {"0": [1.0], "1": [1.0]},
        "mean_status": "ok",
        "micro_total": 2,
        "loss_weight": 2.0,
        "mean_cosine": 1.0,
        "norm_mean": 1.0,
        "norm_stepped": 1.0,
    }
    return _replay(**{**right, **kw})


def replayed(*windows: dict[str, Any]) -> RunView:
    ddp = ev("ddp_init", module="Net", params=10)
    step = ev("step", opt=0, n=1, digest="a", sums=[], line=47)
    return run_of(
        [ev("start"), ddp, step, *windows, end()],
        [ev("start"), ddp, step, end()],
    )


def test_every_replayed_step_passes_and_is_named() -> None:
    run = replayed(window(1), window(2), window(4))
    out = judge("ddp.grad_average", run)
    assert out.status == "pass" and "steps 1, 2, 4" in out.message
    mean = judge("accum.grad_mean", run)
    assert mean.status == "pass" and "steps 1, 2, 4" in mean.message


def test_a_later_step_carrying_earlier_gradients_fails_both_checks() -> None:
    carried = window(2, rel_error=0.6, ratio=1.6, norm_actual=1.6, carried=True)
    carried["mean_rel_error"], carried["mean_ratio"] = 0.6, 1.6
    carried["mean_cosine"] = 0.9
    run = replayed(window(1), carried)
    out = judge("ddp.grad_average", run)
    assert out.status == "fail" and out.rank == 0 and out.line == 47
    assert "At optimizer step 2" in out.message
    assert "zero_grad()" in out.message
    mean = judge("accum.grad_mean", run)
    assert mean.status == "fail" and "step 2" in mean.message and "zero_grad()" in mean.message


def test_a_wrong_scale_is_named_by_its_factor() -> None:
    run = replayed(window(1, mean_rel_error=2.0, mean_ratio=3.0, norm_stepped=3.0))
    assert "3× too large" in judge("accum.grad_mean", run).message
    odd = replayed(window(1, mean_rel_error=0.5, mean_ratio=1.5, norm_stepped=1.5))
    assert "1.5× the mean" in judge("accum.grad_mean", odd).message


def test_a_zero_gradient_warns_and_the_later_steps_are_judged() -> None:
    zero = window(1, status="zero_gradient", norm_actual=0.0)
    out = judge("ddp.grad_average", replayed(zero, window(2)))
    assert out.status == "pass" and out.message.startswith("Warning: in step 1")
    assert "steps 2" in out.message
    bad = judge("ddp.grad_average", replayed(zero, window(2, rel_error=0.5, ratio=2.0)))
    assert bad.status == "fail" and bad.message.startswith("Warning: in step 1")


def test_only_zero_gradients_are_not_judged_never_failed() -> None:
    zero = [window(n, status="zero_gradient", norm_actual=0.0) for n in (1, 2)]
    out = judge("ddp.grad_average", replayed(*zero))
    assert out.status == "skip" and "not judged" in out.message and "(1, 2)" in out.message


def outcomes() -> dict[str, tuple[str, Outcome]]:
    zero = window(1, status="zero_gradient", norm_actual=0.0)
    carried = window(2, rel_error=0.6, ratio=1.6, carried=True, mean_rel_error=0.6)
    off = window(2, rel_error=0.3, ratio=1.3, worst_param="w", mean_rel_error=0.3)
    scaled = window(1, mean_rel_error=0.5, mean_ratio=1.5)
    return {
        "ddp.averaged_steps": (
            "ddp.grad_average",
            judge("ddp.grad_average", replayed(window(1), window(2))),
        ),
        "ddp.later_step_off": (
            "ddp.grad_average",
            judge("ddp.grad_average", replayed(window(1), off)),
        ),
        "ddp.why_carried": (
            "ddp.grad_average",
            judge("ddp.grad_average", replayed(window(1), carried)),
        ),
        "ddp.zero_gradient_warning": (
            "ddp.grad_average",
            judge("ddp.grad_average", replayed(zero, window(2))),
        ),
        "accum.mean_ok_steps": (
            "accum.grad_mean",
            judge("accum.grad_mean", replayed(window(1), window(2))),
        ),
        "accum.later_step_not_mean": (
            "accum.grad_mean",
            judge("accum.grad_mean", replayed(window(1), off)),
        ),
        "accum.why_carried": (
            "accum.grad_mean",
            judge("accum.grad_mean", replayed(window(1), carried)),
        ),
        "accum.why_scaled": ("accum.grad_mean", judge("accum.grad_mean", replayed(scaled))),
    }


OUTCOMES = outcomes()


@pytest.mark.parametrize("name", sorted(OUTCOMES))
@pytest.mark.parametrize("locale", TRANSLATED_LOCALES)
def test_the_new_messages_render_with_no_english_left(name: str, locale: str) -> None:
    check_id, outcome = OUTCOMES[name]
    assert name in _ids(outcome.message), (name, str(outcome.message))
    text = rendered(check_id, outcome, locale)
    assert text != str(outcome.message) and "{" not in text
    assert not english_left(text), text


def test_averaging_by_hand_with_gradients_carried_into_the_next_step_fails() -> None:
    from tests.grader.exercises.test_exercise_checks import coll, grads
    from tests.grader.exercises.test_exercise_checks import run_of as hand_run

    l0, l1, mean = [[1.0, 2.0], [3.0]], [[3.0, 4.0], [5.0]], [[2.0, 3.0], [4.0]]
    cleared = {"kind": "hand_carry", "carried": False, "line": 33}
    carried = {"kind": "hand_carry", "carried": True, "line": 33}
    ok = hand_run({0: [coll(), grads(l0, mean), cleared], 1: [coll(), grads(l1, mean), cleared]})
    assert judge("allreduce.grad_average", ok).status == "pass"
    bad = hand_run({0: [coll(), grads(l0, mean), cleared], 1: [coll(), grads(l1, mean), carried]})
    out = judge("allreduce.grad_average", bad)
    assert out.status == "fail" and out.rank == 1 and out.line == 33
    assert "still there when the next backward pass began" in out.message
    for locale in TRANSLATED_LOCALES:
        text = rendered("allreduce.grad_average", out, locale)
        assert text != str(out.message) and not english_left(text), text
