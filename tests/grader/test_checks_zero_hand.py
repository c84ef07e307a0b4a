"""The zero-by-hand checks (grader/checks/zero_hand.py) on hand-made traces (no sandbox)."""

from __future__ import annotations

from typing import Any

from grader.checks.base import RankView, RunView, get_check
from tests.grader.translated import english_left, rendered

END = {"kind": "end", "status": "ok", "exit_code": 0}
FULL = 30000  # an unsharded Adam's state over the whole model
LARGEST = 8000  # the state of the model's largest parameter


def step(n: int, kept: int, diff: float = 0.0, digest: str = "d", **kw: Any) -> dict[str, Any]:
    return {
        "kind": "sharded_step",
        "n": n,
        "line": 40,
        "optimizer": "Adam",
        "lr": 0.01,
        "max_diff": diff,
        "update": 0.01,
        "param": "0.weight",
        "n_params": 10,
        "state_bytes": kept,
        "full_bytes": FULL,
        "largest_bytes": LARGEST,
        "digest": f"{digest}{n}",
        **kw,
    }


def run_of(*ranks: list[dict[str, Any]]) -> RunView:
    views = [
        RankView(rank=r, exit_code=0, events=[{"seq": i, **e} for i, e in enumerate([*evs, END])])
        for r, evs in enumerate(ranks)
    ]
    return RunView(world_size=len(views), device="cpu", ranks=views, source="")


def assert_translated(check_id: str, outcome: Any) -> None:
    for locale in ("tr", "pt-BR"):
        text = rendered(check_id, outcome, locale)
        assert not english_left(text), (locale, text)


def judge(check_id: str, run: RunView, **params: Any) -> Any:
    definition = get_check(check_id)
    assert definition is not None
    return definition.fn(run, params)


def test_sharded_state_in_sync_and_equal_to_unsharded_passes() -> None:
    run = run_of([step(1, 16000), step(2, 16000)], [step(1, 14000), step(2, 14000)])
    for check_id in ("zero.state_sharded", "zero.matches_unsharded", "zero.replicas_in_sync"):
        out = judge(check_id, run, optimizer="Adam", lr=0.01)
        assert out.status == "pass", (check_id, out.message)
        assert_translated(check_id, out)


def test_the_whole_state_on_a_rank_or_twice_over_fails() -> None:
    whole = run_of([step(1, FULL)], [step(1, FULL)])
    out = judge("zero.state_sharded", whole)
    assert out.status == "fail" and "100%" in out.message and out.rank == 0
    # Each rank under its bound (full / 3 + largest), but together more than the whole state.
    repeated = run_of([step(1, 17000)], [step(1, 17000)], [step(1, 17000)])
    out = judge("zero.state_sharded", repeated)
    assert out.status == "fail" and "more than one rank" in out.message
    assert_translated("zero.state_sharded", out)


def test_a_step_off_the_unsharded_optimizer_names_the_rank_and_what_never_arrived() -> None:
    run = run_of([step(1, 15000)], [step(1, 15000, diff=0.01, unchanged=4)])
    out = judge("zero.matches_unsharded", run)
    assert out.status == "fail" and out.rank == 1
    assert "4 of the model's 10 parameters did not move" in out.message
    assert_translated("zero.matches_unsharded", out)
    # Rounding of the same arithmetic in another order is no difference.
    close = run_of([step(1, 15000, diff=1e-7)], [step(1, 15000)])
    assert judge("zero.matches_unsharded", close).status == "pass"


def test_another_learning_rate_is_another_optimizer() -> None:
    run = run_of([step(1, 15000, lr=0.02)], [step(1, 15000, lr=0.02)])
    out = judge("zero.matches_unsharded", run, optimizer="Adam", lr=0.01)
    assert out.status == "fail" and "learning rate 0.02" in out.message
    assert_translated("zero.matches_unsharded", out)


def test_replicas_that_differ_after_a_step_fail() -> None:
    run = run_of([step(1, 15000), step(2, 15000)], [step(1, 15000), step(2, 15000, digest="x")])
    out = judge("zero.replicas_in_sync", run)
    assert out.status == "fail" and "After step 2" in out.message and out.rank == 1
    assert_translated("zero.replicas_in_sync", out)


def test_no_training_step_fails_and_a_stopped_run_is_not_judged() -> None:
    assert judge("zero.matches_unsharded", run_of([], [])).status == "fail"
    stopped = RunView(world_size=1, device="cpu", ranks=[RankView(rank=0, exit_code=1)])
    assert judge("zero.state_sharded", stopped).status == "skip"
