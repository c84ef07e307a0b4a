"""The ZeroRedundancyOptimizer checks (`zero.*`) on synthetic traces (no processes started)."""

from __future__ import annotations

from typing import Any

import pytest

from grader.checks.base import RankView, RunView, get_check
from grader.events import OptimizerState
from tests.grader.translated import english_left, rendered

SOURCE = "\n".join(f"line{i}" for i in range(1, 100))
END = {"kind": "end", "status": "ok", "exit_code": 0}


def run_of(*ranks: list[dict[str, Any]]) -> RunView:
    views = [
        RankView(rank=r, exit_code=0, events=[{"seq": i, **e} for i, e in enumerate(events)])
        for r, events in enumerate(ranks)
    ]
    return RunView(world_size=len(views), device="cpu", ranks=views, source=SOURCE)


def judge(check_id: str, run: RunView) -> Any:
    definition = get_check(check_id)
    assert definition is not None
    return definition.fn(run, {})


def consolidated(line: int = 70) -> list[dict[str, Any]]:
    return [{"kind": "consolidate_enter", "line": line}, {"kind": "consolidate_exit", "line": line}]


def saved(**fields: Any) -> dict[str, Any]:
    return {
        "kind": "optimizer_state",
        "line": 72,
        "listed": 4,
        "stated": 4,
        "n_params": 4,
        **fields,
    }


def test_a_saved_state_reads_typed_and_a_missing_comparison_means_none() -> None:
    live = {"compared": 3, "stale": 2, "param": 1, "saved_step": 3.0, "live_step": 5.0}
    view = RankView(rank=0, exit_code=0, events=[saved(live=live, path="/j/c.pt"), saved()])
    first, second = view.typed(OptimizerState)
    assert first.live["stale"] == 2 and first.path == "/j/c.pt" and first.listed == 4
    assert second.live == {} and second.load_error is None and second.path is None


def test_a_state_consolidated_before_later_steps_is_stale() -> None:
    live = {"compared": 3, "stale": 2, "param": 1, "saved_step": 3.0, "live_step": 5.0}
    run = run_of([*consolidated(), saved(live=live)], consolidated())
    out = judge("zero.consolidated", run)
    assert out.status == "fail" and out.line == 72
    assert "is stale" in out.message and "3 steps in the saved state, 5 in the live" in out.message
    fresh = run_of([*consolidated(), saved(live={"compared": 3, "stale": 0})], consolidated())
    assert judge("zero.consolidated", fresh).status == "pass"


@pytest.mark.parametrize("locale", ["tr", "pt-BR"])
def test_a_one_sided_consolidation_reads_whole_in_the_viewer_s_language(locale: str) -> None:
    run = run_of(
        [{"kind": "consolidate_enter", "line": 70}],
        [{"kind": "barrier_enter", "line": 79}],
        [{"kind": "barrier_enter", "line": 81}, END],
    )
    out = judge("zero.consolidated", run)
    assert out.status == "fail" and "ranks 1 and 2 never called it" in out.message
    assert english_left(str(out.message))  # what the viewer would see untranslated
    text = rendered("zero.consolidated", out, locale)
    assert not english_left(text), text
    assert all(number in text for number in ("70", "79", "81", "`line79`"))


@pytest.mark.parametrize("locale", ["tr", "pt-BR"])
def test_the_stale_and_the_shard_messages_leave_no_english(locale: str) -> None:
    live = {"compared": 1, "stale": 1, "param": 0, "saved_step": 3.0, "live_step": 5.0}
    stale = judge("zero.consolidated", run_of([*consolidated(), saved(live=live)], consolidated()))
    shard = judge("zero.state_complete", run_of([saved(listed=2)]))
    assert shard.status == "fail" and "covers 2 of the 4 parameters" in shard.message
    for check_id, out in (("zero.consolidated", stale), ("zero.state_complete", shard)):
        text = rendered(check_id, out, locale)
        assert not english_left(text) and "72" in text, text
