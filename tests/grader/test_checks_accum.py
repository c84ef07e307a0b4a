"""The gradient-accumulation checks (`accum.*`) on synthetic traces (no processes started)."""

from __future__ import annotations

from typing import Any

import pytest

from grader.checks.base import RankView, RunView, get_check
from grader.events import AccumStep
from grader.i18n import TRANSLATED_LOCALES
from tests.grader.translated import english_left, rendered

SOURCE = "\n".join(f"line{i}" for i in range(1, 60))


def step(n: int, micro: int, reductions: int) -> dict[str, Any]:
    return {"kind": "accum_step", "n": n, "micro": micro, "reductions": reductions, "line": 40}


def run_of(*ranks: list[dict[str, Any]]) -> RunView:
    end = {"kind": "end", "status": "ok", "exit_code": 0}
    views = [RankView(rank=i, exit_code=0, events=[*evs, end]) for i, evs in enumerate(ranks)]
    return RunView(world_size=len(ranks), device="cpu", ranks=views, source=SOURCE)


def judge(check_id: str, run: RunView, params: dict[str, Any] | None = None) -> Any:
    definition = get_check(check_id)
    assert definition is not None
    return definition.fn(run, params or {})


def replay(**numbers: Any) -> dict[str, Any]:
    base = {"kind": "replay", "status": "ok", "mean_status": "ok", "micro_total": 8}
    base.update(norm_mean=1.0, norm_stepped=1.0, mean_cosine=1.0, clipped=False)
    return {**base, **numbers}


def test_micro_batches_wants_k_per_step_and_allows_a_short_tail() -> None:
    good = [step(1, 4, 1), step(2, 4, 1), step(3, 2, 1)]
    out = judge("accum.micro_batches", run_of(good, good), {"k": 4})
    assert out.status == "pass" and "2 of them after exactly k = 4" in out.message
    every = [step(n, 1, 1) for n in range(1, 5)]
    out = judge("accum.micro_batches", run_of(every, every), {"k": 4})
    assert out.status == "fail" and "after every 1 micro-batch" in out.message
    out = judge("accum.micro_batches", run_of(good, [step(1, 8, 1)]), {"k": 4})
    assert out.status == "fail" and out.rank == 1 and "8 forward passes" in out.message


def test_one_allreduce_names_extra_and_missing_reductions() -> None:
    assert judge("accum.one_allreduce", run_of([step(1, 4, 1)], [step(1, 4, 1)])).status == "pass"
    out = judge("accum.one_allreduce", run_of([step(1, 4, 4)], [step(1, 4, 4)]))
    assert out.status == "fail" and "4 times" in out.message and out.line == 40
    out = judge("accum.one_allreduce", run_of([step(1, 4, 1)], [step(1, 4, 0)]))
    assert out.status == "fail" and out.rank == 1 and "no gradient all-reduce" in out.message


def test_grad_mean_tells_a_sum_from_a_mean() -> None:
    ok = judge("accum.grad_mean", run_of([replay(mean_rel_error=1e-7, mean_ratio=1.0)], []))
    assert ok.status == "pass"
    summed = run_of([replay(mean_rel_error=3.0, mean_ratio=4.0, norm_stepped=4.0)], [])
    out = judge("accum.grad_mean", summed)
    assert out.status == "fail" and "4× too large" in out.message and "8 micro-batch" in out.message
    halved = run_of([replay(mean_rel_error=0.5, mean_ratio=0.5, norm_stepped=0.5)], [])
    assert "2× too small" in judge("accum.grad_mean", halved).message


def test_grad_mean_judges_only_the_direction_of_a_clipped_step() -> None:
    clipped = replay(clipped=True, mean_rel_error=0.6, mean_ratio=0.4, mean_cosine=1.0)
    assert judge("accum.grad_mean", run_of([clipped], [])).status == "pass"
    turned = replay(clipped=True, mean_rel_error=0.6, mean_ratio=0.4, mean_cosine=0.9)
    assert judge("accum.grad_mean", run_of([turned], [])).status == "fail"


def test_grad_mean_skips_when_the_loss_could_not_be_identified() -> None:
    out = judge("accum.grad_mean", run_of([replay(mean_status="unavailable")], []))
    assert out.status == "skip"


def test_a_step_record_reads_typed_with_the_harness_s_defaults() -> None:
    view = RankView(rank=0, exit_code=0, events=[step(3, 4, 1), {"kind": "accum_step"}])
    full, empty = view.typed(AccumStep)
    assert (full.n, full.micro, full.reductions, full.line) == (3, 4, 1, 40)
    assert (empty.n, empty.micro, empty.reductions, empty.line) == (0, 0, 0, None)


@pytest.mark.parametrize("locale", TRANSLATED_LOCALES)
def test_a_failing_step_reads_whole_in_the_viewer_s_language(locale: str) -> None:
    runs = {
        "accum.one_allreduce": run_of([step(1, 4, 4)], [step(1, 4, 4)]),
        "accum.micro_batches": run_of([step(1, 1, 1)], [step(1, 1, 1)]),
        "accum.grad_mean": run_of([replay(mean_rel_error=3.0, mean_ratio=4.0, norm_stepped=4.0)]),
    }
    for check_id, run in runs.items():
        out = judge(check_id, run, {"k": 4})
        assert out.status == "fail" and english_left(str(out.message))
        text = rendered(check_id, out, locale)
        assert not english_left(text), text
        assert "4" in text and ("`line40`" in text or check_id == "accum.grad_mean"), text
